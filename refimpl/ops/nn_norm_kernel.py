"""Batch normalisation as one op: ``_batch_norm_fused`` (autograd node
``NativeBatchNormBackward0`` as torch's) and its one-call backward
``_batch_norm_fused_backward``, used by ``nn_norm.batch_norm`` for float32/float64 inputs.

The op is ``(input, weight, bias, mean, var, training, eps, momentum=None)`` and returns
the normalised output, the mean and the biased variance it used (the batch's when
training, else the running statistics given); only the output is differentiable. In
training, ``mean``/``var`` are the running statistics, or None: given with a
``momentum``, the op updates them in place (the variance unbiased, no version bump) and
saves them for backward, as torch's ``native_batch_norm`` does, so that modifying them in
place before backward raises torch's error.

CPU: numpy, two passes over the input for the statistics and one for the output; the
backward forms the input, weight and bias gradients from two per-channel sums.
Per-channel sums are BLAS products over the input seen as (N, C, L) (``channel_sums``).
CUDA: float32/float64 run the NVRTC kernels of ``refimpl.cuda._norm_kernels`` (one or two
launches, the running statistics updated by the one that writes the batch's statistics;
the backward one or two); other dtypes and empty inputs (which
``use_fused`` never sends here from ``batch_norm``) compose refimpl's CUDA ops under
no_grad; no CPU fallback. Double backward runs the formulas in differentiable refimpl ops.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.cuda import _norm_kernels as _CUDA
from refimpl.ops._helpers import channel_sums
from refimpl.ops._registry import TensorSpec, defop


def _axes(x) -> tuple:
    return (0, *range(2, len(x.shape)))


def _bshape(x) -> list:
    shape = [1] * len(x.shape)
    shape[1] = x.shape[1]
    return shape


def _meta(input, weight, bias, mean, var, training, eps, momentum=None):
    c = (input.shape[1],)
    return (TensorSpec(tuple(input.shape), input.dtype, input.device),
            TensorSpec(c, input.dtype, input.device), TensorSpec(c, input.dtype, input.device))


def _channels(a: np.ndarray) -> np.ndarray:
    """``a`` (N, C, *) seen as (N, C, L): a view when it is contiguous."""
    n, c = a.shape[0], a.shape[1]
    return a.reshape(n, c, math.prod(a.shape[2:]))


def _channel_dots(a3: np.ndarray, b3: np.ndarray) -> np.ndarray:
    """Per-channel sums of ``a3 * b3`` (both (N, C, L)), as one dot product a row."""
    n, c, size = a3.shape
    return np.matmul(a3.reshape(n * c, 1, size), b3.reshape(n * c, size, 1)).reshape(n, c).sum(0)


def _cpu(input, weight, bias, mean, var, training, eps, momentum=None):
    xa = input._np
    x3 = _channels(xa)
    dt = xa.dtype
    if training:  # two passes: the mean, then the mean square of the centred values
        count = max(x3.shape[0] * x3.shape[2], 1)
        m = channel_sums(x3) / dt.type(count)
        xc = np.subtract(x3, m[:, None])
        v = _channel_dots(xc, xc) / dt.type(count)
        if momentum is not None and mean is not None and var is not None:
            update_running_np(mean._np, var._np, m, v, momentum, count)
    else:
        m, v = mean._np, var._np
        xc = np.subtract(x3, m[:, None])
    scale = 1 / np.sqrt(v + eps)
    if weight is not None:
        scale = scale * weight._np
    out = np.multiply(xc, scale.astype(dt)[:, None], out=xc)  # xc is fresh
    if bias is not None:
        out += bias._np[:, None]
    return out.reshape(xa.shape), np.asarray(m, dt), np.asarray(v, dt)


def update_running_np(rm: np.ndarray, rv: np.ndarray, mean: np.ndarray, var: np.ndarray,
                      momentum: float, n: int) -> None:
    """The running statistics' update in place on numpy arrays, in the ops' order and
    dtype (``running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)``, the variance
    unbiased). No version counter moves: torch's batch norm kernels update the running
    statistics without bumping them."""
    rm *= 1 - momentum
    rm += momentum * mean
    unbiased = var * (n / (n - 1) if n > 1 else float("inf"))
    rv *= 1 - momentum
    rv += momentum * unbiased


def update_running_ops(running_mean, running_var, mean, var, momentum: float, n: int) -> None:
    """The same update in refimpl ops (any device or dtype, under no_grad)."""
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():  # the ops below would record a graph in grad mode
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype),
                                                 alpha=momentum)
        if running_var is not None:
            unbiased = var.detach() * (n / (n - 1) if n > 1 else float("inf"))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)


def _ops(input, weight, bias, mean, var, training, eps):
    """The forward in refimpl ops (any device, differentiable)."""
    from refimpl.ops.reduction_stats import var_mean

    shape = _bshape(input)
    if training:
        var, mean = var_mean(input, list(_axes(input)), correction=0)
    out = (input - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean, var


def _cuda(input, weight, bias, mean, var, training, eps, momentum=None):
    if input.numel() and _CUDA.takes(input, weight, bias, mean, var):
        return _CUDA.batch_norm(input, weight, bias, mean, var, training, eps, momentum)
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():  # other dtypes and empty inputs: the composed ops
        out, m, v = _ops(input, weight, bias, mean, var, training, eps)
    if training and momentum is not None and mean is not None and var is not None:
        update_running_ops(mean, var, m, v, momentum, input.numel() // input.shape[1])
    return out.contiguous(), m.contiguous(), v.contiguous()


def _backward(ctx, grad, *_):
    input, weight, bias, mean, var, training, eps = ctx.args[:7]
    needs = ctx.needs_input_grad
    mask = (bool(needs[0]), weight is not None and bool(needs[1]),
            bias is not None and bool(needs[2]))
    if grad is None:
        return None, None, None
    if STATE.grad_enabled:  # create_graph: differentiable formulas
        return _backward_ops(grad, input, weight, mean, var, training, eps, mask)
    _, m, v = ctx.outputs
    gi, gw, gb = batch_norm_backward(grad, input, weight, m.detach(), v.detach(), training,
                                     eps, list(mask))
    return (gi if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None)


def _backward_ops(grad, input, weight, mean, var, training, eps, mask):
    """The gradients in refimpl ops; with ``training`` the statistics depend on the input."""
    axes, shape = list(_axes(input)), _bshape(input)
    if training:
        from refimpl.ops.reduction_stats import var_mean

        var, mean = var_mean(input, axes, correction=0)
    invstd = (var + eps).rsqrt()
    xhat = (input - mean.reshape(shape)) * invstd.reshape(shape)
    gi = gw = gb = None
    gsum = grad.sum(axes)
    gxhat = (grad * xhat).sum(axes)
    if mask[2]:
        gb = gsum
    if mask[1]:
        gw = gxhat
    if mask[0]:
        scale = invstd if weight is None else invstd * weight
        if training:
            n = input.numel() // input.shape[1]
            inner = grad - (gsum / n).reshape(shape) - xhat * (gxhat / n).reshape(shape)
            gi = inner * scale.reshape(shape)
        else:
            gi = grad * scale.reshape(shape)
    return gi, gw, gb


def _jvp(ctx, tx, tw, tb, *_):
    input, weight, training, eps = ctx.args[0], ctx.args[1], ctx.args[5], ctx.args[6]
    _, m, v = ctx.outputs
    axes, shape = list(_axes(input)), _bshape(input)
    invstd = (v + eps).rsqrt().reshape(shape)
    xhat = (input - m.reshape(shape)) * invstd
    out = None
    if tx is not None:
        if training:
            txc = tx - tx.mean(axes, keepdim=True)
            out = (txc - xhat * (xhat * txc).mean(axes, keepdim=True)) * invstd
        else:
            out = tx * invstd
        if weight is not None:
            out = out * weight.reshape(shape)
    if tw is not None:
        part = xhat * tw.reshape(shape)
        out = part if out is None else out + part
    if tb is not None:
        part = tb.reshape(shape).expand(input.shape)
        out = part if out is None else out + part
    return out, None, None


batch_norm_fused = defop("_batch_norm_fused", meta=_meta, cpu=_cpu, cuda=_cuda,
                         backward=_backward, jvp=_jvp, saves=("inputs", "outputs"),
                         diff_outputs=(0,),
                         node="NativeBatchNormBackward0", extra={"method": False})


def _bw_meta(grad, input, weight, mean, var, training, eps, mask):
    c = input.shape[1]
    shapes = (tuple(input.shape), (c,), (c,))
    return tuple(TensorSpec(s if m else (0,), input.dtype, input.device)
                 for s, m in zip(shapes, mask))


def _bw_cpu(grad, input, weight, mean, var, training, eps, mask):
    xa = input._np
    x3, g3 = _channels(xa), _channels(grad._np)
    dt = xa.dtype
    invstd = (1 / np.sqrt(var._np + eps)).astype(dt)
    xc = np.subtract(x3, mean._np[:, None])
    gsum = channel_sums(g3)
    gxhat = _channel_dots(g3, xc) * invstd  # the sums of grad * xhat, xhat = xc * invstd
    empty = np.zeros((0,), dt)
    gi = empty
    if mask[0]:
        scale = invstd if weight is None else invstd * weight._np
        gi = np.multiply(g3, scale.astype(dt)[:, None])
        if training:  # scale * (grad - gsum / n - xhat * gxhat / n), n values a channel
            n = dt.type(max(x3.shape[0] * x3.shape[2], 1))
            xc *= (-(scale * invstd * gxhat / n)).astype(dt)[:, None]
            gi += xc
            gi -= (scale * gsum / n).astype(dt)[:, None]
        gi = gi.reshape(xa.shape)
    return (gi, np.asarray(gxhat if mask[1] else empty, dt),
            np.asarray(gsum if mask[2] else empty, dt))


def _bw_cuda(grad, input, weight, mean, var, training, eps, mask):
    if input.numel() and _CUDA.takes(input, grad, weight, mean, var):
        return _CUDA.batch_norm_backward(grad, input, weight, mean, var, training, eps, mask)
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.factories import empty

    with no_grad():  # other dtypes and empty inputs: the composed ops
        parts = _backward_ops(grad, input, weight, mean, var, training, eps, mask)
    return tuple(p.contiguous() if p is not None else
                 empty((0,), dtype=input.dtype, device=input.device) for p in parts)


batch_norm_backward = defop("_batch_norm_fused_backward", meta=_bw_meta, cpu=_bw_cpu,
                            cuda=_bw_cuda, differentiable=False, extra={"method": False})


def use_fused(input: Tensor, weight, bias) -> bool:
    """Whether ``batch_norm`` takes the fused op (float32/float64 input, parameters of the
    same dtype, on the CPU or CUDA)."""
    dt, dev = input.dtype, input.device  # (a fake tensor's device is not its storage's)
    kind = dev.type
    return ((dt is D.float32 or dt is D.float64) and (kind == "cpu" or kind == "cuda")
            and len(input._shape) >= 2
            and (weight is None or weight.dtype is dt and weight.device == dev)
            and (bias is None or bias.dtype is dt and bias.device == dev))


__all__: list[str] = []
