"""var, std, var_mean, std_mean, norm, linalg_vector_norm, dist (spec TENSOR-507,
TENSOR-508). Re-exported by ``reduction``.

``var`` divides by ``N - correction`` (``correction=1`` by default; ``unbiased=False``
means ``correction=0``) and warns when that is <= 0. Complex inputs give real
results. float32 and narrower inputs accumulate in float64 here, as torch's CPU
Welford does, so the rounding matches.
"""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops._helpers import np_result, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import (
    bad_args,
    count,
    cuda_reductions,
    expand_grad,
    reduce_dims,
    reduced_shape,
    restore_dims,
)
from refimpl.ops.reduction import (
    sum as rsum,
)

# -- var, std, var_mean, std_mean -------------------------------------------------------


def _var_args(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise bad_args("var", "correction=int, unbiased=bool, ")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return input, reduce_dims(input, dim), correction, keepdim


def _check_float(name: str, x: Tensor) -> None:
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        what = "std and var" if name in ("var", "std") else name
        raise RuntimeError(f"{what} only support floating point and complex dtypes")


def _checked_var_args(name: str, input, dim=None, unbiased=None, keepdim=False, *,
                      correction=None) -> tuple:
    """(input, axes, correction, keepdim) after the dtype check and the warning torch
    gives when ``N - correction <= 0``."""
    x, axes, correction, keepdim = _var_args(input, dim, unbiased, keepdim,
                                             correction=correction)
    _check_float(name, x)
    if count(x, axes) - correction <= 0:
        warnings.warn(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
            "the reduction factor (input numel divided by output numel).",
            UserWarning, stacklevel=7)
    return x, axes, correction, keepdim


def _var_np(name: str, *args, **kwargs):
    """(variance, mean) as numpy arrays in the output dtypes."""
    x, axes, correction, keepdim = _checked_var_args(name, *args, **kwargs)
    wide = np.complex128 if x.dtype.is_complex else np.float64
    arr = x._np.astype(wide) if x.dtype.itemsize < 8 or x.dtype is D.complex64 else x._np
    ax = axes if x.dim() else None
    n = count(x, axes)
    dof = builtins.max(0, n - correction)
    with np.errstate(all="ignore"):
        mean = np.sum(arr, axis=ax, keepdims=True) / arr.dtype.type(n)
        dev = np.abs(arr - mean) ** 2 if x.dtype.is_complex else (arr - mean) ** 2
        var = np.sum(dev, axis=ax, keepdims=keepdim) / np.float64(dof)
    if not keepdim:
        mean = mean.reshape(reduced_shape(x._shape, axes, False))
    return var, mean


def _var_meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x, axes, _, keepdim = _var_args(input, dim, unbiased, keepdim, correction=correction)
    return TensorSpec(reduced_shape(x._shape, axes, keepdim), x.dtype.to_real(), x.device)


def _pair_meta(name):
    def meta(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        _check_float(name, input)
        spec = _var_meta(input, dim, unbiased, keepdim, correction=correction)
        return spec, TensorSpec(spec.shape, input.dtype, input.device)
    return meta


def _var_cpu(*args, **kwargs):
    var, _ = _var_np("var", *args, **kwargs)
    return np_result(var, args[0].dtype.to_real())


def _std_cpu(*args, **kwargs):
    var, _ = _var_np("std", *args, **kwargs)
    return np_result(np.sqrt(var), args[0].dtype.to_real())


def _var_mean_cpu(*args, **kwargs):
    var, mean = _var_np("var_mean", *args, **kwargs)
    return np_result(var, args[0].dtype.to_real()), np_result(mean, args[0].dtype)


def _std_mean_cpu(*args, **kwargs):
    var, mean = _var_np("std_mean", *args, **kwargs)
    return np_result(np.sqrt(var), args[0].dtype.to_real()), np_result(mean, args[0].dtype)


def _var_cuda(name: str):
    """CUDA kernel of var/std (one output) or var_mean/std_mean (two): one Welford pass,
    accumulated in float for float32 and narrower, as torch's CUDA kernel does (complex
    inputs: the mean's two parts and the sum of ``|x - mean|^2``)."""
    def kernel(*args, **kwargs):
        x, axes, correction, keepdim = _checked_var_args(name, *args, **kwargs)
        r = cuda_reductions()
        rule = f"{name}_complex" if x.dtype.is_complex else name
        real = x.dtype.to_real()
        if name in ("var", "std"):
            return r.reduction(rule, x, axes, keepdim, real, correction=correction)
        return r.pair(rule, x, axes, keepdim, (real, x.dtype), correction)
    return kernel


def _dof_scale(x, axes, correction) -> float:
    dof = builtins.max(0, count(x, axes) - correction)
    return 2.0 / dof if dof else math.inf


def _var_grad(grad, x, axes, correction, keepdim):
    centered = x - x.mean(axes, keepdim=True)
    return _dof_scale(x, axes, correction) * restore_dims(grad, x, axes, keepdim) * centered


def _var_tangent(tangent, x, axes, correction, keepdim):
    centered = x - x.mean(axes, keepdim=True)
    prod = centered.conj() * tangent
    if prod.dtype.is_complex:
        prod = prod.real
    return _dof_scale(x, axes, correction) * rsum(prod, axes, keepdim)


def _std_scaled(grad, std):
    """d std = d var / (2 std), zero where std is zero."""
    return (grad / (2 * std)).masked_fill(std == 0, 0)


def _mean_grad(grad, x, axes, keepdim):
    return expand_grad(grad, x, axes, keepdim) / count(x, axes)


def _var_backward(ctx, grad):
    x, axes, correction, keepdim = _var_args(*ctx.args, **ctx.kwargs)
    return (_var_grad(grad, x, axes, correction, keepdim),)


def _std_backward(ctx, grad):
    x, axes, correction, keepdim = _var_args(*ctx.args, **ctx.kwargs)
    return (_var_grad(_std_scaled(grad, ctx.outputs[0]), x, axes, correction, keepdim),)


def _pair_backward(is_std: bool):
    def backward(ctx, gvar, gmean=None):
        x, axes, correction, keepdim = _var_args(*ctx.args, **ctx.kwargs)
        out = None
        if gvar is not None:
            if is_std:
                gvar = _std_scaled(gvar, ctx.outputs[0])
            out = _var_grad(gvar, x, axes, correction, keepdim)
        if gmean is not None:
            gm = _mean_grad(gmean, x, axes, keepdim)
            out = gm if out is None else out + gm
        return (out,)
    return backward


def _var_jvp(ctx, tangent, *_):
    x, axes, correction, keepdim = _var_args(*ctx.args, **ctx.kwargs)
    return _var_tangent(tangent, x, axes, correction, keepdim)


def _std_jvp(ctx, tangent, *_):
    return _std_scaled(_var_jvp(ctx, tangent), ctx.outputs[0])


def _pair_jvp(is_std: bool):
    def jvp(ctx, tangent, *_):
        x, axes, correction, keepdim = _var_args(*ctx.args, **ctx.kwargs)
        tv = _var_tangent(tangent, x, axes, correction, keepdim)
        if is_std:
            tv = _std_scaled(tv, ctx.outputs[0])
        return tv, tangent.mean(axes, keepdim)
    return jvp


_OUT = ("inputs", "outputs")
var = defop("var", meta=lambda *a, **k: (_check_float("var", a[0]), _var_meta(*a, **k))[1],
            cpu=_var_cpu, cuda=_var_cuda("var"), backward=_var_backward, jvp=_var_jvp)
std = defop("std", meta=lambda *a, **k: (_check_float("std", a[0]), _var_meta(*a, **k))[1],
            cpu=_std_cpu, cuda=_var_cuda("std"), backward=_std_backward, jvp=_std_jvp,
            saves=_OUT)
var_mean = defop("var_mean", meta=_pair_meta("var_mean"), cpu=_var_mean_cpu,
                 cuda=_var_cuda("var_mean"),
                 backward=_pair_backward(False), jvp=_pair_jvp(False), extra={"method": False})
std_mean = defop("std_mean", meta=_pair_meta("std_mean"), cpu=_std_mean_cpu,
                 cuda=_var_cuda("std_mean"),
                 backward=_pair_backward(True), jvp=_pair_jvp(True), saves=_OUT,
                 extra={"method": False})

# -- vector norm, norm, dist --------------------------------------------------------------


def _norm_dtype(x: Tensor, dtype) -> D.dtype:
    """The dtype the norm is computed in (the input's, or ``dtype``), checked like torch."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {D.type_name(x.dtype)}")
    if dtype is None:
        return x.dtype
    dt = D.dtype_from_any(dtype)
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError("linalg.vector_norm: dtype should be floating point or complex, "
                           f"but got {D.type_name(dt)}")
    if x.dtype.is_complex != dt.is_complex:
        kind = "complex" if x.dtype.is_complex else "real"
        raise RuntimeError(f"linalg.vector_norm: dtype should be {kind} for {kind} inputs, "
                           f"but got {D.type_name(dt)}")
    if D.promote_types(x.dtype, dt) is not dt:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({D.type_name(x.dtype)}) should be "
            f"convertible without narrowing to the specified dtype ({D.type_name(dt)})")
    return dt


def _ord_str(ord) -> str:
    if math.isinf(ord):
        return "inf" if ord > 0 else "-inf"
    return str(int(ord)) if float(ord).is_integer() else str(ord)


def _vn_meta(input, ord=2, dim=None, keepdim=False, *, dtype=None) -> TensorSpec:
    dt = _norm_dtype(input, dtype)
    axes = reduce_dims(input, dim)
    return TensorSpec(reduced_shape(input._shape, axes, keepdim), dt.to_real(), input.device)


def _vn_check(input, ord, dim, dtype) -> tuple:
    """(compute dtype, axes) of a vector norm, with torch's argument errors."""
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' (position 2) must be Number, "
                        "not str")
    dt = _norm_dtype(input, dtype)
    axes = reduce_dims(input, dim)
    if ord < 0 or math.isinf(ord):
        if dim is None and input.numel() == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {_ord_str(ord)} norm "
                               "on an empty tensor because the operation does not have an "
                               "identity")
        for a in axes:
            if input._shape[a] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {_ord_str(ord)} norm on the "
                    f"dimension {a}because this dimension is empty and the operation does "
                    "not have an identity")
    return dt, axes


