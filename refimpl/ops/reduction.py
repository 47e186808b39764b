"""Reductions (spec TENSOR-500..511): sum, mean, prod, max/min, var/std, norm, logsumexp, ...

Every reduction takes ``dim`` as None (all dims), an int, or a sequence of ints (an
empty sequence also means all dims), and ``keepdim``. Output dtypes follow torch:
``sum``/``prod``/``cumsum``/``cumprod`` of bools and integers give int64; ``mean``,
``var``, ``std`` and ``norm`` need a floating or complex input; ``all``/``any`` give
bool except for uint8, which stays uint8. float16 and bfloat16 accumulate in float32
(float32 and narrower accumulate ``var``/``std`` in float64, as torch's CPU does).

Where torch has two overloads with different autograd nodes (``sum()`` gives
``SumBackward0``, ``sum(dim)`` gives ``SumBackward1``) there are two ops, named like
torch's overloads (``sum``, ``sum.dim_IntList``), behind one public function.

This module holds the shared pieces (dims, shapes, ``return_types``, gradient helpers)
and sum/mean/prod/logsumexp/all/any/count_nonzero; ``reduction_minmax`` (max, min,
amax, aminmax, argmax), ``reduction_stats`` (var, std, norm) and ``scan`` (cumsum,
cumprod, cummax, cummin) are re-exported from here. Order statistics (median, mode,
kthvalue) live in ``sorting``.
"""

from __future__ import annotations

import builtins
import collections
import math
import types
import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import compute_np_dtype, np_result, to_np
from refimpl.ops._registry import REGISTRY, TensorSpec, defop

# torch.return_types: the named tuples that multi-output reductions return.
return_types = types.SimpleNamespace()


def structseq(name: str, fields: tuple = ("values", "indices")) -> type:
    """A named-tuple type printed like ``torch.return_types.<name>``; registered in
    ``return_types``."""
    cls = collections.namedtuple(name, fields)

    def __repr__(self) -> str:
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torch.return_types.{name}(\n{body})"

    cls.__repr__ = __repr__
    cls.__module__ = __name__
    cls.__qualname__ = f"return_types.{name}"
    setattr(return_types, name, cls)
    return cls


def named_result(name: str, result: tuple, out=None) -> tuple:
    """``result`` as ``return_types.<name>`` (``<name>_out`` when written to ``out=``, as
    torch does)."""
    return getattr(return_types, f"{name}_out" if out is not None else name)(*result)


def structseq_pair(name: str, fields: tuple = ("values", "indices")) -> None:
    """Register ``return_types.<name>`` and ``return_types.<name>_out``."""
    structseq(name, fields)
    structseq(f"{name}_out", fields)


# -- dims, shapes, argument errors -----------------------------------------------------

def reduce_dims(x: Tensor, dim) -> tuple:
    """``dim`` as a sorted tuple of axes (None or an empty sequence: all of them), with
    torch's IndexError for out-of-range dims and its error for repeated dims."""
    ndim = x.dim()
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    seen: list = []
    for d in dims:
        if not isinstance(d, int):
            raise TypeError(f"dim must be an int or a tuple of ints, not {type(d).__name__}")
        w = wrap_dim(d, ndim)
        if w in seen:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        seen.append(w)
    if ndim > 64:  # a reduction over chosen dims keeps torch's 64-dim iterator limit
        raise RuntimeError("only tensors with up to 64 dims are supported")
    return tuple(sorted(seen)) if ndim else ()


