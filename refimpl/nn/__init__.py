"""torch.nn's functional layer (``refimpl.nn.functional``); refimpl has no modules."""

from __future__ import annotations


def __getattr__(name: str):
    if name == "functional":
        import importlib

        return importlib.import_module("refimpl.nn.functional")
    raise AttributeError(f"module 'refimpl.nn' has no attribute '{name}'")
