"""Special functions on numpy arrays (numpy has no erf, lgamma or digamma; scipy is absent).

Each function takes and returns float64 arrays. ``erfc``/``lgamma`` use the ``math``
module functions elementwise; ``erf`` is vectorised (piecewise Taylor polynomials, within
2 ulp of ``math.erf``); ``erfinv`` refines a closed form first guess with Newton steps on
``erf``; ``digamma`` and ``polygamma`` use the recurrence ``psi(x) = psi(x + 1) - 1/x``
and asymptotic series. Special points follow torch: ``digamma(0) = -inf``,
``digamma(-0.0) = inf``, negative integers give nan, ``lgamma`` at its poles gives inf.
"""

from __future__ import annotations

import math

import numpy as np

_F64 = np.float64


def _each(fn, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, _F64)
    # frompyfunc gives a Python float (not an array) for a 0-dim input
    return np.asarray(np.frompyfunc(fn, 1, 1)(x), dtype=object).astype(_F64)


def erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function ``1 - erf(x)`` (accurate for large x)."""
    return _each(math.erfc, x)


def _lgamma_one(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole: 0, -1, -2, ...
        return math.inf


def lgamma(x: np.ndarray) -> np.ndarray:
    """``log(|gamma(x)|)``; inf at the poles and at -inf."""
    return _each(_lgamma_one, x)


_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)


# erf without a per-element Python loop: [0, 6) is cut into steps of 1/128 and, on each,
# erf is its Taylor polynomial of degree 6 about the step's midpoint (the derivatives from
# erf^(k+1)(a) = 2/sqrt(pi) (-1)^k H_k(a) exp(-a^2), H_k the Hermite polynomials, and erf(a)
# itself from math.erf). The remainder is below 1e-18, so results stay within 2 ulp of
# math.erf in float64 and round to the same float32. Near 0 a series in x^2 keeps the
# relative accuracy of tiny arguments; from 6 on erf is 1.0 in float64.
_ERF_STEP, _ERF_DEG, _ERF_TOP = 1 / 128, 6, 6.0
_ERF_MID = (np.arange(int(_ERF_TOP / _ERF_STEP)) + 0.5) * _ERF_STEP


def _erf_taylor(a: float) -> list[float]:
    """``erf^(k)(a) / k!`` for ``k = 0 .. _ERF_DEG``."""
    coef, h_prev, h, fact = [math.erf(a)], 0.0, 1.0, 1.0
    scale = _SQRT_PI_2 * math.exp(-a * a)
    for k in range(_ERF_DEG):
        fact *= k + 1
        coef.append((-1) ** k * h * scale / fact)
        h_prev, h = h, 2 * a * h - 2 * k * h_prev
    return coef


_ERF_COEF = np.array([_erf_taylor(a) for a in _ERF_MID]).T.copy()  # (degree + 1, steps)
# erf(x) = x * sum_n c_n x^(2n), c_n = 2/sqrt(pi) (-1)^n / (n! (2n + 1)); 8 terms reach
# 1e-20 relative for |x| < 1/128
_ERF_SERIES = [_SQRT_PI_2 * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(8)]


def erf(x: np.ndarray) -> np.ndarray:
    """The error function."""
    shape = np.shape(x)
    x = np.asarray(x, _F64).reshape(-1)  # 1-d: ufuncs of 0-d arrays return scalars
    ax = np.fmin(np.abs(x), _ERF_TOP)  # fmin maps nan to the top, fixed up below
    idx = (ax * (1 / _ERF_STEP)).astype(np.intp)
    np.minimum(idx, len(_ERF_MID) - 1, out=idx)
    t = ax - _ERF_MID.take(idx)
    y = _ERF_COEF[_ERF_DEG].take(idx)
    for k in range(_ERF_DEG - 1, -1, -1):
        y *= t
        y += _ERF_COEF[k].take(idx)
    small = ax < _ERF_STEP
    if small.any():
        xs = ax[small]
        u, s = xs * xs, np.full(xs.shape, _ERF_SERIES[-1])
        for c in _ERF_SERIES[-2::-1]:
            s *= u
            s += c
        y[small] = xs * s
    y[ax >= _ERF_TOP] = 1.0
    y = np.copysign(y, x)
    y[np.isnan(x)] = np.nan
    return y.reshape(shape)


def erfinv(y: np.ndarray) -> np.ndarray:
    """The inverse error function on [-1, 1]: ``erfinv(+-1) = +-inf``, nan outside."""
    y = np.asarray(y, _F64)
    with np.errstate(all="ignore"):
        a = np.abs(y)
        ln = np.log1p(-a * a)
        t1 = 2.0 / (math.pi * 0.147) + ln / 2.0
        x = np.sqrt(np.sqrt(t1 * t1 - ln / 0.147) - t1)  # Winitzki's guess, |error| < 2e-3
        x = np.where(np.isfinite(x), x, 0.0)
        tail = a > 0.5
        for _ in range(5):
            dens = _SQRT_PI_2 * np.exp(-x * x)
            # erf(x) - a, computed through erfc near 1 to avoid cancellation
            x = x - np.where(tail, (1.0 - a) - erfc(x), erf(x) - a) / dens
        x = np.where(a == 1.0, np.inf, x)
        x = np.where(a > 1.0, np.nan, x)
        return np.copysign(x, y)


_PSI_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def digamma(x: np.ndarray) -> np.ndarray:
    """The logarithmic derivative of the gamma function."""
    x = np.asarray(x, _F64)
    with np.errstate(all="ignore"):
        neg = x < 0
        frac = np.where(neg, np.fmod(x, 1.0), 0.0)
        z = np.where(neg, 1.0 - x, x)
        acc = np.zeros_like(z)
        small = (z < 6.0) & (z > 0)
        while np.any(small):
            acc = np.where(small, acc - 1.0 / z, acc)
            z = np.where(small, z + 1.0, z)
            small = (z < 6.0) & (z > 0)
        inv2 = 1.0 / (z * z)
        series = np.zeros_like(z)
        for c in reversed(_PSI_SERIES):
            series = (series + c) * inv2
        out = acc + np.log(z) - 0.5 / z - series
        out = np.where(neg, out - math.pi / np.tan(math.pi * frac), out)
        out = np.where(neg & (x == np.floor(x)), np.nan, out)
        out = np.where(x == 0, np.copysign(np.inf, -x), out)
        out = np.where(x == np.inf, np.inf, out)
        return np.where(np.isnan(x), np.nan, out)


_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _hurwitz_zeta(s: int, x: np.ndarray) -> np.ndarray:
    """``sum_k (x + k) ** -s`` for an integer ``s >= 2`` (Euler-Maclaurin tail)."""
    acc = np.zeros_like(x)
    a = x.copy()
    low = a < 12.0
    while np.any(low):
        acc = np.where(low, acc + np.power(a, -s), acc)
        a = np.where(low, a + 1.0, a)
        low = a < 12.0
    tail = np.power(a, 1 - s) / (s - 1) + 0.5 * np.power(a, -s)
    rising = float(s)
    power = np.power(a, -s - 1)
    for j, b in enumerate(_BERNOULLI, start=1):
        tail = tail + b / math.factorial(2 * j) * rising * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        power = power / (a * a)
    return acc + tail


def trigamma(x: np.ndarray) -> np.ndarray:
    """``polygamma(1, x)``: reflection below 1/2, six recurrence steps, then the
    asymptotic series to the 1/42 term (the same truncation torch uses). float32
    inputs compute in float32, as torch's kernel does (its rounding near the poles
    differs visibly from a float64 evaluation)."""
    x = np.asarray(x)
    one = (x.dtype if x.dtype == np.float32 else np.dtype(_F64)).type
    x = x.astype(one, copy=False)
    with np.errstate(all="ignore"):
        reflect = x < one(0.5)
        sign = np.where(reflect, one(-1), one(1))
        s = np.sin(one(math.pi) * x)
        result = np.where(reflect, -one(math.pi * math.pi) / (s * s), one(0))
        x = np.where(reflect, one(1) - x, x)
        for _ in range(6):
            result = result + one(1) / (x * x)
            x = x + one(1)
        ixx = one(1) / (x * x)
        series = ixx * (one(1 / 6) - ixx * (one(1 / 30) - ixx / one(42)))
        result = result + (one(1) + one(1) / (one(2) * x) + series) / x
        return sign * result


def polygamma(n: int, x: np.ndarray) -> np.ndarray:
    """The ``n``-th derivative of digamma (``n >= 0``)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    x = np.asarray(x, _F64)
    with np.errstate(all="ignore"):
        sign = 1.0 if n % 2 else -1.0
        out = sign * math.factorial(n) * _hurwitz_zeta(n + 1, np.where(np.isfinite(x), x, 1.0))
        pole = (x <= 0) & (x == np.floor(x))
        out = np.where(pole, np.inf if n % 2 else -np.inf, out)
        out = np.where(x == np.inf, 0.0, out)
        return np.where(np.isnan(x) | (x == -np.inf), np.nan, out)
