"""The special-function ops: Bessel, Airy, scaled error function, incomplete gamma,
Hurwitz zeta, the orthogonal polynomials, ``sinc``, ``frexp``, ``gcd``/``lcm``
(spec TENSOR-110).

CPU kernels are in ``special_bessel``, ``special_gamma`` and ``special_poly``; the CUDA
kernels call the device functions of ``special_cuda``. Integer and bool inputs compute
in the default float dtype. Gradients where torch has them: ``i0``, ``i0e``, ``i1``,
``i1e``, ``erfcx``, ``sinc``, ``zeta`` (w.r.t. ``q``), ``igamma``/``igammac`` (w.r.t.
``x``); the Bessel and polynomial families are not differentiable (their outputs do
not require grad), as torch's.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops import special_bessel as _b
from refimpl.ops import special_gamma as _g
from refimpl.ops import special_poly as _p
from refimpl.ops._pointwise import (
    ALL,
    FLOATING,
    INTEGRAL,
    REAL,
    cuda_fields,
    fit,
    inplace,
    unbroadcast,
)
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import named_result, structseq
from refimpl.ops.special_cuda import SpecialBinary, SpecialUnary, run_special
from refimpl.ops.special_overloads import invalid_arguments

_NO_METHOD = {"method": False}


def _unary(name: str, fn, cuda: str, *, grad=None, node=None, method: bool = False,
           saves=("inputs",), kernel: str = "", allow=REAL, cplx: bool = False):
    """A float-valued unary op; ``grad(x, out)`` is its derivative (None: the output
    does not require grad, as torch's non-differentiable special functions).
    ``kernel``: torch's CPU kernel name for its dtype errors (default: the name without
    ``special_``, plus ``_cpu``)."""
    kernel = kernel or name.removeprefix("special_") + "_cpu"
    impl = SpecialUnary(fn, result="float", allow=allow, kernel=kernel, cuda=cuda, name=name,
                        cuda_complex=cplx)
    if grad is None:
        return defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False,
                     **cuda_fields(impl, None if method else _NO_METHOD))

    def backward(ctx, g):
        return (g * grad(ctx.args[0], ctx.outputs[0] if ctx.outputs else None).conj(),)

    def jvp(ctx, t):
        return fit(t * grad(ctx.args[0], ctx.outputs[0]), ctx.outputs[0])

    return defop(name, meta=impl.meta, cpu=impl.cpu, backward=backward, jvp=jvp, node=node,
                 saves=saves, **cuda_fields(impl, None if method else _NO_METHOD))


def _f64(fn):
    """A float64 numpy kernel as a ``Unary`` function (rounded by the dispatcher)."""
    return lambda x: fn(np.asarray(x, np.float64))


def _double(fn: str) -> str:
    return f"{fn}((double)a)"


# -- non-differentiable Bessel and Airy functions ---------------------------------------------

airy_ai = _unary("special_airy_ai", _f64(_b.airy_ai), _double("sp_airy_ai"))
bessel_j0 = _unary("special_bessel_j0", _f64(_b.bessel_j0), _double("sp_j0"))
bessel_j1 = _unary("special_bessel_j1", _f64(_b.bessel_j1), _double("sp_j1"))
bessel_y0 = _unary("special_bessel_y0", _f64(_b.bessel_y0), _double("sp_y0"))
bessel_y1 = _unary("special_bessel_y1", _f64(_b.bessel_y1), _double("sp_y1"))
modified_bessel_i0 = _unary("special_modified_bessel_i0", _f64(_b.i0), _double("sp_i0"))
modified_bessel_i1 = _unary("special_modified_bessel_i1", _f64(_b.i1), _double("sp_i1"))
modified_bessel_k0 = _unary("special_modified_bessel_k0", _f64(_b.modified_bessel_k0),
                            "sp_k(0, (double)a, false)")
modified_bessel_k1 = _unary("special_modified_bessel_k1", _f64(_b.modified_bessel_k1),
                            "sp_k(1, (double)a, false)")
scaled_modified_bessel_k0 = _unary("special_scaled_modified_bessel_k0",
                                   _f64(_b.scaled_modified_bessel_k0), "sp_k(0, (double)a, true)")
scaled_modified_bessel_k1 = _unary("special_scaled_modified_bessel_k1",
                                   _f64(_b.scaled_modified_bessel_k1), "sp_k(1, (double)a, true)")
spherical_bessel_j0 = _unary("special_spherical_bessel_j0", _f64(_b.spherical_bessel_j0),
                             _double("sp_spherical_j0"))

# -- differentiable: i0, i0e, i1, i1e, erfcx, sinc ----------------------------------------------


def _sign(x: Tensor) -> Tensor:
    return x.sign()


def _i1_grad(x, y):
    from refimpl.ops.elementwise_binary import where

    return where(x == 0, 0.5, i0(x) - y / x)


def _i1e_grad(x, y):
    from refimpl.ops.elementwise_binary import where

    return where(x == 0, 0.5, i0e(x) - y * (_sign(x) + x.reciprocal()))


i0 = _unary("i0", _f64(_b.i0), _double("sp_i0"), grad=lambda x, y: i1(x), method=True,
           kernel="i0_vml_cpu")
i0_ = inplace(i0)
i0e = _unary("special_i0e", _f64(_b.i0e), "sp_i_scaled(0, (double)a)",
             grad=lambda x, y: i1e(x) - _sign(x) * y, node="SpecialI0EBackward0",
             saves=("inputs", "outputs"))
i1 = _unary("special_i1", _f64(_b.i1), _double("sp_i1"), grad=_i1_grad,
            node="SpecialI1Backward0", saves=("inputs", "outputs"))
i1e = _unary("special_i1e", _f64(_b.i1e), "sp_i_scaled(1, (double)a)", grad=_i1e_grad,
             node="SpecialI1EBackward0", saves=("inputs", "outputs"))
erfcx = _unary("special_erfcx", _f64(_g.erfcx), _double("sp_erfcx"),
               grad=lambda x, y: x * y * 2 - 2 / math.sqrt(math.pi),
               node="SpecialErfcxBackward0", saves=("inputs", "outputs"))


def _sinc_grad(x, y):
    from refimpl.ops.elementwise_binary import where

    px = x * math.pi
    return where(x == 0, 0.0, ((px).cos() * math.pi - y * math.pi) / px)


sinc = _unary("sinc", _g.sinc, "sp_sinc(a)", grad=_sinc_grad, method=True,
              saves=("inputs", "outputs"), allow=ALL, cplx=True)
sinc_ = inplace(sinc)

# -- binary: zeta, igamma, igammac --------------------------------------------------------------


def _binary_grads(name: str, grad_first, grad_second):
    """backward of a binary op (a ``None`` partial raises torch's error); torch has no
    forward-mode formula for these ops (zeta, igamma, igammac), so neither has refimpl."""

    def backward(ctx, g):
        a, b = ctx.args[0], ctx.args[1]
        need = ctx.needs_input_grad
        ga = gb = None
        if isinstance(a, Tensor) and need[0]:
            if grad_first is None:
                raise NotImplementedError(f"the derivative for '{name}' is not implemented.")
            ga = unbroadcast(g * grad_first(a, b), a)
        if isinstance(b, Tensor) and len(need) > 1 and need[1]:
            gb = unbroadcast(g * grad_second(a, b), b)
        return ga, gb

    return backward, None


def _tensors(name: str):
    """torch's check of a ``(Tensor, Tensor)``-only function."""
    def pre(a, b, **_) -> None:
        for position, (x, arg) in enumerate(((a, "input"), (b, "other")), start=1):
            if not isinstance(x, Tensor):
                raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be "
                                f"Tensor, not {type(x).__name__}")

    return pre


