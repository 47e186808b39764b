"""``optim.lr_scheduler``: learning-rate schedulers with torch's update rules (spec
OPTIM-200..205)."""

from refimpl.optim.lr_scheduler._base import (
    EPOCH_DEPRECATION_WARNING,
    LRScheduler,
    _LRScheduler,
)
from refimpl.optim.lr_scheduler._composite import ChainedScheduler, SequentialLR
from refimpl.optim.lr_scheduler._cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from refimpl.optim.lr_scheduler._plateau import ReduceLROnPlateau
from refimpl.optim.lr_scheduler._schedules import (
    ConstantLR,
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
    StepLR,
)

__all__ = [
    "EPOCH_DEPRECATION_WARNING", "ChainedScheduler", "ConstantLR", "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts", "CyclicLR",
    "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR",
    "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR",
    "_LRScheduler",
]
