"""``linear`` as one op: ``_linear_fused`` (``input @ weight.T + bias`` for a 2-d input;
autograd node ``AddmmBackward0`` as torch's) and its one-call backward
``_linear_fused_backward``, used by ``nn_layers.linear`` for float32/float64 (a contiguous
input of more dims is viewed as 2-d and the result viewed back, as torch does).

CPU: one numpy GEMM (bias added in place); the backward's weight gradient is
``grad.T @ input``, row-major as the weight, so ``.grad`` takes it without a copy. CUDA
(no CPU fallback): one launch broadcasting the bias into the output, then one cuBLAS GEMM
accumulating onto it (``beta=1``: the bias is added in the GEMM's compute type, rounded
once); the backward is two GEMMs reading the operands as they are laid out (transposes
as cuBLAS flags) and one channel-sum kernel for the bias (``refimpl.cuda._conv_kernels``).
Products small enough (``small_mm_fits``) run as one ``small_mm`` kernel each instead of a
GEMM (the forward's bias included), where cuBLAS's host time would exceed the work.
float16/bfloat16 take the op on CUDA only. Double backward runs the formulas in
differentiable refimpl ops.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.cuda import _conv_kernels as _CUDA
from refimpl.ops._registry import TensorSpec, defop


def _meta(input, weight, bias):
    return TensorSpec((input.shape[0], weight.shape[0]), input.dtype, input.device)


def _cpu(input, weight, bias):
    out = np.matmul(input._np, weight._np.T)
    if bias is not None:
        out += bias._np
    return out


def _cuda(input, weight, bias):
    ws = weight._shape
    out = Tensor._empty((input._shape[0], ws[0]), input.dtype, input._storage.device)
    wt = _CUDA.view(weight, (ws[1], ws[0]), weight._stride[::-1])
    if _CUDA.small_mm_fits(out._shape[0], out._shape[1], input._shape[1]):
        return _CUDA.small_mm(out, input, wt, bias)  # small: one kernel, the bias included
    _CUDA.add_bias(out, None, bias, 1)  # the bias broadcast over the rows, then C += A @ B
    return _CUDA.gemm(out, input, wt, beta=1)


def _backward_ops(grad, input, weight, mask):
    """The three gradients in refimpl ops (any device, differentiable)."""
    gi = grad.matmul(weight) if mask[0] else None
    gw = grad.t().matmul(input) if mask[1] else None
    gb = grad.sum(0) if mask[2] else None
    return gi, gw, gb


def _backward(ctx, grad):
    input, weight, bias = ctx.args
    needs = ctx.needs_input_grad
    mask = (bool(needs[0]), bool(needs[1]), bias is not None and bool(needs[2]))
    if STATE.grad_enabled:  # create_graph: differentiable formulas
        return _backward_ops(grad, input, weight, mask)
    gi, gw, gb = linear_backward(grad, input, weight, list(mask))
    return (gi if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None)


def _jvp(ctx, tx, tw, tb):
    input, weight, _ = ctx.args
    out = None
    if tx is not None:
        out = tx.matmul(weight.t())
    if tw is not None:
        part = input.matmul(tw.t())
        out = part if out is None else out + part
    if tb is not None:
        part = tb.expand(input.shape[0], weight.shape[0])
        out = part if out is None else out + part
    return out


linear_fused = defop("_linear_fused", meta=_meta, cpu=_cpu, cuda=_cuda, backward=_backward,
                     jvp=_jvp, node="AddmmBackward0", extra={"method": False})


def _bw_meta(grad, input, weight, mask):
    shapes = (tuple(input.shape), tuple(weight.shape), (weight.shape[0],))
    return tuple(TensorSpec(s if m else (0,), input.dtype, input.device)
                 for s, m in zip(shapes, mask))


def _bw_cpu(grad, input, weight, mask):
    g = grad._np
    empty = np.zeros((0,), g.dtype)
    gi = np.matmul(g, weight._np) if mask[0] else empty
    gw = np.matmul(g.T, input._np) if mask[1] else empty
    gb = g.sum(0) if mask[2] else empty
    return gi, gw, np.asarray(gb, g.dtype)


def _bw_cuda(grad, input, weight, mask):
    dev, dt = input._storage.device, input.dtype
    gi = gw = gb = None  # the gradients not asked for are empty tensors
    m, n = grad._shape
    k = input._shape[1]
    if (not mask[0] or _CUDA.small_mm_fits(m, k, n)) and (not mask[1] or _CUDA.small_mm_fits(n, k, m)) \
            and (not mask[2] or m <= _CUDA.SMALL_MM_INNER):
        # small: every gradient asked for in one launch (a bias-gradient thread sums m rows)
        parts = _CUDA.small_mm_backward(grad, input, weight, mask)
        return tuple(Tensor._empty((0,), dt, dev) if p is None else p for p in parts)
    if mask[0]:
        gi = Tensor._empty(input._shape, dt, dev)
        mm = _CUDA.small_mm if _CUDA.small_mm_fits(m, gi._shape[1], n) else _CUDA.gemm
        mm(gi, grad, weight)
    if mask[1]:
        gt = _CUDA.view(grad, (n, m), grad._stride[::-1])
        gw = Tensor._empty(weight._shape, dt, dev)
        mm = _CUDA.small_mm if _CUDA.small_mm_fits(n, gw._shape[1], m) else _CUDA.gemm
        mm(gw, gt, input)
    if mask[2]:
        gb = _CUDA.channel_sum(_CUDA.dense(grad), m, n, 1)
    return tuple(Tensor._empty((0,), dt, dev) if g is None else g for g in (gi, gw, gb))


linear_backward = defop("_linear_fused_backward", meta=_bw_meta, cpu=_bw_cpu, cuda=_bw_cuda,
                        differentiable=False, extra={"method": False})


_HALF = (D.float16, D.bfloat16)


def use_fused(input: Tensor, weight: Tensor, bias) -> bool:
    """Whether ``linear`` takes the fused op: float32/float64 tensors of one dtype on the
    CPU or CUDA (float16/bfloat16 too on CUDA), a 2-d weight, a 1-d bias of its rows (without a bias torch's op is ``mm``
    and the composed path keeps its node), and a 2-d input or a contiguous one of more
    dims, with data."""
    dt, dev = input.dtype, input.device  # (a fake tensor's device is not its storage's)
    cuda = dev.type == "cuda"
    nd, ws = len(input._shape), weight._shape
    return ((dt is D.float32 or dt is D.float64 or cuda and dt in _HALF)
            and (cuda or dev.type == "cpu")
            and len(ws) == 2 and weight.dtype is dt and weight.device == dev
            and bias is not None and bias.device == dev
            and (nd == 2 or nd > 2 and input.is_contiguous())
            and input.numel() > 0 and weight.numel() > 0
            and bias.dtype is dt and len(bias._shape) == 1 and bias._shape[0] == ws[0])


def linear(input: Tensor, weight: Tensor, bias) -> Tensor:
    """``input @ weight.T + bias`` through the fused op (``use_fused`` must hold)."""
    if input.dim() == 2:
        return linear_fused(input, weight, bias)
    lead = list(input.shape[:-1])
    out = linear_fused(input.view(-1, input.shape[-1]), weight, bias)
    return out.view(*lead, weight.shape[0])


__all__: list[str] = []
