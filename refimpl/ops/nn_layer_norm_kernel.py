"""Layer normalisation as one op: ``_layer_norm_fused`` (autograd node
``NativeLayerNormBackward0`` as torch's) and its one-call backward
``_layer_norm_fused_backward``, used by ``nn_norm.layer_norm`` for float32/float64.

The op returns the output, the mean and the reciprocal standard deviation (kept dims);
only the output is differentiable. CPU: numpy, two passes for the statistics and one for
the output; the backward forms the three gradients from two sums over the normalised
dims. CUDA: float32/float64 run the NVRTC kernels of ``refimpl.cuda._norm_kernels`` (one
launch forward, up to three backward: the rows, the column partials, their sum); other
dtypes and empty inputs compose refimpl's CUDA reduce and pointwise ops under no_grad; no
CPU fallback. Double backward runs the formulas in differentiable refimpl ops.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.cuda import _norm_kernels as _CUDA
from refimpl.ops._registry import TensorSpec, defop


def _axes(x, n: int) -> tuple:
    return tuple(range(len(x.shape) - n, len(x.shape)))


def _meta(input, weight, bias, n, eps):
    stat = (*input.shape[:len(input.shape) - n], *([1] * n))
    return (TensorSpec(tuple(input.shape), input.dtype, input.device),
            TensorSpec(stat, input.dtype, input.device),
            TensorSpec(stat, input.dtype, input.device))


def _cpu(input, weight, bias, n, eps):
    xa = input._np
    axes = _axes(xa, n)
    mean = xa.mean(axes, keepdims=True)
    xc = xa - mean
    rstd = 1 / np.sqrt(np.square(xc).mean(axes, keepdims=True) + eps)
    out = xc * rstd
    if weight is not None:
        out *= weight._np
    if bias is not None:
        out += bias._np
    return out, mean, rstd


def _ops(input, weight, bias, n, eps):
    from refimpl.ops.reduction_stats import var_mean

    var, mean = var_mean(input, list(_axes(input, n)), correction=0, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = (input - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _cuda(input, weight, bias, n, eps):
    if input.numel() and _CUDA.takes(input, weight, bias):
        return _CUDA.layer_norm(input, weight, bias, n, eps)
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():  # other dtypes and empty inputs: the composed ops
        parts = _ops(input, weight, bias, n, eps)
    return tuple(p.contiguous() for p in parts)


def _backward(ctx, grad, *_):
    input, weight, bias, n, eps = ctx.args
    needs = ctx.needs_input_grad
    mask = (bool(needs[0]), weight is not None and bool(needs[1]),
            bias is not None and bool(needs[2]))
    if grad is None:
        return None, None, None
    if STATE.grad_enabled:  # create_graph: differentiable formulas
        return _backward_ops(grad, input, weight, n, eps, mask)
    _, mean, rstd = ctx.outputs
    gi, gw, gb = layer_norm_backward(grad, input, weight, mean.detach(), rstd.detach(), n,
                                     list(mask))
    return (gi if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None)


def _backward_ops(grad, input, weight, n, eps, mask):
    """The gradients in refimpl ops, the statistics recomputed so that they depend on the
    input (double backward)."""
    _, mean, rstd = _ops(input, None, None, n, eps)
    return _backward_from_stats(grad, input, weight, mean, rstd, n, mask)


def _jvp(ctx, tx, tw, tb, *_):
    input, weight, n = ctx.args[0], ctx.args[1], ctx.args[3]
    _, mean, rstd = ctx.outputs
    axes = list(_axes(input, n))
    xhat = (input - mean) * rstd
    out = None
    if tx is not None:
        tc = tx - tx.mean(axes, keepdim=True)
        out = (tc - xhat * (xhat * tc).mean(axes, keepdim=True)) * rstd
        if weight is not None:
            out = out * weight
    if tw is not None:
        part = xhat * tw
        out = part if out is None else out + part
    if tb is not None:
        part = tb.expand(input.shape)
        out = part if out is None else out + part
    return out, None, None


layer_norm_fused = defop("_layer_norm_fused", meta=_meta, cpu=_cpu, cuda=_cuda,
                         backward=_backward, jvp=_jvp, saves=("inputs", "outputs"),
                         diff_outputs=(0,), node="NativeLayerNormBackward0",
                         extra={"method": False})


def _bw_meta(grad, input, weight, mean, rstd, n, mask):
    norm = tuple(input.shape[len(input.shape) - n:])
    shapes = (tuple(input.shape), norm, norm)
    return tuple(TensorSpec(s if m else (0,), input.dtype, input.device)
                 for s, m in zip(shapes, mask))


def _bw_cpu(grad, input, weight, mean, rstd, n, mask):
    xa, g = input._np, grad._np
    axes = _axes(xa, n)
    lead = tuple(range(xa.ndim - n))
    xhat = (xa - mean._np) * rstd._np
    empty = np.zeros((0,), xa.dtype)
    gb = g.sum(lead) if mask[2] else empty
    gw = (g * xhat).sum(lead) if mask[1] else empty
    gi = empty
    if mask[0]:
        gx = g if weight is None else g * weight._np
        gi = gx - gx.mean(axes, keepdims=True)
        gi -= xhat * (gx * xhat).mean(axes, keepdims=True)
        gi *= rstd._np
    return tuple(np.asarray(a, xa.dtype) for a in (gi, gw, gb))


def _bw_cuda(grad, input, weight, mean, rstd, n, mask):
    if input.numel() and _CUDA.takes(input, grad, weight, mean, rstd):
        return _CUDA.layer_norm_backward(grad, input, weight, mean, rstd, n, mask)
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.factories import empty

    with no_grad():  # other dtypes and empty inputs: the composed ops
        parts = _backward_from_stats(grad, input, weight, mean, rstd, n, mask)
    return tuple(p.contiguous() if p is not None else
                 empty((0,), dtype=input.dtype, device=input.device) for p in parts)


def _backward_from_stats(grad, input, weight, mean, rstd, n, mask):
    """The three gradients in refimpl ops from the saved statistics."""
    axes = list(_axes(input, n))
    lead = list(range(input.dim() - n))
    xhat = (input - mean) * rstd
    gi = gw = gb = None
    if mask[2]:
        gb = grad.sum(lead) if lead else grad
    if mask[1]:
        gw = (grad * xhat).sum(lead) if lead else grad * xhat
    if mask[0]:
        gx = grad if weight is None else grad * weight
        gi = (gx - gx.mean(axes, keepdim=True)
              - xhat * (gx * xhat).mean(axes, keepdim=True)) * rstd
    return gi, gw, gb


layer_norm_backward = defop("_layer_norm_fused_backward", meta=_bw_meta, cpu=_bw_cpu,
                            cuda=_bw_cuda, differentiable=False, extra={"method": False})


def use_fused(input: Tensor, weight, bias) -> bool:
    """Whether ``layer_norm`` takes the fused op (float32/float64 input, parameters of the
    same dtype, on the CPU or CUDA)."""
    dt, dev = input.dtype, input.device  # (a fake tensor's device is not its storage's)
    kind = dev.type
    return ((dt is D.float32 or dt is D.float64) and (kind == "cpu" or kind == "cuda")
            and input.numel() > 0
            and (weight is None or weight.dtype is dt and weight.device == dev)
            and (bias is None or bias.dtype is dt and bias.device == dev))


__all__: list[str] = []
