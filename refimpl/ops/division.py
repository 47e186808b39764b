"""Division, remainders and powers (spec: TENSOR-109, TENSOR-110).

``div`` (true, 'trunc' and 'floor' rounding), ``floor_divide``, ``remainder`` (sign of
the divisor), ``fmod`` (sign of the dividend), ``pow`` (tensor or scalar on either
side), ``float_power`` and ``square``, with their in-place forms. Built from the
machinery in ``elementwise``.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._pointwise import (
    BOOL,
    NUMERIC,
    REAL,
    Binary,
    _hidden,
    add_tangents,
    alias,
    check_scalar_first,
    checked_scalar,
    conj,
    cuda_fields,
    dtype_of,
    fast_binary,
    fast_same,
    finish,
    fit,
    inplace,
    not_implemented_cuda,
    operand,
    run_cuda,
    unbroadcast,
)
from refimpl.ops._registry import defop
from refimpl.ops.special_overloads import some_tensor, tensor_first


def _int_zero_check(y) -> None:
    if y.dtype.kind in "iub" and y.size and not np.all(y):
        raise RuntimeError("ZeroDivisionError")


def _trunc_div(x, y):
    if x.dtype.kind in "iu":
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return q + fix.astype(q.dtype)
    return np.trunc(np.true_divide(x, y))


def _div_mode(x, y, rounding_mode=None):
    if rounding_mode is None:
        return np.true_divide(x, y)
    if x.dtype.kind in "iu":
        _int_zero_check(np.broadcast_to(y, np.broadcast_shapes(x.shape, y.shape)))
    return _trunc_div(x, y) if rounding_mode == "trunc" else np.floor_divide(x, y)


def _div_pre(a, b, rounding_mode=None) -> None:
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"'{rounding_mode}'")


_true_div_impl = Binary(np.true_divide, result="float", pre=_div_pre, kernel="div_cpu",
                        name="div", cuda="a / b", cuda_complex=True)
# CUDA integer division by zero is not checked (the GPU cannot raise; torch does not either)
_mode_div_impl = Binary(_div_mode, allow=REAL - BOOL, pre=_div_pre, name="div",
                        kernel=lambda rounding_mode: f"div_{rounding_mode}_cpu",
                        cuda=lambda dtype, a, b, rounding_mode=None: (
                            f"r_div_{rounding_mode}(a, b)", None))


def _div_cpu(a, b):
    if fast_same(a, b) and a.dtype.category >= 2:
        return fast_binary(np.true_divide, a, b)
    return _true_div_impl.cpu(a, b)


def _div_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    if ctx.kwargs.get("rounding_mode") is not None:
        return (unbroadcast(grad * 0, a), unbroadcast(grad * 0, b))
    ga = unbroadcast(grad / conj(b), a) if ctx.needs_input_grad[0] else None
    gb = None
    if isinstance(b, Tensor) and ctx.needs_input_grad[1]:
        gb = unbroadcast(-grad * conj(a / b / b), b)
    return ga, gb


def _div_jvp(ctx, ta, tb=None):
    b = ctx.args[1]
    out = ctx.outputs[0]
    if ctx.kwargs.get("rounding_mode") is not None:
        return fit(out * 0, out)
    return fit(add_tangents(None if ta is None else ta / b,
                            None if tb is None else -tb * out / b), out)


_div_tensor = defop("div", meta=_true_div_impl.meta, cpu=_div_cpu, backward=_div_backward,
                    jvp=_div_jvp, saves=("inputs", "outputs"),
                    **cuda_fields(_true_div_impl, _hidden()))
_div_mode_op = defop("div.Tensor_mode", meta=_mode_div_impl.meta, cpu=_mode_div_impl.cpu,
                     backward=_div_backward, jvp=_div_jvp, node="DivBackward2",
                     **cuda_fields(_mode_div_impl, _hidden()))


def div(input, other, *, rounding_mode: str | None = None, out=None) -> Tensor:
    """``input / other``; ``rounding_mode`` 'trunc' or 'floor' rounds the quotient.

    True division of integers gives the default float dtype; rounded integer division
    by zero raises ``RuntimeError("ZeroDivisionError")`` (TENSOR-109).
    """
    kw = {} if out is None else {"out": out}
    if rounding_mode is None:
        return _div_tensor(input, other, **kw)
    return _div_mode_op(input, other, rounding_mode=rounding_mode, **kw)


def div_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor:
    """In-place ``div``."""
    if rounding_mode is None:
        return _div_tensor_(self, other)
    return _div_mode_(self, other, rounding_mode=rounding_mode)


divide, divide_, true_divide = alias(div, "divide"), alias(div_, "divide_"), alias(
    div, "true_divide")


def true_divide_(self: Tensor, other) -> Tensor:
    """In-place true division."""
    return _div_tensor_(self, other)


def floor_divide(input, other, *, out=None) -> Tensor:
    """``input // other``: division rounded towards negative infinity (TENSOR-109)."""
    return div(input, other, rounding_mode="floor", out=out)


