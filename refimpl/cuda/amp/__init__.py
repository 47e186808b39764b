"""``refimpl.cuda.amp``: torch.cuda.amp's deprecated autocast names (use ``refimpl.amp``)."""

from __future__ import annotations

from refimpl.cuda.amp.autocast_mode import autocast, custom_bwd, custom_fwd
from refimpl.cuda.amp.grad_scaler import GradScaler


def amp_definitely_not_available() -> bool:
    """True when no CUDA device can be used (then CUDA autocast disables itself)."""
    from refimpl import cuda

    return not cuda.is_available()


__all__ = ["GradScaler", "amp_definitely_not_available", "autocast", "custom_bwd",
           "custom_fwd"]
