"""2-d max pooling as one op: ``_max_pool2d_fused`` (values and flat input indices;
autograd node ``MaxPool2DWithIndicesBackward0`` as torch's) and its backward
``_max_pool2d_fused_backward``, used by ``nn_pool.max_pool2d`` for float32/float64 (and
float16/bfloat16 on CUDA).

CPU: one strided view of the padded input per window position; their elementwise maximum,
then the first position holding it (with NaN in the input: a running maximum in window
order, where a window holding NaN takes its last NaN, as torch's kernel does); the
backward sums the gradient into the input with one ``bincount``. CUDA: one kernel each way
(``refimpl.cuda._pool_loss_kernels``: a thread per output walks its window; a thread per
input gathers the gradients of the outputs that picked it, so overlapping windows sum in
output order without atomics); no CPU fallback. Double backward uses the differentiable
``scatter_add``.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop


def _padded_sizes(sizes, out, k, s, p, d) -> list:
    return [max(size + 2 * pp, (o - 1) * ss + dd * (kk - 1) + 1) for size, o, kk, ss, pp, dd in
            zip(sizes, out, k, s, p, d)]


def _meta(input, k, s, p, d, out):
    shape = (*input.shape[:-2], *out)
    return (TensorSpec(shape, input.dtype, input.device),
            TensorSpec(shape, D.int64, input.device))


def _running_max(views, heres):
    """Fold the window positions' views into the running maximum in window order: a later
    position wins when strictly greater (the first maximum stays) or NaN (the last NaN
    stays, as in torch's kernel); the winner's index offset is kept alongside."""
    values = views[0].copy()
    offset = np.full(values.shape, heres[0], np.int64)
    for view, here in zip(views[1:], heres[1:]):
        better = np.greater(view, values)
        better |= np.isnan(view)
        np.copyto(values, view, where=better)
        np.copyto(offset, here, where=better)
    return values, offset


def _cpu(input, k, s, p, d, out):
    xa = input._np
    sizes = xa.shape[-2:]
    lead = xa.shape[:-2]
    padded = _padded_sizes(sizes, out, k, s, p, d)
    if list(padded) != list(sizes):
        xp = np.full((*lead, *padded), -np.inf, xa.dtype)
        xp[..., p[0]:p[0] + sizes[0], p[1]:p[1] + sizes[1]] = xa
    else:
        xp = xa
    # one strided (lead, out) view per window position, in window order
    views, heres = [], []
    for i in range(k[0]):
        for j in range(k[1]):
            r0, c0 = i * d[0], j * d[1]
            views.append(xp[..., r0:r0 + (out[0] - 1) * s[0] + 1:s[0],
                            c0:c0 + (out[1] - 1) * s[1] + 1:s[1]])
            heres.append(r0 * sizes[1] + c0)
    values = views[0].copy()
    for view in views[1:]:
        np.maximum(values, view, out=values)
    # np.maximum propagates NaN, so a NaN anywhere in a window shows in the (smaller)
    # output: one sum over it tells whether the NaN-aware walk is needed
    if np.isnan(np.add.reduce(values, axis=None)):
        values, offset = _running_max(views, heres)
    else:  # no NaN: the first position holding the maximum
        small = np.int8 if len(views) < 128 else np.intp
        pos = np.full(values.shape, len(views) - 1, small)
        for n in range(len(views) - 2, -1, -1):
            # pos = n where view n holds the maximum: pos += (n - pos) * hit, in integers
            # (cheaper than a masked copy in numpy)
            step = np.subtract(small(n), pos)
            step *= np.equal(views[n], values).view(np.int8)
            pos += step
        offset = np.array(heres, np.int64).take(pos)
    base = (np.arange(out[0]).reshape(-1, 1) * s[0] - p[0]) * sizes[1] \
        + np.arange(out[1]) * s[1] - p[1]
    offset += base
    return values, offset


def _cuda(input, k, s, p, d, out):
    return (_CUDA or _cuda_kernels()).max_pool2d(input, k, s, p, d, out)


def _scatter_ops(grad, idx, input):
    """The input gradient in refimpl ops (any device, differentiable in ``grad``)."""
    from refimpl.ops.factories import zeros

    lead = list(input.shape[:-2])
    flat = zeros(*lead, input.shape[-2] * input.shape[-1], dtype=grad.dtype,
                 device=grad.device)
    flat = flat.scatter_add(-1, idx.reshape(*lead, -1), grad.reshape(*lead, -1))
    return flat.reshape(input.shape)


def _backward(ctx, grad, *_):
    input = ctx.args[0]
    idx = ctx.outputs[1]
    if grad is None or not ctx.needs_input_grad[0]:
        return (None,)
    if STATE.grad_enabled:
        return (_scatter_ops(grad, idx, input),)
    return (max_pool2d_backward(grad, input, idx, *ctx.args[1:5]),)


def _jvp(ctx, tx, *_):
    input, idx = ctx.args[0], ctx.outputs[1]
    lead = list(input.shape[:-2])
    picked = tx.reshape(*lead, -1).gather(-1, idx.reshape(*lead, -1))
    return picked.reshape(idx.shape), None


max_pool2d_fused = defop("_max_pool2d_fused", meta=_meta, cpu=_cpu, cuda=_cuda,
                         backward=_backward, jvp=_jvp, saves=("inputs", "outputs"),
                         diff_outputs=(0,), node="MaxPool2DWithIndicesBackward0",
                         extra={"method": False})


def _bw_meta(grad, input, idx, k, s, p, d):
    return TensorSpec(tuple(input.shape), input.dtype, input.device)


def _bw_cpu(grad, input, idx, k, s, p, d):
    """The input gradient: the output gradient summed into the picked positions (disjoint
    windows, without padding, pick each input position at most once: a plain scatter)."""
    disjoint = not any(p) and all(ss >= (kk - 1) * dd + 1 for kk, ss, dd in zip(k, s, d))
    shape = input.shape
    rows = int(np.prod(shape[:-2], dtype=np.int64))
    plane = shape[-2] * shape[-1]
    ia = idx._np.reshape(rows, idx.shape[-2] * idx.shape[-1]) \
        + (np.arange(rows, dtype=np.int64) * plane)[:, None]
    if disjoint:
        placed = np.zeros(rows * plane, input.dtype.np)
        placed[ia.reshape(-1)] = grad._np.reshape(-1)
        return placed.reshape(shape)
    summed = np.bincount(ia.reshape(-1), weights=grad._np.reshape(-1),
                         minlength=rows * plane)
    return summed.astype(input.dtype.np).reshape(shape)


def _bw_cuda(grad, input, idx, k, s, p, d):
    return (_CUDA or _cuda_kernels()).max_pool2d_backward(grad, input, idx, k, s, p, d)


max_pool2d_backward = defop("_max_pool2d_fused_backward", meta=_bw_meta, cpu=_bw_cpu,
                            cuda=_bw_cuda, differentiable=False, extra={"method": False})


def use_fused(input: Tensor) -> bool:
    """Whether ``max_pool2d`` takes the fused op: float32/float64 on the CPU or CUDA,
    float16/bfloat16 on CUDA (whose kernel computes in float)."""
    dt = input.dtype
    kind = input.device.type
    if kind == "cuda":
        taken = dt is D.float32 or dt is D.float64 or dt is D.float16 or dt is D.bfloat16
    else:
        taken = kind == "cpu" and (dt is D.float32 or dt is D.float64)
    return taken


__all__: list[str] = []


_CUDA = None  # refimpl.cuda._pool_loss_kernels, bound on first CUDA call (CPU programs
              # never import refimpl.cuda)


def _cuda_kernels():
    global _CUDA
    from refimpl.cuda import _pool_loss_kernels as _CUDA

    return _CUDA
