"""The negative log likelihood of class indices as one op: ``_nll_loss_fused`` (the loss
and the summed weight; autograd node ``NllLossBackward0`` as torch's) and its backward
``_nll_loss_fused_backward``, used by ``nn_loss.nll_loss`` (and so ``cross_entropy``) for
float32/float64 inputs of shape (N, C) or (C,).

CPU: numpy, one gather of the target classes, the bounds check with torch's message, one
sum; the backward writes ``-weight * grad`` at the target classes of a zero gradient.
CUDA: one kernel each way (``refimpl.cuda._pool_loss_kernels``): the forward is one block
summing in a fixed order (the same loss in every run), and a target out of range is a
device-side assert, as in torch's CUDA kernel (the host never reads the target); the
backward writes the whole gradient; no CPU fallback. Double backward uses the
differentiable ``scatter``.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop


def _meta(input, target, weight, reduction, ignore_index):
    shape = tuple(target.shape) if reduction == "none" else ()
    return (TensorSpec(shape, input.dtype, input.device),
            TensorSpec((), input.dtype, input.device))


def _cpu(input, target, weight, reduction, ignore_index):
    x, t = input._np, target._np
    classes = x.shape[-1]
    if (weight is None and x.ndim == 2 and t.size and not 0 <= ignore_index < classes
            and t.min() >= 0 and t.max() < classes):
        # the common case: no class weights, every target a class, none ignored (the
        # general path below gives the same bits: its weights are all exactly 1)
        losses = -x[np.arange(t.size), t]
        total = np.asarray(t.size, x.dtype)
        if reduction == "none":
            return losses, total
        loss = losses.sum()
        if reduction == "mean":
            loss = loss / total
        return np.asarray(loss, x.dtype), total
    keep = t != ignore_index
    bad = ((t < 0) | (t >= classes)) & keep
    if bad.any():
        raise IndexError(f"Target {int(np.atleast_1d(t)[np.atleast_1d(bad)][0])} is out of "
                         "bounds.")
    safe = np.where(keep, t, 0)
    if x.ndim == 2:
        picked = np.take_along_axis(x, safe[:, None], 1)[:, 0]
    else:
        picked = x[safe]
    w = keep.astype(x.dtype)
    if weight is not None:
        w = w * weight._np[safe]
    losses = -picked * w
    total = np.asarray(w.sum(), x.dtype)
    if reduction == "none":
        return np.asarray(losses, x.dtype), total
    loss = losses.sum()
    if reduction == "mean":
        with np.errstate(all="ignore"):
            loss = loss / total
    return np.asarray(loss, x.dtype), total


def _cuda(input, target, weight, reduction, ignore_index):
    return (_CUDA or _cuda_kernels()).nll_loss(input, target, weight, reduction, ignore_index)


def _scatter_ops(grad, input, target, weight, total, reduction, ignore_index):
    """The input gradient in refimpl ops (any device, differentiable in ``grad``)."""
    from refimpl.ops.factories import zeros

    dim = input.dim() - 1
    keep = target != ignore_index
    safe = target.where(keep, 0)
    w = keep.to(input.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.flatten()).reshape(safe.shape)
    g = grad / total if reduction == "mean" else grad
    vals = -w * g
    if vals.shape != safe.shape:
        vals = vals.expand(safe.shape)
    out = zeros(*input.shape, dtype=input.dtype, device=input.device)
    return out.scatter(dim, safe.unsqueeze(dim), vals.unsqueeze(dim))


def _backward(ctx, grad, *_):
    input, target, weight, reduction, ignore_index = ctx.args
    if grad is None or not ctx.needs_input_grad[0]:
        return (None,)
    total = ctx.outputs[1].detach()
    if STATE.grad_enabled:
        return (_scatter_ops(grad, input, target, weight, total, reduction, ignore_index),)
    return (nll_loss_backward(grad, input, target, weight, total, reduction, ignore_index),)


def _jvp(ctx, tx, *_):
    from refimpl.ops.nn_loss import _nll_ops

    target, weight, reduction, ignore_index = ctx.args[1:]
    return _nll_ops(tx, target, weight, ignore_index, reduction)[0], None


nll_loss_fused = defop("_nll_loss_fused", meta=_meta, cpu=_cpu, cuda=_cuda,
                       backward=_backward, jvp=_jvp, saves=("inputs", "outputs"),
                       diff_outputs=(0,), node="NllLossBackward0", extra={"method": False})


def _bw_meta(grad, input, target, weight, total, reduction, ignore_index):
    return TensorSpec(tuple(input.shape), input.dtype, input.device)


def _bw_cpu(grad, input, target, weight, total, reduction, ignore_index):
    x, t = input._np, target._np
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    w = keep.astype(x.dtype)
    if weight is not None:
        w = w * weight._np[safe]
    g = grad._np
    if reduction == "mean":
        with np.errstate(all="ignore"):
            g = g / total._np
    vals = np.broadcast_to(-w * g, safe.shape)
    out = np.zeros(x.shape, x.dtype)  # (vals: 0-d for an unbatched input)
    if x.ndim == 2:
        out[np.arange(x.shape[0]), safe] = vals
    else:
        out[safe] = vals
    return out


def _bw_cuda(grad, input, target, weight, total, reduction, ignore_index):
    return (_CUDA or _cuda_kernels()).nll_loss_backward(grad, input, target, weight, total, reduction,
                                                ignore_index)


nll_loss_backward = defop("_nll_loss_fused_backward", meta=_bw_meta, cpu=_bw_cpu,
                          cuda=_bw_cuda, differentiable=False, extra={"method": False})


def use_fused(input: Tensor, target: Tensor, weight) -> bool:
    """Whether ``nll_loss`` takes the fused op: a float32/float64 (N, C) or (C,) input on
    the CPU or CUDA with data, an int64 target, a weight of the input's dtype and one value
    per class, or none."""
    dt = input.dtype
    return ((dt is D.float32 or dt is D.float64) and input.device.type in ("cpu", "cuda")
            and input.dim() in (1, 2) and input.numel() > 0 and target.dtype is D.int64
            and type(input) is Tensor and type(target) is Tensor
            and target.device == input.device
            and (weight is None or weight.dtype is dt and weight.device == input.device
                 and tuple(weight.shape) == (input.shape[-1],)))


__all__: list[str] = []


_CUDA = None  # refimpl.cuda._pool_loss_kernels, bound on first CUDA call (CPU programs
              # never import refimpl.cuda)


def _cuda_kernels():
    global _CUDA
    from refimpl.cuda import _pool_loss_kernels as _CUDA

    return _CUDA