def floor_divide_(self: Tensor, other) -> Tensor:
    """In-place ``floor_divide``."""
    return _div_mode_(self, other, rounding_mode="floor")


def _zero_checked(fn):
    def kernel(x, y):
        if x.dtype.kind in "iu":
            _int_zero_check(np.broadcast_to(y, np.broadcast_shapes(x.shape, y.shape)))
        return fn(x, y)

    return kernel


def _fmod_int(x, y):
    if x.dtype.kind in "iu":
        return x - _trunc_div(x, y) * y
    return np.fmod(x, y)


_remainder_impl = Binary(_zero_checked(np.remainder), allow=REAL - BOOL, kernel="remainder_cpu",
                         name="remainder", cuda="r_remainder(a, b)")
_fmod_impl = Binary(_zero_checked(_fmod_int), allow=REAL - BOOL, kernel="fmod_cpu",
                    name="fmod", cuda="r_fmod(a, b)")


def _mod_backward(mode: str):
    def backward(ctx, grad):
        a, b = ctx.args[0], ctx.args[1]
        gb = None
        if isinstance(b, Tensor):
            gb = unbroadcast(-grad * a.div(b, rounding_mode=mode), b)
        return unbroadcast(grad, a), gb

    return backward


def _mod_jvp(mode: str):
    def jvp(ctx, ta, tb=None):
        a, b = ctx.args[0], ctx.args[1]
        tb = None if tb is None else -tb * a.div(b, rounding_mode=mode)
        return fit(add_tangents(ta, tb), ctx.outputs[0])

    return jvp


def _mod_ops(name: str, impl: Binary, mode: str):
    common = {"meta": impl.meta, "cpu": impl.cpu, "backward": _mod_backward(mode),
              "jvp": _mod_jvp(mode), **cuda_fields(impl, _hidden())}
    scalar = defop(f"{name}.Scalar", node=f"{name.capitalize()}Backward0", saves=(), **common)
    tensor = defop(f"{name}.Tensor", node=f"{name.capitalize()}Backward1", **common)
    return scalar, tensor


_remainder_s, _remainder_t = _mod_ops("remainder", _remainder_impl, "floor")
_fmod_s, _fmod_t = _mod_ops("fmod", _fmod_impl, "trunc")
_remainder_s_, _remainder_t_ = inplace(_remainder_s), inplace(_remainder_t)
_fmod_s_, _fmod_t_ = inplace(_fmod_s), inplace(_fmod_t)


def remainder(input, other, *, out=None) -> Tensor:
    """Python's ``%``: the remainder has the sign of the divisor (TENSOR-109)."""
    some_tensor("remainder", (input, other))
    kw = {} if out is None else {"out": out}
    return (_remainder_t if isinstance(other, Tensor) else _remainder_s)(input, other, **kw)


def remainder_(self: Tensor, other) -> Tensor:
    """In-place ``remainder``."""
    return (_remainder_t_ if isinstance(other, Tensor) else _remainder_s_)(self, other)


