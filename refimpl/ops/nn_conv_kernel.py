"""The convolution as one op: ``_conv_im2col`` (forward, autograd node
``ConvolutionBackward0`` as torch's) and ``_conv_im2col_backward`` (the gradients of
input, weight and bias in one call), used by ``nn_conv.convolution`` for float32 and
float64 inputs (and float16/bfloat16 on CUDA, see ``use_fused``).

CPU: one im2col copy of the padded input's sliding windows and one matrix product per
group (numpy); the backward recomputes the columns for the weight gradient and sums the
input gradient's columns back with one strided add per kernel offset. CUDA
(``refimpl.cuda._conv_kernels``; no CPU fallback): the forward is one im2col kernel
(padding and dilation read in place), one cuBLAS GEMM (batched over the batch with the
weight broadcast, writing (N, C_out, L); grouped: batched over the groups into
(C_out, N*L)) and one launch adding the bias (transposing the grouped result). The
backward transposes the output gradient to (C_out, N*L) once; the input gradient is one
GEMM and one col2im gather (one thread per input element, no atomics), the weight
gradient re-im2cols the input and folds the batch into one GEMM's reduction, the bias
gradient is one channel-sum kernel. Small problems (``_conv_kernels.direct_fits``) skip
the columns and the GEMMs: one direct kernel for the output (bias included), one for the
input gradient (a thread per element) and one for the weight gradient (a block of
threads per element), each summing in a fixed order. Double backward runs the backward's formulas in differentiable refimpl
ops.
"""

from __future__ import annotations

import itertools

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.cuda import _conv_kernels as _CUDA
from refimpl.ops._helpers import channel_sums
from refimpl.ops._registry import TensorSpec, defop


def _prod(xs) -> int:
    r = 1
    for v in xs:
        r *= int(v)
    return r