def reduced_shape(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    """The output shape of reducing ``axes`` of ``shape``."""
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def restore_dims(t: Tensor, x: Tensor, axes: tuple, keepdim: bool) -> Tensor:
    """A reduction's output (or gradient) with the reduced axes put back as size 1."""
    if keepdim or not axes or not x.dim():
        return t
    return t.reshape(reduced_shape(x._shape, axes, True))


def expand_grad(grad: Tensor, x: Tensor, axes: tuple, keepdim: bool) -> Tensor:
    """The gradient of a reduction broadcast back over the reduced elements of ``x``."""
    if grad.dim() == 0:
        return grad.expand(x.shape)  # a full reduction: one expand, as torch records it
    return restore_dims(grad, x, axes, keepdim).expand(x.shape)


def count(x: Tensor, axes: tuple) -> int:
    """How many elements of ``x`` each output of a reduction over ``axes`` covers."""
    return math.prod(x._shape[a] for a in axes)


def bad_args(name: str, got: str) -> TypeError:
    """torch's argument-parser error (first line)."""
    return TypeError(
        f"{name}() received an invalid combination of arguments - got ({got}), but "
        "expected one of:"
    )


def check_nonempty(name: str, x: Tensor, axes: tuple, full: bool, exc=RuntimeError) -> None:
    """Reductions without an identity (max, argmax, ...) refuse empty reductions."""
    if full and x.numel() == 0:
        raise exc(f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
                  + (" Specify the reduction dim with the 'dim' argument."
                     if exc is RuntimeError else ""))
    for a in axes:
        if x._shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def not_implemented(kernel: str, x) -> NotImplementedError:
    """torch's error for a dtype (of a tensor ``x``, or ``x`` itself) a CPU kernel does
    not cover."""
    dt = x.dtype if isinstance(x, Tensor) else x
    return NotImplementedError(f'"{kernel}" not implemented for \'{D.type_name(dt)}\'')


def cast_input(x: Tensor, dtype: D.dtype) -> np.ndarray:
    """``x``'s values in the compute type of ``dtype`` (the ``dtype=`` argument casts
    the input before reducing; dropping an imaginary part warns like torch)."""
    if x.dtype.is_complex and not dtype.is_complex:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=5)
        return x._np.real.astype(compute_np_dtype(dtype))
    return to_np(x, dtype)


def cuda_reductions():
    """``refimpl.cuda._reduce_ops`` (imported on first use: CPU-only runs never load the
    CUDA layer)."""
    from refimpl.cuda import _reduce_ops

    return _reduce_ops


def cuda_cast(x: Tensor, dtype) -> D.dtype | None:
    """The dtype a CUDA reduction converts values to before accumulating (``dtype=``),
    with the CPU kernels' warning when that drops an imaginary part."""
    if dtype is None:
        return None
    out = D.dtype_from_any(dtype)
    if x.dtype.is_complex and not out.is_complex:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=5)
    return out


def _axes_np(axes: tuple, x: Tensor):
    return axes if x.dim() else None


def _like(g: Tensor | None, x: Tensor) -> Tensor | None:
    """A gradient in the dtype of the input it belongs to."""
    if g is not None and g.dtype != x.dtype and (x.dtype.is_floating_point or x.dtype.is_complex):
        return g.to(x.dtype)
    return g


def _same_op_jvp(name: str):
    """jvp of a linear reduction: the same op applied to the tangent."""
    def jvp(ctx, tangent, *rest):
        return REGISTRY[name](tangent, *ctx.args[1:], **ctx.kwargs)
    return jvp


def select_backward(grad: Tensor, x: Tensor, dim: int, indices: Tensor,
                    keepdim: bool) -> Tensor:
    """Gradient of an op that picks one element per slice along ``dim`` (max(dim),
    median(dim), kthvalue, mode): ``grad`` scattered to the picked positions."""
    import refimpl

    if not x.dim():
        return grad
    d = wrap_dim(dim, x.dim())
    if not keepdim:
        grad, indices = grad.unsqueeze(d), indices.unsqueeze(d)
    return refimpl.zeros_like(x, dtype=grad.dtype).scatter(d, indices, grad)


def select_jvp(tangent: Tensor, x: Tensor, dim: int, indices: Tensor,
               keepdim: bool) -> Tensor:
    """Tangent of an op that picks one element per slice along ``dim``."""
    if not x.dim():
        return tangent
    d = wrap_dim(dim, x.dim())
    if keepdim:
        return tangent.gather(d, indices)
    return tangent.gather(d, indices.unsqueeze(d)).squeeze(d)


def tie_mask(x: Tensor, value: Tensor, nan_ties: bool) -> Tensor:
    """Where ``x`` equals the (broadcast) reduced ``value``; with ``nan_ties`` a nan
    result also selects the nans of ``x``."""
    mask = x == value
    if nan_ties:
        mask = mask.logical_or(x.isnan().logical_and(value.isnan()))
    return mask


# -- sum, nansum, mean, nanmean --------------------------------------------------------

def _args(input, dim=None, keepdim=False, *, dtype=None):
    return input, dim, keepdim, dtype


