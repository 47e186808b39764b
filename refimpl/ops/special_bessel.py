"""Bessel, modified Bessel and Airy functions on numpy float64 arrays.

No tables of fitted coefficients: every function is a convergent series, a
recurrence or a quadrature whose accuracy follows from analysis, chosen per range.

* ``J0, J1, Y0, Y1``: below 25, Miller's backward recurrence for ``J_k`` normalised
  by ``J_0 + 2 sum J_2k = 1``, with Neumann's series for ``Y_0`` (and its derivative
  for ``Y_1``); from 25, Hankel's asymptotic expansion (error below ``e^-2x``).
* ``I0, I1`` (and the ``exp(-|x|)``-scaled forms): the ascending power series
  (positive terms, no cancellation) up to 30, Hankel's expansion of ``I_nu`` above.
* ``K0, K1`` (and the ``exp(x)``-scaled forms): the ascending series with digamma
  weights (A&S 9.6.13 and 9.6.11) below 1/2; above, the trapezoidal rule on
  ``K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt``, which converges
  geometrically in the number of nodes for this doubly exponentially decaying
  analytic integrand (the step is chosen from the width of its strip of
  analyticity).
* ``Ai``: the Maclaurin series on ``[-8, 2]``; ``sqrt(x/3) K_1/3(zeta) / pi`` with
  the same quadrature above 2; the oscillatory asymptotic expansion (A&S 10.4.60)
  below -8.

Special points follow torch: ``Y0, Y1`` are ``-inf`` at 0 and NaN below, ``K0, K1``
are ``inf`` at 0 and NaN below.
"""

from __future__ import annotations

import math

import numpy as np

_F64 = np.float64
_EULER = 0.57721566490153286061
_TWO_OVER_PI = 2.0 / math.pi
_CHUNK = 1 << 15  # elements per quadrature batch


def _f64(x) -> np.ndarray:
    return np.asarray(x, _F64)


# -- J and Y of order 0 and 1 ------------------------------------------------------------------

def _hankel(nu: int, x: np.ndarray) -> tuple:
    """``(J_nu, Y_nu)`` from Hankel's asymptotic expansion (x >= 25)."""
    mu = 4.0 * nu * nu
    p, q = np.ones_like(x), np.zeros_like(x)
    term = np.ones_like(x)
    for k in range(1, 40):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        if k % 4 == 1:
            q = q + term
        elif k % 4 == 2:
            p = p - term
        elif k % 4 == 3:
            q = q - term
        else:
            p = p + term
    chi = x - (0.5 * nu + 0.25) * math.pi
    scale = np.sqrt(_TWO_OVER_PI / x)
    c, s = np.cos(chi), np.sin(chi)
    return scale * (p * c - q * s), scale * (p * s + q * c)


