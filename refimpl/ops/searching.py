"""Searching and counting: unique, unique_consecutive, searchsorted, bucketize, histc.

unique sorts (stably, NaN last); every NaN is a value of its own. searchsorted compares
as torch does: a NaN boundary or value never compares as in order. On CUDA the kernels
are in ``refimpl/cuda/_sort.py``; unique synchronizes for its output size, as in torch.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import np_result, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import not_implemented


def _cuda_sort():
    from refimpl.cuda import _sort as cuda_sort

    return cuda_sort


# -- unique, unique_consecutive ----------------------------------------------------------

def _no_meta(name: str):
    def meta(*args, **kwargs):
        raise NotImplementedError(f"{name}: the output shape depends on the data, so there is "
                                  "no meta function")
    return meta


def _group_starts(arr: np.ndarray, axis: int | None) -> np.ndarray:
    """Positions where a new run of equal elements (or slices along ``axis``) begins;
    NaNs never equal each other."""
    if axis is None:
        differs = arr[1:] != arr[:-1]
    else:
        moved = np.moveaxis(arr, axis, 0).reshape(arr.shape[axis], -1)
        differs = np.any(moved[1:] != moved[:-1], axis=1)
    return np.flatnonzero(np.concatenate(([True], differs))) if len(differs) + 1 else \
        np.zeros(0, np.int64)


def _runs(arr: np.ndarray, axis: int | None) -> tuple:
    """(first index of each run, inverse run id of each element, run lengths)."""
    n = arr.shape[0 if axis is None else axis]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = _group_starts(arr, axis)
    inverse = np.cumsum(np.isin(np.arange(n), starts)) - 1
    counts = np.diff(np.append(starts, n))
    return starts, inverse.astype(np.int64), counts.astype(np.int64)


def _unique_cpu(consecutive: bool):
    def kernel(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
        if input.dtype.is_complex:
            raise not_implemented("unique", input)
        arr = to_np(input, input.dtype)
        if dim is None:
            flat = arr.reshape(-1)
            order = np.arange(flat.size) if consecutive else np.argsort(flat, kind="stable")
            starts, inv_sorted, counts = _runs(flat[order], None)
            values = flat[order][starts]
            inverse = np.empty(flat.size, np.int64)
            inverse[order] = inv_sorted
            inverse = inverse.reshape(input._shape)
        else:
            d = wrap_dim(dim, input.dim())
            moved = np.moveaxis(arr, d, 0)
            keys = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
            order = np.arange(keys.shape[0]) if consecutive else \
                np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(keys.shape[0])
            starts, inv_sorted, counts = _runs(keys[order], 0)
            values = np.moveaxis(moved[order][starts], 0, d)
            inverse = np.empty(keys.shape[0], np.int64)
            inverse[order] = inv_sorted
        return np_result(values, input.dtype), inverse, counts
    return kernel


def _unique_cuda(consecutive: bool):
    def kernel(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
        if input.dtype.is_complex:
            raise not_implemented("unique", input)
        if dim is not None:
            if not consecutive:
                raise NotImplementedError(
                    "refimpl has no CUDA kernel for sorted unique along a dim")
            return _unique_consecutive_dim_cuda(input, wrap_dim(dim, input.dim()))
        return _cuda_sort().unique(input, consecutive)
    return kernel


def _unique_consecutive_dim_cuda(input: Tensor, d: int) -> tuple:
    """Runs of equal consecutive slices along ``d``, in refimpl's CUDA ops: a slice starts
    a run where it differs from the one before (NaNs differ); the inverse is the running
    count of starts; one synchronization for the number of runs, as in torch."""
    import refimpl as t
    from refimpl.autograd.grad_mode import no_grad

    n = input.shape[d]
    with no_grad():
        if n == 0:
            empty = t.zeros(0, dtype=D.int64, device=input.device)
            return input.clone(), empty, empty.clone()
        keys = input.movedim(d, 0).reshape(n, -1)
        differs = (keys[1:] != keys[:-1]).any(1)
        first = t.ones(1, dtype=D.bool_, device=input.device)
        starts = t.cat([first, differs])
        inverse = starts.long().cumsum(0) - 1
        index = starts.nonzero().reshape(-1)
        ends = t.cat([index[1:], t.full((1,), n, dtype=D.int64, device=input.device)])
        return input.index_select(d, index).contiguous(), inverse, ends - index


def _no_derivative(name: str):
    def backward(ctx, *grads):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")
    return backward


_unique2 = defop("_unique2", meta=_no_meta("unique"), cpu=_unique_cpu(False),
                 cuda=_unique_cuda(False),
                 backward=_no_derivative("_unique2"), diff_outputs=(0,),
                 node="Unique2Backward0", extra={"method": False})
_unique_consecutive = defop(
    "unique_consecutive", meta=_no_meta("unique_consecutive"), cpu=_unique_cpu(True),
    cuda=_unique_cuda(True),
    backward=_no_derivative("unique_consecutive"), diff_outputs=(0,), extra={"method": False})


def _unique_result(result: tuple, return_inverse: bool, return_counts: bool):
    values, inverse, counts = result
    if not (return_inverse or return_counts):
        return values
    return (values, *((inverse,) if return_inverse else ()),
            *((counts,) if return_counts else ()))


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None):
    """The distinct elements (or slices along ``dim``) in ascending order, optionally with
    the inverse mapping and the counts; NaNs are all distinct."""
    r = _unique2(input, sorted, return_inverse, return_counts, dim)
    return _unique_result(r, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None):
    """Collapse runs of equal consecutive elements (or slices along ``dim``)."""
    r = _unique_consecutive(input, True, return_inverse, return_counts, dim)
    return _unique_result(r, return_inverse, return_counts)


# -- searchsorted, bucketize, histc ------------------------------------------------------

def _binary_search(bd: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """Insertion points of ``values`` (..., m) into the rows of ``bd`` (..., n), with
    torch's comparisons: a NaN boundary or value never compares as in order."""
    lo = np.zeros(values.shape, np.int64)
    hi = np.full(values.shape, bd.shape[-1], np.int64)
    with np.errstate(invalid="ignore"):
        while np.any(lo < hi):
            active = lo < hi
            mid = (lo + hi) // 2
            probe = np.take_along_axis(bd, np.minimum(mid, bd.shape[-1] - 1), -1)
            go_right = ~(probe > values) if right else ~(probe >= values)
            lo = np.where(active & go_right, mid + 1, lo)
            hi = np.where(active & ~go_right, mid, hi)
    return lo


