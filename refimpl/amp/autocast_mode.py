"""``refimpl.autocast`` / ``refimpl.amp.autocast`` and the custom-Function helpers
``custom_fwd`` / ``custom_bwd`` (spec AUTOCAST-001..012, AUTOCAST-040..043)."""

from __future__ import annotations

import collections.abc
import functools
import warnings

import numpy as np

from refimpl import _autocast as _ac

__all__ = ["autocast", "autocast_decorator", "custom_bwd", "custom_fwd",
           "is_autocast_available"]


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can be used for ``device_type`` (spec AUTOCAST-002); an unknown
    device string raises torch's device-parsing error."""
    try:
        _ac.check_device_type(device_type)
    except RuntimeError as e:
        if "unknown device type" in str(e):
            return False
        raise
    return True


def autocast_decorator(autocast_instance: autocast, func):
    """``func`` wrapped so that every call runs inside ``autocast_instance``."""

    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


def _cuda_unavailable() -> bool:
    from refimpl import cuda

    return not cuda.is_available()


class autocast:
    """A region (context manager or decorator) where listed ops run in mixed precision.

    ``device_type`` is ``"cuda"`` or ``"cpu"`` (a string); ``dtype`` defaults to the
    device's autocast dtype (``get_autocast_dtype``: float16 on CUDA, bfloat16 on the
    CPU); ``enabled=False`` makes a region where autocast is off; ``cache_enabled``
    (default: the current setting) controls the cast cache of float32 leaf weights.
    The state is per thread. Entering saves the previous state and exiting restores it;
    leaving the outermost region empties the cast cache (spec AUTOCAST-003..012).
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        from refimpl import _dtype as D

        if not isinstance(device_type, str):
            raise ValueError(  # noqa: TRY004 (torch raises ValueError)
                f"Expected `device_type` of type `str`, got: `{type(device_type)}`"
            )
        self.fast_dtype = _ac.get_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'"
            )
        self._cache_enabled = (_ac.AUTOCAST.cache_enabled if cache_enabled is None
                               else cache_enabled)
        if enabled:
            if device_type == "cuda":
                if _cuda_unavailable():
                    warnings.warn(
                        "CUDA is not available or torch_xla is imported. Disabling autocast.",
                        stacklevel=2,
                    )
                    enabled = False
                elif self.fast_dtype == D.bfloat16:
                    from refimpl import cuda

                    if not cuda.is_bf16_supported():
                        raise RuntimeError(
                            "Current CUDA Device does not support bfloat16. Please switch "
                            "dtype to float16."
                        )
            elif self.fast_dtype not in (D.bfloat16, D.float16):
                name = device_type.upper()
                warnings.warn(
                    f"In {name} autocast, but the target dtype is not supported. Disabling "
                    f"autocast.\n{name} Autocast only supports dtypes of torch.bfloat16, "
                    "torch.float16 currently.",
                    stacklevel=2,
                )
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        s = _ac.AUTOCAST
        self.prev_cache_enabled = s.cache_enabled
        self.prev = _ac.is_enabled(self.device)
        self.prev_fastdtype = _ac.get_dtype(self.device)
        _ac.set_enabled(self.device, self._enabled)
        _ac.set_dtype(self.device, self.fast_dtype)
        s.nesting += 1
        s.cache_enabled = self._cache_enabled
        return self

    def __exit__(self, *exc: object) -> bool:
        s = _ac.AUTOCAST
        s.nesting -= 1
        if s.nesting == 0:
            _ac.clear_cache()
        _ac.set_enabled(self.device, self.prev)
        _ac.set_dtype(self.device, self.prev_fastdtype)
        s.cache_enabled = self.prev_cache_enabled
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                "Did you mean to use autocast as a context manager? For example:\n"
                "    with torch.autocast(device_type=...):\n"
                "        output = model(input)"
            )
        return autocast_decorator(self, func)


def _cast(value, device_type: str, dtype):
    """Tensors in ``value`` (containers walked) cast to ``dtype`` when they are floating,
    not float64 and on ``device_type``; strings and numpy arrays pass through."""
    from refimpl._tensor import Tensor

    if isinstance(value, Tensor):
        ok = (value.dtype.is_floating_point and value.device.type == device_type
              and value.dtype.itemsize != 8)
        return value.to(dtype) if ok else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        items = (_cast(v, device_type, dtype) for v in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def _check_device_type_arg(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(  # noqa: TRY004 (torch raises ValueError)
            f"Expected `device_type` of type `str`, got: `{type(device_type)}`"
        )


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for a custom Function's ``forward`` (spec AUTOCAST-040, 041).

    It records on ``ctx`` the autocast state ``forward`` ran with, for ``custom_bwd``.
    With ``cast_inputs``, inside an autocast-enabled region the floating-point tensors
    of the arguments (containers walked) are cast to ``cast_inputs`` and ``forward`` runs
    with autocast disabled; outside such a region it changes nothing.
    """
    _check_device_type_arg(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type,
                                 cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _ac.get_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _ac.is_enabled(device_type)
            return fwd(*args, **kwargs)
        on = _ac.is_enabled(device_type)
        ctx._fwd_used_autocast = False
        if not on:
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs),
                       **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for a custom Function's ``backward``: it runs with the autocast state
    (enabled flag and dtype) that ``forward`` ran with (spec AUTOCAST-042)."""
    _check_device_type_arg(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast,
                      dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
