"""The autograd layer of the dispatcher: records graph nodes for differentiable ops."""

from __future__ import annotations


def record(op, args, kwargs):
    """Run ``op`` below autograd and attach a graph node to its outputs."""
    raise NotImplementedError(f"refimpl.autograd: recording '{op.name}' is not implemented yet")