def _sum_dtype(x: Tensor, dtype) -> D.dtype:
    if dtype is not None:
        return D.dtype_from_any(dtype)
    return D.int64 if x.dtype.category <= 1 else x.dtype


def _sum_meta(input, dim=None, keepdim=False, *, dtype=None) -> TensorSpec:
    axes = reduce_dims(input, dim)
    return TensorSpec(reduced_shape(input._shape, axes, keepdim), _sum_dtype(input, dtype),
                      input.device)


# Cascade summation of large contiguous float arrays: rows of _ROW elements are added
# elementwise in groups of _GROUP (vectorised, one pass over the data), the group sums
# are combined the same way, and the last row is summed pairwise. Each element meets
# at most _GROUP sequential additions per level, so the error stays within a few times
# numpy's pairwise sum (and torch's cascade sum), at the speed of one streaming pass;
# numpy's own pairwise loop is not vectorised and is ~1.7x slower than torch here.
_ROW, _GROUP = 2048, 64


def cascade_sum(arr: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """The sum of all elements of ``arr`` (float32/float64; any other array is summed
    by ``np.sum``)."""
    flat = arr.reshape(-1) if arr.flags.c_contiguous else None
    if flat is None or arr.dtype.kind != "f" or arr.dtype.itemsize < 4 or \
            flat.size < _ROW * _GROUP:
        return np.sum(arr, keepdims=keepdims)
    rows = flat.size // _ROW
    block = flat[:rows * _ROW].reshape(rows, _ROW)
    while block.shape[0] > _GROUP:
        whole = block.shape[0] // _GROUP * _GROUP
        head = block[:whole].reshape(-1, _GROUP, _ROW).sum(axis=1)
        block = np.concatenate([head, block[whole:]]) if whole < block.shape[0] else head
    total = np.sum(block.sum(axis=0)) + np.sum(flat[rows * _ROW:])
    return np.reshape(total, (1,) * arr.ndim) if keepdims else total


def _sum_cpu(input, dim=None, keepdim=False, *, dtype=None) -> np.ndarray:
    axes = reduce_dims(input, dim)
    out = _sum_dtype(input, dtype)
    arr = cast_input(input, out) if dtype is not None else input._np
    if len(axes) == input.dim() and arr.dtype == compute_np_dtype(out):
        return np_result(cascade_sum(arr, keepdim), out)
    return np_result(np.sum(arr, axis=_axes_np(axes, input), dtype=compute_np_dtype(out),
                            keepdims=keepdim), out)


def _sum_cuda(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    axes = reduce_dims(input, dim)
    return cuda_reductions().reduction("sum", input, axes, keepdim, _sum_dtype(input, dtype),
                                       cast=cuda_cast(input, dtype))


def _sum_backward(ctx, grad):
    x, dim, keepdim, _ = _args(*ctx.args, **ctx.kwargs)
    return (_like(expand_grad(grad, x, reduce_dims(x, dim), keepdim), x),)


# the backward of sum and mean reads only the input's shape: nothing is saved
_sum = defop("sum", meta=_sum_meta, cpu=_sum_cpu, cuda=_sum_cuda, backward=_sum_backward,
             jvp=_same_op_jvp("sum"), extra={"method": False, "save_needs": {}})
_sum_dim = defop("sum.dim_IntList", meta=_sum_meta, cpu=_sum_cpu, cuda=_sum_cuda,
                 backward=_sum_backward,
                 jvp=_same_op_jvp("sum.dim_IntList"), node="SumBackward1",
                 extra={"method": False, "save_needs": {}})


def _pick(name: str, full, with_dim, input, args, kwargs):
    if args or "dim" in kwargs:
        return with_dim(input, *args, **kwargs)
    if "keepdim" in kwargs:
        raise bad_args(name, "keepdim=bool, ")
    return full(input, **kwargs)


def sum(input: Tensor, *args, **kwargs) -> Tensor:
    """Sum over ``dim`` (all dims by default); bools and integers sum to int64 unless
    ``dtype`` is given, in which case the input is cast to it first (TENSOR-500)."""
    return _pick("sum", _sum, _sum_dim, input, args, kwargs)


def _nansum_cpu(input, dim=None, keepdim=False, *, dtype=None) -> np.ndarray:
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    axes = reduce_dims(input, dim)
    out = _sum_dtype(input, dtype)
    arr = cast_input(input, out) if dtype is not None else input._np
    return np_result(np.nansum(arr, axis=_axes_np(axes, input), dtype=compute_np_dtype(out),
                               keepdims=keepdim), out)


def _nansum_cuda(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    if input.dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA kernel for nansum of complex inputs")
    axes = reduce_dims(input, dim)
    return cuda_reductions().reduction("nansum", input, axes, keepdim,
                                       _sum_dtype(input, dtype), cast=cuda_cast(input, dtype))


def _nansum_backward(ctx, grad):
    x, dim, keepdim, _ = _args(*ctx.args, **ctx.kwargs)
    g = expand_grad(_like(grad, x), x, reduce_dims(x, dim), keepdim)
    return (g * x.isnan().logical_not(),)


def _nansum_jvp(ctx, tangent, *_):
    x = ctx.args[0]
    return nansum(tangent * x.isnan().logical_not(), *ctx.args[1:], **ctx.kwargs)


nansum = defop("nansum", meta=_sum_meta, cpu=_nansum_cpu, cuda=_nansum_cuda,
               backward=_nansum_backward,
               jvp=_nansum_jvp)


def _mean_dtype(name: str, x: Tensor, dtype) -> D.dtype:
    if dtype is not None:
        out = D.dtype_from_any(dtype)
        if out.category < 2:
            raise RuntimeError(
                f"{name}(): could not infer output dtype. Optional dtype must be either a "
                f"floating point or complex dtype. Got: {D.type_name(out)}")
        return out
    if x.dtype.category < 2:
        raise RuntimeError(
            f"{name}(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {D.type_name(x.dtype)}")
    return x.dtype


def _mean_meta(input, dim=None, keepdim=False, *, dtype=None) -> TensorSpec:
    axes = reduce_dims(input, dim)
    return TensorSpec(reduced_shape(input._shape, axes, keepdim),
                      _mean_dtype("mean", input, dtype), input.device)


def _mean_cpu(input, dim=None, keepdim=False, *, dtype=None) -> np.ndarray:
    out = _mean_dtype("mean", input, dtype)
    axes = reduce_dims(input, dim)
    arr = cast_input(input, out)
    with np.errstate(all="ignore"):
        if len(axes) == input.dim():
            total = cascade_sum(arr, keepdim)
        else:
            total = np.sum(arr, axis=_axes_np(axes, input), keepdims=keepdim)
        return np_result(total / arr.dtype.type(count(input, axes)), out)


def _mean_cuda(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    out = _mean_dtype("mean", input, dtype)
    axes = reduce_dims(input, dim)
    cuda_cast(input, dtype)
    return cuda_reductions().reduction("mean", input, axes, keepdim, out, cast=out)


def _mean_backward(ctx, grad):
    x, dim, keepdim, _ = _args(*ctx.args, **ctx.kwargs)
    axes = reduce_dims(x, dim)
    return (_like(expand_grad(grad, x, axes, keepdim) / count(x, axes), x),)


_mean = defop("mean", meta=_mean_meta, cpu=_mean_cpu, cuda=_mean_cuda, backward=_mean_backward,
              jvp=_same_op_jvp("mean"), extra={"method": False, "save_needs": {}})
_mean_dim = defop("mean.dim", meta=_mean_meta, cpu=_mean_cpu, cuda=_mean_cuda,
                  backward=_mean_backward,
                  jvp=_same_op_jvp("mean.dim"), node="MeanBackward1",
                  extra={"method": False, "save_needs": {}})


def mean(input: Tensor, *args, **kwargs) -> Tensor:
    """Arithmetic mean over ``dim``; the input (or ``dtype``) must be floating or
    complex. The mean of no elements is nan (TENSOR-502)."""
    return _pick("mean", _mean, _mean_dim, input, args, kwargs)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The mean of the non-nan elements: ``nansum / count of non-nan`` (composite, as in
    torch, so its node is ``DivBackward0``)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError("nanmean(): expected input to have floating point or complex "
                           f"dtype but got {D.type_name(input.dtype)}")
    n = input.isnan().logical_not().sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype).div(n)


# -- prod ------------------------------------------------------------------------------

def _prod_cpu(input, dim=None, keepdim=False, *, dtype=None) -> np.ndarray:
    axes = reduce_dims(input, dim)
    out = _sum_dtype(input, dtype)
    arr = cast_input(input, out) if dtype is not None else input._np
    with np.errstate(all="ignore"):
        return np_result(np.prod(arr, axis=_axes_np(axes, input),
                                 dtype=compute_np_dtype(out), keepdims=keepdim), out)


def _prod_cuda(input, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    axes = reduce_dims(input, dim)
    return cuda_reductions().reduction("prod", input, axes, keepdim, _sum_dtype(input, dtype),
                                       cast=cuda_cast(input, dtype))


def _others_product(x: Tensor, dim: int) -> Tensor:
    """For every element, the product of the other elements along ``dim``, without
    dividing (so zeros are handled): exclusive cumprods from both ends."""
    import refimpl

    n = x.shape[dim]
    if n == 1:
        return refimpl.ones_like(x)
    ones = refimpl.ones_like(x.narrow(dim, 0, 1))
    left = refimpl.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    right = refimpl.cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return left * right


def _prod_grad_factor(x: Tensor, dim) -> tuple:
    """(d prod / d x, the dim it was taken over) for a full or a one-dim prod."""
    if dim is None:
        flat = x.reshape(-1)
        return _others_product(flat, 0).reshape(x.shape), None
    d = wrap_dim(dim, x.dim())
    if not x.dim():
        import refimpl

        return refimpl.ones_like(x), d
    return _others_product(x, d), d


def _prod_backward(ctx, grad):
    x, dim, keepdim, _ = _args(*ctx.args, **ctx.kwargs)
    if x.numel() == 0:
        return (x.mul(0),)
    factor, d = _prod_grad_factor(x, dim)
    axes = reduce_dims(x, d)
    return (_like(expand_grad(grad, x, axes, keepdim), x) * factor.conj(),)


def _prod_jvp(ctx, tangent, *_):
    x, dim, keepdim, dtype = _args(*ctx.args, **ctx.kwargs)
    dims = () if dim is None else (dim, keepdim)
    if x.numel() == 0:
        return sum(tangent, *dims, dtype=dtype)
    factor, _d = _prod_grad_factor(x, dim)
    return sum(tangent * factor, *dims, dtype=dtype)


_prod = defop("prod", meta=_sum_meta, cpu=_prod_cpu, cuda=_prod_cuda, backward=_prod_backward,
              jvp=_prod_jvp, extra={"method": False})
_prod_dim = defop("prod.dim_int", meta=_sum_meta, cpu=_prod_cpu, cuda=_prod_cuda,
                  backward=_prod_backward,
                  jvp=_prod_jvp, node="ProdBackward1", extra={"method": False})


def prod(input: Tensor, *args, **kwargs) -> Tensor:
    """Product of all elements, or over one ``dim``; bools and integers give int64
    unless ``dtype`` is given (TENSOR-501)."""
    dim = args[0] if args else kwargs.get("dim", 0)
    if not isinstance(dim, int):
        raise bad_args("prod", type(dim).__name__ if args else f"dim={type(dim).__name__}, ")
    return _pick("prod", _prod, _prod_dim, input, args, kwargs)


# -- logsumexp -------------------------------------------------------------------------

def _float_dtype(x: Tensor) -> D.dtype:
    return x.dtype if x.dtype.category >= 2 else D.get_default_dtype()


def _lse_meta(input, dim, keepdim=False) -> TensorSpec:
    axes = reduce_dims(input, dim)
    return TensorSpec(reduced_shape(input._shape, axes, keepdim), _float_dtype(input),
                      input.device)


def _lse_cpu(input, dim, keepdim=False) -> np.ndarray:
    axes = reduce_dims(input, dim)
    out = _float_dtype(input)
    arr = to_np(input, out)
    ax = _axes_np(axes, input)
    with np.errstate(all="ignore"):
        if arr.size and builtins.all(input._shape[a] for a in axes):
            m = np.max(arr.real if arr.dtype.kind == "c" else arr, axis=ax, keepdims=True)
            m = np.where(np.isinf(m), 0, m).astype(arr.dtype)
        else:
            m = np.zeros((1,) * arr.ndim, arr.dtype)
        r = np.log(np.sum(np.exp(arr - m), axis=ax, keepdims=True)) + m
        if not keepdim:
            r = r.reshape(reduced_shape(input._shape, axes, False))
    return np_result(r, out)


def _lse_cuda(input, dim, keepdim=False) -> Tensor:
    axes = reduce_dims(input, dim)
    if input.dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA kernel for logsumexp of complex inputs")
    out = _float_dtype(input)
    return cuda_reductions().reduction("logsumexp", input, axes, keepdim, out, cast=out)


def _lse_backward(ctx, grad):
    x, dim, keepdim = ctx.args[0], ctx.args[1], (ctx.args[2:] or [ctx.kwargs.get(
        "keepdim", False)])[0]
    axes = reduce_dims(x, dim)
    r = restore_dims(ctx.outputs[0], x, axes, keepdim)
    return (restore_dims(grad, x, axes, keepdim) * (x - r).exp().conj(),)


def _lse_jvp(ctx, tangent, *_):
    x, dim = ctx.args[0], ctx.args[1]
    keepdim = (ctx.args[2:] or [ctx.kwargs.get("keepdim", False)])[0]
    axes = reduce_dims(x, dim)
    r = restore_dims(ctx.outputs[0], x, axes, keepdim)
    return sum(tangent * (x - r).exp(), dim, keepdim)


logsumexp = defop("logsumexp", meta=_lse_meta, cpu=_lse_cpu, cuda=_lse_cuda,
                  backward=_lse_backward,
                  jvp=_lse_jvp, saves=("inputs", "outputs"))


# -- all, any, count_nonzero -----------------------------------------------------------

def _logical_meta(input, dim=None, keepdim=False) -> TensorSpec:
    axes = reduce_dims(input, dim)
    out = D.uint8 if input.dtype is D.uint8 else D.bool_
    return TensorSpec(reduced_shape(input._shape, axes, keepdim), out, input.device)


def _logical_cpu(np_fn):
    def kernel(input, dim=None, keepdim=False) -> np.ndarray:
        axes = reduce_dims(input, dim)
        out = D.uint8 if input.dtype is D.uint8 else D.bool_
        return np_result(np_fn(input._np, axis=_axes_np(axes, input), keepdims=keepdim), out)
    return kernel


def _logical_cuda(name: str):
    def kernel(input, dim=None, keepdim=False) -> Tensor:
        axes = reduce_dims(input, dim)
        out = D.uint8 if input.dtype is D.uint8 else D.bool_
        return cuda_reductions().reduction(name, input, axes, keepdim, out)
    return kernel


all = defop("all", meta=_logical_meta, cpu=_logical_cpu(np.all), cuda=_logical_cuda("all"),
            differentiable=False)
any = defop("any", meta=_logical_meta, cpu=_logical_cpu(np.any), cuda=_logical_cuda("any"),
            differentiable=False)


def _cnz_meta(input, dim=None) -> TensorSpec:
    return TensorSpec(reduced_shape(input._shape, reduce_dims(input, dim), False), D.int64,
                      input.device)


def _cnz_cpu(input, dim=None) -> np.ndarray:
    axes = reduce_dims(input, dim)
    return np_result(np.count_nonzero(input._np, axis=_axes_np(axes, input)), D.int64)


def _cnz_cuda(input, dim=None) -> Tensor:
    axes = reduce_dims(input, dim)
    return cuda_reductions().reduction("count_nonzero", input, axes, False, D.int64)


count_nonzero = defop("count_nonzero", meta=_cnz_meta, cpu=_cnz_cpu, cuda=_cnz_cuda,
                      differentiable=False)

# -- the rest of the family, one module each, re-exported here -------------------------
from refimpl.ops.reduction_minmax import amax, amin, aminmax, argmax, argmin, max, min
from refimpl.ops.reduction_stats import (
    dist,
    linalg_vector_norm,
    norm,
    std,
    std_mean,
    var,
    var_mean,
)
from refimpl.ops.scan import cummax, cummin, cumprod, cumsum

__all__ = [
    "all", "amax", "amin", "aminmax", "any", "argmax", "argmin", "count_nonzero", "cummax",
    "cummin", "cumprod", "cumsum", "dist", "linalg_vector_norm", "logsumexp", "max", "mean",
    "min", "nanmean", "nansum", "norm", "prod", "return_types", "std", "std_mean", "sum", "var",
    "var_mean",
]
TENSOR_METHODS = ("sum", "mean", "nanmean", "prod", "max", "min", "aminmax", "norm", "dist",
                  "cummax", "cummin")