def _searchsorted_check(seq: Tensor, vals, right: bool, side, sorter, device: str) -> bool:
    """torch's argument checks of searchsorted (``vals``: the values tensor or None for a
    number); returns ``right`` resolved with ``side``."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError("torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to "
                               "opposites, got side of left while right was True")
        right = side == "right"
    if seq.dim() == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    vshape = vals._shape if vals is not None else ()
    if seq.dim() > 1 and (vals is None or seq._shape[:-1] != vshape[:-1]):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq._shape)} and input value tensor {list(vshape)}")
    for t in (seq, vals):
        if t is not None and (t.dtype is D.bool_ or t.dtype.is_complex):
            raise not_implemented(f"searchsorted_out_{device}", t)
    if sorter is not None and sorter._shape != seq._shape:
        raise RuntimeError(
            "torch.searchsorted(): boundary and sorter must have the same size, but got "
            f"boundary tensor {list(seq._shape)}and got sorter tensor {list(sorter._shape)}")
    return right


def _searchsorted_cpu(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                      sorter=None) -> np.ndarray:
    seq = sorted_sequence
    vals = input if isinstance(input, Tensor) else None
    right = _searchsorted_check(seq, vals, right, side, sorter, "cpu")
    bd = seq._np
    if sorter is not None:
        bd = np.take_along_axis(bd, sorter._np, -1)
    v = vals._np if vals is not None else np.asarray(input)
    common = np.result_type(bd.dtype, v.dtype) if bd.dtype.kind != "V" else np.float32
    bd, v = bd.astype(common), v.astype(common)
    if seq.dim() == 1:
        flat = v.reshape(1, -1)
        r = _binary_search(bd.reshape(1, -1), flat, right).reshape(v.shape)
    else:
        r = _binary_search(bd, v, right)
    return r.astype(np.int32 if out_int32 else np.int64)


def _searchsorted_cuda(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                       sorter=None) -> Tensor:
    seq = sorted_sequence
    if not isinstance(input, Tensor):
        from refimpl.ops.factories import full

        input = full((), input, device=seq.device)
    right = _searchsorted_check(seq, input, right, side, sorter, "cuda")
    return _cuda_sort().searchsorted(seq, input, right, sorter, out_int32)


def _searchsorted_meta(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                       sorter=None) -> TensorSpec:
    shape = input._shape if isinstance(input, Tensor) else ()
    return TensorSpec(shape, D.int32 if out_int32 else D.int64, sorted_sequence.device)


searchsorted = defop("searchsorted", meta=_searchsorted_meta, cpu=_searchsorted_cpu,
                     cuda=_searchsorted_cuda,
                     differentiable=False, extra={"method": False})


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False,
              out=None) -> Tensor:
    """For each element, the index of the bucket of 1-D ``boundaries`` it falls in
    (``searchsorted`` with the arguments swapped)."""
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    kwargs = {"out_int32": out_int32, "right": right}
    if out is not None:
        kwargs["out"] = out
    return searchsorted(boundaries, input, **kwargs)


def _histc_check(input, bins, min, max, device: str) -> None:
    # the CPU kernel takes floating types; the CUDA one every real type but bool
    if not input.dtype.is_floating_point and (device == "cpu" or input.dtype is D.bool_
                                              or input.dtype.is_complex):
        raise not_implemented(f"histogram_{device}", input)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if max < min:
        raise RuntimeError("torch.histc: max must be larger than min")


def _histc_cpu(input, bins=100, min=0, max=0) -> np.ndarray:
    _histc_check(input, bins, min, max, "cpu")
    arr = to_np(input, input.dtype).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and arr.size:
        lo, hi = float(arr.min()), float(arr.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    keep = arr[(arr >= lo) & (arr <= hi)].astype(np.float64)
    pos = np.minimum(((keep - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    return np_result(np.bincount(pos, minlength=bins).astype(np.float64), input.dtype)


def _histc_cuda(input, bins=100, min=0, max=0) -> Tensor:
    _histc_check(input, bins, min, max, "cuda")
    lo, hi = float(min), float(max)
    if not input.dtype.is_floating_point:  # integer inputs take integer bounds
        lo, hi = float(int(lo)), float(int(hi))
    if lo == hi and input.numel():
        # the data's range: two reductions and a synchronization, as in torch
        lo, hi = float(input.min().item()), float(input.max().item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return _cuda_sort().histc(input, bins, lo, hi)


histc = defop("histc", meta=lambda input, bins=100, min=0, max=0: TensorSpec(
    (bins,), input.dtype, input.device), cpu=_histc_cpu, cuda=_histc_cuda,
    differentiable=False)

__all__ = ["bucketize", "histc", "searchsorted", "unique", "unique_consecutive"]
TENSOR_METHODS = ("unique", "unique_consecutive", "histc")
