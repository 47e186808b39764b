"""The orthogonal polynomials of ``torch.special`` on numpy arrays: ``(x, n)`` ->
``P_n(x)``, computed in ``x``'s dtype (float32 stays float32, as torch's kernels).

``n`` is truncated to an integer; ``n < 0`` gives 0. Each family is evaluated by its
three-term recurrence; the Chebyshev families (and their shifted forms, argument
``2x - 1``) switch to their trigonometric closed forms (``T_n(cos t) = cos(nt)``, ...)
inside ``(-1, 1)`` above a small degree, and return their exact values at the ends of
the interval. Hermite polynomials beyond degree 128 (float32) / 512 (float64) are
NaN, as torch's.

Each recurrence step has the form ``a * q - c``; torch's compiled kernels fuse it into
one fused multiply-add, so float32 steps here are computed the same way (the product
is exact in float64, one rounding to float32 follows), which reproduces torch's float32
values bit for bit.
"""

from __future__ import annotations

import numpy as np

# Chebyshev kinds: (first-degree value as a function of y, the degree above which the
# closed form is used inside (-1, 1) for the plain / the shifted family)
_FIRST = {"t": lambda y: y, "u": lambda y: y + y, "v": lambda y: y + y - 1, "w": lambda y: y + y + 1}
_CLOSED_FROM = {"t": (6, 6), "u": (8, 6), "v": (8, 6), "w": (8, 4)}


def _fms(a: np.ndarray, q: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * q - c`` rounded once, as a fused multiply-add (float32 through float64)."""
    if q.dtype == np.float32:
        wide = np.asarray(a, np.float64) * q.astype(np.float64) - np.asarray(c, np.float64)
        return wide.astype(np.float32)
    return a * q - c


def degrees(n: np.ndarray) -> np.ndarray:
    """``n`` as int64 degrees (NaN and infinities as -1, i.e. the zero polynomial)."""
    n = np.asarray(n)
    if n.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.where(np.isfinite(n), np.trunc(np.where(np.isfinite(n), n, -1)),
                            -1).astype(np.int64)
    return n.astype(np.int64)


def _recur(first: np.ndarray, n: np.ndarray, step) -> np.ndarray:
    """``P_n`` from ``P_0 = 1``, ``P_1 = first`` and ``P_{k+1} = step(k, P_k, P_{k-1})``."""
    one = np.ones_like(first)
    p, q = one, first.copy()
    out = np.where(n == 0, one, first)
    top = int(np.max(n, initial=1))
    for k in range(1, top):
        r = step(k, q, p)
        p, q = q, r
        out = np.where(n == k + 1, r, out)
    return out


def _ends(kind: str, n: np.ndarray, dtype) -> tuple:
    """The values at ``y = 1`` and ``y = -1``."""
    odd = (n % 2) == 1
    n1, n2 = (n + 1).astype(dtype), (2 * n + 1).astype(dtype)
    sgn = np.where(odd, -1.0, 1.0).astype(dtype)
    one = np.ones(n.shape, dtype)
    return {"t": (one, sgn), "u": (n1, sgn * n1), "v": (one, sgn * n2),
            "w": (n2, sgn)}[kind]


def _closed(kind: str, y: np.ndarray, n: np.ndarray) -> np.ndarray:
    dt = y.dtype.type
    theta = np.arccos(y)
    nf = n.astype(y.dtype)
    if kind == "t":
        return np.cos(nf * theta)
    if kind == "u":
        s = np.sin(theta)
        return np.where(s != 0, np.sin((nf + 1) * theta) / s,
                        (nf + 1) * np.cos((nf + 1) * theta) / y)
    half = theta / dt(2)
    top, hi = _ends(kind, n, y.dtype)
    if kind == "v":
        return np.where(np.sin(half) != 1, np.cos((nf + dt(0.5)) * theta) / np.cos(half), hi)
    return np.where(np.cos(half) != 1, np.sin((nf + dt(0.5)) * theta) / np.sin(half), top)


def chebyshev(kind: str, x: np.ndarray, n: np.ndarray, shifted: bool = False) -> np.ndarray:
    """Chebyshev polynomial of the first (t), second (u), third (v) or fourth (w)
    kind; ``shifted`` evaluates at ``2x - 1``."""
    x = np.asarray(x)
    dt = x.dtype.type
    n = np.broadcast_to(degrees(n), np.broadcast_shapes(x.shape, np.shape(n)))
    x = np.broadcast_to(x, n.shape)
    y = (x + x - dt(1)) if shifted else x
    two_y = y + y
    out = _recur(_FIRST[kind](y).astype(x.dtype), n, lambda k, q, p: _fms(two_y, q, p))
    closed_from = _CLOSED_FROM[kind][shifted]
    inside = (n > closed_from) & (np.abs(y) < 1)
    if np.any(inside):
        with np.errstate(all="ignore"):
            out = np.where(inside, _closed(kind, np.where(inside, y, dt(0)), n), out)
    top, bottom = _ends(kind, n, x.dtype)
    at_top = (x == 1) if shifted else (np.abs(x) == 1) & (x > 0)
    at_bottom = (x == 0) if shifted else (np.abs(x) == 1) & (x < 0)
    out = np.where(at_top, top, np.where(at_bottom, bottom, out))
    return np.where(n < 0, dt(0), out)


def hermite_h(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Physicists' Hermite polynomial ``H_n``."""
    return _hermite(x, n, physicists=True)


def hermite_he(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Probabilists' Hermite polynomial ``He_n``."""
    return _hermite(x, n, physicists=False)


def _hermite(x, n, physicists: bool) -> np.ndarray:
    x = np.asarray(x)
    dt = x.dtype.type
    n = np.broadcast_to(degrees(n), np.broadcast_shapes(x.shape, np.shape(n)))
    x = np.broadcast_to(x, n.shape)
    limit = 128 if x.dtype == np.float32 else 512
    too_high = n > limit
    m = np.where(too_high, 0, n)
    if physicists:
        out = _recur(x + x, m, lambda k, q, p: _fms(x + x, q, dt(2 * k) * p))
    else:
        out = _recur(x.copy(), m, lambda k, q, p: _fms(x, q, dt(k) * p))
    out = np.where(too_high, dt(np.nan), out)
    return np.where(n < 0, dt(0), out)


def laguerre_l(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Laguerre polynomial ``L_n`` (1 at ``x = 0``)."""
    x = np.asarray(x)
    dt = x.dtype.type
    n = np.broadcast_to(degrees(n), np.broadcast_shapes(x.shape, np.shape(n)))
    x = np.broadcast_to(x, n.shape)
    out = _recur(dt(1) - x, n,
                 lambda k, q, p: _fms(dt(2 * k) + (dt(1) - x), q, dt(k) * p) / dt(k + 1))
    out = np.where(x == 0, dt(1), out)
    return np.where(n < 0, dt(0), out)


def legendre_p(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Legendre polynomial ``P_n`` (exact at ``x = +-1``)."""
    x = np.asarray(x)
    dt = x.dtype.type
    n = np.broadcast_to(degrees(n), np.broadcast_shapes(x.shape, np.shape(n)))
    x = np.broadcast_to(x, n.shape)
    out = _recur(x.copy(), n,
                 lambda k, q, p: _fms(dt(2 * k + 1) * x, q, dt(k) * p) / dt(k + 1))
    odd = (n % 2) == 1
    out = np.where(np.abs(x) == 1, np.where((x > 0) | ~odd, dt(1), dt(-1)), out)
    return np.where(n < 0, dt(0), out)
