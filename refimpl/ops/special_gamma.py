"""Incomplete gamma, Hurwitz zeta, ``erfcx`` and ``sinc`` on numpy arrays.

* ``igamma``/``igammac`` (regularised ``P(a, x)``, ``Q(a, x)``): the power series
  ``P = x^a e^-x / Gamma(a + 1) * sum x^k / ((a+1)...(a+k))`` for ``x < a + 1``, the
  continued fraction for ``Q`` (Legendre's, evaluated by the modified Lentz method)
  above; the other function is the complement.
* ``zeta(x, q)``: the Euler-Maclaurin formula (direct sum up to ``q + N >= 15``, then
  the integral, the half term and Bernoulli corrections up to ``B_20``).
* ``erfcx``: ``exp(x^2) erfc(x)`` with ``x^2`` split exactly into two doubles (Dekker)
  below 25, the asymptotic series of ``erfc`` above.

Special values follow torch: ``P(0, x > 0) = 1``, NaN for negative arguments, ``zeta``
is ``inf`` at ``x = 1`` and at non-positive integer ``q``, NaN for ``x < 1``.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl.ops import _special

_F64 = np.float64


def _prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``x^a e^-x / Gamma(a)``."""
    return np.exp(a * np.log(x) - x - _special.lgamma(a))


def _p_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    term = 1.0 / a
    total = term.copy()
    ap = a.copy()
    for _ in range(2000):
        ap = ap + 1.0
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * 1e-17):
            break
    return total * _prefactor(a, x)


def _q_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / tiny)
    d = 1.0 / np.where(b == 0, tiny, b)
    h = d.copy()
    for i in range(1, 2000):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = 1.0 / np.where(d == 0, tiny, d)
        c = b + an / c
        c = np.where(c == 0, tiny, c)
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) <= 1e-16):
            break
    return h * _prefactor(a, x)


def _incomplete(a, x, upper: bool) -> np.ndarray:
    a, x = np.broadcast_arrays(np.asarray(a, _F64), np.asarray(x, _F64))
    out = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
        low = ok & (x < a + 1)
        high = ok & ~low
        if np.any(low):
            p = _p_series(a[low], x[low])
            out[low] = 1.0 - p if upper else p
        if np.any(high):
            q = _q_fraction(a[high], x[high])
            out[high] = q if upper else 1.0 - q
        lower_one, lower_zero = 1.0, 0.0
        if upper:
            lower_one, lower_zero = 0.0, 1.0
        out[(a == 0) & (x > 0)] = lower_one
        out[(a > 0) & (x == 0)] = lower_zero
        out[(x == np.inf) & (a >= 0) & (a < np.inf)] = lower_one
        out[(a == np.inf) & (x >= 0) & (x < np.inf)] = lower_zero
    return out


def igamma(a, x) -> np.ndarray:
    """The regularised lower incomplete gamma function ``P(a, x)``."""
    return _incomplete(a, x, upper=False)


def igammac(a, x) -> np.ndarray:
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return _incomplete(a, x, upper=True)


_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330)


def zeta(x, q) -> np.ndarray:
    """The Hurwitz zeta function ``sum_k (q + k)^-x``."""
    x, q = np.broadcast_arrays(np.asarray(x, _F64), np.asarray(q, _F64))
    out = np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        q_int = q == np.floor(q)
        ok = (x > 1) & np.isfinite(x) & np.isfinite(q) & ~((q <= 0) & q_int)
        ok &= ~((q <= 0) & (x != np.floor(x)))
        if np.any(ok):
            out[ok] = _zeta_em(x[ok], q[ok])
        out[(x > 1) & (q <= 0) & q_int] = np.inf
        out[x == 1] = np.inf
        out[(x == np.inf) & (q == 1)] = 1.0
        out[(x == np.inf) & (q > 1)] = 0.0
    return out


def _zeta_em(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    acc = np.zeros_like(s)
    a = q.copy()
    low = a < 15.0
    while np.any(low):
        acc = np.where(low, acc + np.power(a, -s), acc)
        a = np.where(low, a + 1.0, a)
        low = a < 15.0
    tail = np.power(a, 1.0 - s) / (s - 1.0) + 0.5 * np.power(a, -s)
    rising = s.copy()  # s (s+1) ... (s + 2j - 2)
    power = np.power(a, -s - 1.0)
    fact = 2.0  # (2j)!
    for j, b in enumerate(_B2K, start=1):
        tail = tail + b / fact * rising * power
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
        power = power / (a * a)
        fact *= (2 * j + 1) * (2 * j + 2)
    return acc + tail


_SPLIT = 134217729.0  # 2^27 + 1


def erfcx(x) -> np.ndarray:
    """The scaled complementary error function ``exp(x^2) erfc(x)``."""
    x = np.asarray(x, _F64)
    with np.errstate(all="ignore"):
        c = _SPLIT * x
        xh = c - (c - x)
        xl = x - xh
        hi = x * x
        lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
        direct = np.exp(hi) * np.exp(lo) * _special.erfc(np.where(x < 25, x, 0.0))
        big = np.where(x >= 25, x, 25.0)
        inv = 1.0 / (2.0 * big * big)
        series, term = np.ones_like(x), np.ones_like(x)
        for k in range(1, 12):
            term = -term * (2 * k - 1) * inv
            series = series + term
        asym = series / (big * math.sqrt(math.pi))
        out = np.where(x < 25, direct, asym)
        out = np.where(x == -np.inf, np.inf, out)
        return np.where(np.isnan(x), np.nan, out)


def sinc(x: np.ndarray) -> np.ndarray:
    """The normalised sinc ``sin(pi x) / (pi x)`` in ``x``'s dtype (real or complex), 1
    at 0."""
    x = np.asarray(x)
    px = x * x.real.dtype.type(math.pi)
    with np.errstate(all="ignore"):
        return np.where(x == 0, x.dtype.type(1), np.sin(px) / px)
