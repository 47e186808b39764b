"""The reductions of refimpl's ops as :class:`~refimpl.cuda._reduce.Reducer` rules.

Each rule is a few lines of C over the template's names (``a``/``b`` states, ``v``
a value in the accumulation type, ``i`` its reduce index, ``p`` the parameters);
see ``_reduce.py`` for the template. The functions at the bottom allocate outputs on
the input's device and run one reducer; the op definitions (``refimpl/ops/reduction*``)
check arguments exactly as their CPU kernels do and then call these.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda._reduce import Reducer, reduce

_NAN_FIRST = "if (is_nan(a)) return a; if (is_nan(v)) return v; "


def _ext(cmp: str) -> str:
    return f"if (is_nan(a)) return a; if (is_nan(b)) return b; return b {cmp} a ? b : a;"


def _arg(cmp: str) -> str:
    """Combine of (value, index) states: NaN wins, then the better value, then the
    smaller index (torch returns the first occurrence)."""
    return ("if (a.i < 0) return b; if (b.i < 0) return a; "
            "bool an = is_nan(a.v), bn = is_nan(b.v); "
            "if (an || bn) { if (an && bn) return a.i <= b.i ? a : b; return an ? a : b; } "
            "if (a.v == b.v) return a.i <= b.i ? a : b; "
            f"return b.v {cmp} a.v ? b : a;")


_STORE = "out[o] = to_out(a);"
_PAIR = "S b; b.v = v; b.i = i; return r_combine(a, b);"
_PAIR_STATE = "struct { ACC v; long long i; }"
_WELFORD_STATE = "struct { ACC m, m2, n; }"
_WELFORD_INIT = "S s; s.m = 0; s.m2 = 0; s.n = 0; return s;"
_WELFORD_REDUCE = ("a.n += 1; ACC d = v - a.m; a.m += d / a.n; a.m2 += d * (v - a.m); "
                   "return a;")
_WELFORD_COMBINE = ("if (a.n == 0) return b; if (b.n == 0) return a; "
                    "ACC n = a.n + b.n, d = b.m - a.m, f = b.n / n; S r; "
                    "r.m = a.m + d * f; r.m2 = a.m2 + b.m2 + d * d * a.n * f; r.n = n; "
                    "return r;")
_VAR = "double dof = p.n - p.c; RACC var = a.m2 / (RACC)(dof > 0 ? dof : 0); "
# complex Welford: the mean's real and imaginary parts, and the sum of |x - mean|^2
_CWELFORD_STATE = "struct { RACC mr, mi, m2, n; }"
_CWELFORD_INIT = "S s; s.mr = 0; s.mi = 0; s.m2 = 0; s.n = 0; return s;"
_CWELFORD_REDUCE = ("a.n += 1; RACC dr = v.re - a.mr, di = v.im - a.mi; a.mr += dr / a.n; "
                    "a.mi += di / a.n; a.m2 += dr * (v.re - a.mr) + di * (v.im - a.mi); "
                    "return a;")
_CWELFORD_COMBINE = ("if (a.n == 0) return b; if (b.n == 0) return a; "
                     "RACC n = a.n + b.n, f = b.n / n, dr = b.mr - a.mr, di = b.mi - a.mi; "
                     "S r; r.mr = a.mr + dr * f; r.mi = a.mi + di * f; "
                     "r.m2 = a.m2 + b.m2 + (dr * dr + di * di) * a.n * f; r.n = n; return r;")
_CMEAN = "ACC mean; mean.re = a.mr; mean.im = a.mi; "

REDUCERS: dict[str, Reducer] = {r.name: r for r in [
    Reducer("sum", "return ACC_ZERO;", "return a + v;", "return a + b;", _STORE),
    Reducer("nansum", "return ACC_ZERO;", "return is_nan(v) ? a : a + v;", "return a + b;",
            _STORE),
    Reducer("prod", "return ACC_ONE;", "return a * v;", "return a * b;", _STORE),
    Reducer("mean", "return ACC_ZERO;", "return a + v;", "return a + b;",
            "out[o] = to_out(scale(a, p.inv_n));"),
    Reducer("amax", "return LOWEST;", "return r_combine(a, v);", _ext(">"), _STORE),
    Reducer("amin", "return HIGHEST;", "return r_combine(a, v);", _ext("<"), _STORE),
    Reducer("max_dim", "S s; s.v = LOWEST; s.i = -1; return s;", _PAIR, _arg(">"),
            "out[o] = to_out(a.v); out2[o] = a.i;", _PAIR_STATE, uses_index=True),
    Reducer("min_dim", "S s; s.v = HIGHEST; s.i = -1; return s;", _PAIR, _arg("<"),
            "out[o] = to_out(a.v); out2[o] = a.i;", _PAIR_STATE, uses_index=True),
    Reducer("argmax", "S s; s.v = LOWEST; s.i = -1; return s;", _PAIR, _arg(">"),
            "out2[o] = a.i;", _PAIR_STATE, uses_index=True),
    Reducer("argmin", "S s; s.v = HIGHEST; s.i = -1; return s;", _PAIR, _arg("<"),
            "out2[o] = a.i;", _PAIR_STATE, uses_index=True),
    Reducer("all", "return 1;", "return a & nz(v);", "return a & b;", _STORE, "int"),
    Reducer("any", "return 0;", "return a | nz(v);", "return a | b;", _STORE, "int"),
    Reducer("count_nonzero", "return 0;", "return a + nz(v);", "return a + b;", _STORE,
            "long long"),
    Reducer("var", _WELFORD_INIT, _WELFORD_REDUCE, _WELFORD_COMBINE,
            _VAR + "out[o] = to_out(var);", _WELFORD_STATE),
    Reducer("std", _WELFORD_INIT, _WELFORD_REDUCE, _WELFORD_COMBINE,
            _VAR + "out[o] = to_out(r_sqrt(var));", _WELFORD_STATE),
    Reducer("var_mean", _WELFORD_INIT, _WELFORD_REDUCE, _WELFORD_COMBINE,
            _VAR + "out[o] = to_out(var); out2[o] = to_out2(a.m);", _WELFORD_STATE),
    Reducer("std_mean", _WELFORD_INIT, _WELFORD_REDUCE, _WELFORD_COMBINE,
            _VAR + "out[o] = to_out(r_sqrt(var)); out2[o] = to_out2(a.m);", _WELFORD_STATE),
    Reducer("var_complex", _CWELFORD_INIT, _CWELFORD_REDUCE, _CWELFORD_COMBINE,
            _VAR + "out[o] = to_out(var);", _CWELFORD_STATE),
    Reducer("std_complex", _CWELFORD_INIT, _CWELFORD_REDUCE, _CWELFORD_COMBINE,
            _VAR + "out[o] = to_out(r_sqrt(var));", _CWELFORD_STATE),
    Reducer("var_mean_complex", _CWELFORD_INIT, _CWELFORD_REDUCE, _CWELFORD_COMBINE,
            _VAR + _CMEAN + "out[o] = to_out(var); out2[o] = to_out2(mean);", _CWELFORD_STATE),
    Reducer("std_mean_complex", _CWELFORD_INIT, _CWELFORD_REDUCE, _CWELFORD_COMBINE,
            _VAR + _CMEAN + "out[o] = to_out(r_sqrt(var)); out2[o] = to_out2(mean);",
            _CWELFORD_STATE),
    Reducer("norm0", "return 0;", "return a + (ACC)(v != 0);", "return a + b;", _STORE,
            abs=True),
    Reducer("norm1", "return 0;", "return a + v;", "return a + b;", _STORE, abs=True),
    Reducer("norm2", "return 0;", "return a + v * v;", "return a + b;",
            "out[o] = to_out(r_sqrt(a));", abs=True),
    Reducer("norm_inf", "return LOWEST;", "return r_combine(a, v);", _ext(">"), _STORE,
            abs=True),
    Reducer("norm_neg_inf", "return HIGHEST;", "return r_combine(a, v);", _ext("<"), _STORE,
            abs=True),
    Reducer("norm_p", "return 0;", "return a + r_pow(v, p.q);", "return a + b;",
            "out[o] = to_out(r_pow(a, 1.0 / p.q));", abs=True),
    # log-sum-exp as a running (max, sum of exp(x - max)); -inf adds nothing, +inf wins
    Reducer("logsumexp", "S s; s.m = LOWEST; s.s = 0; return s;",
            "S b; b.m = v; b.s = 1; return r_combine(a, b);",
            "if (is_nan(a.m)) return a; if (is_nan(b.m)) return b; "
            "if (b.m == LOWEST) return a; if (a.m == LOWEST) return b; "
            "if (a.m == HIGHEST || b.m == HIGHEST) { a.m = HIGHEST; a.s = 1; return a; } "
            "if (a.m >= b.m) { a.s += b.s * r_exp(b.m - a.m); return a; } "
            "b.s += a.s * r_exp(a.m - b.m); return b;",
            "ACC m = a.m; bool special = is_nan(m) || m == LOWEST || m == HIGHEST; "
            "out[o] = to_out(special ? m : m + r_log(a.s));",
            "struct { ACC m, s; }"),
]}


def _shape(x: Tensor, axes: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(x._shape))
    return tuple(s for i, s in enumerate(x._shape) if i not in axes)


def _empty(x: Tensor, shape: tuple, dtype: D.dtype) -> Tensor:
    return Tensor._empty(shape, dtype, x.device)


def reduction(name: str, x: Tensor, axes: tuple, keepdim: bool, out_dtype: D.dtype, *,
              cast: D.dtype | None = None, correction: float = 0.0, q: float = 0.0) -> Tensor:
    """One output: reducer ``name`` over ``axes`` of ``x`` (values cast to ``cast``
    first when given)."""
    out = _empty(x, _shape(x, axes, keepdim), out_dtype)
    reduce(REDUCERS[name], x, axes, out, cast=cast, correction=correction, q=q)
    return out


def values_indices(name: str, x: Tensor, axes: tuple, keepdim: bool) -> tuple:
    """``(values, indices)`` of ``max_dim``/``min_dim`` over ``axes``."""
    shape = _shape(x, axes, keepdim)
    values, indices = _empty(x, shape, x.dtype), _empty(x, shape, D.int64)
    reduce(REDUCERS[name], x, axes, values, indices)
    return values, indices


def indices(name: str, x: Tensor, axes: tuple, shape: tuple) -> Tensor:
    """The int64 index output of ``argmax``/``argmin`` over ``axes``, shaped ``shape``."""
    out = _empty(x, shape, D.int64)
    reduce(REDUCERS[name], x, axes, None, out)
    return out


def pair(name: str, x: Tensor, axes: tuple, keepdim: bool, dtypes: tuple,
         correction: float) -> tuple:
    """``var_mean``/``std_mean``: two outputs from one Welford pass."""
    shape = _shape(x, axes, keepdim)
    a, b = _empty(x, shape, dtypes[0]), _empty(x, shape, dtypes[1])
    reduce(REDUCERS[name], x, axes, a, b, correction=correction)
    return a, b


def vector_norm(x: Tensor, ord: float, axes: tuple, keepdim: bool, dt: D.dtype) -> Tensor:
    """The ``ord``-norm of ``x`` (cast to ``dt``) over ``axes``, in ``dt``'s real type."""
    if ord == 0:
        name = "norm0"
    elif ord == 1:
        name = "norm1"
    elif ord == 2:
        name = "norm2"
    elif math.isinf(ord):
        name = "norm_inf" if ord > 0 else "norm_neg_inf"
    else:
        name = "norm_p"
    return reduction(name, x, axes, keepdim, dt.to_real(), cast=dt, q=float(ord))
