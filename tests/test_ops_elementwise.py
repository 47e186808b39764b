"""Differential tests of refimpl's elementwise ops against torch (the oracle).

Every case builds the same seeded numpy data in both libraries, calls the op the same
way in both and requires the same outcome: an equal dtype and shape and close values
(tolerance per dtype, NaN equal to NaN), or an exception of the same type with the
same message.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

import refimpl as t
from refimpl.ops import activation

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-10,
        "complex64": 2e-5, "complex128": 1e-10}
ATOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12,
        "complex64": 1e-5, "complex128": 1e-12}
SPECIALS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5])


def data(dtype: str, shape, seed: int, *, nonzero: bool = False, special: bool = True,
         low: float | None = None, high: float | None = None) -> np.ndarray:
    """Seeded values of ``dtype`` (numpy; bfloat16 as ml_dtypes), specials included."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        lo = max(info.min, -20 if low is None else low)
        hi = min(info.max, 20 if high is None else high)
        v = rng.integers(lo, hi + 1, n)
        if nonzero:
            v[v == 0] = 1
        return v.astype(dtype).reshape(shape)
    lo, hi = (-3.0 if low is None else low), (3.0 if high is None else high)
    v = rng.uniform(lo, hi, n)
    if dtype.startswith("complex"):
        v = v + 1j * rng.uniform(lo, hi, n)
    if special and n >= 8:
        v[: len(SPECIALS)] = SPECIALS
        rng.shuffle(v)
    if nonzero:
        v[v == 0] = 1
    npdt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    return v.astype(npdt).reshape(shape)


def both(arr: np.ndarray, dtype: str):
    """The array as a (refimpl, torch) pair of tensors with identical values."""
    if dtype == "bfloat16":  # the same bits in both (NaN payloads and signs included)
        o = torch.from_numpy(np.array(arr).view(np.int16)).view(torch.bfloat16)
        return t.from_numpy(np.array(arr)), o
    return t.from_numpy(np.array(arr)), torch.from_numpy(np.array(arr))


def to_numpy(x):
    """A result of either library as numpy (bfloat16 widened to float32)."""
    if isinstance(x, torch.Tensor):
        x = x.resolve_conj()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.detach().numpy()
    arr = np.array(x._np)
    return arr.astype(np.float32) if arr.dtype == ml_dtypes.bfloat16 else arr


def same_error(ref_exc: BaseException, torch_exc: BaseException) -> None:
    assert type(ref_exc).__name__ == type(torch_exc).__name__, (ref_exc, torch_exc)
    expect, got = str(torch_exc), str(ref_exc)
    if isinstance(torch_exc, TypeError):  # torch's argument-parser text: first line only
        expect, got = expect.splitlines()[0], got.splitlines()[0]
    assert got == expect


def check_same(ref_fn, torch_fn) -> None:
    """Run both; require equal outcomes (value, dtype, shape) or equal exceptions."""
    try:
        expected = torch_fn()
    except Exception as e:  # noqa: BLE001 - any torch error must be reproduced
        with pytest.raises(Exception) as info:
            ref_fn()
        same_error(info.value, e)
        return
    if isinstance(expected, torch.Tensor) and expected.dtype == torch.complex32:
        with pytest.raises(NotImplementedError, match="complex32"):  # refimpl has no complex32
            ref_fn()
        return
    got = ref_fn()
    compare(got, expected)


def compare(got, expected) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            compare(g, e)
        return
    if not isinstance(expected, torch.Tensor):
        assert got == expected or (got != got and expected != expected), (got, expected)
        return
    assert str(got.dtype) == str(expected.dtype)
    assert tuple(got.shape) == tuple(expected.shape)
    g, e = to_numpy(got), to_numpy(expected)
    name = str(expected.dtype).removeprefix("torch.")
    if name.startswith("complex"):
        for part in (np.real, np.imag):
            np.testing.assert_allclose(part(g), part(e), rtol=RTOL[name], atol=ATOL[name],
                                       equal_nan=True)
    elif name in RTOL:
        np.testing.assert_allclose(g, e, rtol=RTOL[name], atol=ATOL[name], equal_nan=True)
    else:
        np.testing.assert_array_equal(g, e)


