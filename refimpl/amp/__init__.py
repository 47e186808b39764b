"""``refimpl.amp``: automatic mixed precision (torch.amp's names; spec AUTOCAST).

``autocast`` regions run listed ops in a lower precision; ``custom_fwd``/``custom_bwd``
make custom autograd Functions autocast-aware. The op lists are data in ``_op_lists``.
``GradScaler`` scales losses and unscales gradients (spec AMP-SCALER).
"""

from __future__ import annotations

from refimpl.amp.autocast_mode import (
    autocast,
    custom_bwd,
    custom_fwd,
    is_autocast_available,
)
from refimpl.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
