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
pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

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


class Pair(tuple):
    """One operand on both sides: (refimpl tensor, torch tensor)."""


def both(arr: np.ndarray, dtype: str) -> Pair:
    """The array as a (refimpl, torch) pair of tensors with identical values."""
    if dtype == "bfloat16":  # the same bits in both (NaN payloads and signs included)
        o = torch.from_numpy(np.array(arr).view(np.int16)).view(torch.bfloat16)
        return Pair((t.from_numpy(np.array(arr)), o))
    return Pair((t.from_numpy(np.array(arr)), torch.from_numpy(np.array(arr))))


def same(fn, *args, tol: str | None = None, **kwargs) -> None:
    """``fn(lib, *args, **kwargs)`` on refimpl and on torch: the same outcome.

    ``fn`` is a function of the library, or a name: ``"exp"`` is ``lib.exp``, ``".exp"``
    the method of the first argument. Pair arguments give each side its own tensor.
    ``tol`` names the dtype whose tolerance applies (the computing dtype, when a result
    is widened into a wider ``out=``).
    """

    def side(i: int, lib):
        a = [x[i] if isinstance(x, Pair) else x for x in args]
        kw = {k: v[i] if isinstance(v, Pair) else v for k, v in kwargs.items()}
        if callable(fn):
            return fn(lib, *a, **kw)
        if fn.startswith("."):
            return getattr(a[0], fn[1:])(*a[1:], **kw)
        return lib_fn(lib, fn)(*a, **kw)

    check_same(lambda: side(0, t), lambda: side(1, torch), tol)


def to_numpy(x):
    """A result of either library as numpy (bfloat16 widened to float32)."""
    if isinstance(x, torch.Tensor):
        x = x.resolve_conj()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.detach().numpy()
    arr = np.array(x.resolve_conj().resolve_neg()._np)
    return arr.astype(np.float32) if arr.dtype == ml_dtypes.bfloat16 else arr


def same_error(ref_exc: BaseException, torch_exc: BaseException) -> None:
    assert type(ref_exc).__name__ == type(torch_exc).__name__, (ref_exc, torch_exc)
    expect, got = str(torch_exc), str(ref_exc)
    if isinstance(torch_exc, TypeError):  # torch's argument-parser text: first line only
        expect, got = expect.splitlines()[0], got.splitlines()[0]
    assert got == expect


def check_same(ref_fn, torch_fn, tol: str | None = None) -> None:
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
    compare(got, expected, tol)


def compare(got, expected, tol: str | None = None) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            compare(g, e, tol)
        return
    if not isinstance(expected, torch.Tensor):
        both_nan = isinstance(got, float) and np.isnan(got) and np.isnan(expected)
        assert got == expected or both_nan, (got, expected)
        return
    assert str(got.dtype) == str(expected.dtype)
    assert tuple(got.shape) == tuple(expected.shape)
    g, e = to_numpy(got), to_numpy(expected)
    name = tol or str(expected.dtype).removeprefix("torch.")
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
    if name == "gelu" or (name == "sgn" and dtype.startswith("complex")):
        # torch's result at +-inf depends on whether the element falls in a vectorised
        # chunk or the scalar tail of its CPU loop (gelu(inf) is inf or nan); refimpl
        # follows the scalar formulas, so the comparison leaves infinities out
        arr[np.isinf(arr)] = 0
    same(name, both(arr, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "abs", "neg", "sqrt", "floor", "sigmoid", "isnan"])
