"""The autocast state functions of the ``refimpl`` namespace, with torch 2.13's names and
signatures (spec AUTOCAST-030..035). The state is per thread; the device-less legacy
forms act on CUDA, and the per-device legacy names warn (DeprecationWarning)."""

from __future__ import annotations

import warnings

from refimpl import _autocast as _ac

__all__ = [
    "autocast_decrement_nesting", "autocast_increment_nesting", "clear_autocast_cache",
    "get_autocast_cpu_dtype", "get_autocast_dtype", "get_autocast_gpu_dtype",
    "get_autocast_ipu_dtype", "get_autocast_xla_dtype", "is_autocast_cache_enabled",
    "is_autocast_cpu_enabled", "is_autocast_enabled", "is_autocast_ipu_enabled",
    "is_autocast_xla_enabled", "set_autocast_cache_enabled", "set_autocast_cpu_dtype",
    "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_enabled",
    "set_autocast_gpu_dtype", "set_autocast_ipu_dtype", "set_autocast_ipu_enabled",
    "set_autocast_xla_dtype", "set_autocast_xla_enabled",
]


def _arg(fn: str, name: str, pos: int, value, kind: type, kind_name: str):
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be {kind_name}, "
                        f"not {type(value).__name__}")
    return value


def _dtype_arg(fn: str, pos: int, value):
    from refimpl import _dtype as D

    return _arg(fn, "dtype", pos, value, D.dtype, "torch.dtype")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread (no argument: CUDA)."""
    if device_type is None:
        return _ac.is_enabled("cuda")
    return _ac.is_enabled(_arg("is_autocast_enabled", "device_type", 1, device_type, str,
                               "str"))


def set_autocast_enabled(*args) -> None:
    """``set_autocast_enabled(device_type, enabled)``, or the legacy
    ``set_autocast_enabled(enabled)`` for CUDA."""
    if len(args) == 1:
        _ac.set_enabled("cuda", _arg("set_autocast_enabled", "enabled", 1, args[0], bool,
                                     "bool"))
        return
    device_type, enabled = args
    _arg("set_autocast_enabled", "enabled", 2, enabled, bool, "bool")
    _ac.set_enabled(_arg("set_autocast_enabled", "device_type", 1, device_type, str, "str"),
                    enabled)


def get_autocast_dtype(device_type: str):
    """The lower-precision dtype autocast uses for ``device_type`` in this thread."""
    return _ac.get_dtype(_arg("get_autocast_dtype", "device_type", 1, device_type, str,
                              "str"))


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast uses for ``device_type`` in this thread."""
    _dtype_arg("set_autocast_dtype", 2, dtype)
    _ac.set_dtype(_arg("set_autocast_dtype", "device_type", 1, device_type, str, "str"),
                  dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether casts of float32 leaf weights are cached inside autocast regions."""
    return _ac.AUTOCAST.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the weight-cast cache on or off for this thread."""
    _ac.AUTOCAST.cache_enabled = _arg("set_autocast_cache_enabled", "enabled", 1, enabled,
                                      bool, "bool")


def clear_autocast_cache() -> None:
    """Drop every cached cast (the outermost ``autocast`` exit does this)."""
    _ac.clear_cache()


def autocast_increment_nesting() -> int:
    """Enter one autocast nesting level; returns the new depth."""
    _ac.AUTOCAST.nesting += 1
    return _ac.AUTOCAST.nesting


def autocast_decrement_nesting() -> int:
    """Leave one autocast nesting level; returns the new depth."""
    _ac.AUTOCAST.nesting -= 1
    return _ac.AUTOCAST.nesting


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def _legacy(device: str, label: str):
    def is_enabled() -> bool:
        _deprecated(f"is_autocast_{label}_enabled()", f"is_autocast_enabled('{device}')")
        return _ac.is_enabled(device)

    def set_enabled(enabled: bool) -> None:
        _deprecated(f"set_autocast_{label}_enabled(enabled)",
                    f"set_autocast_enabled('{device}', enabled)")
        _ac.set_enabled(device, _arg(f"set_autocast_{label}_enabled", "enabled", 1, enabled,
                                     bool, "bool"))

    def get_dtype():
        _deprecated(f"get_autocast_{label}_dtype()", f"get_autocast_dtype('{device}')")
        return _ac.get_dtype(device)

    def set_dtype(dtype) -> None:
        _deprecated(f"set_autocast_{label}_dtype(dtype)",
                    f"set_autocast_dtype('{device}', dtype)")
        _ac.set_dtype(device, _dtype_arg(f"set_autocast_{label}_dtype", 1, dtype))

    for f, doc in ((is_enabled, "Deprecated: is_autocast_enabled('{d}')."),
                   (set_enabled, "Deprecated: set_autocast_enabled('{d}', enabled)."),
                   (get_dtype, "Deprecated: get_autocast_dtype('{d}')."),
                   (set_dtype, "Deprecated: set_autocast_dtype('{d}', dtype).")):
        f.__doc__ = doc.format(d=device)
    return is_enabled, set_enabled, get_dtype, set_dtype


is_autocast_cpu_enabled, set_autocast_cpu_enabled, get_autocast_cpu_dtype, \
    set_autocast_cpu_dtype = _legacy("cpu", "cpu")
is_autocast_ipu_enabled, set_autocast_ipu_enabled, get_autocast_ipu_dtype, \
    set_autocast_ipu_dtype = _legacy("ipu", "ipu")
is_autocast_xla_enabled, set_autocast_xla_enabled, get_autocast_xla_dtype, \
    set_autocast_xla_dtype = _legacy("xla", "xla")
_, _, get_autocast_gpu_dtype, set_autocast_gpu_dtype = _legacy("cuda", "gpu")
