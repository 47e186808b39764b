"""Elementwise arithmetic: add, sub, rsub, mul, neg, abs, positive (spec: TENSOR-105..111).

The machinery these ops are built from lives in ``_pointwise`` (re-exported here:
``inplace``, ``binary_meta`` and ``unary_meta`` are what other op modules use).
Division and powers are in ``division``, unary math in ``elementwise_unary``, the
other binary ops in ``elementwise_binary`` and ``clamp``, comparisons and
logical/bitwise ops in ``comparison``, activations in ``activation``.

Ops whose torch overloads record different autograd nodes (``rsub(x, y)`` is
``RsubBackward0``, ``rsub(x, 2)`` ``RsubBackward1``) are one OpDef per overload,
named like aten (``rsub.Scalar``), behind one public function.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._pointwise import (  # noqa: F401 - re-exported for other op modules
    NUMERIC,
    REDUCED,
    Binary,
    Unary,
    _hidden,
    add_tangents,
    alias,
    binary_meta,
    check_scalar_first,
    checked_scalar,
    conj,
    cuda_fields,
    dtype_of,
    exact_out,
    fast_binary,
    fast_same,
    fit,
    inplace,
    mark_pointwise,
    scalar_np,
    unary_meta,
    unbroadcast,
)
from refimpl.ops._registry import TensorSpec, defop

# -- add / sub / rsub ----------------------------------------------------------------------

def _alpha_check(dtype: D.dtype, a, b, alpha=1) -> None:
    if isinstance(alpha, bool):
        if dtype is not D.bool_:
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif dtype.category < 2 and not isinstance(alpha, int):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number.")
    elif dtype.category < 3 and isinstance(alpha, complex):
        raise RuntimeError(
            "For non-complex input tensors, argument alpha must not be a complex number.")
    checked_scalar(alpha, D.float32 if dtype in REDUCED else dtype)


def _scaled(y, alpha):
    # torch computes a + alpha * b even for alpha == 1; for complex operands the product
    # matters (inf + 0j) * (1 + 0j) = inf + nanj
    if type(alpha) is int and alpha == 1 and y.dtype.kind != "c":
        return y
    return y * scalar_np(alpha, y.dtype)


def _alpha_cuda(op: str):
    """``a op b`` or ``a op alpha * b`` (alpha in the compute type, as torch's opmath)."""

    def spec(dtype, a, b, alpha=1):
        if type(alpha) is int and alpha == 1 and dtype.category < 3:
            return f"a {op} b", None
        return f"a {op} alpha * b", {"alpha": (alpha, dtype)}

    return spec


_add_impl = Binary(lambda x, y, alpha=1: np.add(x, _scaled(y, alpha)), post=_alpha_check,
                   complex32=True, name="add", cuda=_alpha_cuda("+"), cuda_complex=True,
                   round_scalars=True)


def _add_cpu(a, b, *, alpha=1):
    if type(alpha) is int and alpha == 1 and fast_same(a, b):
        return fast_binary(np.add, a, b)
    return _add_impl.cpu(a, b, alpha=alpha)


def _add_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    alpha = ctx.kwargs.get("alpha", 1)
    gb = None
    if isinstance(b, Tensor):
        gb = unbroadcast(grad if alpha == 1 else grad * conj(alpha), b)
    return unbroadcast(grad, a), gb


def _add_jvp(ctx, ta, tb=None):
    alpha = ctx.kwargs.get("alpha", 1)
    if tb is not None and alpha != 1:
        tb = tb * alpha
    return fit(add_tangents(ta, tb), ctx.outputs[0])


add = defop("add", meta=_add_impl.meta, cpu=_add_cpu, backward=_add_backward, jvp=_add_jvp,
            saves=(), **cuda_fields(_add_impl))


def _sub_check(a, b, **_) -> None:
    ba, bb = dtype_of(a) is D.bool_, dtype_of(b) is D.bool_
    if ba and bb:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead.")
    if ba or bb:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
            "instead.")


_sub_impl = Binary(lambda x, y, alpha=1: np.subtract(x, _scaled(y, alpha)), pre=_sub_check,
                   name="sub", post=_alpha_check, complex32=True, cuda=_alpha_cuda("-"),
                   cuda_complex=True, round_scalars=True)


def _sub_cpu(a, b, *, alpha=1):
    if type(alpha) is int and alpha == 1 and fast_same(a, b) and a.dtype is not D.bool_:
        return fast_binary(np.subtract, a, b)
    return _sub_impl.cpu(a, b, alpha=alpha)


def _sub_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    alpha = ctx.kwargs.get("alpha", 1)
    gb = None
    if isinstance(b, Tensor):
        gb = unbroadcast(-grad if alpha == 1 else grad * (-conj(alpha)), b)
    return unbroadcast(grad, a), gb


def _sub_jvp(ctx, ta, tb=None):
    alpha = ctx.kwargs.get("alpha", 1)
    if tb is not None:
        tb = -tb if alpha == 1 else tb * (-alpha)
    return fit(add_tangents(ta, tb), ctx.outputs[0])


sub = defop("sub", meta=_sub_impl.meta, cpu=_sub_cpu, backward=_sub_backward, jvp=_sub_jvp,
            saves=(), **cuda_fields(_sub_impl))
subtract = alias(sub, "subtract")

def _rsub_meta(a, b, *, alpha=1) -> TensorSpec:
    return _sub_impl.meta(b, a, alpha=alpha)  # torch computes sub(other, self, alpha)


def _rsub_cpu(a, b, *, alpha=1):
    return _sub_impl.cpu(b, a, alpha=alpha)