def lib_fn(lib, name: str):
    """``lib.<name>``; activations come from torch.nn.functional / refimpl.ops.activation."""
    if name in ("gelu", "silu", "softplus", "hardtanh"):
        return getattr(activation if lib is t else torch.nn.functional, name)
    return getattr(lib, name)


# -- unary ops ------------------------------------------------------------------------------

UNARY = [
    "neg", "abs", "sign", "sgn", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1",
    "sqrt", "rsqrt", "square", "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "logit", "relu", "erf",
    "erfc", "erfinv", "floor", "ceil", "round", "trunc", "frac", "angle", "nan_to_num",
    "deg2rad", "rad2deg", "signbit", "positive", "lgamma", "digamma", "isnan", "isinf",
    "isfinite", "isposinf", "isneginf", "isreal", "logical_not", "bitwise_not", "conj",
    "conj_physical", "gelu", "silu", "softplus", "hardtanh", "fix", "negative", "absolute",
    "arcsin", "arctanh",
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    arr = data(dtype, (3, 5), seed=zlib.crc32(f"{name}-{dtype}".encode()), low=-2, high=2)
    r, o = both(arr, dtype)
    check_same(lambda: lib_fn(t, name)(r), lambda: lib_fn(torch, name)(o))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "abs", "neg", "sqrt", "floor", "sigmoid", "isnan"])
def test_unary_zero_dim_and_empty(name, dtype):
    for shape in [(), (0,), (2, 0, 3)]:
        arr = data(dtype, shape, seed=1)
        r, o = both(arr, dtype)
        check_same(lambda: getattr(t, name)(r), lambda: getattr(torch, name)(o))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "sin", "abs", "neg", "floor", "sqrt", "sigmoid",
                                  "relu", "round", "frac", "nan_to_num", "logit", "sgn"])
def test_unary_inplace(name, dtype):
    arr = data(dtype, (2, 3), seed=7)
    r, o = both(arr, dtype)
    check_same(lambda: getattr(r, name + "_")(), lambda: getattr(o, name + "_")())
    compare(r, o)


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_unary_with_arguments(dtype):
    arr = data(dtype, (4, 5), seed=3, low=-1.5, high=1.5)
    r, o = both(arr, dtype)
    cases = [
        ("round", (), {"decimals": 1}), ("round", (), {"decimals": -1}),
        ("round", (), {"decimals": 2}), ("nan_to_num", (), {"nan": 1.5, "posinf": 2.0}),
        ("nan_to_num", (0.0, None, -7.0), {}), ("logit", (0.1,), {}), ("logit", (0.6,), {}),
        ("polygamma", (1,), {}), ("polygamma", (2,), {}), ("polygamma", (-1,), {}),
        ("threshold", (0.5, 7), {}), ("threshold", (0, -1), {}),
    ]
    for name, args, kwargs in cases:
        if name == "polygamma":  # torch's values at the poles are rounding noise: avoid them
            rp, op = both(data(dtype, (4, 5), seed=4, low=0.05, high=6, special=False), dtype)
            check_same(lambda: t.polygamma(args[0], rp), lambda: torch.polygamma(args[0], op))
            check_same(lambda: rp.polygamma(args[0]), lambda: op.polygamma(args[0]))
            continue
        check_same(lambda: getattr(t, name)(r, *args, **kwargs),
                   lambda: getattr(torch, name)(o, *args, **kwargs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_arguments(dtype):
    arr = data(dtype, (4, 5), seed=5)
    r, o = both(arr, dtype)
    f = torch.nn.functional
    cases = [
        ("gelu", (), {"approximate": "tanh"}), ("gelu", (), {"approximate": "foo"}),
        ("softplus", (), {"beta": 2, "threshold": 1}), ("hardtanh", (-0.5, 2.0), {}),
        ("hardtanh", (0, 3), {}),
    ]
    for name, args, kwargs in cases:
        check_same(lambda: getattr(activation, name)(r, *args, **kwargs),
                   lambda: getattr(f, name)(o, *args, **kwargs))


# -- binary ops -----------------------------------------------------------------------------

BINARY = [
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
    "float_power", "atan2", "hypot", "maximum", "minimum", "fmax", "fmin", "copysign", "xlogy",
    "logaddexp", "logaddexp2", "nextafter", "heaviside", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "rsub", "isclose", "greater_equal",
]
DIVIDING = {"div", "true_divide", "floor_divide", "remainder", "fmod"}


def operands(name, da, db, shape_a=(3, 4), shape_b=(3, 4), seed=0):
    a = data(da, shape_a, seed=seed, low=-4, high=4)
    low = 0 if name.startswith("bitwise_") and "shift" in name else -4
    b = data(db, shape_b, seed=seed + 1, low=low, high=9 if "shift" in name else 4,
             nonzero=name in DIVIDING)
    return both(a, da), both(b, db)


@pytest.mark.parametrize("db", DTYPES)
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "remainder", "eq", "lt",
                                  "maximum", "bitwise_and", "atan2", "floor_divide"])
