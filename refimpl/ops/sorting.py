"""Sorting and order statistics: sort, argsort, msort, topk, kthvalue, median,
nanmedian, mode (dims: spec TENSOR-309; median: TENSOR-509). unique, searchsorted and
histc are in ``searching.py``.

Sorts are stable in both directions, NaN ranking above every number (last ascending,
first descending). Where torch's CPU kernels leave the order of ties unspecified
(``topk``, ``kthvalue``, ``mode`` on long slices) refimpl takes the stable order: the
values always agree with torch, the indices among equal values may not.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import OUT_DTYPE, np_result, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import (
    bad_args,
    check_nonempty,
    named_result,
    not_implemented,
    reduce_dims,
    reduced_shape,
    select_backward,
    select_jvp,
    structseq_pair,
    tie_mask,
)

for _name in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode"):
    structseq_pair(_name)


def stable_argsort(arr: np.ndarray, axis: int, descending: bool = False) -> np.ndarray:
    """Stable argsort along ``axis``; descending keeps equal values in index order."""
    if not descending:
        return np.argsort(arr, axis=axis, kind="stable")
    order = np.flip(np.argsort(np.flip(arr, axis), axis=axis, kind="stable"), axis)
    return arr.shape[axis] - 1 - order


def _values_indices_meta(shape, x: Tensor) -> tuple:
    return TensorSpec(shape, x.dtype, x.device), TensorSpec(shape, D.int64, x.device)


def _pick_along(arr: np.ndarray, order: np.ndarray, d: int) -> np.ndarray:
    return np.take_along_axis(arr, order, d)


def _as_nd(x: Tensor) -> np.ndarray:
    return to_np(x, x.dtype).reshape(x._shape or (1,))


def _selected_backward(dim_of, keepdim_of=lambda ctx: True):
    """Backward of an op whose output 1 holds the picked indices of output 0."""
    def backward(ctx, grad, *_):
        x = ctx.args[0]
        return (select_backward(grad, x, dim_of(ctx), ctx.outputs[1], keepdim_of(ctx)),)
    return backward


def _selected_jvp(dim_of, keepdim_of=lambda ctx: True):
    def jvp(ctx, tangent, *_):
        return select_jvp(tangent, ctx.args[0], dim_of(ctx), ctx.outputs[1], keepdim_of(ctx))
    return jvp


def _arg(ctx, pos: int, name: str, default):
    return ctx.args[pos] if len(ctx.args) > pos else ctx.kwargs.get(name, default)


# -- sort, argsort, msort ----------------------------------------------------------------

def _sort_cpu(input, dim=-1, descending=False, *, stable=False) -> tuple:
    d = wrap_dim(dim, input.dim())
    if input.dtype.is_complex:
        raise RuntimeError(" Sort does not support complex dtypes on CPU")
    arr = _as_nd(input)
    order = stable_argsort(arr, d, bool(descending))
    return (np_result(_pick_along(arr, order, d).reshape(input._shape), input.dtype),
            order.reshape(input._shape))


def _cuda_sort():
    from refimpl.cuda import _sort as cuda_sort

    return cuda_sort


def _sort_cuda(input, dim=-1, descending=False, *, stable=False) -> tuple:
    d = wrap_dim(dim, input.dim())
    if input.dtype.is_complex:
        raise RuntimeError(" Sort does not support complex dtypes on CUDA")
    values, indices = _cuda_sort().sort(input, d if input.dim() else 0, bool(descending))
    return values, indices


def _sort_meta(input, dim=-1, descending=False, *, stable=False) -> tuple:
    wrap_dim(dim, input.dim())
    return _values_indices_meta(input._shape, input)


_sort = defop("sort", meta=_sort_meta, cpu=_sort_cpu, cuda=_sort_cuda,
              backward=_selected_backward(lambda ctx: _arg(ctx, 1, "dim", -1)),
              jvp=_selected_jvp(lambda ctx: _arg(ctx, 1, "dim", -1)), diff_outputs=(0,),
              saves=("outputs",), extra={"method": False, "out_dtype": OUT_DTYPE})


def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False,
         out=None):
    """``(values, indices)`` sorted along ``dim``; always stable (TENSOR-309)."""
    kwargs = {} if out is None else {"out": out}
    return named_result("sort", _sort(input, dim, descending, stable=stable, **kwargs), out)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, *,
            stable: bool = False) -> Tensor:
    """The indices that sort ``input`` along ``dim`` (``sort(...).indices``)."""
    return _sort(input, dim, descending, stable=stable)[1]


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dim."""
    return _sort(input, 0)[0]


