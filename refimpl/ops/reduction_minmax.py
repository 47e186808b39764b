"""max, min, amax, amin, aminmax, argmax, argmin (spec TENSOR-504, TENSOR-505).

Re-exported by ``reduction``. ``max(x)`` reduces everything to a 0-dim tensor and
splits its gradient evenly among tied maxima; ``max(x, dim)`` returns
``(values, indices)`` (the first index among ties) and sends the gradient to that
index; ``max(x, other)`` is ``maximum``. ``amax`` reduces several dims at once and,
like torch, splits the gradient evenly among ties. NaN propagates: a slice holding a
NaN has max and min NaN, at the first NaN's index.
"""

from __future__ import annotations

import builtins

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import OUT_DTYPE, np_result, to_np
from refimpl.ops._pointwise import check_scalar_first
from refimpl.ops._registry import REGISTRY, TensorSpec, defop
from refimpl.ops.reduction import (
    bad_args,
    check_nonempty,
    cuda_reductions,
    named_result,
    not_implemented,
    reduce_dims,
    reduced_shape,
    restore_dims,
    select_backward,
    select_jvp,
    structseq_pair,
    tie_mask,
)

structseq_pair("max")
structseq_pair("min")
structseq_pair("aminmax", ("min", "max"))


def _full_meta(input) -> TensorSpec:
    return TensorSpec((), input.dtype, input.device)


def _extreme_full_cpu(name: str, np_fn):
    def kernel(input) -> np.ndarray:
        if input.dtype.is_complex:
            raise not_implemented(f"{name}_all", input)
        check_nonempty(name, input, (), True)
        return np_result(np_fn(to_np(input, input.dtype)), input.dtype)
    return kernel


def _extreme_full_cuda(name: str):
    def kernel(input) -> Tensor:
        if input.dtype.is_complex:
            raise not_implemented(f"{name}_all", input)
        check_nonempty(name, input, (), True)
        return cuda_reductions().reduction(f"a{name}", input, tuple(range(input.dim())), False,
                                           input.dtype)
    return kernel


def _evenly_backward(ctx, grad):
    x, value = ctx.args[0], ctx.outputs[0]
    mask = tie_mask(x, value, nan_ties=True)
    return (mask * (grad / mask.sum()),)


def _evenly_jvp(ctx, tangent):
    x, value = ctx.args[0], ctx.outputs[0]
    mask = tie_mask(x, value, nan_ties=True)
    return (tangent * mask).sum() / mask.sum()


def _dim_meta(input, dim, keepdim=False) -> tuple:
    axes = reduce_dims(input, dim)
    shape = reduced_shape(input._shape, axes, keepdim)
    return TensorSpec(shape, input.dtype, input.device), TensorSpec(shape, D.int64, input.device)


def _extreme_dim_cpu(name: str, np_arg):
    def kernel(input, dim, keepdim=False) -> tuple:
        axes = reduce_dims(input, dim)
        if input.dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support complex input")
        check_nonempty(name, input, axes, False)
        arr = to_np(input, input.dtype)
        if not input.dim():
            return np_result(arr, input.dtype), np.zeros((), np.int64)
        d = axes[0]
        idx = np_arg(arr, axis=d, keepdims=True)
        values = np.take_along_axis(arr, idx, d)
        if not keepdim:
            values, idx = values.squeeze(d), idx.squeeze(d)
        return np_result(values, input.dtype), np_result(idx, D.int64)
    return kernel


def _extreme_dim_cuda(name: str):
    def kernel(input, dim, keepdim=False) -> tuple:
        axes = reduce_dims(input, dim)
        if input.dtype.is_complex:
            raise RuntimeError(f"{name}(): does not support complex input")
        check_nonempty(name, input, axes, False)
        return cuda_reductions().values_indices(f"{name}_dim", input, axes, keepdim)
    return kernel


def _dim_backward(ctx, grad, _gi=None):
    x, dim = ctx.args[0], ctx.args[1]
    keepdim = (ctx.args[2:] or [ctx.kwargs.get("keepdim", False)])[0]
    return (select_backward(grad, x, dim, ctx.outputs[1], keepdim),)


def _dim_jvp(ctx, tangent, *_):
    x, dim = ctx.args[0], ctx.args[1]
    keepdim = (ctx.args[2:] or [ctx.kwargs.get("keepdim", False)])[0]
    return select_jvp(tangent, x, dim, ctx.outputs[1], keepdim)


def _declare(name: str, np_fn, np_arg):
    full = defop(name, meta=_full_meta, cpu=_extreme_full_cpu(name, np_fn),
                 cuda=_extreme_full_cuda(name), backward=_evenly_backward, jvp=_evenly_jvp, node=f"{name.title()}Backward1",
                 saves=("inputs", "outputs"), extra={"method": False})
    with_dim = defop(f"{name}.dim", meta=_dim_meta, cpu=_extreme_dim_cpu(name, np_arg),
                     cuda=_extreme_dim_cuda(name), backward=_dim_backward, jvp=_dim_jvp, node=f"{name.title()}Backward0",
                     diff_outputs=(0,), saves=("outputs",), extra={"method": False})
    return full, with_dim


