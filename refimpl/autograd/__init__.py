"""refimpl.autograd: reverse-mode automatic differentiation (spec: AUTOGRAD-*)."""

from __future__ import annotations

from refimpl.autograd.grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             inputs=None) -> None:
    """Compute gradients of ``tensors`` w.r.t. graph leaves (the engine)."""
    raise NotImplementedError("refimpl.autograd.backward: the engine is not implemented yet")


__all__ = ["backward", "enable_grad", "inference_mode", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