def _some_tensor(name: str, first: str, second: str):
    """torch's check of a function whose overloads take a Number on one side."""
    def pre(a, b, **_) -> None:
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise invalid_arguments(name, (a, b), (
                f"Tensor {first}, Tensor {second}, *, Tensor out = None",
                f"Number {first}, Tensor {second}, *, Tensor out = None",
                f"Tensor {first}, Number {second}, *, Tensor out = None"))

    return pre


def _binary(name: str, fn, cuda: str, *, grads=None, node=None, method=False, allow=REAL,
            result="float", kernel: str = "", pre=None):
    kernel = kernel or name.removeprefix("special_") + "_cpu"
    impl = SpecialBinary(fn, result=result, allow=allow, kernel=kernel, name=name,
                         cuda=cuda, pre=pre or _some_tensor(name, "x", "n"))
    extra = None if method else _NO_METHOD
    if grads is None:
        return defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False,
                     **cuda_fields(impl, extra))
    backward, jvp = grads
    return defop(name, meta=impl.meta, cpu=impl.cpu, backward=backward, jvp=jvp, node=node,
                 **cuda_fields(impl, extra))


def _igamma_dx(a, x):
    return ((a - 1) * x.log() - x - a.lgamma()).exp() if isinstance(a, Tensor) else (
        (x.log() * (a - 1) - x - math.lgamma(a)).exp())