def _vn_cuda(input, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor:
    dt, axes = _vn_check(input, ord, dim, dtype)
    return cuda_reductions().vector_norm(input, float(ord), axes, keepdim, dt)


def _vn_cpu(input, ord=2, dim=None, keepdim=False, *, dtype=None) -> np.ndarray:
    dt, axes = _vn_check(input, ord, dim, dtype)
    out = dt.to_real()
    a = np.abs(to_np(input, dt))
    ax = axes if input.dim() else None
    with np.errstate(all="ignore"):
        if ord == 0:
            r = np.sum(a != 0, axis=ax, keepdims=keepdim, dtype=a.dtype)
        elif ord == math.inf:
            r = np.max(a, axis=ax, keepdims=keepdim)
        elif ord == -math.inf:
            r = np.min(a, axis=ax, keepdims=keepdim)
        elif ord == 1:
            r = np.sum(a, axis=ax, keepdims=keepdim)
        elif ord == 2:
            r = np.sqrt(np.sum(a * a, axis=ax, keepdims=keepdim))
        else:
            p = a.dtype.type(ord)
            r = np.sum(a ** p, axis=ax, keepdims=keepdim) ** (1 / p)
    return np_result(r, out)


def _vn_args(input, ord=2, dim=None, keepdim=False, *, dtype=None):
    return input, float(ord), reduce_dims(input, dim), keepdim


def _vn_grad(grad, x, ord, axes, keepdim, norm):
    """d norm / d x times ``grad`` (torch's conventions at zero)."""
    if ord == 0:
        return None
    g = restore_dims(grad, x, axes, keepdim)
    n = restore_dims(norm, x, axes, keepdim)
    sgn = x.sgn() if x.dtype.is_complex else x.sign()
    if ord == 1:
        return sgn * g
    if ord == 2:
        return x * (g / n).masked_fill(n == 0, 0)
    if math.isinf(ord):
        xa = x.abs()
        mask = (xa == n).logical_or(xa.isnan())
        return sgn * ((g / mask.sum(axes, keepdim=True)) * mask)
    xa = x.abs()
    if ord < 1:
        scaled = sgn * xa.pow(ord - 1).masked_fill(x == 0, 0)
        return scaled * g * n.pow(1 - ord)
    scaled = sgn * xa.pow(ord - 1) if ord < 2 else x * xa.pow(ord - 2)
    return scaled * (g / n.pow(ord - 1)).masked_fill(n == 0, 0)


def _vn_backward(ctx, grad):
    x, ord, axes, keepdim = _vn_args(*ctx.args, **ctx.kwargs)
    xin = x if grad.dtype == x.dtype.to_real() else x.to(_norm_dtype(x, ctx.kwargs.get("dtype")))
    g = _vn_grad(grad, xin, ord, axes, keepdim, ctx.outputs[0])
    return (g if g is None or g.dtype == x.dtype else g.to(x.dtype),)


def _vn_jvp(ctx, tangent, *_):
    x, ord, axes, keepdim = _vn_args(*ctx.args, **ctx.kwargs)
    norm = ctx.outputs[0]
    if ord == 0:
        return norm.mul(0)
    import refimpl

    d = _vn_grad(refimpl.ones_like(norm), x, ord, axes, keepdim, norm)
    prod = d.conj() * tangent
    if prod.dtype.is_complex:
        prod = prod.real
    return rsum(prod, axes, keepdim)


linalg_vector_norm = defop("linalg_vector_norm", meta=_vn_meta, cpu=_vn_cpu, cuda=_vn_cuda,
                           backward=_vn_backward, jvp=_vn_jvp, saves=_OUT,
                           extra={"method": False})


@composite("norm")
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, out=None,
         dtype=None) -> Tensor:
    """The vector p-norm over ``dim`` (all elements by default). ``p`` is a number
    (``inf``, ``-inf`` and ``0`` included) or ``'fro'`` (the 2-norm over at most two
    dims) or ``'nuc'`` (the nuclear norm of the matrices over two dims) (TENSOR-508)."""
    if p is None:
        p = 2
    if isinstance(p, str):
        if p == "nuc":
            from refimpl import linalg

            dims = tuple(range(input.dim())) if dim is None else (
                (dim,) if isinstance(dim, int) else tuple(dim))
            if len(dims) != 2:
                got = " ".join(str(d) for d in dims)
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {got}")
            return linalg.matrix_norm(input, "nuc", dims, keepdim, dtype=dtype, out=out)
        if p != "fro":
            raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
        if dim is not None and not isinstance(dim, int) and len(tuple(dim)) > 2:
            got = " ".join(str(d) for d in dim)
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {got}")
        p = 2
    kwargs = {} if dtype is None else {"dtype": dtype}
    if out is not None:
        kwargs["out"] = out
    return linalg_vector_norm(input, p, dim, keepdim, **kwargs)


@composite("dist")
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of ``input - other`` (broadcast)."""
    for x in (input, other):
        if not (x.dtype.is_floating_point or x.dtype.is_complex):
            raise RuntimeError("norm(): input dtype should be either floating point or "
                               f"complex. Got {D.type_name(x.dtype)} instead.")
    return linalg_vector_norm(input - other, p)


__all__ = ["dist", "linalg_vector_norm", "norm", "std", "std_mean", "var", "var_mean"]
