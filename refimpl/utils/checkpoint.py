"""``refimpl.utils.checkpoint``: activation checkpointing (implemented in
``refimpl.autograd.checkpoint``)."""

from __future__ import annotations

from refimpl.autograd.checkpoint import (
    CheckpointError,
    CheckpointFunction,
    checkpoint,
    checkpoint_sequential,
    noop_context_fn,
    set_checkpoint_early_stop,
)

__all__ = [
    "CheckpointError",
    "CheckpointFunction",
    "checkpoint",
    "checkpoint_sequential",
    "noop_context_fn",
    "set_checkpoint_early_stop",
]