zeta = _binary("special_zeta", _g.zeta, "sp_zeta((double)a, (double)b)",
               grads=_binary_grads("zeta", None, lambda x, q: -x * zeta(x + 1, q)),
               node="SpecialZetaBackward0", pre=_some_tensor("special_zeta", "self", "other"))
igamma = _binary("igamma", _g.igamma, "sp_igamma((double)a, (double)b, false)",
                 grads=_binary_grads("igamma: input", None, _igamma_dx), method=True,
                 allow=FLOATING, result="promote", kernel="igamma_cpu", pre=_tensors("igamma"))
igammac = _binary("igammac", _g.igammac, "sp_igamma((double)a, (double)b, true)",
                  grads=_binary_grads("igammac: input", None, lambda a, x: -_igamma_dx(a, x)),
                  method=True, allow=FLOATING, result="promote", kernel="igammac_cpu",
                  pre=_tensors("igammac"))
igamma_, igammac_ = inplace(igamma), inplace(igammac)

# -- orthogonal polynomials ---------------------------------------------------------------------

_KINDS = {"t": 0, "u": 1, "v": 2, "w": 3}


def _poly(name: str, fn, cuda: str):
    return _binary(name, fn, cuda)


def _cheb(kind: str, shifted: bool):
    prefix = "shifted_" if shifted else ""
    return _poly(f"special_{prefix}chebyshev_polynomial_{kind}",
                 lambda x, n: _p.chebyshev(kind, x, n, shifted),
                 f"sp_cheb({_KINDS[kind]}, {'true' if shifted else 'false'}, a, b)")


chebyshev_polynomial_t, chebyshev_polynomial_u = _cheb("t", False), _cheb("u", False)
chebyshev_polynomial_v, chebyshev_polynomial_w = _cheb("v", False), _cheb("w", False)
shifted_chebyshev_polynomial_t = _cheb("t", True)
shifted_chebyshev_polynomial_u = _cheb("u", True)
shifted_chebyshev_polynomial_v = _cheb("v", True)
shifted_chebyshev_polynomial_w = _cheb("w", True)
hermite_polynomial_h = _poly("special_hermite_polynomial_h", _p.hermite_h,
                             "sp_hermite(true, a, b)")
hermite_polynomial_he = _poly("special_hermite_polynomial_he", _p.hermite_he,
                              "sp_hermite(false, a, b)")
laguerre_polynomial_l = _poly("special_laguerre_polynomial_l", _p.laguerre_l, "sp_laguerre(a, b)")
legendre_polynomial_p = _poly("special_legendre_polynomial_p", _p.legendre_p, "sp_legendre(a, b)")

# -- gcd, lcm -------------------------------------------------------------------------------------

gcd = _binary("gcd", np.gcd, "sp_gcd(a, b)", allow=INTEGRAL, result="promote", method=True,
              kernel="gcd_cpu", pre=_tensors("gcd"))
lcm = _binary("lcm", np.lcm, "sp_lcm(a, b)", allow=INTEGRAL, result="promote", method=True,
              kernel="lcm_cpu", pre=_tensors("lcm"))
gcd_, lcm_ = inplace(gcd), inplace(lcm)

# -- frexp ----------------------------------------------------------------------------------------


def _frexp_check(input: Tensor) -> None:
    if input.dtype not in FLOATING:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")