def _rsub_cuda(a, b, *, alpha=1):
    return _sub_impl.cuda(b, a, alpha=alpha)


def _rsub_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    alpha = ctx.kwargs.get("alpha", 1)
    ga = unbroadcast(-grad if alpha == 1 else grad * (-conj(alpha)), a)
    return ga, unbroadcast(grad, b)


def _rsub_jvp(ctx, ta, tb=None):
    alpha = ctx.kwargs.get("alpha", 1)
    if ta is not None:
        ta = -ta if alpha == 1 else ta * (-alpha)
    return fit(add_tangents(ta, tb), ctx.outputs[0])


_rsub_tensor = defop("rsub", meta=_rsub_meta, cpu=_rsub_cpu, cuda=_rsub_cuda,
                     backward=_rsub_backward,
                     jvp=_rsub_jvp, saves=(), extra=_hidden())
_rsub_scalar = defop("rsub.Scalar", meta=_rsub_meta, cpu=_rsub_cpu, cuda=_rsub_cuda,
                     backward=_rsub_backward, jvp=_rsub_jvp, saves=(), node="RsubBackward1",
                     extra=_hidden())


def rsub(input: Tensor, other, alpha=1, *, out=None) -> Tensor:
    """``other - alpha * input`` (TENSOR-105)."""
    if not isinstance(input, Tensor):
        check_scalar_first("rsub", ("(Tensor input, Tensor other, *, Number alpha = 1)",
                                    "(Tensor input, Number other, Number alpha = 1)"),
                           input, other)
    op = _rsub_tensor if isinstance(other, Tensor) else _rsub_scalar
    kw = {} if out is None else {"out": out}
    if not (type(alpha) is int and alpha == 1):
        kw["alpha"] = alpha
    return op(input, other, **kw)


# -- mul -----------------------------------------------------------------------------------

_mul_impl = Binary(np.multiply, complex32=True, name="mul", cuda="a * b", cuda_complex=True)


def _mul_cpu(a, b):
    if fast_same(a, b):
        return fast_binary(np.multiply, a, b)
    return _mul_impl.cpu(a, b)


def _mul_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    ga = unbroadcast(grad * conj(b), a) if ctx.needs_input_grad[0] else None
    gb = unbroadcast(grad * conj(a), b) if len(ctx.needs_input_grad) > 1 and \
        ctx.needs_input_grad[1] else None
    return ga, gb


def _mul_jvp(ctx, ta, tb=None):
    a, b = ctx.args[0], ctx.args[1]
    return fit(add_tangents(None if ta is None else ta * b, None if tb is None else tb * a),
               ctx.outputs[0])


mul = defop("mul", meta=_mul_impl.meta, cpu=_mul_cpu, backward=_mul_backward, jvp=_mul_jvp,
            **cuda_fields(_mul_impl))
multiply = alias(mul, "multiply")

# -- neg / abs / positive -------------------------------------------------------------------

def _neg_check(x) -> None:
    if x.dtype is D.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


_neg_impl = Unary(np.negative, check=_neg_check, cuda="-a", cuda_complex=True, name="neg")
_neg = defop("neg", meta=_neg_impl.meta, cpu=_neg_impl.cpu, backward=lambda ctx, g: (-g,),
             jvp=lambda ctx, t: -t, saves=(), **cuda_fields(_neg_impl))
neg = exact_out(_neg)
negative = alias(neg, "negative")
neg_ = inplace(_neg)
negative_ = alias(neg_, "negative_")

# torch's CPU kernel has no bool abs; its CUDA kernel has (the identity)
_abs_impl = Unary(np.abs, result="real", allow=NUMERIC, kernel="abs_cpu", cuda="r_abs(a)",
                  cuda_complex=True, name="abs", cuda_allow=NUMERIC | {D.bool_})


def _abs_backward(ctx, grad):
    x = ctx.args[0]
    return (unbroadcast(grad * x.sgn(), x),)


def _abs_jvp(ctx, t):
    x = ctx.args[0]
    if x.dtype.category == 3:
        return fit((x.sgn().conj() * t).real, ctx.outputs[0])
    return t * x.sgn()


_abs = defop("abs", meta=_abs_impl.meta, cpu=_abs_impl.cpu, backward=_abs_backward,
             jvp=_abs_jvp, **cuda_fields(_abs_impl))
abs = exact_out(_abs)
absolute = alias(abs, "absolute")
_abs_ = inplace(_abs)
_abs_.extra["method"] = False  # Tensor.abs_ is the checking function below


def abs_(self: Tensor) -> Tensor:
    """In-place ``abs`` (complex tensors refuse: the result would be real)."""
    if self.dtype.category == 3:
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return _abs_(self)


absolute_ = alias(abs_, "absolute_")


def positive(input: Tensor) -> Tensor:
    """``+input``: returns ``input`` itself; bool tensors raise like torch."""
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


__pos__ = positive


add_ = inplace(add)
sub_ = inplace(sub)
subtract_ = alias(sub_, "subtract_")
mul_ = inplace(mul)
multiply_ = alias(mul_, "multiply_")

__all__ = [
    "abs", "abs_", "absolute", "add", "mul", "multiply", "neg", "neg_", "negative", "negative_",
    "positive", "rsub", "sub", "subtract",
]
TENSOR_METHODS = (
    "positive", "subtract", "subtract_", "multiply", "multiply_", "negative",
    "negative_", "absolute", "absolute_", "abs_", "__pos__",
)

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("rsub", "rsub.Scalar")