# -- topk, kthvalue --------------------------------------------------------------------

def _topk_check(input, k, dim) -> int:
    d = wrap_dim(dim, input.dim())
    size = input._shape[d] if input.dim() else 1
    if k < 0 or k > size:
        raise RuntimeError("selected index k out of range")
    return d


def _topk_meta(input, k, dim=-1, largest=True, sorted=True) -> tuple:
    d = _topk_check(input, k, dim)
    shape = tuple(k if i == d else s for i, s in enumerate(input._shape))
    return _values_indices_meta(shape, input)


def _topk_cpu(input, k, dim=-1, largest=True, sorted=True) -> tuple:
    d = _topk_check(input, k, dim)
    if input.dtype.is_complex:
        raise RuntimeError(" topk does not support complex dtypes on CPU")
    if input.dtype is D.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    arr = _as_nd(input)
    if not input.dim():  # k is 0 or 1; torch returns the element either way
        return np_result(arr.reshape(()), input.dtype), np.zeros((), np.int64)
    order = np.take(stable_argsort(arr, d, bool(largest)), np.arange(k), axis=d)
    return np_result(_pick_along(arr, order, d), input.dtype), order


def _topk_cuda(input, k, dim=-1, largest=True, sorted=True) -> tuple:
    d = _topk_check(input, k, dim)
    if input.dtype.is_complex:
        raise RuntimeError(" topk does not support complex dtypes on CUDA")
    return _cuda_sort().topk(input, k, d if input.dim() else 0, bool(largest))


_topk = defop("topk", meta=_topk_meta, cpu=_topk_cpu, cuda=_topk_cuda,
              backward=_selected_backward(lambda ctx: _arg(ctx, 2, "dim", -1)),
              jvp=_selected_jvp(lambda ctx: _arg(ctx, 2, "dim", -1)), diff_outputs=(0,),
              saves=("outputs",), extra={"method": False, "out_dtype": OUT_DTYPE})


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True,
         *, out=None):
    """The ``k`` largest (or smallest) elements along ``dim`` as ``(values, indices)``,
    always in sorted order."""
    kwargs = {} if out is None else {"out": out}
    return named_result("topk", _topk(input, k, dim, largest, sorted, **kwargs), out)


def _kth_meta(input, k, dim=-1, keepdim=False) -> tuple:
    axes = reduce_dims(input, dim)
    return _values_indices_meta(reduced_shape(input._shape, axes, keepdim), input)


def _kth_cpu(input, k, dim=-1, keepdim=False) -> tuple:
    d = wrap_dim(dim, input.dim())
    size = input._shape[d] if input.dim() else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.dtype is D.bool_ or input.dtype.is_complex:
        raise not_implemented("kthvalue_cpu", input)
    arr = _as_nd(input)
    idx = np.take(stable_argsort(arr, d), [k - 1], axis=d)
    return _finish_selection(input, arr, idx, d, keepdim)


def _kth_cuda(input, k, dim=-1, keepdim=False) -> tuple:
    d = wrap_dim(dim, input.dim())
    size = input._shape[d] if input.dim() else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.dtype is D.bool_ or input.dtype.is_complex:
        raise not_implemented("kthvalue_cuda", input)
    return _cuda_sort().select(input, d, keepdim, k=k - 1)


def _finish_selection(input: Tensor, arr: np.ndarray, idx: np.ndarray, d: int,
                      keepdim: bool) -> tuple:
    """(values, indices) of one picked element per slice along ``d`` (kept as size 1)."""
    values = _pick_along(arr, idx, d)
    if not input.dim():
        values, idx = values.reshape(()), idx.reshape(())
    elif not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return np_result(values, input.dtype), np_result(idx, D.int64)