_max, _max_dim = _declare("max", np.max, np.argmax)
_min, _min_dim = _declare("min", np.min, np.argmin)


def _extreme(name: str, full, with_dim, binary: str, input, args, kwargs):
    if not isinstance(input, Tensor):
        check_scalar_first(name, (
            "(Tensor input, *, Tensor out = None)",
            "(Tensor input, Tensor other, *, Tensor out = None)",
            "(Tensor input, int dim, bool keepdim = False, *, tuple of Tensors out = None)"),
            input, args[0] if args else None)
    kwargs = dict(kwargs)
    first = args[0] if args else kwargs.pop("dim", kwargs.pop("other", _MISSING))
    if first is _MISSING:
        if "keepdim" in kwargs:
            raise bad_args(name, "keepdim=bool, ")
        return full(input, **kwargs)
    rest = args[1:]
    if isinstance(first, Tensor):
        return REGISTRY[binary](input, first, *rest, **kwargs)
    if not isinstance(first, int):
        raise bad_args(name, type(first).__name__ if args else
                       f"dim={type(first).__name__}, ")
    return named_result(name, with_dim(input, first, *rest, **kwargs), kwargs.get("out"))


_MISSING = object()


def max(input: Tensor, *args, **kwargs):
    """``max(input)``: the largest element (0-dim); ``max(input, dim, keepdim=False)``:
    ``(values, indices)`` along ``dim``; ``max(input, other)``: elementwise ``maximum``.
    NaN propagates (TENSOR-504)."""
    return _extreme("max", _max, _max_dim, "maximum", input, args, kwargs)


def min(input: Tensor, *args, **kwargs):
    """``min(input)``, ``min(input, dim, keepdim=False)`` or ``min(input, other)``, the
    mirror image of ``max`` (TENSOR-504)."""
    return _extreme("min", _min, _min_dim, "minimum", input, args, kwargs)


# -- amax, amin, aminmax ---------------------------------------------------------------

def _a_meta(input, dim=(), keepdim=False) -> TensorSpec:
    axes = reduce_dims(input, dim)
    return TensorSpec(reduced_shape(input._shape, axes, keepdim), input.dtype, input.device)


def _a_cpu(name: str, kernel_name: str, np_fn):
    def kernel(input, dim=(), keepdim=False) -> np.ndarray:
        axes = reduce_dims(input, dim)
        if input.dtype.is_complex:
            raise not_implemented(kernel_name, input)
        full = dim is None or not isinstance(dim, int) and not tuple(dim)
        check_nonempty(name, input, axes, full)
        arr = to_np(input, input.dtype)
        return np_result(np_fn(arr, axis=axes if input.dim() else None, keepdims=keepdim),
                         input.dtype)
    return kernel


def _a_cuda(name: str, kernel_name: str):
    def kernel(input, dim=(), keepdim=False) -> Tensor:
        axes = reduce_dims(input, dim)
        if input.dtype.is_complex:
            raise not_implemented(kernel_name, input)
        full = dim is None or not isinstance(dim, int) and not tuple(dim)
        check_nonempty(name, input, axes, full)
        return cuda_reductions().reduction(name, input, axes, keepdim, input.dtype)
    return kernel


def _a_args(input, dim=(), keepdim=False):
    return input, reduce_dims(input, dim), keepdim


def _scaled_by_count(grad, x, value, axes, keepdim):
    mask = tie_mask(x, restore_dims(value, x, axes, keepdim), nan_ties=False)
    return restore_dims(grad, x, axes, keepdim) / mask.sum(axes, keepdim=True) * mask


def _a_backward(ctx, grad):
    x, axes, keepdim = _a_args(*ctx.args, **ctx.kwargs)
    return (_scaled_by_count(grad, x, ctx.outputs[0], axes, keepdim),)


def _a_jvp_of(x, value, tangent, axes, keepdim):
    mask = tie_mask(x, restore_dims(value, x, axes, keepdim), nan_ties=False)
    from refimpl.ops.reduction import sum as rsum

    num = rsum(tangent * mask, axes, keepdim) if axes else tangent * mask
    return num / (rsum(mask, axes, keepdim) if axes else mask)


def _a_jvp(ctx, tangent, *_):
    x, axes, keepdim = _a_args(*ctx.args, **ctx.kwargs)
    return _a_jvp_of(x, ctx.outputs[0], tangent, axes, keepdim)


_A_OUT_DTYPE = ("Expected the dtype for input and out to match, but got {RES} for input's "
                "dtype and {OUT} for out's dtype.")
amax = defop("amax", meta=_a_meta, cpu=_a_cpu("amax", "max_values_cpu", np.max),
             cuda=_a_cuda("amax", "max_values_cuda"), backward=_a_backward, jvp=_a_jvp,
             saves=("inputs", "outputs"), extra={"out_dtype": _A_OUT_DTYPE})
amin = defop("amin", meta=_a_meta, cpu=_a_cpu("amin", "min_values_cpu", np.min),
             cuda=_a_cuda("amin", "min_values_cuda"), backward=_a_backward, jvp=_a_jvp,
             saves=("inputs", "outputs"), extra={"out_dtype": _A_OUT_DTYPE})


