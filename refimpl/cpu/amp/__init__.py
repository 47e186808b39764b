"""``torch.cpu.amp``: the deprecated CPU spellings of ``refimpl.amp``."""

from .grad_scaler import GradScaler

__all__ = ["GradScaler"]