def test_unary_zero_dim_and_empty(name, dtype):
    for shape in [(), (0,), (2, 0, 3)]:
        same(name, both(data(dtype, shape, seed=1), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["exp", "sin", "abs", "neg", "floor", "sqrt", "sigmoid",
                                  "relu", "round", "frac", "nan_to_num", "logit", "sgn"])
def test_unary_inplace(name, dtype):
    x = both(data(dtype, (2, 3), seed=7), dtype)
    same("." + name + "_", x)
    compare(*x)


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_unary_with_arguments(dtype):
    x = both(data(dtype, (4, 5), seed=3, low=-1.5, high=1.5), dtype)
    for name, args, kwargs in [
        ("round", (), {"decimals": 1}), ("round", (), {"decimals": -1}),
        ("round", (), {"decimals": 2}), ("nan_to_num", (), {"nan": 1.5, "posinf": 2.0}),
        ("nan_to_num", (0.0, None, -7.0), {}), ("logit", (0.1,), {}), ("logit", (0.6,), {}),
        ("threshold", (0.5, 7), {}), ("threshold", (0, -1), {}),
    ]:
        same(name, x, *args, **kwargs)
    # torch's polygamma values at the poles are rounding noise: stay away from them
    p = both(data(dtype, (4, 5), seed=4, low=0.05, high=6, special=False), dtype)
    for n in (1, 2, -1):
        same(lambda lib, v, n: lib.polygamma(n, v), p, n)
        same(".polygamma", p, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_arguments(dtype):
    x = both(data(dtype, (4, 5), seed=5), dtype)
    for name, args, kwargs in [
        ("gelu", (), {"approximate": "tanh"}), ("gelu", (), {"approximate": "foo"}),
        ("softplus", (), {"beta": 2, "threshold": 1}), ("hardtanh", (-0.5, 2.0), {}),
        ("hardtanh", (0, 3), {}),
    ]:
        same(name, x, *args, **kwargs)


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
    """Two operands for ``name`` (integer divisors without zeros, shifts non-negative)."""
    a = data(da, shape_a, seed=seed, low=-4, high=4)
    shift = "shift" in name
    b = data(db, shape_b, seed=seed + 1, low=0 if shift else -4, high=9 if shift else 4,
             nonzero=name in DIVIDING)
    return both(a, da), both(b, db)


@pytest.mark.parametrize("db", DTYPES)
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "remainder", "eq", "lt",
                                  "maximum", "bitwise_and", "atan2", "floor_divide"])
def test_binary_dtype_pairs(name, da, db):
    same(name, *operands(name, da, db))


SHAPES = [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (3, 4)), ((3, 4), ()), ((2, 3), (3, 2)),
          ((0, 4), (4,)), ((), ())]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_shapes(name, dtype, shapes):
    same(name, *operands(name, dtype, dtype, *shapes, seed=11))


SCALARS = [3, -2, 0, 2.5, -0.5, True, False, 1 + 2j, 300]


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_python_scalar(name, dtype, scalar):
    shape = (2, 3) if dtype != "float64" else ()
    x, _ = operands(name, dtype, dtype, shape, shape, seed=13)
    same(name, x, scalar)


@pytest.mark.parametrize("scalar", [2, -3, 0.5, True, 1j], ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["pow", "xlogy", "bitwise_left_shift", "rsub"])
def test_binary_scalar_first(name, dtype, scalar):
    x, _ = operands(name, dtype, dtype, (2, 3), (2, 3), seed=17)
    if name == "rsub":  # rsub(tensor, scalar, alpha) is scalar - alpha * tensor
        same("rsub", x, scalar, alpha=2 if dtype != "bool" else 1)
    else:
        same(name, scalar, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
                                "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__",
                                "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
                                "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
                                "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"])
def test_python_operators(op, dtype):
    a, b = operands("div", dtype, dtype, (2, 3), (2, 3), seed=19)
    if not op.startswith("__r") or op == "__rshift__":  # reflected: Python passes scalars
        same("." + op, a, b)
    for scalar in (2, 2.5):
        same("." + op, a, scalar)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int16", "int64", "float16", "float32",
                                   "float64", "complex64"])
@pytest.mark.parametrize("alpha", [2, 0.5, True, 1j, 300, -1], ids=repr)
@pytest.mark.parametrize("name", ["add", "sub", "rsub"])
def test_alpha(name, alpha, dtype):
    same(name, *operands(name, dtype, dtype, (2, 3), (3,), seed=23), alpha=alpha)


