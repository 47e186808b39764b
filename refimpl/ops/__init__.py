"""Every op of refimpl, one definition each (see ``_registry.py`` for what a definition holds).

Modules: ``elementwise`` (math, comparisons, logical/bitwise), ``reduction``, ``linalg``,
``views``, ``shape`` (cat, stack, flip, ...), ``indexing``, ``factories``, ``random``,
``copy`` (copy_, fill_, to, clone). Each module's ``__all__`` names the functions that
``refimpl`` exports; every ``OpDef`` also becomes a Tensor method of the same name
unless its ``extra`` says ``method=False``; a module's ``TENSOR_METHODS`` adds plain
functions as methods.
"""

from __future__ import annotations

import importlib

from refimpl.ops._registry import REGISTRY, OpDef, defop, get

MODULES = [
    "copy", "factories", "elementwise", "views", "shape", "indexing", "reduction", "linalg",
    "random", "interop",
]

loaded = []
for _name in MODULES:
    try:
        loaded.append(importlib.import_module(f"refimpl.ops.{_name}"))
    except ModuleNotFoundError as _e:
        if _e.name != f"refimpl.ops.{_name}":
            raise

__all__ = ["REGISTRY", "OpDef", "defop", "get", "loaded"]
