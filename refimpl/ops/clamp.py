"""The clamp family: clamp/clip, clamp_min, clamp_max (spec: TENSOR-110).

Each has a scalar-bound overload and a tensor-bound overload (torch records different
autograd nodes for them: ``ClampBackward1`` / ``ClampBackward0``); mixing a tensor and
a scalar bound is torch's TypeError. NaN in the input or a bound propagates; where
``min > max`` the result is ``max``.

Scalar bounds: a floating input keeps its dtype (bounds are converted with torch's
overflow check); other inputs promote with the bounds (``clamp(int_tensor, 0.5)`` is
float). Tensor bounds promote like any binary op and broadcast.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import result_type
from refimpl.ops._pointwise import (
    REAL,
    _hidden,
    check_scalar_first,
    checked_scalar,
    compute_dtype,
    finish,
    fit,
    inplace,
    mark_pointwise,
    not_implemented,
    not_implemented_cuda,
    operand,
    out_device,
    run_cuda,
    unbroadcast,
)
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.elementwise_binary import _CPP_NAMES, broadcast_all, where

_COMPLEX_MSG = "clamp is not supported for complex types"


def _both_none(lo, hi) -> None:
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")


def _scalar_dtype(x: Tensor, lo, hi, inplace: bool = False) -> D.dtype:
    """torch's clamp: floating inputs keep their dtype; others promote with the bounds.

    In place, a promoted dtype is refused with torch's message (before the complex check).
    """
    if x.dtype.category == 3:
        raise NotImplementedError(_COMPLEX_MSG)
    dtype = x.dtype
    if dtype.category != 2:
        dtype = result_type(x, *(b for b in (lo, hi) if b is not None))
        if inplace and dtype is not x.dtype:
            raise RuntimeError(f"result type {D.type_name(dtype)} can't be cast to the "
                               f"desired output type {_CPP_NAMES[x.dtype]}")
        if dtype.category == 3:
            raise NotImplementedError(_COMPLEX_MSG)
    return dtype


def _compute(x, lo, hi, dtype: D.dtype, shape: tuple) -> np.ndarray:
    cdt = compute_dtype(dtype)
    r = operand(x, dtype, cdt)
    with np.errstate(all="ignore"):
        if lo is not None:
            r = np.maximum(r, operand(lo, dtype, cdt))
        if hi is not None:
            r = np.minimum(r, operand(hi, dtype, cdt))
    return finish(r, dtype, shape)


def _bound_value(v, dtype: D.dtype):
    if v is None:
        return None
    if dtype.category == 2:
        v = checked_scalar(v, D.float64)  # torch reads the bound as a double first
    return checked_scalar(v, dtype)


def _scalar_meta(self, min=None, max=None) -> TensorSpec:
    _both_none(min, max)
    return TensorSpec(self._shape, _scalar_dtype(self, min, max), self.device)


def _scalar_cpu(self, min=None, max=None) -> np.ndarray:
    dtype = _scalar_meta(self, min, max).dtype
    if dtype is D.bool_:
        kernel = ("clamp_scalar_cpu" if min is not None and max is not None
                  else "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu")
        raise not_implemented(kernel, dtype)
    return _compute(self, _bound_value(min, dtype), _bound_value(max, dtype), dtype,
                    self._shape)


def _clamp_expr(lo, hi) -> str:
    """NaN-propagating bounds, in the order of the CPU kernel (``min`` first)."""
    if lo is not None and hi is not None:
        return "r_minimum(r_maximum(a, b), c)"
    return "r_maximum(a, b)" if lo is not None else "r_minimum(a, c)"


def _scalar_cuda_into(into, self, min=None, max=None):
    dtype = _scalar_meta(self, min, max).dtype
    if dtype is D.bool_:
        kernel = ("clamp_scalar_cpu" if min is not None and max is not None
                  else "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu")
        raise not_implemented_cuda(kernel, dtype)
    lo, hi = _bound_value(min, dtype), _bound_value(max, dtype)
    return run_cuda(_clamp_expr(lo, hi), (self, 0 if lo is None else lo,
                                          0 if hi is None else hi),
                    dtype, dtype, None, self._shape, into, "clamp")


def _scalar_cuda(self, min=None, max=None):
    return _scalar_cuda_into(None, self, min, max)


def _tensor_meta(self, min=None, max=None, *, check_self: bool = True) -> TensorSpec:
    _both_none(min, max)
    if check_self and self.dtype.category == 3:
        raise NotImplementedError(_COMPLEX_MSG)
    bounds = [b for b in (min, max) if b is not None]
    return TensorSpec(broadcast_all(self, *bounds), result_type(self, *bounds),
                      out_device(self, *bounds))


def _tensor_spec(self, min, max, check_self: bool, unsupported) -> TensorSpec:
    """The output of clamp with tensor bounds, after torch's dtype check (``unsupported``
    builds the device's "not implemented" error)."""
    spec = _tensor_meta(self, min, max, check_self=check_self)
    if min is not None and max is not None:
        kernel, allow = "clamp_cpu", REAL - {D.bool_}
    else:
        kernel, allow = ("maximum_cpu" if min is not None else "minimum_cpu"), REAL
    if spec.dtype not in allow:
        raise unsupported(kernel, spec.dtype)
    return spec


