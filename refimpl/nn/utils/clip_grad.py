"""Gradient clipping: by total norm (``clip_grad_norm_``) or by value (``clip_grad_value_``)."""

from __future__ import annotations

from collections.abc import Iterable

from refimpl._tensor import Tensor
from refimpl.autograd.grad_mode import no_grad


def _as_list(parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of the per-tensor norms (0 for no tensors)."""
    from refimpl.ops.factories import tensor
    from refimpl.ops.reduction_stats import linalg_vector_norm
    from refimpl.ops.shape import stack

    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        norms = [linalg_vector_norm(g, norm_type) for g in tensors]
        first = norms[0].device
        total = linalg_vector_norm(stack([n.to(first) for n in norms]), norm_type)
    if error_if_nonfinite and bool(total.isnan().logical_or(total.isinf())):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their total norm is at most ``max_norm``;
    returns the total norm before clipping."""
    params = _as_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    if not grads:
        return total
    with no_grad():
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.device))
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
