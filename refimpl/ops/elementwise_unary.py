"""Unary elementwise math: exponentials, logarithms, trigonometry, rounding, special
functions and the sign family (spec: TENSOR-110, TENSOR-310).

Floating ops on bool/integer tensors compute in the default float dtype (``exp`` of
an int64 tensor is float32); rounding ops keep integer dtypes (a copy); complex
inputs follow torch's support table (an op without a complex kernel raises torch's
error naming it). Every op has an in-place form ``<name>_``.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from refimpl import _dtype as D
from refimpl._math_views import set_bits
from refimpl._tensor import Tensor
from refimpl.ops import _special
from refimpl.ops._pointwise import (
    ALL,
    COMPLEX,
    FLOATING,
    NUMERIC,
    REAL,
    Unary,
    alias,
    cuda_fields,
    exact_out,
    fit,
    inplace,
)
from refimpl.ops._pointwise import (
    conj as conj_value,
)
from refimpl.ops._registry import defop

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _unary(name: str, fn, *, result: str = "float", allow=ALL, kernel: str = "",
           check=None, grad=None, saves=("inputs",), with_inplace: bool = True,
           node: str | None = None, backward=None, cuda=None, cplx: bool = False):
    """Declare ``name`` (and ``name_``) from a numpy function, a CUDA expression over
    ``a`` (``cplx``: it holds for complex dtypes too) and a derivative.

    ``grad(x, out)`` is d out / d x written in refimpl ops; backward is
    ``grad_out * conj(grad)`` and jvp ``tangent * grad``, torch's conventions for
    holomorphic functions. ``grad=_zero_grad`` gives zeros (rounding ops);
    ``grad=None`` leaves the op without derivative formulas.
    """
    impl = Unary(fn, result=result, allow=allow, kernel=kernel, check=check, cuda=cuda,
                 cuda_complex=cplx, name=name)
    custom, backward, jvp = backward, None, None
    if grad is _zero_grad:
        def backward(ctx, g):
            return (_zero_grad(ctx.args[0], None),)

        def jvp(ctx, t):
            return _zero_grad(ctx.outputs[0], None)
    elif grad is not None:
        def backward(ctx, g):
            x = ctx.args[0]
            d = grad(x, ctx.outputs[0] if ctx.outputs else None)
            r = g * conj_value(d)
            return (r.real if r.dtype.category == 3 and x.dtype.category < 3 else r,)

        def jvp(ctx, t):
            return fit(t * grad(ctx.args[0], ctx.outputs[0]), ctx.outputs[0])
    op = defop(name, meta=impl.meta, cpu=impl.cpu, backward=custom or backward, jvp=jvp,
               saves=saves, node=node, **cuda_fields(impl))
    return op, (inplace(op) if with_inplace else None)


def _zero_grad(x, out):
    from refimpl.ops.factories import zeros_like

    return zeros_like(x)


# -- exponentials and logarithms -------------------------------------------------------

exp, exp_ = _unary("exp", np.exp, cuda="exp(a)", cplx=True, grad=lambda x, y: y, saves=("outputs",))
exp2, exp2_ = _unary("exp2", np.exp2, cuda="exp2(a)", cplx=True,
                     grad=lambda x, y: y * _LN2, saves=("outputs",))
expm1, expm1_ = _unary("expm1", np.expm1, cuda="expm1(a)", cplx=True,
                       grad=lambda x, y: y + 1, saves=("outputs",))
log, log_ = _unary("log", np.log, cuda="log(a)", cplx=True, grad=lambda x, y: x.reciprocal())
log2, log2_ = _unary("log2", np.log2, cuda="log2(a)", cplx=True,
                     grad=lambda x, y: (x * _LN2).reciprocal())
log10, log10_ = _unary("log10", np.log10, cuda="log10(a)", cplx=True,
                       grad=lambda x, y: (x * _LN10).reciprocal())
log1p, log1p_ = _unary("log1p", np.log1p, cuda="log1p(a)", cplx=True,
                       grad=lambda x, y: (x + 1).reciprocal())
sqrt, sqrt_ = _unary("sqrt", np.sqrt, cuda="sqrt(a)", cplx=True,
                     grad=lambda x, y: (y * 2).reciprocal(),
                     saves=("outputs",))
rsqrt, rsqrt_ = _unary("rsqrt", lambda x: 1 / np.sqrt(x), cuda="r_rsqrt(a)", cplx=True,
                       grad=lambda x, y: y.pow(3) * -0.5,
                       saves=("outputs",))
reciprocal, reciprocal_ = _unary("reciprocal", lambda x: 1 / x, cuda="1 / a", cplx=True,
                                 grad=lambda x, y: -(y * y),
                                 saves=("outputs",))

# -- trigonometric and hyperbolic ------------------------------------------------------------

sin, sin_ = _unary("sin", np.sin, cuda="sin(a)", cplx=True, grad=lambda x, y: x.cos())
cos, cos_ = _unary("cos", np.cos, cuda="cos(a)", cplx=True, grad=lambda x, y: -x.sin())
tan, tan_ = _unary("tan", np.tan, cuda="tan(a)", cplx=True,
                   grad=lambda x, y: y * y + 1, saves=("outputs",))
asin, asin_ = _unary("asin", np.arcsin, cuda="asin(a)",
                     grad=lambda x, y: (1 - x * x).rsqrt())
acos, acos_ = _unary("acos", np.arccos, cuda="acos(a)",
                     grad=lambda x, y: -(1 - x * x).rsqrt())
atan, atan_ = _unary("atan", np.arctan, cuda="atan(a)", cplx=True,
                     grad=lambda x, y: (x * x + 1).reciprocal())
sinh, sinh_ = _unary("sinh", np.sinh, cuda="sinh(a)", cplx=True, grad=lambda x, y: x.cosh())
cosh, cosh_ = _unary("cosh", np.cosh, cuda="cosh(a)", cplx=True, grad=lambda x, y: x.sinh())
tanh, tanh_ = _unary("tanh", np.tanh, cuda="tanh(a)", cplx=True,
                     grad=lambda x, y: 1 - y * y, saves=("outputs",),
                     backward=lambda ctx, g: (_activation().tanh_backward(g, ctx.outputs[0]),))
asinh, asinh_ = _unary("asinh", np.arcsinh, cuda="asinh(a)", cplx=True,
                       grad=lambda x, y: (x * x + 1).rsqrt())
acosh, acosh_ = _unary("acosh", np.arccosh, cuda="acosh(a)", cplx=True,
                       grad=lambda x, y: (x * x - 1).rsqrt())
atanh, atanh_ = _unary("atanh", np.arctanh, cuda="atanh(a)", cplx=True,
                       grad=lambda x, y: (1 - x * x).reciprocal())
arcsin, arccos, arctan = alias(asin, "arcsin"), alias(acos, "arccos"), alias(atan, "arctan")
arcsinh, arccosh = alias(asinh, "arcsinh"), alias(acosh, "arccosh")
arctanh = alias(atanh, "arctanh")
arcsin_, arccos_, arctan_ = alias(asin_, "arcsin_"), alias(acos_, "arccos_"), alias(
    atan_, "arctan_")
arcsinh_, arccosh_ = alias(asinh_, "arcsinh_"), alias(acosh_, "arccosh_")
arctanh_ = alias(atanh_, "arctanh_")


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


sigmoid, sigmoid_ = _unary(
    "sigmoid", _sigmoid, cuda="r_sigmoid(a)", cplx=True, grad=lambda x, y: y * (1 - y),
    saves=("outputs",),
    backward=lambda ctx, g: (_activation().sigmoid_backward(g, ctx.outputs[0]),))


def _activation():
    from refimpl.ops import activation

    return activation
deg2rad, deg2rad_ = _unary(
    "deg2rad", lambda x: x * np.asarray(math.pi / 180, x.dtype),
    cuda=lambda dtype, x: ("a * k", {"k": (math.pi / 180, dtype)}), grad=lambda x, y: math.pi / 180,
    check=lambda x: _no_complex(x, "deg2rad is not supported for complex tensors."), saves=(),
    node="Deg2RadBackward0")
rad2deg, rad2deg_ = _unary(
    "rad2deg", lambda x: x * np.asarray(180 / math.pi, x.dtype),
    cuda=lambda dtype, x: ("a * k", {"k": (180 / math.pi, dtype)}), grad=lambda x, y: 180 / math.pi,
    check=lambda x: _no_complex(x, "rad2deg is not supported for complex tensors."), saves=(),
    node="Rad2DegBackward0")


def _no_complex(x, message: str, exc=RuntimeError) -> None:
    if x.dtype.category == 3:
        raise exc(message)


# -- special functions ------------------------------------------------------------------------

erf, erf_ = _unary("erf", _special.erf, cuda="erf(a)", allow=REAL, kernel="erf_vml_cpu",
                   grad=lambda x, y: (-x * x).exp() * _TWO_OVER_SQRT_PI)
erfc, erfc_ = _unary("erfc", _special.erfc, cuda="erfc(a)", allow=REAL, kernel="erfc_vml_cpu",
                     grad=lambda x, y: (-x * x).exp() * -_TWO_OVER_SQRT_PI)
erfinv, erfinv_ = _unary("erfinv", _special.erfinv, cuda="erfinv(a)",
                         allow=REAL, kernel="erfinv_vml_cpu",
                         grad=lambda x, y: (y * y).exp() * (math.sqrt(math.pi) / 2),
                         saves=("outputs",))
lgamma, lgamma_ = _unary("lgamma", _special.lgamma, cuda="r_lgamma(a)",
                         allow=REAL, kernel="lgamma_vml_cpu",
                         grad=lambda x, y: x.digamma())
digamma, digamma_ = _unary("digamma", _special.digamma, cuda="r_digamma(a)",
                           allow=REAL, kernel="digamma",
                           grad=lambda x, y: polygamma(1, x))


def _polygamma_check(x, n) -> None:
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")


_polygamma_impl = Unary(lambda x, n: _special.polygamma(n, x), result="float", allow=REAL,
                        kernel="polygamma", check=_polygamma_check, name="polygamma",
                        cuda=lambda dtype, x, n: ("r_polygamma(n, a)", {"n": (n, D.int32)}))


def _polygamma_backward(ctx, g):
    x, n = ctx.args[0], ctx.args[1]
    return (g * polygamma(n + 1, x),)


def _polygamma_jvp(ctx, t, tn=None):
    x, n = ctx.args[0], ctx.args[1]
    return fit(t * polygamma(n + 1, x), ctx.outputs[0])


# The op takes (input, n) so that the in-place form writes into the tensor argument.
_polygamma = defop("polygamma", meta=_polygamma_impl.meta, cpu=_polygamma_impl.cpu,
                   backward=_polygamma_backward, jvp=_polygamma_jvp,
                   **cuda_fields(_polygamma_impl, {"method": False}))
_polygamma_ = inplace(_polygamma)


def polygamma(n, input) -> Tensor:
    """The ``n``-th derivative of digamma at ``input`` (``Tensor.polygamma(n)`` too)."""
    if isinstance(n, Tensor):  # the method form: self.polygamma(n)
        n, input = input, n
    return _polygamma(input, n)


def polygamma_(self: Tensor, n: int) -> Tensor:
    """In-place ``polygamma(n, self)``."""
    return _polygamma_(self, n)


# -- rounding --------------------------------------------------------------------------------

def _rounding(name: str, fn):
    def check(x, **_):
        if x.dtype.category == 3:
            raise NotImplementedError(f"{name} is not supported for complex inputs")

    def compute(x):
        return x.copy() if x.dtype.kind in "iu" else fn(x)

    return _unary(name, compute, result="same", allow=NUMERIC, kernel=f"{name}_vml_cpu",
                  check=check, grad=_zero_grad, saves=(), cuda=f"r_{name}(a)")


floor, floor_ = _rounding("floor", np.floor)
ceil, ceil_ = _rounding("ceil", np.ceil)
trunc, trunc_ = _rounding("trunc", np.trunc)
floor, ceil, trunc = exact_out(floor), exact_out(ceil), exact_out(trunc)
fix, fix_ = alias(trunc, "fix"), alias(trunc_, "fix_")


def _round_compute(x):
    return x.copy() if x.dtype.kind in "iu" else np.rint(x)


def _round_decimals(x, decimals=0):
    ten = np.asarray(10.0 ** abs(decimals), x.dtype)
    if decimals >= 0:
        return np.rint(x * ten) / ten
    return np.rint(x / ten) * ten


def _round_dec_cuda(dtype, x, decimals=0):
    expr = "r_round(a * k) / k" if decimals >= 0 else "r_round(a / k) * k"
    return expr, {"k": (10.0 ** abs(decimals), dtype)}


_round_impl = Unary(_round_compute, result="same", allow=NUMERIC - COMPLEX,
                    kernel="round_vml_cpu", cuda="r_round(a)", name="round")
_round_dec_impl = Unary(_round_decimals, result="same", allow=FLOATING, kernel="round_cpu",
                        cuda=_round_dec_cuda, name="round")
_round = defop("round", meta=_round_impl.meta, cpu=_round_impl.cpu,
               backward=lambda ctx, g: (_zero_grad(ctx.args[0], None),),
               jvp=lambda ctx, t: _zero_grad(ctx.outputs[0], None), saves=(),
               **cuda_fields(_round_impl, {"method": False}))
_round_dec = defop("round.decimals", meta=_round_dec_impl.meta, cpu=_round_dec_impl.cpu,
                   backward=lambda ctx, g: (_zero_grad(ctx.args[0], None),),
                   jvp=lambda ctx, t: _zero_grad(ctx.outputs[0], None), saves=(),
                   node="RoundBackward1", **cuda_fields(_round_dec_impl, {"method": False}))
_round_, _round_dec_ = inplace(_round), inplace(_round_dec)
_round_exact, _round_dec_exact = exact_out(_round), exact_out(_round_dec)


def round(input: Tensor, *, decimals: int = 0, out=None) -> Tensor:
    """Round half to even; ``decimals`` rounds to that many decimal digits (floats)."""
    if decimals == 0:
        return _round_exact(input, out=out)
    return _round_dec_exact(input, decimals=decimals, out=out)


def round_(self: Tensor, *, decimals: int = 0) -> Tensor:
    """In-place ``round``."""
    return _round_(self) if decimals == 0 else _round_dec_(self, decimals=decimals)


frac, frac_ = _unary("frac", lambda x: x - np.trunc(x), result="same", allow=FLOATING,
                     cuda="r_frac(a)",
                     kernel="frac_cpu", grad=lambda x, y: 1, saves=())
frac = exact_out(frac)

# -- sign family ------------------------------------------------------------------------------


def _sign(x):
    if x.dtype.kind == "b":
        return x.copy()
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _sgn(x):
    if x.dtype.kind != "c":
        return _sign(x)
    # componentwise division by |x|, like torch's vectorised kernel (inf + 0j -> nan + 0j)
    mag = np.abs(x)
    safe = np.where(mag == 0, 1, mag)
    out = np.empty_like(x)
    out.real, out.imag = x.real / safe, x.imag / safe
    return np.where(mag == 0, 0, out).astype(x.dtype)


sign, sign_ = _unary(
    "sign", _sign, result="same", cuda="r_sign(a)",
    check=lambda x: _no_complex(
        x, "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
        "torch.sgn instead.", NotImplementedError),
    grad=_zero_grad, saves=())
sign = exact_out(sign)


def _sgn_backward(ctx, g):
    x, y = ctx.args[0], ctx.outputs[0]
    if x.dtype.category < 3:
        return (_zero_grad(x, None),)
    mag = x.abs()
    # d sgn: (g - Re(g * conj(sgn)) * sgn) / |x|, zero where x == 0
    proj = (g * y.conj()).real * y
    from refimpl.ops.elementwise_binary import where

    return (where(mag == 0, 0, (g - proj) / mag),)


def _sgn_jvp(ctx, t):
    x, y = ctx.args[0], ctx.outputs[0]
    if x.dtype.category < 3:
        return _zero_grad(y, None)
    mag = x.abs()
    from refimpl.ops.elementwise_binary import where

    return where(mag == 0, 0, (t - (t * y.conj()).real * y) / mag)


_sgn_impl = Unary(_sgn, result="same", cuda="r_sgn(a)", cuda_complex=True, name="sgn")
sgn = defop("sgn", meta=_sgn_impl.meta, cpu=_sgn_impl.cpu, backward=_sgn_backward,
            jvp=_sgn_jvp, saves=("inputs", "outputs"), **cuda_fields(_sgn_impl))
sgn_ = inplace(sgn)
sgn = exact_out(sgn)


def _angle(x):
    if x.dtype.kind == "c":
        return np.angle(x)
    return np.where(np.isnan(x), x, np.where(x < 0, np.asarray(math.pi, x.dtype), 0))


def _angle_backward(ctx, g):
    x = ctx.args[0]
    if x.dtype.category < 3:
        return (_zero_grad(x, None),)
    from refimpl.ops.elementwise_binary import where

    return (where(x == 0, 0, g * x / x.abs().pow(2) * 1j),)


_angle_impl = Unary(_angle, result="float_real", cuda="r_angle(a)", cuda_complex=True,
                    name="angle")
angle = defop("angle", meta=_angle_impl.meta, cpu=_angle_impl.cpu, backward=_angle_backward,
              jvp=lambda ctx, t: fit(_angle_jvp(ctx.args[0], t), ctx.outputs[0]),
              **cuda_fields(_angle_impl))


def _angle_jvp(x, t):
    if x.dtype.category < 3:
        return t * 0
    return (x.conj() * t).imag / x.abs().pow(2)


signbit, _ = _unary(
    "signbit", lambda x: np.signbit(x) if x.dtype.kind == "f" else x < 0, result="bool",
    cuda="r_signbit(a)",
    check=lambda x: _no_complex(x, "signbit is not implemented for complex tensors.",
                                NotImplementedError), with_inplace=False)
signbit = exact_out(signbit, lambda out, expected: "signbit does not support non-boolean "
                    "outputs.")


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind in "iub":
        return x.copy()
    if x.dtype.kind == "c":
        re = _nan_to_num(x.real, nan, posinf, neginf)
        im = _nan_to_num(x.imag, nan, posinf, neginf)
        return re + 1j * im
    info = np.finfo(x.dtype)
    return np.nan_to_num(x, nan=0.0 if nan is None else nan,
                         posinf=info.max if posinf is None else posinf,
                         neginf=info.min if neginf is None else neginf)


class _NanToNum(Unary):
    """Replacement values default to the finite extremes of the *tensor's* dtype."""

    def cpu(self, x, nan=0.0, posinf=None, neginf=None):
        if x.dtype in (D.float16, D.bfloat16):
            info = ml_dtypes.finfo(x.dtype.np)
            posinf = float(info.max) if posinf is None else posinf
            neginf = float(info.min) if neginf is None else neginf
        return Unary.cpu(self, x, nan=nan, posinf=posinf, neginf=neginf)