def _tensor_cpu(self, min=None, max=None, *, check_self: bool = True) -> np.ndarray:
    spec = _tensor_spec(self, min, max, check_self, not_implemented)
    return _compute(self, min, max, spec.dtype, spec.shape)


def _tensor_cuda_into(into, self, min=None, max=None, *, check_self: bool = True):
    spec = _tensor_spec(self, min, max, check_self, not_implemented_cuda)
    return run_cuda(_clamp_expr(min, max), (self, 0 if min is None else min,
                                            0 if max is None else max),
                    spec.dtype, spec.dtype, None, spec.shape, into, "clamp")


def _tensor_cuda(self, min=None, max=None):
    return _tensor_cuda_into(None, self, min, max)


def _inside(x, lo, hi):
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        upper = x <= hi
        inside = upper if inside is None else inside.logical_and(upper)
    return inside


def _bounds(ctx):
    args = ctx.args
    return (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else None)


def _scalar_backward(ctx, g):
    lo, hi = _bounds(ctx)
    return (where(_inside(ctx.args[0], lo, hi), g, 0),)


def _scalar_jvp(ctx, t, *_):
    lo, hi = _bounds(ctx)
    return fit(where(_inside(ctx.args[0], lo, hi), t, 0), ctx.outputs[0])


def _bound_masks(x, lo, hi):
    """Where each bound wins: torch's clamp_backward_min_max (ties go to the input)."""
    if lo is not None and hi is not None:
        return (x < lo).logical_and(lo < hi), (x > hi).logical_or(hi < lo)
    if lo is not None:
        return x < lo, None
    return None, x > hi


def _tensor_backward(ctx, g):
    x = ctx.args[0]
    lo, hi = _bounds(ctx)
    m_lo, m_hi = _bound_masks(x, lo, hi)
    return (unbroadcast(where(_inside(x, lo, hi), g, 0), x),
            None if m_lo is None else unbroadcast(where(m_lo, g, 0), lo),
            None if m_hi is None else unbroadcast(where(m_hi, g, 0), hi))


def _tensor_jvp(ctx, tx, tlo=None, thi=None):
    x = ctx.args[0]
    lo, hi = _bounds(ctx)
    m_lo, m_hi = _bound_masks(x, lo, hi)
    r = where(_inside(x, lo, hi), 0 if tx is None else tx, 0)
    if m_lo is not None and tlo is not None:
        r = r + where(m_lo, tlo, 0)
    if m_hi is not None and thi is not None:
        r = r + where(m_hi, thi, 0)
    return fit(r, ctx.outputs[0])


_clamp_s = defop("clamp", meta=_scalar_meta, cpu=_scalar_cpu, backward=_scalar_backward,
                 jvp=_scalar_jvp, node="ClampBackward1", cuda=_scalar_cuda,
                 extra=_hidden(cuda_into=_scalar_cuda_into))
_clamp_t = defop("clamp.Tensor", meta=_tensor_meta, cpu=_tensor_cpu,
                 backward=_tensor_backward, jvp=_tensor_jvp, node="ClampBackward0",
                 cuda=_tensor_cuda, extra=_hidden(cuda_into=_tensor_cuda_into))


def _one_bound(name: str, which: str):
    """clamp_min / clamp_max: (scalar op, tensor op), argument (self, bound)."""

    def s_meta(self, bound):
        if self.dtype.category == 3 or isinstance(bound, complex):
            raise NotImplementedError(_COMPLEX_MSG)
        return _scalar_meta(self, **{which: bound})

    def s_cpu(self, bound):
        s_meta(self, bound)
        return _scalar_cpu(self, **{which: bound})

    def t_meta(self, bound):
        return _tensor_meta(self, **{which: bound}, check_self=False)

    def t_cpu(self, bound):
        return _tensor_cpu(self, **{which: bound}, check_self=False)

    def s_cuda_into(into, self, bound):
        s_meta(self, bound)
        return _scalar_cuda_into(into, self, **{which: bound})

    def t_cuda_into(into, self, bound):
        return _tensor_cuda_into(into, self, **{which: bound}, check_self=False)

    def keep(x, b):
        return x >= b if which == "min" else x <= b

    def backward(ctx, g):
        x, b = ctx.args[0], ctx.args[1]
        k = keep(x, b)
        return unbroadcast(where(k, g, 0), x), unbroadcast(where(k, 0, g), b)

    def jvp(ctx, tx, tb=None):
        x, b = ctx.args[0], ctx.args[1]
        return fit(where(keep(x, b), 0 if tx is None else tx, 0 if tb is None else tb),
                   ctx.outputs[0])

    camel = "ClampMin" if which == "min" else "ClampMax"
    scalar = defop(name, meta=s_meta, cpu=s_cpu, backward=backward, jvp=jvp,
                   node=f"{camel}Backward0", cuda=lambda self, b: s_cuda_into(None, self, b),
                   extra=_hidden(cuda_into=s_cuda_into))
    tensor = defop(f"{name}.Tensor", meta=t_meta, cpu=t_cpu, backward=backward, jvp=jvp,
                   node=f"{camel}Backward1", cuda=lambda self, b: t_cuda_into(None, self, b),
                   extra=_hidden(cuda_into=t_cuda_into))
    return scalar, tensor