_kthvalue = defop("kthvalue", meta=_kth_meta, cpu=_kth_cpu, cuda=_kth_cuda,
                  backward=_selected_backward(lambda ctx: _arg(ctx, 2, "dim", -1),
                                              lambda ctx: _arg(ctx, 3, "keepdim", False)),
                  jvp=_selected_jvp(lambda ctx: _arg(ctx, 2, "dim", -1),
                                    lambda ctx: _arg(ctx, 3, "keepdim", False)),
                  diff_outputs=(0,), saves=("outputs",),
                  extra={"method": False, "out_overlap": True,
                         "out_dtype": "output values must be of same type as input"})


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False, *, out=None):
    """The ``k``-th smallest element along ``dim`` (1-based) and its index."""
    kwargs = {} if out is None else {"out": out}
    return named_result("kthvalue", _kthvalue(input, k, dim, keepdim, **kwargs), out)


# -- median, nanmedian, mode -----------------------------------------------------------

def _median_positions(arr: np.ndarray, d: int, ignore_nan: bool) -> np.ndarray:
    """Which sorted position holds the (lower) median of each slice: a NaN's, when the
    slice has one and NaNs count (it sorts first among them)."""
    n = arr.shape[d]
    valid = np.sum(~np.isnan(arr), axis=d, keepdims=True) if arr.dtype.kind == "f" else \
        np.full([1 if i == d else s for i, s in enumerate(arr.shape)], n)
    if ignore_nan:
        return np.maximum(valid - 1, 0) // 2
    return np.where(valid < n, valid, (n - 1) // 2)


def _median_check(name: str, input: Tensor) -> None:
    if input.dtype is D.bool_ or input.dtype.is_complex:
        raise not_implemented("median_cpu", input)


def _median_full_cpu(ignore_nan: bool):
    def kernel(input) -> np.ndarray:
        _median_check("median", input)
        arr = to_np(input, input.dtype).reshape(-1)
        if arr.size == 0:
            with np.errstate(all="ignore"):
                return np.array(np.nan).astype(input.dtype.np)
        pos = _median_positions(arr, 0, ignore_nan)
        return np_result(np.sort(arr)[pos[0]], input.dtype)
    return kernel


def _median_dim_cpu(name: str, ignore_nan: bool):
    def kernel(input, dim, keepdim=False) -> tuple:
        axes = reduce_dims(input, dim)
        _median_check(name, input)
        check_nonempty("median", input, axes, False)
        d = axes[0] if axes else 0
        arr = _as_nd(input)
        order = stable_argsort(arr, d)
        idx = _pick_along(order, _median_positions(arr, d, ignore_nan), d)
        return _finish_selection(input, arr, idx, d, keepdim)
    return kernel


def _median_full_cuda(ignore_nan: bool):
    def kernel(input) -> Tensor:
        _median_check("median", input)
        if input.numel() == 0:
            from refimpl.ops.factories import full

            return full((), float("nan"), dtype=input.dtype, device=input.device)
        return _cuda_sort().select(input.reshape(-1), 0, False, how=2 if ignore_nan else 1)[0]
    return kernel


def _median_dim_cuda(name: str, ignore_nan: bool):
    def kernel(input, dim, keepdim=False) -> tuple:
        axes = reduce_dims(input, dim)
        _median_check(name, input)
        check_nonempty("median", input, axes, False)
        if input.dim() >= 25:  # torch raises from 25 dimensions on (its TensorInfo limit)
            raise RuntimeError("CUDA Tensors cannot have more than 25 dimensions")
        d = axes[0] if axes else 0
        return _cuda_sort().select(input, d, keepdim, how=2 if ignore_nan else 1)
    return kernel


def _evenly_backward(ctx, grad):
    x, value = ctx.args[0], ctx.outputs[0]
    mask = tie_mask(x, value, nan_ties=True)
    return (mask * (grad / mask.sum()),)


def _evenly_jvp(ctx, tangent):
    mask = tie_mask(ctx.args[0], ctx.outputs[0], nan_ties=True)
    return (tangent * mask).sum() / mask.sum()


def _dim_of(ctx):
    return _arg(ctx, 1, "dim", -1)


def _keepdim_of(ctx):
    return _arg(ctx, 2, "keepdim", False)


def _declare_median(name: str, ignore_nan: bool):
    full = defop(name, meta=lambda input: TensorSpec((), input.dtype, input.device),
                 cpu=_median_full_cpu(ignore_nan), cuda=_median_full_cuda(ignore_nan),
                 backward=_evenly_backward, jvp=_evenly_jvp,
                 saves=("inputs", "outputs"), extra={"method": False})
    with_dim = defop(f"{name}.dim", meta=_kth_meta_dim, cpu=_median_dim_cpu(name, ignore_nan),
                     cuda=_median_dim_cuda(name, ignore_nan),
                     backward=_selected_backward(_dim_of, _keepdim_of),
                     jvp=_selected_jvp(_dim_of, _keepdim_of), diff_outputs=(0,),
                     node=f"{name.title()}Backward1", saves=("outputs",),
                     extra={"method": False})

    def public(input: Tensor, *args, **kwargs):
        if not args and "dim" not in kwargs:
            if "keepdim" in kwargs:
                raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
            return full(input, **kwargs)
        dim = args[0] if args else kwargs["dim"]
        if not isinstance(dim, int):
            raise bad_args(name, type(dim).__name__)
        return named_result(name, with_dim(input, *args, **kwargs), kwargs.get("out"))

    public.__name__ = public.__qualname__ = name
    return public


def _kth_meta_dim(input, dim, keepdim=False) -> tuple:
    return _kth_meta(input, 1, dim, keepdim)


median = _declare_median("median", False)
median.__doc__ = """``median(input)``: the lower median of all elements (NaN if any is
NaN); ``median(input, dim, keepdim=False)``: ``(values, indices)`` (TENSOR-509)."""
nanmedian = _declare_median("nanmedian", True)
nanmedian.__doc__ = """``median`` ignoring NaNs (NaN only where every element is)."""


def _mode_cpu(input, dim=-1, keepdim=False) -> tuple:
    axes = reduce_dims(input, dim)
    if input.dtype.is_complex:
        raise not_implemented("mode_cpu", input)
    check_nonempty("mode", input, axes, False)
    d = axes[0] if axes else 0
    arr = _as_nd(input)
    rows = np.moveaxis(arr, d, -1).reshape(-1, arr.shape[d])
    picks = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        order = np.argsort(row, kind="stable")
        s = row[order]
        starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
        counts = np.diff(np.append(starts, len(s)))
        best = int(np.argmax(counts))
        picks[r] = order[starts[best] + counts[best] - 1]
    idx = np.moveaxis(picks.reshape(*np.moveaxis(arr, d, -1).shape[:-1], 1), -1, d)
    return _finish_selection(input, arr, idx, d, keepdim)


def _mode_cuda(input, dim=-1, keepdim=False) -> tuple:
    axes = reduce_dims(input, dim)
    if input.dtype.is_complex:
        raise not_implemented("mode_cuda", input)
    check_nonempty("mode", input, axes, False)
    return _cuda_sort().select(input, axes[0] if axes else 0, keepdim, how=-1)


_mode = defop("mode", meta=lambda input, dim=-1, keepdim=False: _kth_meta(input, 1, dim, keepdim),
              cpu=_mode_cpu, cuda=_mode_cuda, backward=_selected_backward(_dim_of, _keepdim_of),
              jvp=_selected_jvp(_dim_of, _keepdim_of), diff_outputs=(0,),
              saves=("outputs",), extra={"method": False})


def mode(input: Tensor, dim: int = -1, keepdim: bool = False, *, out=None):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones)
    and an index where it occurs."""
    kwargs = {} if out is None else {"out": out}
    return named_result("mode", _mode(input, dim, keepdim, **kwargs), out)


__all__ = ["argsort", "kthvalue", "median", "mode", "msort", "nanmedian", "sort", "topk"]
TENSOR_METHODS = ("sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode")