def _frexp_meta(input: Tensor):
    _frexp_check(input)
    return (TensorSpec(input._shape, input.dtype, input.device),
            TensorSpec(input._shape, D.int32, input.device))


def _frexp_cpu(input: Tensor):
    _frexp_check(input)
    x = input._np.astype(np.float32) if input.dtype in (D.float16, D.bfloat16) else input._np
    m, e = np.frexp(x)
    return np.asarray(m).astype(input.dtype.np), np.asarray(e).astype(np.int32)


def _frexp_cuda(input: Tensor):
    _frexp_check(input)
    m = run_special("sp_frexp_m(a)", (input,), input.dtype, input.dtype, None, input._shape,
                    None, "frexp")
    e = run_special("sp_frexp_e(a)", (input,), D.int32, input.dtype, None, input._shape, None,
                    "frexp")
    return m, e


def _frexp_backward(ctx, g_mantissa, g_exponent=None):
    # torch's formula: exp2 of the int32 exponent is in the default float dtype
    return (g_mantissa / ctx.outputs[1].exp2(),)


def _frexp_jvp(ctx, t):
    return t / ctx.outputs[1].exp2()


structseq("frexp", ("mantissa", "exponent"))
structseq("frexp_out", ("mantissa", "exponent"))
_frexp = defop("frexp", meta=_frexp_meta, cpu=_frexp_cpu, cuda=_frexp_cuda,
               backward=_frexp_backward, jvp=_frexp_jvp, diff_outputs=(0,), saves=("outputs",),
               node="FrexpBackward0", extra=_NO_METHOD)


def frexp(input: Tensor, *, out=None):
    """``input = mantissa * 2 ** exponent`` with ``|mantissa|`` in ``[0.5, 1)``; returns
    ``(mantissa, exponent)`` (exponent int32)."""
    m, e = _frexp(input) if out is None else _frexp(input, out=out)
    return named_result("frexp", (m, e), out)


# -- composites: mvlgamma, ldexp, polar ---------------------------------------------------------


def mvlgamma(input: Tensor, p: int, *, out=None) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2)``."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = input if input.dtype.category >= 2 else input.to(D.get_default_dtype())
    total = x.lgamma()
    for j in range(1, p):
        total = total + (x - j / 2).lgamma()
    total = total + p * (p - 1) / 4 * math.log(math.pi)
    return total if out is None else out.resize_(total.shape).copy_(total)


def mvlgamma_(self: Tensor, p: int) -> Tensor:
    """In-place ``mvlgamma``."""
    return self.copy_(mvlgamma(self, p))


def ldexp(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """``input * 2 ** other``."""
    from refimpl.ops.division import pow

    _tensors("ldexp")(input, other)
    result = input * pow(2.0, other)
    return result if out is None else out.resize_(result.shape).copy_(result)


def ldexp_(self: Tensor, other: Tensor) -> Tensor:
    """In-place ``ldexp``."""
    from refimpl.ops.division import pow

    return self.mul_(pow(2.0, other))


def polar(abs: Tensor, angle: Tensor, *, out=None) -> Tensor:
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    from refimpl.ops.views_dtype import complex as make_complex

    if abs.dtype not in (D.float16, D.float32, D.float64) or \
            angle.dtype not in (D.float16, D.float32, D.float64):
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{abs.dtype._legacy} and {angle.dtype._legacy}")
    if abs.dtype is not angle.dtype:
        raise RuntimeError(f"Expected object of scalar type {abs.dtype._legacy} but got scalar "
                           f"type {angle.dtype._legacy} for second argument")
    return make_complex(abs * angle.cos(), abs * angle.sin(), **({} if out is None else
                                                                  {"out": out}))


__all__ = [
    "frexp",
    "gcd",
    "gcd_",
    "i0",
    "i0_",
    "igamma",
    "igamma_",
    "igammac",
    "igammac_",
    "lcm",
    "lcm_",
    "ldexp",
    "ldexp_",
    "mvlgamma",
    "polar",
    "sinc",
    "sinc_",
]
TENSOR_METHODS = ["frexp", "ldexp", "ldexp_", "mvlgamma", "mvlgamma_"]