def _nan_to_num_cuda(dtype, x, nan=0.0, posinf=None, neginf=None):
    if dtype.category < 2:
        return "a", None
    real = dtype.to_real()
    info = ml_dtypes.finfo(real.np)
    bound = D.float32 if real in (D.float16, D.bfloat16) else real
    return "r_nan_to_num(a, nan_, pos_, neg_)", {
        "nan_": (0.0 if nan is None else nan, bound),
        "pos_": (float(info.max) if posinf is None else posinf, bound),
        "neg_": (float(info.min) if neginf is None else neginf, bound)}


_nan_impl = _NanToNum(_nan_to_num, result="same", cuda=_nan_to_num_cuda, cuda_complex=True,
                      name="nan_to_num")
nan_to_num = defop("nan_to_num", meta=_nan_impl.meta, cpu=_nan_impl.cpu,
                   backward=lambda ctx, g: (g * ctx.args[0].isfinite(),),
                   jvp=lambda ctx, t: t * ctx.args[0].isfinite(), **cuda_fields(_nan_impl))
nan_to_num_ = inplace(nan_to_num)
nan_to_num = exact_out(nan_to_num, lambda out, expected: (
    f"nan_to_num: dtype of out: {D.type_name(out)} should be same as input: "
    f"{D.type_name(expected)}"))

