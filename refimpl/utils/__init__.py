"""refimpl.utils: torch.utils-like helpers (``refimpl.utils.checkpoint``)."""

from __future__ import annotations


def __getattr__(name: str):
    # submodules load on first use
    import importlib

    if name in ("checkpoint", "hooks"):
        return importlib.import_module(f"refimpl.utils.{name}")
    raise AttributeError(f"module 'refimpl.utils' has no attribute '{name}'")