def _out_sizes(x, weight, stride, pads, dilation) -> list:
    xs, ws = x._shape, weight._shape
    return [(xs[2 + i] + pads[i][0] + pads[i][1] - dilation[i] * (ws[2 + i] - 1) - 1)
            // stride[i] + 1 for i in range(len(stride))]


def _meta(input, weight, bias, stride, pads, dilation, groups):
    shape = (input._shape[0], weight._shape[0],
             *_out_sizes(input, weight, stride, pads, dilation))
    return TensorSpec(shape, input.dtype, input.device)


def _padded_np(xa: np.ndarray, pads) -> np.ndarray:
    if not any(a or b for a, b in pads):
        return xa
    shape = xa.shape[:2] + tuple(s + a + b for s, (a, b) in zip(xa.shape[2:], pads))
    xp = np.zeros(shape, xa.dtype)
    xp[(slice(None), slice(None), *(slice(a, a + s) for s, (a, _) in
                                    zip(xa.shape[2:], pads)))] = xa
    return xp


def _cols_np(xa, kernel, stride, pads, dilation, groups, out_sizes) -> np.ndarray:
    """The im2col columns (N, G, Cg*K, L) of ``xa`` (one copy of the windows view)."""
    xp = _padded_np(xa, pads)
    n = len(kernel)
    st = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, xp.shape[:2] + tuple(kernel) + tuple(out_sizes),
        st[:2] + tuple(st[2 + i] * dilation[i] for i in range(n))
        + tuple(st[2 + i] * stride[i] for i in range(n)), writeable=False)
    batch, c = xp.shape[:2]
    return win.reshape(batch, groups, (c // groups) * _prod(kernel), _prod(out_sizes))


def _cpu(input, weight, bias, stride, pads, dilation, groups):
    xa, wa = input._np, weight._np
    kernel = wa.shape[2:]
    out_sizes = _out_sizes(input, weight, stride, pads, dilation)
    cols = _cols_np(xa, kernel, stride, pads, dilation, groups, out_sizes)
    og = wa.shape[0] // groups
    out = np.matmul(wa.reshape(groups, og, -1), cols)  # (N, G, Og, L)
    out = out.reshape(xa.shape[0], wa.shape[0], *out_sizes)
    if bias is not None:
        out += bias._np.reshape(-1, *([1] * len(out_sizes)))
    return out


def _cuda(input, weight, bias, stride, pads, dilation, groups):
    batch, cout = input._shape[0], weight._shape[0]
    kernel = list(weight._shape[2:])
    out_sizes = _out_sizes(input, weight, stride, pads, dilation)
    out = Tensor._empty((batch, cout, *out_sizes), input.dtype, input._storage.device)
    if out.numel() == 0:
        return out
    w = _CUDA.dense(weight)
    length, ck = _prod(out_sizes), input._shape[1] * _prod(kernel)
    if _CUDA.direct_fits(out.numel(), ck // groups):  # small: one direct kernel
        return _CUDA.direct_forward(input, w, bias if bias is None else _CUDA.dense(bias),
                                    out, out_sizes, stride, pads, dilation, groups)
    if groups == 1:  # one batched GEMM, the weight broadcast, writing (N, C_out, L)
        cols = _CUDA.im2col(input, kernel, out_sizes, stride, pads, dilation, layout_b=False)
        flat = _CUDA.view(out, (batch, cout, length), (cout * length, length, 1))
        _CUDA.gemm(flat, _CUDA.view(w, (batch, cout, ck), (0, ck, 1)), cols)
        if bias is not None:
            _CUDA.add_bias(out, out, bias, length)
        return out
    # grouped: one GEMM over the groups into (C_out, N, L), transposed with the bias added
    og, cgk = cout // groups, ck // groups
    cols = _CUDA.im2col(input, kernel, out_sizes, stride, pads, dilation, layout_b=True)
    nl = batch * length
    tmp = Tensor._empty((groups, og, nl), input.dtype, input.device)
    _CUDA.gemm(tmp, _CUDA.view(w, (groups, og, cgk), (og * cgk, cgk, 1)),
               _CUDA.view(cols, (groups, cgk, nl), (cgk * nl, nl, 1)))
    return _CUDA.swap01(tmp, cout, batch, length, out.shape, bias)


def _backward(ctx, grad):
    input, weight, bias, stride, pads, dilation, groups = ctx.args
    needs = ctx.needs_input_grad
    mask = (bool(needs[0]), bool(needs[1]), bias is not None and bool(needs[2]))
    if STATE.grad_enabled:  # create_graph: differentiable formulas
        return _backward_ops(grad, input, weight, stride, pads, dilation, groups, mask)
    gi, gw, gb = conv_backward(grad, input, weight, stride, pads, dilation, groups, list(mask))
    return (gi if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None)


def _jvp(ctx, tx, tw, tb):
    input, weight, _, stride, pads, dilation, groups = ctx.args
    out = None
    for a, b in ((tx, weight), (input, tw)):
        if a is not None and b is not None:
            part = conv_im2col(a, b, None, stride, pads, dilation, groups)
            out = part if out is None else out + part
    if tb is not None:
        part = tb.reshape(-1, *([1] * len(stride)))
        out = part if out is None else out + part
    return out


conv_im2col = defop("_conv_im2col", meta=_meta, cpu=_cpu, cuda=_cuda, backward=_backward,
                    jvp=_jvp, node="ConvolutionBackward0", extra={"method": False})


def _backward_ops(grad, input, weight, stride, pads, dilation, groups, mask):
    """The three gradients written in refimpl ops (differentiable; any device)."""
    from refimpl.ops.einsum import einsum
    from refimpl.ops.nn_shape import col2im, pad, windows

    n = len(stride)
    batch, c = input.shape[:2]
    cout, cg = weight.shape[:2]
    kernel = list(weight.shape[2:])
    k, og = _prod(kernel), cout // groups
    out_sizes = list(grad.shape[2:])
    g = grad.reshape(batch, groups, og, _prod(out_sizes))
    gi = gw = gb = None
    if mask[2]:
        gb = grad.sum([0, *range(2, 2 + n)])
    if mask[1]:
        flat = [p for pair in reversed(pads) for p in pair]
        xp = pad(input, flat) if any(flat) else input
        win = windows(xp, kernel, stride, dilation)  # (N, C, *out, *kernel)
        win = win.reshape(batch, groups, cg, _prod(out_sizes), k)
        gw = einsum("ngol,ngclk->gock", g, win).reshape(weight.shape)
    if mask[0]:
        w = weight.reshape(groups, og, cg, k)
        dcols = einsum("gock,ngol->ngckl", w, g).reshape(batch, c * k, _prod(out_sizes))
        padded = [input.shape[2 + i] + pads[i][0] + pads[i][1] for i in range(n)]
        gi = col2im(dcols, padded, out_sizes, kernel, dilation, [0] * n, stride)
        for i in range(n):
            if pads[i][0] or pads[i][1]:
                gi = gi.narrow(2 + i, pads[i][0], input.shape[2 + i])
    return gi, gw, gb


def _bw_meta(grad, input, weight, stride, pads, dilation, groups, mask):
    shapes = (input.shape, weight.shape, (weight.shape[0],))
    return tuple(TensorSpec(tuple(s) if m else (0,), input.dtype, input.device)
                 for s, m in zip(shapes, mask))


def _bw_cpu(grad, input, weight, stride, pads, dilation, groups, mask):
    xa, wa = input._np, weight._np
    batch, c = xa.shape[:2]
    cout = wa.shape[0]
    og, kernel = cout // groups, wa.shape[2:]
    out_sizes = list(grad.shape[2:])
    g = grad._np.reshape(batch, groups, og, _prod(out_sizes))
    empty = np.zeros((0,), xa.dtype)
    gb = empty
    if mask[2]:  # the sums over the batch and positions
        gb = channel_sums(g.reshape(batch, cout, g.shape[3]))
    gw = empty
    if mask[1]:
        cols = _cols_np(xa, kernel, stride, pads, dilation, groups, out_sizes)
        gw = np.matmul(g, cols.swapaxes(-1, -2)).sum(0).reshape(wa.shape)
    gi = empty
    if mask[0] and all(st == 1 for st in stride) and all(
            a <= (k - 1) * dd and b <= (k - 1) * dd for (a, b), k, dd in
            zip(pads, kernel, dilation)):
        gi = _grad_input_stride1(grad._np, wa, pads, dilation, groups, xa.shape)
    elif mask[0]:
        dcols = np.matmul(wa.reshape(groups, og, -1).transpose(0, 2, 1), g)
        dcols = dcols.reshape(batch, c, *kernel, *out_sizes)
        shape = xa.shape[:2] + tuple(s + a + b for s, (a, b) in zip(xa.shape[2:], pads))
        gp = np.zeros(shape, xa.dtype)
        for offs in itertools.product(*(range(k) for k in kernel)):
            dst = tuple(slice(o * d, o * d + s * (m - 1) + 1, s) for o, d, s, m in
                        zip(offs, dilation, stride, out_sizes))
            gp[(slice(None), slice(None), *dst)] += dcols[(slice(None), slice(None), *offs)]
        gi = gp[(slice(None), slice(None), *(slice(a, a + s) for s, (a, _) in
                                             zip(xa.shape[2:], pads)))]
        gi = np.ascontiguousarray(gi)
    return gi, gw, gb


def _grad_input_stride1(ga: np.ndarray, wa: np.ndarray, pads, dilation, groups: int,
                        x_shape) -> np.ndarray:
    """The input gradient of a stride-1 convolution as one correlation: the output
    gradient padded by ``(k - 1) * dilation - pad`` on each side, its windows (one im2col
    copy) times the flipped, transposed weight, one matrix product per group."""
    n = len(pads)
    kernel = wa.shape[2:]
    full = [((k - 1) * d - a, (k - 1) * d - b)
            for (a, b), k, d in zip(pads, kernel, dilation)]
    cout, cg = wa.shape[:2]
    og = cout // groups
    # w[co, c, k] -> wf[g, c, (o, k flipped)]: the weight seen from the input's side
    flip = (slice(None),) * 3 + (slice(None, None, -1),) * n
    wf = wa.reshape(groups, og, cg, *kernel)[flip]
    wf = wf.swapaxes(1, 2).reshape(groups, cg, og * _prod(kernel))
    cols = _cols_np(ga, kernel, [1] * n, full, dilation, groups, list(x_shape[2:]))
    return np.matmul(wf, cols).reshape(x_shape)


def _bw_cuda(grad, input, weight, stride, pads, dilation, groups, mask):
    batch, c = input._shape[:2]
    cout = weight._shape[0]
    kernel = list(weight._shape[2:])
    out_sizes = list(grad._shape[2:])
    length = _prod(out_sizes)
    og, cgk, nl = cout // groups, (c // groups) * _prod(kernel), batch * length
    grad = _CUDA.dense(grad)
    dev, dt = input._storage.device, input.dtype
    gi = gw = gb = None  # the gradients not asked for are empty tensors
    # small problems: direct kernels (no columns, no transposed copy)
    direct_gi = mask[0] and _CUDA.direct_fits(input.numel(), og * _prod(kernel))
    direct_gw = mask[1] and nl <= _CUDA.DIRECT_GW_SUM and _CUDA.direct_fits(weight.numel(), nl)
    if (direct_gi or not mask[0]) and (direct_gw or not mask[1]) and (
            nl <= _CUDA.DIRECT_GW_SUM or not mask[2]):
        # every gradient asked for in one launch (a block sums each weight and bias gradient)
        parts = _CUDA.direct_backward(grad, input, _CUDA.dense(weight), mask, out_sizes,
                                      stride, pads, dilation, groups)
        return tuple(Tensor._empty((0,), dt, dev) if p is None else p for p in parts)
    if mask[2]:
        gb = _CUDA.channel_sum(grad, batch, cout, length)
    if direct_gi:
        gi = _CUDA.direct_grad_input(grad, _CUDA.dense(weight), input._shape, out_sizes,
                                     stride, pads, dilation, groups)
    if direct_gw:
        gw = _CUDA.direct_grad_weight(grad, input, weight._shape, out_sizes, stride, pads,
                                      dilation, groups)
    mask = (mask[0] and not direct_gi, mask[1] and not direct_gw, False)
    if mask[0] or mask[1]:
        gt = _CUDA.swap01(grad, batch, cout, length, (groups, og, nl))  # (C_out, N*L)
    if mask[1]:  # the batch folded into the reduction: one GEMM over the groups
        cols = _CUDA.im2col(input, kernel, out_sizes, stride, pads, dilation, layout_b=True)
        gw = Tensor._empty(weight._shape, dt, dev)
        _CUDA.gemm(_CUDA.view(gw, (groups, og, cgk), (og * cgk, cgk, 1)), gt,
                   _CUDA.view(cols, (groups, nl, cgk), (cgk * nl, 1, nl)))
    if mask[0]:
        w = _CUDA.dense(weight)
        dcols = Tensor._empty((groups, cgk, nl), dt, dev)
        _CUDA.gemm(dcols, _CUDA.view(w, (groups, cgk, og), (og * cgk, 1, cgk)), gt)
        gi = _CUDA.col2im(dcols, input._shape, kernel, out_sizes, stride, pads, dilation,
                          layout_b=True)
    return tuple(Tensor._empty((0,), dt, dev) if g is None else g for g in (gi, gw, gb))


conv_backward = defop("_conv_im2col_backward", meta=_bw_meta, cpu=_bw_cpu, cuda=_bw_cuda,
                      differentiable=False, extra={"method": False})


def use_fused(x: Tensor, weight: Tensor, bias) -> bool:
    """Whether ``convolution`` takes the fused op: float32/float64 on the CPU or CUDA, and
    float16/bfloat16 on CUDA except a depthwise convolution (one input channel per group,
    whose float32 accumulation ``convolution`` writes out); the weight and bias on the
    input's device. Other dtypes keep the composed path."""
    dev = x.device  # (a fake tensor's device is not its storage's)
    dt, kind = x.dtype, dev.type
    if dt is D.float16 or dt is D.bfloat16:
        ok = kind == "cuda" and not (weight._shape[1] == 1 and x._shape[1] > 1)
    else:
        ok = (dt is D.float32 or dt is D.float64) and (kind == "cpu" or kind == "cuda")
    return ok and weight.device == dev and (bias is None or bias.device == dev)


__all__: list[str] = []
