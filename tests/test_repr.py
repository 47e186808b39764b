"""repr/str of tensors against torch's, character for character."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")


def pair(values, dtype: str):
    """The same values as a refimpl and a torch tensor (bfloat16 bit-identical)."""
    arr = np.asarray(values)
    if dtype == "bfloat16":
        bits = arr.astype(ml_dtypes.bfloat16)
        return t.from_numpy(bits), torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    with np.errstate(over="ignore"):  # float16 cases saturate to inf on purpose
        arr = arr.astype(dtype)
    return t.from_numpy(arr.copy()), torch.from_numpy(arr.copy())


def same_repr(values, dtype: str = "float32") -> None:
    r, o = pair(values, dtype)
    assert repr(r) == repr(o)
    assert str(r) == str(o)


rng = np.random.default_rng(0)
FLOAT_CASES = {
    "ints": [1.0, -2.0, 300.0],
    "fixed": [1.5, -0.25, 3.14159],
    "small": [1e-5, 0.5, 2.0],
    "large": [1e9, 1.0, -3.0],
    "ratio": [0.001, 1.5, 2000.0],
    "int_ratio": [1.0, 5000.0],
    "specials": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.25],
    "specials_int": [np.nan, np.inf, 2.0, -0.0],
    "zeros": [0.0, -0.0, 0.0],
    "all_nan": [np.nan, np.nan],
    "scalar": 1.5,
    "scalar_int": 2.0,
    "scalar_nan": np.nan,
    "matrix": rng.standard_normal((3, 4)),
    "cube": rng.standard_normal((2, 3, 4)) * 100,
    "wide": rng.standard_normal(30),
    "wide_matrix": rng.standard_normal((3, 25)),
    "long": rng.standard_normal(2000),
    "long_matrix": rng.standard_normal((50, 50)),
    "long_cube": rng.standard_normal((12, 12, 12)),
    "long_rows": rng.standard_normal((1001, 2)),
    "tiny_values": rng.standard_normal(5) * 1e-7,
    "huge_values": rng.standard_normal((2, 2)) * 1e12,
    "rounding": [0.99995, 123.456789, 1e-4],
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", list(FLOAT_CASES))
def test_float(case, dtype):
    same_repr(FLOAT_CASES[case], dtype)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "int16", "bool"])
@pytest.mark.parametrize("values", [[1, -2, 100], 7, [[1, 20], [300, -4]], list(range(2000)),
                                    [[0, 1]] * 600], ids=["vec", "scalar", "mat", "long",
                                                          "long_rows"])
def test_integer_and_bool(values, dtype):
    arr = np.asarray(values)
    if dtype == "uint8":
        arr = np.abs(arr) % 256
    same_repr(arr % 2 == 1 if dtype == "bool" else arr, dtype)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("values", [
    [1 + 2j, -3.5 - 0.25j, 0j], [1 + 1e-6j, 2 + 0j], [complex(np.nan, 1), complex(1, -np.inf)],
    1.5 - 2j, [1 + 1j, 2 - 2j, 300 + 4j], (rng.standard_normal((3, 30)) * 1j + 1),
    rng.standard_normal(1500) + 2j,
], ids=["basic", "small_imag", "specials", "scalar", "int_mode", "wide", "long"])
def test_complex(values, dtype):
    same_repr(values, dtype)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "complex64"])
def test_empty(shape, dtype):
    same_repr(np.zeros(shape), dtype)


def test_autograd_suffixes():
    for lib in (t, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        assert repr(x) == "tensor([1., 2.], requires_grad=True)"
        assert repr(x + 1) == "tensor([2., 3.], grad_fn=<AddBackward0>)"
        assert repr((x * 2).sum()) == "tensor(6., grad_fn=<SumBackward0>)"
        y = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        assert repr(y ** 2) == "tensor([1., 4.], dtype=torch.float64, grad_fn=<PowBackward0>)"
    long_r = t.arange(20.0).requires_grad_()
    long_o = torch.arange(20.0).requires_grad_()
    assert repr(long_r * 1.5) == repr(long_o * 1.5)
    assert repr(long_r.double() / 7) == repr(long_o.double() / 7)


def test_meta_tensors():
    for shape, dtype in [((2, 3), "float32"), ((), "int64"), ((4,), "float16")]:
        r = t.empty(shape, dtype=getattr(t, dtype), device="meta")
        o = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        assert repr(r) == repr(o)


@pytest.mark.parametrize("options", [
    {"precision": 2}, {"precision": 8}, {"sci_mode": True}, {"sci_mode": False},
    {"linewidth": 40}, {"linewidth": 200}, {"edgeitems": 1, "threshold": 10},
    {"edgeitems": 0, "threshold": 5}, {"threshold": 5}, {"profile": "short"},
    {"profile": "full"}, {"profile": "short", "precision": 6},
], ids=str)
def test_printoptions(options):
    values = [rng.standard_normal(40), rng.standard_normal((6, 7)) * 1000, [1.0, 2.0, 3.0],
              np.arange(12).reshape(3, 4), [1e-6, 1.0]]
    try:
        t.set_printoptions(**options)
        torch.set_printoptions(**options)
        for v in values:
            for dtype in ("float32", "int64", "complex64"):
                same_repr(v, dtype)
    finally:
        t.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_printoptions_sci_mode_resets():
    t.set_printoptions(sci_mode=True)
    t.set_printoptions(precision=4)  # sci_mode is always assigned: back to automatic
    try:
        assert repr(t.tensor([1.5])) == "tensor([1.5000])"
    finally:
        t.set_printoptions(profile="default")


def test_default_dtype_float64():
    t.set_default_dtype(t.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for values, dtype in [([1.5, 2.0], "float64"), ([1.5], "float32"), ([1j], "complex128"),
                              ([1j], "complex64"), (np.zeros((0, 2)), "float32"),
                              (np.zeros(0), "float64")]:
            same_repr(values, dtype)
    finally:
        t.set_default_dtype(t.float32)
        torch.set_default_dtype(torch.float32)


def test_views_and_noncontiguous():
    base = rng.standard_normal((4, 6))
    r, o = pair(base, "float32")
    for fn in [lambda x: x.t(), lambda x: x[:, ::2], lambda x: x[1], lambda x: x[1:3, 2:5]]:
        assert repr(fn(r)) == repr(fn(o))


def test_format_and_str_of_zero_dim():
    r, o = pair(2.5, "float32")
    assert f"{r:.2f}" == f"{o:.2f}" == "2.50"
    assert str(r) == str(o) == "tensor(2.5000)"