# -- conjugation ------------------------------------------------------------------------------

_conj_impl = Unary(np.conj, result="same", cuda="r_conj(a)", cuda_complex=True,
                   name="conj_physical")
_conj_physical = defop("conj_physical", meta=_conj_impl.meta, cpu=_conj_impl.cpu,
                       backward=lambda ctx, g: (g.conj_physical(),),
                       jvp=lambda ctx, t: t.conj_physical(), saves=(),
                       **cuda_fields(_conj_impl, {"method": False}))
_conj_physical_ = inplace(_conj_physical)
_conj_physical_exact = exact_out(_conj_physical)


def conj_physical(input: Tensor, *, out=None) -> Tensor:
    """A conjugated copy of a complex tensor; a real tensor is returned itself."""
    if input.dtype.category == 3 or out is not None:
        return _conj_physical_exact(input, out=out)
    return input


def conj_physical_(self: Tensor) -> Tensor:
    """Conjugate a complex tensor in place (nothing to do for real tensors)."""
    return _conj_physical_(self) if self.dtype.category == 3 else self


def _same_view(x: Tensor):
    from refimpl.ops._registry import ViewSpec

    return ViewSpec(x._shape, x._stride, x._offset)


def _toggle_conj(src: Tensor, out: Tensor) -> None:
    set_bits(out, not src._conj_bit, src._neg_bit)


