"""``refimpl.special``: torch.special's functions (spec TENSOR-110).

Most are refimpl ops under torch.special's names (the Bessel, Airy, polynomial, zeta,
incomplete-gamma and scaled-error-function kernels are in ``refimpl.ops.special_ops``);
the others are written in refimpl ops (so they run on every device and differentiate
through the ops they use). Integer inputs compute in the default float dtype, as
torch's do.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops import elementwise_unary as _u
from refimpl.ops.activation import logit as _logit
from refimpl.ops.elementwise_binary import xlogy as _xlogy
from refimpl.ops.elementwise_unary import digamma, erf, erfc, erfinv, exp2, expm1, log1p
from refimpl.ops.reduction import logsumexp as _logsumexp
from refimpl.ops.softmax import log_softmax as _log_softmax
from refimpl.ops.softmax import softmax as _softmax
from refimpl.ops.special_ops import (
    airy_ai,
    bessel_j0,
    bessel_j1,
    bessel_y0,
    bessel_y1,
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    erfcx,
    hermite_polynomial_h,
    hermite_polynomial_he,
    i0,
    i0e,
    i1,
    i1e,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    modified_bessel_i0,
    modified_bessel_i1,
    modified_bessel_k0,
    modified_bessel_k1,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
    spherical_bessel_j0,
    zeta,
)
from refimpl.ops.special_ops import igamma as gammainc
from refimpl.ops.special_ops import igammac as gammaincc
from refimpl.ops.special_ops import sinc as _sinc

__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2",
           "expit", "expm1", "gammainc", "gammaincc", "gammaln", "hermite_polynomial_h",
           "hermite_polynomial_he", "i0", "i0e", "i1", "i1e", "laguerre_polynomial_l",
           "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
           "modified_bessel_k1", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "sinc",
           "softmax", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]

psi = digamma


def _done(result: Tensor, out: Tensor | None) -> Tensor:
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def _floating(x: Tensor) -> Tensor:
    """``x`` in a floating dtype (integers and bools in the default float dtype)."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return x
    return x.to(D.get_default_dtype())


def expit(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _done(_u.sigmoid(input), out)


def gammaln(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``log(|gamma(x)|)``."""
    return _done(_u.lgamma(input), out)


def polygamma(n: int, input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The ``n``-th derivative of the digamma function."""
    return _done(_u.polygamma(n, input), out)


def logit(input: Tensor, eps: float | None = None, *, out: Tensor | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return _done(_logit(input, eps), out)


def xlogy(input, other, *, out: Tensor | None = None) -> Tensor:
    """``input * log(other)``, 0 where ``input`` is 0 (NaN ``other`` stays NaN)."""
    return _done(_xlogy(input, other), out)


def xlog1py(input, other, *, out: Tensor | None = None) -> Tensor:
    """``input * log1p(other)``, 0 where ``input`` is 0 (NaN ``other`` stays NaN)."""
    from refimpl.ops.elementwise_binary import where

    x = input if isinstance(input, Tensor) else None
    y = other if isinstance(other, Tensor) else None
    like = x if x is not None else y
    if x is None:
        x = like.new_tensor(input, dtype=D.get_default_dtype()) if not isinstance(input, float) \
            else like.new_tensor(input)
    if y is None:
        y = like.new_tensor(other)
    x, y = _floating(x), _floating(y)
    product = x * log1p(y)
    result = where((x == 0) & ~y.isnan(), product.new_zeros(()), product)
    return _done(result, out)


def entr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``-x * log(x)`` for ``x > 0``, 0 at 0, ``-inf`` below (NaN stays NaN)."""
    from refimpl.ops.elementwise_binary import where

    x = _floating(input)
    positive = -x * x.log()
    zero = x.new_zeros(())
    result = where(x > 0, positive, where(x == 0, zero, where(x < 0, zero - math.inf, x)))
    return _done(result, out)


def sinc(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0."""
    return _done(_sinc(input), out)


def ndtr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The standard normal cumulative distribution function."""
    x = _floating(input)
    return _done(erfc(x * -math.sqrt(0.5)) * 0.5, out)


def ndtri(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The inverse of :func:`ndtr` (``-inf`` at 0, ``inf`` at 1)."""
    p = _floating(input)
    return _done(erfinv(p * 2 - 1) * math.sqrt(2.0), out)


def log_ndtr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``log(ndtr(x))``, computed in float64 (with the asymptotic series far in the left
    tail, where ``ndtr`` underflows) and returned in the input's floating dtype."""
    from refimpl.ops.elementwise_binary import where

    x = _floating(input)
    wide = x.to(D.float64)
    direct = (erfc(wide * -math.sqrt(0.5)) * 0.5).log()
    far = wide.clamp(max=-20.0)
    tail = (-far * far / 2 - (-far).log() - 0.5 * math.log(2 * math.pi)
            + (1 - 1 / far ** 2 + 3 / far ** 4).log())
    return _done(where(wide < -20, tail, direct).to(x.dtype), out)


def multigammaln(input: Tensor, p: int, *, out: Tensor | None = None) -> Tensor:
    """The log of the multivariate gamma function of dimension ``p``."""
    from refimpl.ops.special_ops import mvlgamma

    return _done(mvlgamma(input, p), out)


def round(input: Tensor, *, decimals: int = 0, out: Tensor | None = None) -> Tensor:
    """Round half to even (at ``decimals`` places)."""
    return _done(_u.round(input, decimals=decimals), out)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """``refimpl.softmax``."""
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """``refimpl.log_softmax``."""
    return _log_softmax(input, dim, dtype=dtype)


def logsumexp(input: Tensor, dim, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, overflow-safe."""
    return _done(_logsumexp(input, dim, keepdim), out)