def _miller(x: np.ndarray) -> tuple:
    """``(J0, J1, Y0, Y1)`` for ``0 < x < 25`` by backward recurrence."""
    n = 2 * (int(np.max(x, initial=0.0)) // 2) + 50
    nxt, cur = np.zeros_like(x), np.full_like(x, 1e-30)
    norm = np.zeros_like(x)
    ysum = np.zeros_like(x)   # sum_k (-1)^k J_2k / k
    y1sum = np.zeros_like(x)  # sum_k (-1)^k (J_2k-1 - J_2k+1) / k
    j1 = np.zeros_like(x)
    for k in range(n, 0, -1):
        prev = (2.0 * k / x) * cur - nxt  # J_{k-1} from J_k, J_{k+1}
        huge = np.abs(prev) > 1e200  # small x grows the sequence fast: rescale
        if np.any(huge):
            f = np.where(huge, 1e-200, 1.0)
            prev, cur, nxt = prev * f, cur * f, nxt * f
            norm, ysum, y1sum, j1 = norm * f, ysum * f, y1sum * f, j1 * f
        if k % 2 == 0:
            m = k // 2
            sign = -1.0 if m % 2 else 1.0
            norm = norm + 2.0 * cur
            ysum = ysum + sign * cur / m
            y1sum = y1sum + sign * (prev - nxt) / m
        if k == 1:
            j1 = cur
        nxt, cur = cur, prev
    norm = norm + cur
    j0, j1 = cur / norm, j1 / norm
    ysum, y1sum = ysum / norm, y1sum / norm
    log_term = np.log(x / 2.0) + _EULER
    y0 = _TWO_OVER_PI * log_term * j0 - 2.0 * _TWO_OVER_PI * ysum
    y1 = _TWO_OVER_PI * (log_term * j1 - j0 / x) + _TWO_OVER_PI * y1sum
    return j0, j1, y0, y1


def _bessel_jy(x: np.ndarray) -> tuple:
    """``(J0, J1, Y0, Y1)`` of ``|x|`` (callers fix signs and the domain)."""
    a = np.abs(x)
    with np.errstate(all="ignore"):
        big = a >= 25.0
        small = (a < 25.0) & (a > 0)
        out = [np.full_like(a, np.nan) for _ in range(4)]
        if np.any(small):
            for o, v in zip(out, _miller(a[small])):
                o[small] = v
        if np.any(big):
            j0, y0 = _hankel(0, a[big])
            j1, y1 = _hankel(1, a[big])
            for o, v in zip(out, (j0, j1, y0, y1)):
                o[big] = v
        zero = a == 0
        out[0][zero], out[1][zero] = 1.0, 0.0
        out[2][zero], out[3][zero] = -np.inf, -np.inf
        inf = np.isinf(a)
        for o in out:
            o[inf] = 0.0
    return tuple(out)


def bessel_j0(x) -> np.ndarray:
    """Bessel function of the first kind of order 0."""
    return _bessel_jy(_f64(x))[0]


def bessel_j1(x) -> np.ndarray:
    """Bessel function of the first kind of order 1 (odd)."""
    x = _f64(x)
    v = _bessel_jy(x)[1]
    return np.where(x < 0, -v, v)


def bessel_y0(x) -> np.ndarray:
    """Bessel function of the second kind of order 0 (NaN for ``x < 0``)."""
    x = _f64(x)
    return np.where(x < 0, np.nan, _bessel_jy(x)[2])


def bessel_y1(x) -> np.ndarray:
    """Bessel function of the second kind of order 1 (NaN for ``x < 0``)."""
    x = _f64(x)
    return np.where(x < 0, np.nan, _bessel_jy(x)[3])


# -- I of order 0 and 1 --------------------------------------------------------------------------

def _i_series(nu: int, a: np.ndarray) -> np.ndarray:
    """``I_nu(a)`` for ``0 <= a <= 30`` by the ascending series."""
    q = a * a / 4.0
    term = np.ones_like(a) if nu == 0 else a / 2.0
    total = term.copy()
    for k in range(1, 80):
        term = term * q / (k * (k + nu))
        total = total + term
    return total


def _i_scaled_asymptotic(nu: int, a: np.ndarray) -> np.ndarray:
    """``exp(-a) I_nu(a)`` for ``a > 30`` (Hankel's expansion; the exponentially small
    second solution is below double precision there)."""
    mu = 4.0 * nu * nu
    term, total = np.ones_like(a), np.ones_like(a)
    for k in range(1, 30):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * a)
        total = total + term
    return total / np.sqrt(2.0 * math.pi * a)