def _aminmax_meta(input, *, dim=None, keepdim=False) -> tuple:
    spec = _a_meta(input, () if dim is None else dim, keepdim)
    return spec, spec


def _aminmax_check(input, dim, kernel_name: str) -> tuple:
    axes = reduce_dims(input, dim)
    if input.dtype.is_complex:
        raise not_implemented(kernel_name, input)
    if dim is None and input.numel() == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    for a in axes:
        if input._shape[a] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {a} to have non-zero size.")
    return axes


def _aminmax_cpu(input, *, dim=None, keepdim=False) -> tuple:
    _aminmax_check(input, dim, "aminmax_cpu")
    axes = reduce_dims(input, dim)
    arr = to_np(input, input.dtype)
    ax = axes if input.dim() else None
    return (np_result(np.min(arr, axis=ax, keepdims=keepdim), input.dtype),
            np_result(np.max(arr, axis=ax, keepdims=keepdim), input.dtype))


def _aminmax_cuda(input, *, dim=None, keepdim=False) -> tuple:
    axes = _aminmax_check(input, dim, "aminmax_cuda")
    r = cuda_reductions()
    return (r.reduction("amin", input, axes, keepdim, input.dtype),
            r.reduction("amax", input, axes, keepdim, input.dtype))


def _aminmax_backward(ctx, gmin, gmax):
    x = ctx.args[0]
    axes = reduce_dims(x, ctx.kwargs.get("dim"))
    keepdim = ctx.kwargs.get("keepdim", False)
    parts = [_scaled_by_count(g, x, v, axes, keepdim)
             for g, v in zip((gmin, gmax), ctx.outputs) if g is not None]
    return (builtins.sum(parts[1:], parts[0]) if parts else None,)


def _aminmax_jvp(ctx, tangent, *_):
    x = ctx.args[0]
    axes = reduce_dims(x, ctx.kwargs.get("dim"))
    keepdim = ctx.kwargs.get("keepdim", False)
    return tuple(_a_jvp_of(x, v, tangent, axes, keepdim) for v in ctx.outputs)


_aminmax = defop("aminmax", meta=_aminmax_meta, cpu=_aminmax_cpu, cuda=_aminmax_cuda,
                 backward=_aminmax_backward,
                 jvp=_aminmax_jvp, saves=("inputs", "outputs"),
                 extra={"method": False, "out_dtype": OUT_DTYPE})


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False, out=None):
    """``(min, max)`` of all elements, or along ``dim`` (TENSOR-504)."""
    kwargs = {"dim": dim, "keepdim": keepdim} if dim is not None else {"keepdim": keepdim}
    if out is not None:
        kwargs["out"] = out
    return named_result("aminmax", _aminmax(input, **kwargs), out)


# -- argmax, argmin --------------------------------------------------------------------

def _arg_meta(input, dim=None, keepdim=False) -> TensorSpec:
    if dim is None:
        shape = (1,) * input.dim() if keepdim else ()
    else:
        shape = reduced_shape(input._shape, reduce_dims(input, dim), keepdim)
    return TensorSpec(shape, D.int64, input.device)


def _arg_check(name: str, input, dim) -> None:
    if dim is not None:
        wrap_dim(dim, input.dim())
    if input.dtype is D.bool_ or input.dtype.is_complex:
        kind = "bool" if input.dtype is D.bool_ else "complex"
        raise RuntimeError(f"{name}(): does not support {kind} input")
    if dim is None:
        check_nonempty(name, input, (), True, exc=IndexError)
    else:
        check_nonempty(name, input, reduce_dims(input, dim), False)


def _arg_cpu(name: str, np_arg):
    def kernel(input, dim=None, keepdim=False) -> np.ndarray:
        _arg_check(name, input, dim)
        arr = to_np(input, input.dtype)
        if dim is None:
            r = np_arg(arr.reshape(-1))
            return np_result(np.reshape(r, (1,) * input.dim() if keepdim else ()), D.int64)
        axes = reduce_dims(input, dim)
        if not input.dim():
            return np.zeros((), np.int64)
        return np_result(np_arg(arr, axis=axes[0], keepdims=keepdim), D.int64)
    return kernel


def _arg_cuda(name: str):
    def kernel(input, dim=None, keepdim=False) -> Tensor:
        _arg_check(name, input, dim)
        axes = tuple(range(input.dim())) if dim is None else reduce_dims(input, dim)
        shape = _arg_meta(input, dim, keepdim).shape
        return cuda_reductions().indices(name, input, axes, shape)
    return kernel


argmax = defop("argmax", meta=_arg_meta, cpu=_arg_cpu("argmax", np.argmax),
               cuda=_arg_cuda("argmax"), differentiable=False)
argmin = defop("argmin", meta=_arg_meta, cpu=_arg_cpu("argmin", np.argmin),
               cuda=_arg_cuda("argmin"), differentiable=False)

__all__ = ["amax", "amin", "aminmax", "argmax", "argmin", "max", "min"]
