"""Scaled dot-product attention as one op: ``_sdpa_fused`` (the output and the attention
weights; autograd node ``ScaledDotProductFlashAttentionForCpuBackward0`` as torch's CPU
op) and its one-call backward ``_sdpa_fused_backward``, used by
``nn_layers.scaled_dot_product_attention`` without dropout for float32/float64 inputs of
one batch shape and head size (a mask that needs no gradient).

CPU: numpy, two batched matrix products around a softmax (rows with every position masked
give zeros, as torch's math path); the backward forms the three gradients from the saved
weights with four batched products. CUDA (``refimpl.cuda._attention_kernels``): the
forward is two cuBLAS batched GEMMs around one NVRTC kernel (mask and row softmax in
place), the backward four GEMMs around one kernel (the softmax backward with the scale);
no CPU fallback. Double backward runs the formulas in differentiable refimpl ops.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop


def _meta(q, k, v, mask, scale, causal):
    return (TensorSpec((*q.shape[:-1], v.shape[-1]), q.dtype, q.device),
            TensorSpec((*q.shape[:-1], k.shape[-2]), q.dtype, q.device))


def _cpu(q, k, v, mask, scale, causal):
    qa, ka, va = q._np, k._np, v._np
    s = np.matmul(qa, ka.swapaxes(-1, -2)) * qa.dtype.type(scale)
    length, source = s.shape[-2], s.shape[-1]
    if causal:
        mask = None
        s = np.where(np.tri(length, source, dtype=bool), s, -np.inf)
    if mask is not None:
        m = mask._np
        s = np.where(m, s, -np.inf) if m.dtype == np.bool_ else s + m
    top = s.max(-1, keepdims=True)
    dead = np.isneginf(top)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - np.where(dead, 0, top))
        w = e / e.sum(-1, keepdims=True)
    if dead.any():
        w = np.where(dead, 0, w)
    w = w.astype(qa.dtype, copy=False)
    return np.matmul(w, va), w


def _ops(q, k, v, mask, scale, causal):
    """The forward in refimpl ops (any device, differentiable): output and weights."""
    from refimpl.ops.factories import ones

    scores = q.matmul(k.transpose(-2, -1)) * scale
    if causal:
        mask = ones((q.shape[-2], k.shape[-2]), dtype=D.bool_, device=q.device).tril()
    if mask is not None:
        if mask.dtype is D.bool_:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        else:
            scores = scores + mask
    weights = scores.softmax(-1)
    weights = weights.masked_fill((scores == float("-inf")).all(-1, keepdim=True), 0.0)
    return weights.matmul(v), weights


def _cuda(q, k, v, mask, scale, causal):
    from refimpl.cuda import _attention_kernels as kernels

    if kernels.supports(q):
        return kernels.forward(q, k, v, mask, scale, causal)
    return _composed_cuda(q, k, v, mask, scale, causal)


def _composed_cuda(q, k, v, mask, scale, causal):
    """The forward in refimpl's CUDA ops, for inputs the kernels do not take (dtypes
    other than float32/float64, which ``use_fused`` never routes here)."""
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        out, w = _ops(q, k, v, mask, scale, causal)
    return out.contiguous(), w.contiguous()


def _from_weights(grad, q, k, v, w, scale, mask3):
    """The gradients of q, k, v in refimpl ops, from the weights ``w``."""
    gv = w.transpose(-2, -1).matmul(grad) if mask3[2] else None
    gi = gk = None
    if mask3[0] or mask3[1]:
        gw = grad.matmul(v.transpose(-2, -1))
        gs = w * (gw - (gw * w).sum(-1, keepdim=True)) * scale
        gi = gs.matmul(k) if mask3[0] else None
        gk = gs.transpose(-2, -1).matmul(q) if mask3[1] else None
    return gi, gk, gv


def _backward(ctx, grad, *_):
    q, k, v, mask, scale, causal = ctx.args
    needs = ctx.needs_input_grad
    mask3 = (bool(needs[0]), bool(needs[1]), bool(needs[2]))
    if grad is None:
        return None, None, None
    if STATE.grad_enabled:  # create_graph: the weights recomputed, differentiable
        w = _ops(q, k, v, mask, scale, causal)[1]
        return _from_weights(grad, q, k, v, w, scale, mask3)
    w = ctx.outputs[1].detach()
    gq, gk, gv = sdpa_backward(grad, q, k, v, w, scale, list(mask3))
    return (gq if mask3[0] else None, gk if mask3[1] else None, gv if mask3[2] else None)


def _jvp(ctx, tq, tk, tv, *_):
    q, k, v, _, scale = ctx.args[:5]
    w = ctx.outputs[1]
    out = None
    if tq is not None or tk is not None:
        ts = None
        if tq is not None:
            ts = tq.matmul(k.transpose(-2, -1))
        if tk is not None:
            part = q.matmul(tk.transpose(-2, -1))
            ts = part if ts is None else ts + part
        ts = ts * scale
        tw = w * (ts - (w * ts).sum(-1, keepdim=True))
        out = tw.matmul(v)
    if tv is not None:
        part = w.matmul(tv)
        out = part if out is None else out + part
    return out, None


sdpa_fused = defop("_sdpa_fused", meta=_meta, cpu=_cpu, cuda=_cuda, backward=_backward,
                   jvp=_jvp, saves=("inputs", "outputs"), diff_outputs=(0,),
                   node="ScaledDotProductFlashAttentionForCpuBackward0",
                   extra={"method": False})


def _bw_meta(grad, q, k, v, w, scale, mask3):
    return tuple(TensorSpec(tuple(t.shape) if m else (0,), q.dtype, q.device)
                 for t, m in zip((q, k, v), mask3))


def _bw_cpu(grad, q, k, v, w, scale, mask3):
    g, wa = grad._np, w._np
    empty = np.zeros((0,), wa.dtype)
    gv = np.matmul(wa.swapaxes(-1, -2), g) if mask3[2] else empty
    gq = gk = empty
    if mask3[0] or mask3[1]:
        gw = np.matmul(g, v._np.swapaxes(-1, -2))
        gs = wa * (gw - (gw * wa).sum(-1, keepdims=True))
        gs *= wa.dtype.type(scale)
        if mask3[0]:
            gq = np.matmul(gs, k._np)
        if mask3[1]:
            gk = np.matmul(gs.swapaxes(-1, -2), q._np)
    return gq, gk, gv


def _bw_cuda(grad, q, k, v, w, scale, mask3):
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.cuda import _attention_kernels as kernels

    if kernels.supports(q):
        parts = kernels.backward(grad, q, k, v, w, scale, mask3)
    else:  # dtypes the kernels do not take: refimpl's CUDA ops
        with no_grad():
            parts = tuple(p.contiguous() if p is not None else None
                          for p in _from_weights(grad, q, k, v, w, scale, mask3))
    return tuple(p if p is not None else Tensor._empty((0,), q.dtype, q._storage.device)
                 for p in parts)


sdpa_backward = defop("_sdpa_fused_backward", meta=_bw_meta, cpu=_bw_cpu, cuda=_bw_cuda,
                      differentiable=False, extra={"method": False})


def use_fused(q: Tensor, k: Tensor, v: Tensor, mask) -> bool:
    """Whether attention takes the fused op where torch's CPU takes its flash kernel:
    float32/float64 4-d q, k, v of one dtype, device, batch shape and head size, with data;
    a 2-d or 4-d mask (bool or of q's dtype) on that device that needs no gradient. Other inputs keep
    the composed (math) path, whose nodes are torch's there."""
    dt = q.dtype
    dev = q.device
    return ((dt is D.float32 or dt is D.float64) and dev.type in ("cpu", "cuda")
            and q.dim() == 4 and k.dim() == 4 and v.dim() == 4
            and q.shape[-1] == k.shape[-1] == v.shape[-1]
            and k.dtype is dt and v.dtype is dt and k.device == dev and v.device == dev
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and k.shape[-2] == v.shape[-2]
            and q.numel() > 0 and k.numel() > 0 and v.numel() > 0
            and (mask is None or mask.device == dev and not mask.requires_grad
                 and (mask.dtype is D.bool_ or mask.dtype is dt) and mask.dim() in (2, 4)
                 and _fits(mask.shape, (*q.shape[:-1], k.shape[-2]))))


def _fits(shape, target) -> bool:
    """Whether ``shape`` broadcasts to ``target`` without growing it."""
    return len(shape) <= len(target) and all(
        m in (1, t) for m, t in zip(reversed(tuple(shape)), reversed(tuple(target))))


__all__: list[str] = []
