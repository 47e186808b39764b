"""The deprecated ``refimpl.cpu.amp.autocast``: warns (FutureWarning) and forwards to
``refimpl.amp.autocast("cpu", ...)`` (spec AUTOCAST-050)."""

from __future__ import annotations

import warnings

from refimpl import _dtype as D
from refimpl.amp import autocast_mode as _amp

__all__ = ["autocast"]


class autocast(_amp.autocast):
    """Deprecated: ``refimpl.amp.autocast("cpu", ...)``."""

    def __new__(cls, enabled: bool = True, dtype=D.bfloat16, cache_enabled: bool = True):
        warnings.warn(
            "`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cpu', args...)` instead.",
            FutureWarning, stacklevel=2,
        )
        return super().__new__(cls)

    def __init__(self, enabled: bool = True, dtype=D.bfloat16, cache_enabled: bool = True):
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