def _i_scaled(nu: int, x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        low = a <= 30.0
        out[low] = _i_series(nu, a[low]) * np.exp(-a[low])
        out[~low] = _i_scaled_asymptotic(nu, a[~low])
        out[np.isinf(a)] = 0.0
        out[np.isnan(a)] = np.nan
    return out if nu == 0 else np.copysign(out, x)


def i0e(x) -> np.ndarray:
    """``exp(-|x|) I0(x)``."""
    return _i_scaled(0, _f64(x))


def i1e(x) -> np.ndarray:
    """``exp(-|x|) I1(x)`` (odd)."""
    return _i_scaled(1, _f64(x))


def i0(x) -> np.ndarray:
    """Modified Bessel function of the first kind of order 0."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        r = _i_scaled(0, x) * np.exp(np.abs(x))
        return np.where(np.isinf(x), np.inf, r)


def i1(x) -> np.ndarray:
    """Modified Bessel function of the first kind of order 1 (odd)."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        r = _i_scaled(1, x) * np.exp(np.abs(x))
        return np.where(np.isinf(x), x, r)


# -- K of order 0 and 1 ------------------------------------------------------------------------

def _k_series(nu: int, x: np.ndarray) -> np.ndarray:
    """``K_nu(x)`` for small ``x`` (A&S 9.6.13 for nu = 0, 9.6.11 for nu = 1)."""
    q = x * x / 4.0
    log_half = np.log(x / 2.0)
    if nu == 0:
        term, psi = np.ones_like(x), -_EULER
        total = psi * term
        for k in range(1, 30):
            term = term * q / (k * k)
            psi += 1.0 / k
            total = total + psi * term
        return total - log_half * _i_series(0, x)
    term = x / 4.0  # (x/2) / 2 * q^k / (k! (k+1)!)
    psi_sum = 1.0 - 2.0 * _EULER  # psi(1) + psi(2)
    total = psi_sum * term
    for k in range(1, 30):
        term = term * q / (k * (k + 1))
        psi_sum += 1.0 / k + 1.0 / (k + 1)
        total = total + psi_sum * term
    return 1.0 / x + log_half * _i_series(1, x) - total


def k_nu_scaled(nu: float, z: np.ndarray) -> np.ndarray:
    """``exp(z) K_nu(z)`` for ``z >= 1/2`` by the trapezoidal rule on
    ``int_0^inf exp(-z (cosh t - 1)) cosh(nu t) dt``.

    The integrand is analytic and bounded in a strip around the real axis whose
    useful width shrinks like ``1/sqrt(z)``; the step ``min(1/4, 0.6/sqrt(z))``
    keeps the discretisation error below double precision, and the range ends
    where the integrand is below ``exp(-40)``.
    """
    z = _f64(z)
    if z.size > _CHUNK:  # bound the (elements x nodes) working array
        flat = z.reshape(-1)
        parts = [k_nu_scaled(nu, flat[i:i + _CHUNK]) for i in range(0, flat.size, _CHUNK)]
        return np.concatenate(parts).reshape(z.shape)
    h = np.minimum(0.25, 0.6 / np.sqrt(z))
    t_end = np.arccosh(1.0 + 45.0 / z) + 2.0 * abs(nu) * h
    steps = int(np.max(np.ceil(t_end / h), initial=1.0)) + 1
    j = np.arange(steps, dtype=_F64)
    t = h[..., None] * j
    half = np.sinh(t / 2.0)
    w = np.exp(-2.0 * z[..., None] * half * half) * np.cosh(nu * t)  # cosh t - 1, exactly
    w[..., 0] *= 0.5
    return h * w.sum(axis=-1)


def _k(nu: int, x: np.ndarray, scaled: bool) -> np.ndarray:
    out = np.full_like(x, np.nan)
    with np.errstate(all="ignore"):
        small = (x > 0) & (x < 0.5)
        s = _k_series(nu, x[small])
        out[small] = s * np.exp(x[small]) if scaled else s
        big = (x >= 0.5) & np.isfinite(x)
        if np.any(big):
            v = k_nu_scaled(nu, x[big])
            out[big] = v if scaled else v * np.exp(-x[big])
        out[x == 0] = np.inf
        out[x == np.inf] = 0.0
    return out


def modified_bessel_k0(x) -> np.ndarray:
    """Modified Bessel function of the second kind of order 0."""
    return _k(0, _f64(x), False)


def modified_bessel_k1(x) -> np.ndarray:
    """Modified Bessel function of the second kind of order 1."""
    return _k(1, _f64(x), False)


def scaled_modified_bessel_k0(x) -> np.ndarray:
    """``exp(x) K0(x)``."""
    return _k(0, _f64(x), True)


def scaled_modified_bessel_k1(x) -> np.ndarray:
    """``exp(x) K1(x)``."""
    return _k(1, _f64(x), True)


# -- Airy Ai and the spherical j0 ---------------------------------------------------------------

_AI0 = 0.355028053887817239260  # Ai(0)
_AIP0 = 0.258819403792806798405  # -Ai'(0)


def _airy_maclaurin(x: np.ndarray) -> np.ndarray:
    x3 = x * x * x
    f, g = np.ones_like(x), x.copy()
    tf, tg = f.copy(), g.copy()
    for k in range(1, 60):
        tf = tf * x3 / ((3 * k - 1) * (3 * k))
        tg = tg * x3 / ((3 * k) * (3 * k + 1))
        f, g = f + tf, g + tg
    return _AI0 * f - _AIP0 * g


def _airy_negative(x: np.ndarray) -> np.ndarray:
    """``Ai(x)`` for ``x < -8`` (A&S 10.4.60)."""
    a = -x
    zeta = 2.0 / 3.0 * a * np.sqrt(a)
    p, q = np.ones_like(a), np.zeros_like(a)
    u, term = 1.0, np.ones_like(a)
    for k in range(1, 2 * 15):
        u *= (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k)
        term = term / zeta
        sign = -1.0 if (k // 2) % 2 else 1.0
        if k % 2:
            q = q + sign * u * term
        else:
            p = p + sign * u * term
    phase = zeta + math.pi / 4
    return (np.sin(phase) * p - np.cos(phase) * q) / (math.sqrt(math.pi) * np.sqrt(np.sqrt(a)))


def airy_ai(x) -> np.ndarray:
    """The Airy function ``Ai``."""
    x = _f64(x)
    out = np.full_like(x, np.nan)
    with np.errstate(all="ignore"):
        mid = (x >= -8.0) & (x <= 2.0)
        out[mid] = _airy_maclaurin(x[mid])
        low = x < -8.0
        out[low] = _airy_negative(x[low])
        high = (x > 2.0) & (x < 110.0)
        if np.any(high):
            xh = x[high]
            zeta = 2.0 / 3.0 * xh * np.sqrt(xh)
            out[high] = np.sqrt(xh / 3.0) / math.pi * k_nu_scaled(1.0 / 3.0, zeta) * np.exp(-zeta)
        out[x >= 110.0] = 0.0
        out[x == -np.inf] = 0.0
    return out


def spherical_bessel_j0(x) -> np.ndarray:
    """``sin(x) / x``, its Taylor series near 0."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        x2 = x * x
        series = np.ones_like(x)
        for k in range(7, 0, -1):  # 1 - x^2/(2*3) (1 - x^2/(4*5) (1 - ...))
            series = 1.0 - x2 / (2 * k * (2 * k + 1)) * series
        r = np.where(np.abs(x) < 0.5, series, np.sin(x) / x)
        return np.where(np.isinf(x), 0.0, r)
