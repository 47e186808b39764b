"""Scans along one dim: cumsum, cumprod, cummax, cummin (spec TENSOR-501).

Re-exported by ``reduction``. ``cumsum``/``cumprod`` of bools and integers give int64
unless ``dtype`` is given. ``cummax``/``cummin`` return ``(values, indices)``: among
equal values the latest index wins, and once a NaN is met it propagates (each later
NaN taking the index).
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import compute_np_dtype, np_result, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import (
    _sum_dtype,
    cast_input,
    named_result,
    not_implemented,
    structseq_pair,
)

structseq_pair("cummax")
structseq_pair("cummin")


def _scan_args(input, dim, *, dtype=None):
    return input, wrap_dim(dim, input.dim()), dtype


def _scan_meta(input, dim, *, dtype=None) -> TensorSpec:
    wrap_dim(dim, input.dim())
    return TensorSpec(input._shape, _sum_dtype(input, dtype), input.device)


def _scan_cpu(name: str, np_fn):
    def kernel(input, dim, *, dtype=None) -> np.ndarray:
        d = wrap_dim(dim, input.dim())
        out = _sum_dtype(input, dtype)
        if out is D.bool_:
            raise not_implemented(f"{name}_out_cpu", out)
        arr = cast_input(input, out) if dtype is not None else input._np
        with np.errstate(all="ignore"):
            r = np_fn(arr.reshape(arr.shape or (1,)), axis=d, dtype=compute_np_dtype(out))
        return np_result(r.reshape(input._shape), out)
    return kernel


def _reversed_cumsum(g: Tensor, d: int) -> Tensor:
    return g.flip(d).cumsum(d).flip(d)


def _as_input_dtype(g: Tensor, x: Tensor) -> Tensor:
    return g.to(x.dtype) if g.dtype != x.dtype else g


def _cumsum_backward(ctx, grad):
    x, d, _ = _scan_args(*ctx.args, **ctx.kwargs)
    if not x.dim():
        return (_as_input_dtype(grad, x),)
    return (_as_input_dtype(_reversed_cumsum(grad, d), x),)


def _cumsum_jvp(ctx, tangent, *_):
    return cumsum(tangent, *ctx.args[1:], **ctx.kwargs)


cumsum = defop("cumsum", meta=_scan_meta, cpu=_scan_cpu("cumsum", np.cumsum),
               backward=_cumsum_backward, jvp=_cumsum_jvp, extra={"save_needs": {}})


def _cumprod_matrix(x: Tensor, d: int) -> Tensor:
    """``C[..., k, j] = prod(x[i] for i <= j if i != k)`` for ``j >= k``, else 0, with
    ``dim`` moved last: the Jacobian of cumprod, free of divisions (zeros allowed)."""
    import refimpl

    xm = x.movedim(d, -1)
    n = xm.shape[-1]
    ar = refimpl.arange(n, device=x.device)
    rows = xm.unsqueeze(-2).expand(*xm.shape[:-1], n, n)
    eye = ar.unsqueeze(1) == ar.unsqueeze(0)
    upper = ar.unsqueeze(0) >= ar.unsqueeze(1)
    return rows.masked_fill(eye, 1).cumprod(-1) * upper


def _cumprod_prep(ctx):
    x, d, dtype = _scan_args(*ctx.args, **ctx.kwargs)
    xc = x.to(D.dtype_from_any(dtype)) if dtype is not None else x
    return x, xc, d


def _has_zero(x: Tensor) -> bool:
    return bool((x == 0).any())


def _cumprod_backward(ctx, grad):
    x, xc, d = _cumprod_prep(ctx)
    if x.numel() <= 1 or not x.dim():
        return (_as_input_dtype(grad, x),)
    if not _has_zero(xc):
        g = _reversed_cumsum(grad * ctx.outputs[0].conj(), d) / xc.conj()
    else:
        c = _cumprod_matrix(xc, d)
        g = (c.conj() * grad.movedim(d, -1).unsqueeze(-2)).sum(-1).movedim(-1, d)
    return (_as_input_dtype(g, x),)


def _cumprod_jvp(ctx, tangent, *_):
    x, xc, d = _cumprod_prep(ctx)
    tangent = tangent.to(xc.dtype) if tangent.dtype != xc.dtype else tangent
    if x.numel() <= 1 or not x.dim():
        return tangent
    if not _has_zero(xc):
        return ctx.outputs[0] * (tangent / xc).cumsum(d)
    c = _cumprod_matrix(xc, d)
    return (c * tangent.movedim(d, -1).unsqueeze(-1)).sum(-2).movedim(-1, d)


cumprod = defop("cumprod", meta=_scan_meta, cpu=_scan_cpu("cumprod", np.cumprod),
                backward=_cumprod_backward, jvp=_cumprod_jvp, saves=("inputs", "outputs"))


# -- cummax, cummin --------------------------------------------------------------------

def _cumext_meta(input, dim) -> tuple:
    wrap_dim(dim, input.dim())
    return (TensorSpec(input._shape, input.dtype, input.device),
            TensorSpec(input._shape, D.int64, input.device))


def _cumext_cpu(name: str, ufunc):
    def kernel(input, dim) -> tuple:
        d = wrap_dim(dim, input.dim())
        if input.dtype.is_complex:
            raise not_implemented(f"{name}_cpu", input)
        arr = to_np(input, input.dtype).reshape(input._shape or (1,))
        values = ufunc.accumulate(arr, axis=d)
        hit = arr == values
        if arr.dtype.kind == "f":
            hit |= np.isnan(arr) & np.isnan(values)
        shape = [1] * arr.ndim
        shape[d] = arr.shape[d]
        pos = np.arange(arr.shape[d], dtype=np.int64).reshape(shape)
        idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=d)
        return (np_result(values.reshape(input._shape), input.dtype),
                np_result(idx.reshape(input._shape), D.int64))
    return kernel


def _cumext_backward(ctx, grad, _gi=None):
    import refimpl

    x, d = ctx.args[0], ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs["dim"]
    if not x.dim():
        return (grad,)
    d = wrap_dim(d, x.dim())
    return (refimpl.zeros_like(x).scatter_add(d, ctx.outputs[1], grad),)


def _cumext_jvp(ctx, tangent, *_):
    x, d = ctx.args[0], ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs["dim"]
    if not x.dim():
        return tangent
    return tangent.gather(wrap_dim(d, x.dim()), ctx.outputs[1])


def _declare(name: str, ufunc):
    op = defop(name, meta=_cumext_meta, cpu=_cumext_cpu(name, ufunc), backward=_cumext_backward,
               jvp=_cumext_jvp, diff_outputs=(0,), saves=("inputs", "outputs"),
               extra={"method": False})

    def public(input: Tensor, dim: int, *, out=None):
        kwargs = {} if out is None else {"out": out}
        if not input.dim() and dim not in (0, -1):
            raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}")
        return named_result(name, op(input, dim, **kwargs), out)

    public.__name__ = public.__qualname__ = name
    return public


cummax = _declare("cummax", np.maximum)
cummax.__doc__ = """Running maximum along ``dim``: ``(values, indices)`` (TENSOR-501)."""
cummin = _declare("cummin", np.minimum)
cummin.__doc__ = """Running minimum along ``dim``: ``(values, indices)`` (TENSOR-501)."""

__all__ = ["cummax", "cummin", "cumprod", "cumsum"]
