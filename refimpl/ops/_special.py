"""Special functions on numpy arrays (numpy has no erf, lgamma or digamma; scipy is absent).

Each function takes and returns float64 arrays. ``erf``/``erfc``/``lgamma`` use the
correctly rounded ``math`` module functions elementwise; ``erfinv`` refines a closed
form first guess with Newton steps on ``erf``; ``digamma`` and ``polygamma`` use the
recurrence ``psi(x) = psi(x + 1) - 1/x`` and asymptotic series. Special points follow
torch: ``digamma(0) = -inf``, ``digamma(-0.0) = inf``, negative integers give nan,
``lgamma`` at its poles gives inf.
"""

from __future__ import annotations

import math

import numpy as np

_F64 = np.float64


def _each(fn, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, _F64)
    # frompyfunc gives a Python float (not an array) for a 0-dim input
    return np.asarray(np.frompyfunc(fn, 1, 1)(x), dtype=object).astype(_F64)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function."""
    return _each(math.erf, x)


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
