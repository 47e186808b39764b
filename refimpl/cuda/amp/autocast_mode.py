"""The deprecated ``refimpl.cuda.amp`` spellings of autocast and the custom-Function
decorators: each warns (FutureWarning) and forwards to ``refimpl.amp`` with
``device_type="cuda"`` (spec AUTOCAST-050)."""

from __future__ import annotations

import functools
import warnings

from refimpl import _dtype as D
from refimpl.amp import autocast_mode as _amp

__all__ = ["autocast", "custom_bwd", "custom_fwd"]


class autocast(_amp.autocast):
    """Deprecated: ``refimpl.amp.autocast("cuda", ...)``."""

    def __new__(cls, enabled: bool = True, dtype=D.float16, cache_enabled: bool = True):
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cuda', args...)` instead.",
            FutureWarning, stacklevel=2,
        )
        return super().__new__(cls)

    def __init__(self, enabled: bool = True, dtype=D.float16, cache_enabled: bool = True):
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated: ``refimpl.amp.custom_fwd(args..., device_type="cuda")``."""
    warnings.warn(
        "`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
        "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
        FutureWarning, stacklevel=2,
    )
    return functools.partial(_amp.custom_fwd, device_type="cuda")(fwd=fwd,
                                                                  cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """Deprecated: ``refimpl.amp.custom_bwd(args..., device_type="cuda")``."""
    warnings.warn(
        "`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
        "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.",
        FutureWarning, stacklevel=2,
    )
    return functools.partial(_amp.custom_bwd, device_type="cuda")(bwd)
