"""``refimpl.cpu.amp``: torch.cpu.amp's deprecated names (use ``refimpl.amp``)."""

from __future__ import annotations

from refimpl.cpu.amp.autocast_mode import autocast
from refimpl.cpu.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast"]