def _toggle_neg(src: Tensor, out: Tensor) -> None:
    set_bits(out, src._conj_bit, not src._neg_bit)


# Math views (refimpl._math_views): same memory, one bit flipped; the dispatcher's view
# path aliases the input and calls extra["math_bits"] on the new tensor.
_conj_view = defop("conj", kind="view", meta=_same_view,
                   backward=lambda ctx, g: (g.conj(),), jvp=lambda ctx, t: t.conj(),
                   saves=(), extra={"method": False, "math_bits": _toggle_conj})
_neg_view_op = defop("_neg_view", kind="view", meta=_same_view,
                     backward=lambda ctx, g: (g.neg(),), jvp=lambda ctx, t: t._neg_view(),
                     saves=(), extra={"method": False, "math_bits": _toggle_neg})


def conj(input: Tensor) -> Tensor:
    """The complex conjugate as a lazy view: same memory, conjugate bit flipped
    (``is_conj()``; TENSOR-025). Real tensors return themselves."""
    return _conj_view(input) if input.dtype.category == 3 else input


def _neg_view(input: Tensor) -> Tensor:
    """A lazily negated view: same memory, negative bit flipped (``is_neg()``)."""
    return _neg_view_op(input)


def resolve_conj(input: Tensor) -> Tensor:
    """A new tensor with the conjugation applied when ``input.is_conj()``, else ``input``."""
    if not input._conj_bit:
        return input
    from refimpl.ops.copy import clone

    return clone(input)


