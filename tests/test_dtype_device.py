"""dtypes, type promotion and devices, checked against torch where it is installed."""

from __future__ import annotations

import itertools

import pytest

import refimpl as t
from refimpl import _dtype as D

NAMES = [*D.DTYPES, "complex32"]


def _get(name: str) -> D.dtype:
    return D.DTYPES.get(name) or D.ALIASES[name]


def test_dtype_repr_and_flags():
    assert repr(t.float32) == "torch.float32"
    assert t.float is t.float32 and t.long is t.int64 and t.bool.name == "bool"
    assert t.bfloat16.is_floating_point and not t.int8.is_floating_point
    assert t.complex64.is_complex and t.complex64.to_real() is t.float32
    assert t.float32.itemsize == 4 and t.bfloat16.itemsize == 2


def test_promote_types_examples():
    assert t.promote_types(t.uint8, t.int8) is t.int16
    assert t.promote_types(t.float16, t.bfloat16) is t.float32
    assert t.promote_types(t.complex64, t.float64) is t.complex128
    assert t.promote_types(t.bool, t.int32) is t.int32


def test_result_type_scalar_classes():
    assert t.result_type(t.ones(2, dtype=t.int32), 2.5) is t.float32
    assert t.result_type(t.ones(2, dtype=t.int32), 2) is t.int32
    assert t.result_type(t.ones(2, dtype=t.float16), t.ones((), dtype=t.float64)) is t.float16
    assert t.result_type(t.ones(2, dtype=t.int8), t.ones((), dtype=t.float64)) is t.float64


def test_default_dtype_round_trip():
    assert t.get_default_dtype() is t.float32
    t.set_default_dtype(t.float64)
    try:
        assert t.tensor([1.5]).dtype is t.float64
        assert t.result_type(t.ones(2, dtype=t.int32), 1.0) is t.float64
    finally:
        t.set_default_dtype(t.float32)
    with pytest.raises(TypeError, match="only floating-point types"):
        t.set_default_dtype(t.int64)


@pytest.mark.parametrize("a,b", list(itertools.product(NAMES, NAMES)))
def test_promotion_matches_torch(a, b):
    torch = pytest.importorskip("torch")
    ta, tb = getattr(torch, a), getattr(torch, b)
    ra, rb = _get(a), _get(b)
    assert str(torch.promote_types(ta, tb)) == repr(D.promote_types(ra, rb))
    assert torch.can_cast(ta, tb) == D.can_cast(ra, rb)
    zt = torch.zeros((), dtype=tb)
    xt = torch.zeros(2, dtype=ta)
    assert str(torch.result_type(xt, zt)) == repr(D.result_type_of([ra], [rb], []))
    for scalar in (True, 2, 2.5, 1 + 2j):
        assert str(torch.result_type(xt, scalar)) == repr(D.result_type_of([ra], [], [scalar]))
        assert str(torch.result_type(zt, scalar)) == repr(D.result_type_of([], [rb], [scalar]))


@pytest.mark.parametrize("text", ["foo", "cuda:x", "cuda:-1", "cpu:0:1", "cuda:01", "cuda: 0",
                                  "CUDA", "", "cuda0", "foo:1", "foo:x"])
def test_invalid_device_strings_match_torch(text):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as expected:
        torch.device(text)
    with pytest.raises(RuntimeError) as got:
        t.device(text)
    assert str(got.value) == str(expected.value)


def test_device_parsing():
    d = t.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1)
    assert repr(d) == "device(type='cuda', index=1)" and str(d) == "cuda:1"
    assert t.device("cuda", 0) == t.device("cuda:0")
    assert repr(t.device("cpu")) == "device(type='cpu')"
    assert t.device(t.device("cpu")) == t.device("cpu")
    assert hash(t.device("cuda:0")) == hash(t.device("cuda", 0))
