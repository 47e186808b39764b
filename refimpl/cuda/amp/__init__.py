"""``torch.cuda.amp``: the deprecated CUDA spellings of ``refimpl.amp``."""

from .grad_scaler import GradScaler

__all__ = ["GradScaler"]
