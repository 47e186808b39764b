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
    "copy", "factories", "elementwise", "division", "elementwise_unary", "elementwise_binary",
    "comparison", "clamp", "activation", "printing",
    "views", "views_dtype", "slicing", "views_inplace", "views_properties",
    "broadcast", "shape", "indexing", "gather_scatter", "scatter_reduce", "masked",
    "reduction", "softmax", "linalg", "sorting", "searching", "random", "interop", "asserts",
    "nn_activation", "amp_ops", "amp_list_ops", "amp_list_aliases",
    "linalg_spectral", "linalg_spectral_solve", "linalg_spectral_eig",
    "fft", "windows", "spectral",
    "special_ops",
    "linalg_factor", "linalg_det", "linalg_triangular", "linalg_qr",
    "nn_aten",
]
# issue #10's shape, reduction and random ops
MODULES += ["view_copies", "shape_extra", "reduction_extra", "reduction_extra_stats",
            "random_extra", "segment_reduce"]

loaded: list = []


def load() -> list:
    """Import every op module once (refimpl's ``__init__`` calls this); returns them."""
    if not loaded:
        for name in MODULES:
            try:
                loaded.append(importlib.import_module(f"refimpl.ops.{name}"))
            except ModuleNotFoundError as e:
                if e.name != f"refimpl.ops.{name}":
                    raise
    return loaded


def __getattr__(name: str):
    # torch.ops-style namespaces: ops.aten.<op>.<overload>, and user namespaces declared
    # with refimpl.library.Library
    from refimpl import library

    space = library.NAMESPACES.get(name)
    if space is None:
        raise AttributeError(f"module 'refimpl.ops' has no attribute '{name}'")
    return space


__all__ = ["REGISTRY", "OpDef", "defop", "get", "load", "loaded"]
MODULES += ["nn_aten_seed"]