def fmod(input, other, *, out=None) -> Tensor:
    """C's ``fmod``: the remainder has the sign of the dividend (TENSOR-109)."""
    tensor_first("fmod", (input, other))
    kw = {} if out is None else {"out": out}
    return (_fmod_t if isinstance(other, Tensor) else _fmod_s)(input, other, **kw)


def fmod_(self: Tensor, other) -> Tensor:
    """In-place ``fmod``."""
    return (_fmod_t_ if isinstance(other, Tensor) else _fmod_s_)(self, other)


# -- pow ---------------------------------------------------------------------------------------

def _int_pow(x, y):
    """Integer power with torch's rule for negative exponents (1, -1 or 0)."""
    neg = y < 0
    if not np.any(neg):
        return np.power(x, y)
    r = np.power(x, np.where(neg, 0, y).astype(y.dtype, copy=False))
    one = np.ones((), x.dtype)
    odd = (y & 1).astype(bool)
    inv = np.where(x == 1, one, np.where(x == -1, np.where(odd, -one, one), 0 * one))
    return np.where(neg, inv, r)


def _pow(x, y):
    if x.dtype.kind in "iu":
        return _int_pow(x, y)
    if x.dtype.kind == "c":  # exp(y log x), torch's complex pow (also at 0 and inf)
        return np.exp(y * np.log(x))
    return np.power(x, y)


def _pow_scalar_exp(x, y):
    """``x ** scalar`` with torch's special exponents (products, sqrt, reciprocal)."""
    if x.dtype.kind in "iu":
        return _int_pow(x, y)
    e = y.item()
    if e == 2:
        return x * x
    if e == 3:
        return x * x * x
    if e == 0.5:
        return np.sqrt(x)
    if e == -0.5:
        return 1 / np.sqrt(x)
    if e == -1:
        return 1 / x
    if e == -2:
        return 1 / (x * x)
    return _pow(x, y)


def _pow_scalar_check(dtype, a, b) -> None:
    if dtype_of(a).category <= 1 and isinstance(b, int) and b < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if dtype.category == 1:
        checked_scalar(b, dtype)  # the exponent is converted to the base's type


# torch's pow(Tensor, Scalar) kernels for special exponents (floating and complex)
_POW_SPECIAL = {2: "a * a", 3: "a * a * a", 0.5: "sqrt(a)", -0.5: "r_rsqrt(a)", -1: "1 / a",
                -2: "1 / (a * a)"}


class _PowScalarExp(Binary):
    """``pow(Tensor, Scalar)``: exponents 0 and 1 fill and copy, for every dtype."""

    def cpu(self, a, b, **kwargs):
        shape, dtype, out = self.prepare(a, b, kwargs)
        if b == 0:
            return np.ones(shape, out.np)
        if b == 1:
            return finish(operand(a, dtype), out, shape).copy()
        return Binary.cpu(self, a, b)

    def cuda_into(self, into, a, b, **kwargs):
        """The CUDA kernel: special exponents as products, roots and reciprocals."""
        shape, dtype, out = self.prepare(a, b, kwargs)
        if b == 0 or b == 1:
            expr = "1" if b == 0 else "a"
        else:
            if dtype not in self.allow:
                raise not_implemented_cuda("pow", dtype)
            expr = "r_pow(a, b)"
            if dtype.category >= 2:
                e = b.real if isinstance(b, complex) and b.imag == 0 else b
                expr = _POW_SPECIAL.get(e, expr) if not isinstance(e, complex) else expr
        return run_cuda(expr, (a, b), out, dtype, None, shape, into, "pow")


class _PowScalarBase(Binary):
    """``pow(Scalar, Tensor)``: a base of 1 gives ones, for every dtype."""

    def cpu(self, a, b, **kwargs):
        shape, dtype, out = self.prepare(a, b, kwargs)
        self.check_kernel(dtype, kwargs)
        if a == 1:
            return np.ones(shape, out.np)
        return Binary.cpu(self, a, b)

    def cuda_into(self, into, a, b, **kwargs):
        """The CUDA kernel (a base of 1 gives ones)."""
        shape, dtype, out = self.prepare(a, b, kwargs)
        if dtype not in self.allow:
            raise not_implemented_cuda("pow", dtype)
        return run_cuda("1" if a == 1 else "r_pow(a, b)", (a, b), out, dtype, None, shape,
                        into, "pow")