def resolve_neg(input: Tensor) -> Tensor:
    """A new tensor with the negation applied when ``input.is_neg()``, else ``input``."""
    if not input._neg_bit:
        return input
    from refimpl.ops.copy import clone

    return clone(input)


def is_conj(input: Tensor) -> bool:
    """Whether ``input`` is a lazily conjugated view (its conjugate bit is set)."""
    return input._conj_bit


def is_neg(input: Tensor) -> bool:
    """Whether ``input`` is a lazily negated view (its negative bit is set)."""
    return input._neg_bit


__all__ = [
    "_neg_view",
    "acos",
    "acos_",
    "acosh",
    "acosh_",
    "angle",
    "arccos",
    "arccos_",
    "arccosh",
    "arccosh_",
    "arcsin",
    "arcsin_",
    "arcsinh",
    "arcsinh_",
    "arctan",
    "arctan_",
    "arctanh",
    "arctanh_",
    "asin",
    "asin_",
    "asinh",
    "asinh_",
    "atan",
    "atan_",
    "atanh",
    "atanh_",
    "ceil",
    "ceil_",
    "conj",
    "conj_physical",
    "conj_physical_",
    "cos",
    "cos_",
    "cosh",
    "cosh_",
    "deg2rad",
    "deg2rad_",
    "digamma",
    "erf",
    "erf_",
    "erfc",
    "erfc_",
    "erfinv",
    "exp",
    "exp2",
    "exp2_",
    "exp_",
    "expm1",
    "expm1_",
    "fix",
    "fix_",
    "floor",
    "floor_",
    "frac",
    "frac_",
    "is_conj",
    "is_neg",
    "lgamma",
    "log",
    "log1p",
    "log1p_",
    "log2",
    "log2_",
    "log10",
    "log10_",
    "log_",
    "nan_to_num",
    "nan_to_num_",
    "polygamma",
    "rad2deg",
    "rad2deg_",
    "reciprocal",
    "reciprocal_",
    "resolve_conj",
    "resolve_neg",
    "round",
    "round_",
    "rsqrt",
    "rsqrt_",
    "sgn",
    "sigmoid",
    "sigmoid_",
    "sign",
    "signbit",
    "sin",
    "sin_",
    "sinh",
    "sinh_",
    "sqrt",
    "sqrt_",
    "tan",
    "tan_",
    "tanh",
    "tanh_",
    "trunc",
    "trunc_",
]
TENSOR_METHODS = (
    "round", "round_", "conj", "_neg_view", "conj_physical", "conj_physical_", "resolve_conj",
    "resolve_neg", "is_conj", "is_neg", "polygamma", "polygamma_", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "arcsin_", "arccos_", "arctan_", "arcsinh_",
    "arccosh_", "arctanh_", "fix", "fix_",
)