def test_binary_dtype_pairs(name, da, db):
    (ra, oa), (rb, ob) = operands(name, da, db)
    check_same(lambda: getattr(t, name)(ra, rb), lambda: getattr(torch, name)(oa, ob))


SHAPES = [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (3, 4)), ((3, 4), ()), ((2, 3), (3, 2)),
          ((0, 4), (4,)), ((), ())]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_shapes(name, dtype, shapes):
    (ra, oa), (rb, ob) = operands(name, dtype, dtype, *shapes, seed=11)
    check_same(lambda: getattr(t, name)(ra, rb), lambda: getattr(torch, name)(oa, ob))


SCALARS = [3, -2, 0, 2.5, -0.5, True, False, 1 + 2j, 300]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_python_scalar(name, dtype, scalar):
    shape = (2, 3) if dtype != "float64" else ()
    (ra, oa), _ = operands(name, dtype, dtype, shape, shape, seed=13)
    check_same(lambda: getattr(t, name)(ra, scalar), lambda: getattr(torch, name)(oa, scalar))


@pytest.mark.parametrize("scalar", [2, -3, 0.5, True, 1j], ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["pow", "xlogy", "bitwise_left_shift", "rsub"])
def test_binary_scalar_first(name, dtype, scalar):
    (ra, oa), _ = operands(name, dtype, dtype, (2, 3), (2, 3), seed=17)
    if name == "rsub":  # rsub(tensor, scalar): scalar - tensor
        check_same(lambda: t.rsub(ra, scalar, alpha=2 if dtype != "bool" else 1),
                   lambda: torch.rsub(oa, scalar, alpha=2 if dtype != "bool" else 1))
        return
    check_same(lambda: getattr(t, name)(scalar, ra), lambda: getattr(torch, name)(scalar, oa))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
                                "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__",
                                "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
                                "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
                                "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"])
def test_python_operators(op, dtype):
    (ra, oa), (rb, ob) = operands("div", dtype, dtype, (2, 3), (2, 3), seed=19)
    if not op.startswith("__r") or op == "__rshift__":  # reflected: Python passes scalars
        check_same(lambda: getattr(ra, op)(rb), lambda: getattr(oa, op)(ob))
    for scalar in (2, 2.5):
        check_same(lambda: getattr(ra, op)(scalar), lambda: getattr(oa, op)(scalar))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "int64", "float16", "float32",
                                   "float64", "complex64"])
@pytest.mark.parametrize("kwargs", [{"alpha": 2}, {"alpha": 0.5}, {"alpha": True},
                                    {"alpha": 1j}, {"alpha": 300}, {"alpha": -1}], ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "rsub"])
def test_alpha(name, kwargs, dtype):
    (ra, oa), (rb, ob) = operands(name, dtype, dtype, (2, 3), (3,), seed=23)
    check_same(lambda: getattr(t, name)(ra, rb, **kwargs),
               lambda: getattr(torch, name)(oa, ob, **kwargs))