_pow_tt_impl = Binary(_pow, allow=NUMERIC, kernel="pow", name="pow", cuda="r_pow(a, b)",
                      cuda_complex=True)
_pow_ts_impl = _PowScalarExp(_pow_scalar_exp, allow=NUMERIC, kernel="pow", name="pow",
                             post=_pow_scalar_check)
_pow_st_impl = _PowScalarBase(_pow, allow=NUMERIC, kernel="pow", name="pow")


def _zeros_like(x):
    from refimpl.ops.factories import zeros_like

    return zeros_like(x)


def _where(cond, x, y):
    from refimpl.ops.elementwise_binary import where

    return where(cond, x, y)


def _pow_ts_backward(ctx, grad):
    x, e = ctx.args[0], ctx.args[1]
    if e == 0:
        return (_zeros_like(x),)
    e = complex(e) if isinstance(e, complex) else float(e)
    return (unbroadcast(grad * conj(e * x.pow(e - 1)), x),)


def _pow_ts_jvp(ctx, tx, te=None):
    x, e = ctx.args[0], ctx.args[1]
    if e == 0:
        return _zeros_like(ctx.outputs[0])
    e = complex(e) if isinstance(e, complex) else float(e)
    return fit(tx * (e * x.pow(e - 1)), ctx.outputs[0])


def _log_scalar(v, complex_out: bool):
    if isinstance(v, complex) or complex_out:
        import cmath

        return cmath.log(complex(v)) if v != 0 else complex(float("-inf"), 0)
    if v > 0:
        return math.log(v)
    return float("-inf") if v == 0 else float("nan")


def _exp_grad_factor(base, exponent: Tensor, result: Tensor):
    """d(base ** exponent)/d exponent: result * log(base), 0 where base == 0 and exp >= 0."""
    nonneg = exponent.real >= 0 if exponent.dtype.category == 3 else exponent >= 0
    if isinstance(base, Tensor):
        # a real base of a complex power takes the complex log (log(-1) = i*pi, not nan)
        log_base = (base.to(result.dtype) if result.dtype.category == 3
                    and base.dtype.category < 3 else base).log()
        return _where((base == 0) & nonneg, 0, result * log_base)
    factor = result * _log_scalar(base, exponent.dtype.category == 3)
    return _where(nonneg, 0, factor) if base == 0 else factor


def _pow_self_factor(x, e):
    return _where(e == 0, 0, e * x.pow(e - 1))


def _pow_tt_backward(ctx, grad):
    x, e = ctx.args[0], ctx.args[1]
    gx = ge = None
    if ctx.needs_input_grad[0]:
        gx = unbroadcast(grad * conj(_pow_self_factor(x, e)), x)
    if ctx.needs_input_grad[1]:
        ge = unbroadcast(grad * conj(_exp_grad_factor(x, e, ctx.outputs[0])), e)
    return gx, ge


def _pow_tt_jvp(ctx, tx, te=None):
    x, e = ctx.args[0], ctx.args[1]
    result = ctx.outputs[0]
    t1 = None if tx is None else tx * _pow_self_factor(x, e)
    t2 = None if te is None else te * _exp_grad_factor(x, e, result)
    return fit(add_tangents(t1, t2), result)


def _pow_st_backward(ctx, grad):
    base, e = ctx.args[0], ctx.args[1]
    return None, unbroadcast(grad * conj(_exp_grad_factor(base, e, ctx.outputs[0])), e)


def _pow_st_jvp(ctx, tb, te=None):
    base, e = ctx.args[0], ctx.args[1]
    if te is None:
        return None
    return fit(te * _exp_grad_factor(base, e, ctx.outputs[0]), ctx.outputs[0])


