"""``refimpl.cpu.amp``: torch.cpu.amp's deprecated autocast name (use ``refimpl.amp``)."""

from __future__ import annotations

from refimpl.cpu.amp.autocast_mode import autocast

__all__ = ["autocast"]
