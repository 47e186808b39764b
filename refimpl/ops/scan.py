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
    cuda_cast,
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


def _scan_cuda(name: str):
    def kernel(input, dim, *, dtype=None) -> Tensor:
        from refimpl.cuda import _reduce_scan

        d = wrap_dim(dim, input.dim())
        out = _sum_dtype(input, dtype)
        if out is D.bool_:
            raise not_implemented(f"{name}_cuda", out)
        return _reduce_scan.scan(name, input, d if input.dim() else 0, out,
                                 cast=cuda_cast(input, dtype))
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
               cuda=_scan_cuda("cumsum"),
               backward=_cumsum_backward, jvp=_cumsum_jvp, extra={"save_needs": {}})


def _zero_split(x: Tensor, d: int) -> tuple:
    """Pieces of cumprod's derivative around each slice's first zero along ``d``:
    (before the first zero, the first zero, from it on, prod of x before it (``q``),
    prod of x after it up to each position (``p``), x with 1 from the first zero on)."""
    zeros = (x == 0).cumsum(d)
    before = zeros == 0
    first = (x == 0).logical_and(zeros == 1)
    from_first = before.logical_not()
    x_before = x.masked_fill(from_first, 1)
    q = x_before.cumprod(d)
    p = x.masked_fill(before.logical_or(first), 1).cumprod(d)
    return before, first, from_first, q, p, x_before


def _cumprod_prep(ctx):
    x, d, dtype = _scan_args(*ctx.args, **ctx.kwargs)
    xc = x.to(D.dtype_from_any(dtype)) if dtype is not None else x
    return x, xc, d


def _has_zero(x: Tensor) -> bool:
    return bool((x == 0).any())


def _cumprod_backward(ctx, grad):
    # out[j] = prod(x[:j+1]); d out[j] / d x[k] = out[j] / x[k] before the first zero z,
    # prod(x[:z]) * prod(x[z+1:j+1]) at z, and 0 after z (the zero is in the product)
    x, xc, d = _cumprod_prep(ctx)
    out = ctx.outputs[0]
    if x.numel() <= 1 or not x.dim():
        return (_as_input_dtype(grad, x),)
    if not _has_zero(xc):
        g = _reversed_cumsum(grad * out.conj(), d) / xc.conj()
    else:
        _, first, from_first, q, p, x_before = _zero_split(xc, d)
        g_before = (_reversed_cumsum(grad * out.conj(), d) / x_before.conj()).masked_fill(
            from_first, 0)
        g_first = (q.conj() * _reversed_cumsum(grad * p.conj() * from_first, d)).masked_fill(
            first.logical_not(), 0)
        g = g_before + g_first
    return (_as_input_dtype(g, x),)


def _cumprod_jvp(ctx, tangent, *_):
    x, xc, d = _cumprod_prep(ctx)
    out = ctx.outputs[0]
    tangent = tangent.to(xc.dtype) if tangent.dtype != xc.dtype else tangent
    if x.numel() <= 1 or not x.dim():
        return tangent
    if not _has_zero(xc):
        return out * (tangent / xc).cumsum(d)
    before, first, from_first, q, p, x_before = _zero_split(xc, d)
    t_before = out * (tangent / x_before).masked_fill(from_first, 0).cumsum(d)
    at_zero = (tangent * q).masked_fill(first.logical_not(), 0).sum(d, keepdim=True)
    return t_before.masked_fill(from_first, 0) + (at_zero * p).masked_fill(before, 0)


cumprod = defop("cumprod", meta=_scan_meta, cpu=_scan_cpu("cumprod", np.cumprod),
                cuda=_scan_cuda("cumprod"),
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


def _cumext_cuda(name: str):
    def kernel(input, dim) -> tuple:
        from refimpl.cuda import _reduce_scan

        d = wrap_dim(dim, input.dim())
        if input.dtype.is_complex:
            raise not_implemented(f"{name}_cuda", input)
        return _reduce_scan.scan(name, input, d if input.dim() else 0, input.dtype,
                                 with_indices=True)
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
    op = defop(name, meta=_cumext_meta, cpu=_cumext_cpu(name, ufunc), cuda=_cumext_cuda(name),
               backward=_cumext_backward,
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