_min_s, _min_t = _one_bound("clamp_min", "min")
_max_s, _max_t = _one_bound("clamp_max", "max")
_clamp_s_, _clamp_t_ = inplace(_clamp_s), inplace(_clamp_t)
_min_s_, _min_t_, _max_s_, _max_t_ = (inplace(op) for op in (_min_s, _min_t, _max_s, _max_t))


def _type_name(v) -> str:
    if isinstance(v, Tensor):
        return "Tensor"
    return type(v).__name__


def _pick(name: str, input, lo, hi, tensor_op, scalar_op):
    kinds = [isinstance(b, Tensor) for b in (lo, hi) if b is not None]
    if kinds and all(kinds):
        return tensor_op
    if not any(kinds):
        return scalar_op
    got = ", ".join(_type_name(v) for v in (input, lo, hi) if v is not None)
    raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                    "but expected one of:")


def _no_complex_bound(self: Tensor, bound) -> None:
    """clamp_min/clamp_max refuse complex scalars before any promotion."""
    if not isinstance(bound, Tensor) and (self.dtype.category == 3 or isinstance(bound, complex)):
        raise NotImplementedError(_COMPLEX_MSG)


def _check_inplace(self: Tensor, *bounds) -> None:
    """Scalar in-place clamps refuse to promote ``self`` (torch's own message)."""
    if any(isinstance(b, Tensor) for b in bounds):
        return
    lo = bounds[0]
    hi = bounds[1] if len(bounds) > 1 else None
    if lo is None and hi is None:
        return
    _scalar_dtype(self, lo, hi, inplace=True)


def clamp(input: Tensor, min=None, max=None, *, out=None) -> Tensor:
    """Limit ``input`` to ``[min, max]``: both bounds scalars or both tensors (TENSOR-110)."""
    op = _pick("clamp", input, min, max, _clamp_t, _clamp_s)
    return op(input, min, max, **({} if out is None else {"out": out}))


def clamp_(self: Tensor, min=None, max=None) -> Tensor:
    """In-place ``clamp``."""
    op = _pick("clamp_", self, min, max, _clamp_t_, _clamp_s_)
    _check_inplace(self, min, max)
    return op(self, min, max)


def clip(input: Tensor, min=None, max=None, *, out=None) -> Tensor:
    """Alias of ``clamp``."""
    return clamp(input, min, max, out=out)


def clip_(self: Tensor, min=None, max=None) -> Tensor:
    """Alias of ``clamp_``."""
    return clamp_(self, min, max)


def _bound_signatures(which: str) -> tuple:
    return (f"(Tensor input, Tensor {which}, *, Tensor out = None)",
            f"(Tensor input, Number {which}, *, Tensor out = None)")


def clamp_min(input: Tensor, min, *, out=None) -> Tensor:
    """``max(input, min)`` with clamp's dtype rules."""
    if not isinstance(input, Tensor):
        check_scalar_first("clamp_min", _bound_signatures("min"), input, min)
    op = _min_t if isinstance(min, Tensor) else _min_s
    return op(input, min, **({} if out is None else {"out": out}))


def clamp_min_(self: Tensor, min) -> Tensor:
    """In-place ``clamp_min``."""
    _no_complex_bound(self, min)
    _check_inplace(self, min, None)
    return (_min_t_ if isinstance(min, Tensor) else _min_s_)(self, min)


def clamp_max(input: Tensor, max, *, out=None) -> Tensor:
    """``min(input, max)`` with clamp's dtype rules."""
    if not isinstance(input, Tensor):
        check_scalar_first("clamp_max", _bound_signatures("max"), input, max)
    op = _max_t if isinstance(max, Tensor) else _max_s
    return op(input, max, **({} if out is None else {"out": out}))


def clamp_max_(self: Tensor, max) -> Tensor:
    """In-place ``clamp_max``."""
    _no_complex_bound(self, max)
    _check_inplace(self, None, max)
    return (_max_t_ if isinstance(max, Tensor) else _max_s_)(self, max)


__all__ = [
    "clamp", "clamp_", "clamp_max", "clamp_max_", "clamp_min", "clamp_min_", "clip", "clip_",
]
TENSOR_METHODS = ("clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_", "clamp_max",
                  "clamp_max_")

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("clamp", "clamp.Tensor", "clamp_min", "clamp_min.Tensor", "clamp_max", "clamp_max.Tensor")
