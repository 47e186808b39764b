"""``torch.cuda.amp.GradScaler``: ``refimpl.amp.GradScaler("cuda", ...)`` under its old name."""

from __future__ import annotations

from refimpl.amp.grad_scaler import DeprecatedGradScaler, OptState

__all__ = ["GradScaler", "OptState"]


class GradScaler(DeprecatedGradScaler):
    """Deprecated: use ``refimpl.amp.GradScaler("cuda", ...)`` (constructing one emits
    torch's FutureWarning)."""

    device_type = "cuda"