_pow_tt = defop("pow", meta=_pow_tt_impl.meta, cpu=_pow_tt_impl.cpu, backward=_pow_tt_backward,
                jvp=_pow_tt_jvp, node="PowBackward1", saves=("inputs", "outputs"),
                **cuda_fields(_pow_tt_impl, _hidden()))
_pow_ts = defop("pow.Tensor_Scalar", meta=_pow_ts_impl.meta, cpu=_pow_ts_impl.cpu,
                backward=_pow_ts_backward, jvp=_pow_ts_jvp, node="PowBackward0",
                **cuda_fields(_pow_ts_impl, _hidden()))
_pow_st = defop("pow.Scalar", meta=_pow_st_impl.meta, cpu=_pow_st_impl.cpu,
                backward=_pow_st_backward, jvp=_pow_st_jvp, node="PowBackward2",
                saves=("inputs", "outputs"), **cuda_fields(_pow_st_impl, _hidden()))
_pow_tt_, _pow_ts_ = inplace(_pow_tt), inplace(_pow_ts)


_POW_SIGNATURES = ("(Tensor input, Tensor exponent, *, Tensor out = None)",
                   "(Number self, Tensor exponent, *, Tensor out = None)",
                   "(Tensor input, Number exponent, *, Tensor out = None)")


def pow(input, exponent, *, out=None) -> Tensor:
    """``input ** exponent``; either may be a Python scalar (TENSOR-110).

    Integer tensors raised to a negative integer *scalar* raise "Integers to negative
    integer powers are not allowed."; negative integer *tensor* exponents give 0
    (or +-1 for bases +-1).
    """
    kw = {} if out is None else {"out": out}
    if not isinstance(input, Tensor):
        check_scalar_first("pow", _POW_SIGNATURES, input, exponent)
        return _pow_st(input, exponent, **kw)
    return (_pow_tt if isinstance(exponent, Tensor) else _pow_ts)(input, exponent, **kw)


def pow_(self: Tensor, exponent) -> Tensor:
    """In-place ``pow``."""
    return (_pow_tt_ if isinstance(exponent, Tensor) else _pow_ts_)(self, exponent)


def float_power(input, exponent, *, out=None) -> Tensor:
    """``pow`` computed in float64 (complex128 when an operand is complex)."""
    some_tensor("float_power", (input, exponent), "exponent")
    cplx = any(dtype_of(x).category == 3 for x in (input, exponent))
    dtype = D.complex128 if cplx else D.float64
    if isinstance(input, Tensor):
        input = input.to(dtype)
    elif cplx:
        input = complex(input)
    if isinstance(exponent, Tensor):
        exponent = exponent.to(dtype)
    elif cplx:
        exponent = complex(exponent)
    return pow(input, exponent, out=out)


def float_power_(self: Tensor, exponent) -> Tensor:
    """In-place ``float_power``: ``self`` must already be float64 (or complex128)."""
    cplx = self.dtype.category == 3 or dtype_of(exponent).category == 3
    need = D.complex128 if cplx else D.float64
    if self.dtype is not need:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {D.type_name(self.dtype)} but the "
            f"operation's result requires dtype {D.type_name(need)}")
    if isinstance(exponent, Tensor):
        exponent = exponent.to(need)
    return pow_(self, exponent)


def square(input: Tensor, *, out=None) -> Tensor:
    """``input ** 2`` (bool gives int64, like torch)."""
    return pow(input, 2, out=out)


def square_(self: Tensor) -> Tensor:
    """In-place ``square``."""
    return pow_(self, 2)

_div_tensor_ = inplace(_div_tensor)
_div_mode_ = inplace(_div_mode_op)

__all__ = [
    "div", "divide", "float_power", "floor_divide", "fmod", "pow", "remainder", "square",
    "square_", "true_divide",
]
TENSOR_METHODS = (
    "div", "div_", "divide", "divide_", "true_divide", "true_divide_", "floor_divide",
    "floor_divide_", "remainder", "remainder_", "fmod", "fmod_", "pow", "pow_", "float_power",
    "float_power_", "square", "square_",
)