@pytest.mark.parametrize("mode", [None, "trunc", "floor", "round"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_div_rounding_modes(mode, dtype):
    (ra, oa), (rb, ob) = operands("div", dtype, dtype, (3, 4), (4,), seed=29)
    check_same(lambda: t.div(ra, rb, rounding_mode=mode),
               lambda: torch.div(oa, ob, rounding_mode=mode))
    check_same(lambda: t.div(ra, -3, rounding_mode=mode),
               lambda: torch.div(oa, -3, rounding_mode=mode))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float32"])
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_integer_division_by_zero(name, dtype):
    a, z = data(dtype, (4,), seed=1), np.zeros(4, dtype)
    (ra, oa), (rz, oz) = both(a, dtype), both(z, dtype)
    check_same(lambda: getattr(t, name)(ra, rz), lambda: getattr(torch, name)(oa, oz))
    check_same(lambda: getattr(t, name)(ra, 0), lambda: getattr(torch, name)(oa, 0))
    check_same(lambda: t.div(ra, rz, rounding_mode="trunc"),
               lambda: torch.div(oa, oz, rounding_mode="trunc"))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_integer_overflow_wraps(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max // 2 + 1], dtype)
    (ra, oa) = both(a, dtype)
    for name, other in [("add", 1), ("sub", 1), ("mul", 3), ("pow", 3), ("add", 2**40),
                        ("mul", -1), ("neg", None), ("abs", None)]:
        args = () if other is None else (other,)
        check_same(lambda: getattr(t, name)(ra, *args), lambda: getattr(torch, name)(oa, *args))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "float32", "float64"])
def test_pow_special_exponents(dtype):
    base = data(dtype, (4, 5), seed=31)
    (rb, ob) = both(base, dtype)
    for e in [0, 1, 2, 3, 0.5, -0.5, -1, -2, 1.5, -3, True, False, 2j]:
        check_same(lambda: t.pow(rb, e), lambda: torch.pow(ob, e))
    ints = np.array([1, -1, 2, 0, -2, 3], "int64")
    exps = np.array([-1, -1, -1, -3, -2, 0], "int64")
    (ri, oi), (re, oe) = both(ints, "int64"), both(exps, "int64")
    check_same(lambda: t.pow(ri, re), lambda: torch.pow(oi, oe))
    for b in [1, 2, -2, 0, 0.0, 1.5, True]:
        check_same(lambda: t.pow(b, re), lambda: torch.pow(b, oe))


# -- ternary and argument-taking ops -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp(dtype):
    arr = data(dtype, (3, 4), seed=37)
    r, o = both(arr, dtype)
    lo, hi = data(dtype, (4,), seed=38), data(dtype, (3, 1), seed=39)
    (rl, ol), (rh, oh) = both(lo, dtype), both(hi, dtype)
    for args, kwargs in [((-1, 1), {}), ((0.5,), {}), ((None, 2), {}), ((), {}),
                         ((), {"min": -1.5}), ((2, -2), {}), ((float("nan"),), {}),
                         ((1000,), {}), ((True, None), {}), ((1j,), {}), ((-1, 1.5), {})]:
        check_same(lambda: t.clamp(r, *args, **kwargs), lambda: torch.clamp(o, *args, **kwargs))
    for args in [(rl, rh), (rl,), (None, rh)]:
        oargs = tuple({id(rl): ol, id(rh): oh}.get(id(a)) for a in args)
        check_same(lambda: t.clamp(r, *args), lambda: torch.clamp(o, *oargs))
    check_same(lambda: t.clamp(r, rl, 1.0), lambda: torch.clamp(o, ol, 1.0))
    check_same(lambda: t.clamp_min(r, 0), lambda: torch.clamp_min(o, 0))
    check_same(lambda: t.clamp_max(r, rl), lambda: torch.clamp_max(o, ol))
    check_same(lambda: t.clip(r, -1, 1), lambda: torch.clip(o, -1, 1))
    check_same(lambda: r.clone().clamp_(0.5, 1), lambda: o.clone().clamp_(0.5, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_where(dtype):
    cond = data("bool", (3, 4), seed=41)
    x, y = data(dtype, (3, 4), seed=42), data(dtype, (4,), seed=43)
    (rc, oc), (rx, ox), (ry, oy) = both(cond, "bool"), both(x, dtype), both(y, dtype)
    check_same(lambda: t.where(rc, rx, ry), lambda: torch.where(oc, ox, oy))
    check_same(lambda: t.where(rc, rx, 0.5), lambda: torch.where(oc, ox, 0.5))
    check_same(lambda: t.where(rc, 2, ry), lambda: torch.where(oc, 2, oy))
    check_same(lambda: t.where(rc, 1, 2.5), lambda: torch.where(oc, 1, 2.5))
    check_same(lambda: t.where(rx, rx, ry), lambda: torch.where(ox, ox, oy))
    check_same(lambda: rx.where(rc, ry), lambda: ox.where(oc, oy))
    check_same(lambda: t.where(rc[:2], rx, ry), lambda: torch.where(oc[:2], ox, oy))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lerp_addcmul_addcdiv(dtype):
    a, b, w = (data(dtype, s, seed=i) for i, s in enumerate([(3, 4), (4,), (3, 1)], 50))
    (ra, oa), (rb, ob), (rw, ow) = both(a, dtype), both(b, dtype), both(w, dtype)
    for weight in [0.3, 0.7, 2, 1j]:
        check_same(lambda: t.lerp(ra, rb, weight), lambda: torch.lerp(oa, ob, weight))
    check_same(lambda: t.lerp(ra, rb, rw), lambda: torch.lerp(oa, ob, ow))
    for value in [1, 2, 0.5, 300, 1j]:
        check_same(lambda: t.addcmul(ra, rb, rw, value=value),
                   lambda: torch.addcmul(oa, ob, ow, value=value))
        check_same(lambda: t.addcdiv(ra, rb, rw, value=value),
                   lambda: torch.addcdiv(oa, ob, ow, value=value))
    rf, of = both(data("float64", (4,), seed=9), "float64")
    check_same(lambda: t.lerp(ra, rf, 0.5), lambda: torch.lerp(oa, of, 0.5))
    check_same(lambda: t.addcmul(ra, rf, rw), lambda: torch.addcmul(oa, of, ow))


@pytest.mark.parametrize("dtype", DTYPES)
def test_isclose_equal(dtype):
    a = data(dtype, (3, 4), seed=61)
    b = a.copy()
    b.flat[::3] = data(dtype, (4,), seed=62)
    (ra, oa), (rb, ob) = both(a, dtype), both(b, dtype)
    for kwargs in [{}, {"equal_nan": True}, {"rtol": 0.5}, {"atol": 2}, {"rtol": -1}]:
        check_same(lambda: t.isclose(ra, rb, **kwargs), lambda: torch.isclose(oa, ob, **kwargs))
        check_same(lambda: t.allclose(ra, rb, **kwargs),
                   lambda: torch.allclose(oa, ob, **kwargs))
    check_same(lambda: t.equal(ra, rb), lambda: torch.equal(oa, ob))
    check_same(lambda: t.equal(ra, ra.clone()), lambda: torch.equal(oa, oa.clone()))
    check_same(lambda: t.equal(ra, ra[:1]), lambda: torch.equal(oa, oa[:1]))
    rf, of = both(data("float32", (3, 4), seed=1), "float32")
    check_same(lambda: t.isclose(ra, rf), lambda: torch.isclose(oa, of))


# -- in-place and out= --------------------------------------------------------------------------


@pytest.mark.parametrize("other_dtype", ["bool", "int64", "float32", "float64", "complex64"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "complex128"])
@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_", "pow_", "remainder_",
                                  "eq_", "lt_", "clamp_", "bitwise_or_", "atan2_", "copysign_"])
def test_inplace_casting(name, dtype, other_dtype):
    (ra, oa), (rb, ob) = operands(name, dtype, other_dtype, (2, 3), (3,), seed=71)
    if name == "clamp_":
        check_same(lambda: ra.clamp_(rb), lambda: oa.clamp_(ob))
    else:
        check_same(lambda: getattr(ra, name)(rb), lambda: getattr(oa, name)(ob))
    compare(ra, oa)
    (ra, oa), (rb, ob) = operands(name, dtype, other_dtype, (3,), (2, 3), seed=71)
    check_same(lambda: getattr(ra, name)(rb), lambda: getattr(oa, name)(ob))


@pytest.mark.parametrize("out_dtype", ["bool", "int64", "float32", "float64", "complex64"])
@pytest.mark.parametrize("name", ["add", "div", "exp", "eq", "abs", "floor_divide", "logical_not",
                                  "maximum", "sqrt", "sign"])
def test_out(name, out_dtype):
    unary = name in ("exp", "abs", "logical_not", "sqrt", "sign")
    (ra, oa), (rb, ob) = operands(name, "int32", "float32", (2, 3), (2, 3), seed=73)
    ro, oo = both(np.zeros(6, out_dtype).reshape(2, 3), out_dtype)
    args_r, args_o = ((ra,), (oa,)) if unary else ((ra, rb), (oa, ob))
    check_same(lambda: getattr(t, name)(*args_r, out=ro),
               lambda: getattr(torch, name)(*args_o, out=oo))
    compare(ro, oo)


def test_out_returns_out_and_inplace_returns_self():
    a = t.ones(3)
    out = t.zeros(3)
    assert t.add(a, a, out=out) is out
    assert a.mul_(2) is a
    assert t.positive(a) is a
    assert t.conj(a) is a
    assert a._version == 1


# -- misc semantics -------------------------------------------------------------------------------


def test_errors_for_bool_and_complex():
    rb, ob = both(np.array([True, False]), "bool")
    for fn in [lambda lib, x: x - x, lambda lib, x: -x, lambda lib, x: x - 1,
               lambda lib, x: 1 - x, lambda lib, x: +x, lambda lib, x: lib.positive(x)]:
        check_same(lambda: fn(t, rb), lambda: fn(torch, ob))
    rc, oc = both(np.array([1 + 1j]), "complex64")
    for fn in [lambda lib, x: x < x, lambda lib, x: lib.clamp(x, 0), lambda lib, x: lib.sign(x),
               lambda lib, x: lib.maximum(x, x), lambda lib, x: x.floor(), lambda lib, x: x.relu()]:
        check_same(lambda: fn(t, rc), lambda: fn(torch, oc))


def test_type_errors_for_scalar_other():
    r, o = both(np.array([1.0, 2.0], "float32"), "float32")
    for name in ["maximum", "atan2", "hypot", "logaddexp", "logical_and", "isclose"]:
        check_same(lambda: getattr(t, name)(r, 2), lambda: getattr(torch, name)(o, 2))
    check_same(lambda: t.clamp(r, r, 1.0), lambda: torch.clamp(o, o, 1.0))


def test_default_dtype_float64_promotion():
    (ri, oi) = both(np.array([1, 2, 3]), "int64")
    t.set_default_dtype(t.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for fn in [lambda lib, x: x / 2, lambda lib, x: lib.exp(x), lambda lib, x: x * 1.5,
                   lambda lib, x: x + 1j, lambda lib, x: lib.sigmoid(x)]:
            check_same(lambda: fn(t, ri), lambda: fn(torch, oi))
    finally:
        t.set_default_dtype(t.float32)
        torch.set_default_dtype(torch.float32)


def test_noncontiguous_inputs():
    a = data("float32", (4, 6), seed=81)
    (ra, oa) = both(a, "float32")
    check_same(lambda: ra.t() + ra.t(), lambda: oa.t() + oa.t())
    check_same(lambda: ra[:, ::2].exp(), lambda: oa[:, ::2].exp())
    check_same(lambda: ra.t() * ra[:, :4].t()[0], lambda: oa.t() * oa[:, :4].t()[0])


def test_broadcast_error_messages():
    r1, o1 = both(np.ones((3,), "float32"), "float32")
    r2, o2 = both(np.ones((2, 2), "float32"), "float32")
    for fn in [lambda lib, a, b: a + b, lambda lib, a, b: lib.where(a > 0, a, b),
               lambda lib, a, b: lib.lerp(a, b, 0.5), lambda lib, a, b: lib.addcmul(a, a, b),
               lambda lib, a, b: a.add_(b), lambda lib, a, b: b.mul_(a[:2])]:
        check_same(lambda: fn(t, r1, r2), lambda: fn(torch, o1, o2))