@pytest.mark.parametrize("mode", [None, "trunc", "floor", "round"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_div_rounding_modes(mode, dtype):
    a, b = operands("div", dtype, dtype, (3, 4), (4,), seed=29)
    same("div", a, b, rounding_mode=mode)
    same("div", a, -3, rounding_mode=mode)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float32"])
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_integer_division_by_zero(name, dtype):
    a, z = both(data(dtype, (4,), seed=1), dtype), both(np.zeros(4, dtype), dtype)
    same(name, a, z)
    same(name, a, 0)
    same("div", a, z, rounding_mode="trunc")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_integer_overflow_wraps(dtype):
    info = np.iinfo(dtype)
    a = both(np.array([info.max, info.min, info.max // 2 + 1], dtype), dtype)
    for name, other in [("add", 1), ("sub", 1), ("mul", 3), ("pow", 3), ("add", 2**40),
                        ("mul", -1)]:
        same(name, a, other)
    same("neg", a)
    same("abs", a)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "float32", "float64"])
def test_pow_special_exponents(dtype):
    base = both(data(dtype, (4, 5), seed=31), dtype)
    for e in [0, 1, 2, 3, 0.5, -0.5, -1, -2, 1.5, -3, True, False, 2j]:
        same("pow", base, e)
    ints = both(np.array([1, -1, 2, 0, -2, 3], "int64"), "int64")
    exps = both(np.array([-1, -1, -1, -3, -2, 0], "int64"), "int64")
    same("pow", ints, exps)
    for b in [1, 2, -2, 0, 0.0, 1.5, True]:
        same("pow", b, exps)


# -- ternary and argument-taking ops -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamp(dtype):
    x = both(data(dtype, (3, 4), seed=37), dtype)
    lo, hi = both(data(dtype, (4,), seed=38), dtype), both(data(dtype, (3, 1), seed=39), dtype)
    for args, kwargs in [((-1, 1), {}), ((0.5,), {}), ((None, 2), {}), ((), {}),
                         ((), {"min": -1.5}), ((2, -2), {}), ((float("nan"),), {}),
                         ((1000,), {}), ((True, None), {}), ((1j,), {}), ((-1, 1.5), {})]:
        same("clamp", x, *args, **kwargs)
        same(lambda lib, v, *a, **k: v.clone().clamp_(*a, **k), x, *args, **kwargs)
    for args in [(lo, hi), (lo,), (None, hi), (lo, 1.0)]:
        same("clamp", x, *args)
    for bound in [0, 1j, 1.5, lo]:
        same("clamp_min", x, bound)
        same("clamp_max", x, bound)
        same(lambda lib, v, b: v.clone().clamp_min_(b), x, bound)
    same("clip", x, -1, 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_where(dtype):
    c = both(data("bool", (3, 4), seed=41), "bool")
    x, y = both(data(dtype, (3, 4), seed=42), dtype), both(data(dtype, (4,), seed=43), dtype)
    same("where", c, x, y)
    same("where", c, x, 0.5)
    same("where", c, 2, y)
    same("where", c, 1, 2.5)
    same("where", x, x, y)
    same(".where", x, c, y)
    same(lambda lib, c, x, y: lib.where(c[:2], x, y), c, x, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lerp_addcmul_addcdiv(dtype):
    a, b, w = (both(data(dtype, s, seed=i), dtype)
               for i, s in enumerate([(3, 4), (4,), (3, 1)], 50))
    for weight in [0.3, 0.7, 2, 1j, w]:
        same("lerp", a, b, weight)
    for value in [1, 2, 0.5, 300, 1j]:
        same("addcmul", a, b, w, value=value)
        same("addcdiv", a, b, w, value=value)
    f = both(data("float64", (4,), seed=9), "float64")
    same("lerp", a, f, 0.5)
    same("addcmul", a, f, w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_isclose_equal(dtype):
    a = data(dtype, (3, 4), seed=61)
    b = a.copy()
    b.flat[::3] = data(dtype, (4,), seed=62)
    pa, pb = both(a, dtype), both(b, dtype)
    for kwargs in [{}, {"equal_nan": True}, {"rtol": 0.5}, {"atol": 2}, {"rtol": -1}]:
        same("isclose", pa, pb, **kwargs)
        same("allclose", pa, pb, **kwargs)
    same("equal", pa, pb)
    same(lambda lib, x: lib.equal(x, x.clone()), pa)
    same(lambda lib, x: lib.equal(x, x[:1]), pa)
    same("isclose", pa, both(data("float32", (3, 4), seed=1), "float32"))


# -- in-place and out= --------------------------------------------------------------------------


@pytest.mark.parametrize("other_dtype", ["bool", "int64", "float32", "float64", "complex64"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "complex128"])
@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_", "pow_", "remainder_",
                                  "eq_", "lt_", "clamp_", "bitwise_or_", "atan2_", "copysign_"])
def test_inplace_casting(name, dtype, other_dtype):
    a, b = operands(name, dtype, other_dtype, (2, 3), (3,), seed=71)
    same("." + name, a, b)
    compare(*a)
    a, b = operands(name, dtype, other_dtype, (3,), (2, 3), seed=71)
    same("." + name, a, b)


@pytest.mark.parametrize("out_dtype", ["bool", "int64", "float32", "float64", "complex64"])
@pytest.mark.parametrize("name", ["add", "div", "exp", "eq", "abs", "floor_divide", "logical_not",
                                  "maximum", "sqrt", "sign", "floor", "nan_to_num", "signbit"])
def test_out(name, out_dtype):
    a, b = operands(name, "int32", "float32", (2, 3), (2, 3), seed=73)
    out = both(np.zeros((2, 3), out_dtype), out_dtype)
    tol = "complex64" if out_dtype.startswith("complex") else "float32"
    if name in ("exp", "abs", "logical_not", "sqrt", "sign", "floor", "nan_to_num", "signbit"):
        same(name, a, out=out, tol=tol)
        same(name, b, out=out, tol=tol)
    else:
        same(name, a, b, out=out, tol=tol)
    compare(*out, tol)


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
    b = both(np.array([True, False]), "bool")
    for fn in [lambda lib, x: x - x, lambda lib, x: -x, lambda lib, x: x - 1,
               lambda lib, x: 1 - x, lambda lib, x: +x, lambda lib, x: lib.positive(x)]:
        same(fn, b)
    c = both(np.array([1 + 1j]), "complex64")
    for fn in [lambda lib, x: x < 1, lambda lib, x: lib.clamp(x, 0), lambda lib, x: lib.sign(x),
               lambda lib, x: lib.maximum(x, x), lambda lib, x: x.floor(), lambda lib, x: x.relu(),
               lambda lib, x: x.abs_()]:
        same(fn, c)


def test_type_errors_for_scalar_other():
    x = both(np.array([1.0, 2.0], "float32"), "float32")
    for name in ["maximum", "atan2", "hypot", "logaddexp", "logical_and", "isclose", "heaviside"]:
        same(name, x, 2)
    same("clamp", x, x, 1.0)


def test_default_dtype_float64_promotion():
    i = both(np.array([1, 2, 3]), "int64")
    t.set_default_dtype(t.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for fn in [lambda lib, x: x / 2, lambda lib, x: lib.exp(x), lambda lib, x: x * 1.5,
                   lambda lib, x: x + 1j, lambda lib, x: lib.sigmoid(x)]:
            same(fn, i)
    finally:
        t.set_default_dtype(t.float32)
        torch.set_default_dtype(torch.float32)


def test_noncontiguous_inputs():
    a = both(data("float32", (4, 6), seed=81), "float32")
    same(lambda lib, x: x.t() + x.t(), a)
    same(lambda lib, x: x[:, ::2].exp(), a)
    same(lambda lib, x: x.t() * x[:, :4].t()[0], a)


def test_broadcast_error_messages():
    a, b = both(np.ones((3,), "float32"), "float32"), both(np.ones((2, 2), "float32"), "float32")
    for fn in [lambda lib, a, b: a + b, lambda lib, a, b: lib.where(a > 0, a, b),
               lambda lib, a, b: lib.lerp(a, b, 0.5), lambda lib, a, b: lib.addcmul(a, a, b),
               lambda lib, a, b: a.add_(b), lambda lib, a, b: b.mul_(a[:2])]:
        same(fn, a, b)


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float32", "complex64"])
@pytest.mark.parametrize("name", BINARY + UNARY)
def test_meta_device(name, dtype):
    """Meta tensors run only the meta functions: the shape and dtype torch's CPU op gives,
    and the same argument errors, but none of the kernels' missing-dtype errors.

    (torch's own meta device runs Python decompositions with errors of their own, e.g.
    ``maximum`` of complex meta tensors succeeds there; refimpl's meta functions are the
    checks its CPU kernels make before computing.)
    """
    if name in ("equal", "allclose", "positive", "conj", "conj_physical", "float_power"):
        pytest.skip("not an op with a meta function")

    def run(lib, device):
        x = lib.zeros((3, 1), dtype=getattr(lib, dtype), device=device)
        y = lib.ones((4,), dtype=getattr(lib, dtype), device=device)
        f = lib_fn(lib, name)
        out = f(x, y) if name in BINARY else f(x)
        return str(out.dtype), tuple(out.shape)

    try:
        expected = run(torch, "cpu")
    except Exception as e:  # noqa: BLE001 - meta must raise the same argument error
        if isinstance(e, NotImplementedError) and str(e).startswith('"'):
            assert run(t, "meta")[1] in ((3, 1), (3, 4))  # a kernel's error: meta works
            return
        with pytest.raises(type(e)) as info:
            run(t, "meta")
        assert str(info.value) == str(e)
        return
    assert run(t, "meta") == expected
