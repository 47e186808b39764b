"""Unit tests of refimpl's FFT internals: the cuFFT plan cache's bookkeeping (with plans
replaced by a stand-in, so no GPU is needed), the scaling kernel's NVRTC compile, meta
shapes of the primitives, and the Bessel series of the Kaiser windows. The transforms'
values, errors and gradients are conformance cases (conformance/cases/fft/)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import refimpl as t
from refimpl.cuda import _cufft
from refimpl.ops import windows


class _FakePlan:
    made: ClassVar[list] = []

    def __init__(self, device, kind, sizes, batch):
        self.key = (kind, sizes, batch)
        self.destroyed = False
        self.runs = 0
        _FakePlan.made.append(self)

    def execute(self, src, dst, direction):
        self.runs += 1

    def destroy(self):
        self.destroyed = True


@pytest.fixture
def cache(monkeypatch):
    _FakePlan.made = []
    monkeypatch.setattr(_cufft, "_Plan", _FakePlan)
    return _cufft.PlanCache(0)


def _run(cache, n):
    cache.execute("C2C", (n,), 1, None, None, -1)


def test_plans_are_made_once_per_configuration(cache):
    for n in (8, 16, 8, 8):
        _run(cache, n)
    assert cache.size == 2
    assert [p.runs for p in _FakePlan.made] == [3, 1]


def test_least_recently_used_plan_goes_first(cache):
    for n in (8, 16, 32):
        _run(cache, n)
    _run(cache, 8)  # 16 is now the oldest
    cache.max_size = 2
    assert cache.size == 2
    assert [p.key[1] for p in _FakePlan.made if p.destroyed] == [(16,)]
    _run(cache, 64)
    assert [p.key[1] for p in _FakePlan.made if p.destroyed] == [(16,), (32,)]


def test_zero_capacity_keeps_no_plan(cache):
    cache.max_size = 0
    _run(cache, 8)
    _run(cache, 8)
    assert cache.size == 0
    assert len(_FakePlan.made) == 2 and all(p.destroyed for p in _FakePlan.made)


def test_clear_and_limits(cache):
    _run(cache, 8)
    cache.clear()
    assert cache.size == 0 and _FakePlan.made[0].destroyed
    assert cache.max_size == 4096
    with pytest.raises(RuntimeError, match="^cuFFT plan cache size must be non-negative, "
                                           "but got -3$"):
        cache.max_size = -3
    with pytest.raises(RuntimeError, match="can not be larger than 9223372036854775807"):
        cache.max_size = 2**63
    with pytest.raises(RuntimeError, match=r"^\.size is a read-only property"):
        cache.size = 1


def test_manager_checks_the_device_index():
    with pytest.raises(RuntimeError, match=r"^cufft_plan_cache: expected 0 <= device index < "
                                           r"\d+, but got device with index 99$"):
        t.backends.cuda.cufft_plan_cache[99]


def test_scaling_kernel_compiles():
    from refimpl.cuda._pointwise import compile_check

    for dt in (t.complex64, t.complex128, t.float32, t.float64):
        try:
            image = compile_check("a * s", [dt], [dt], dt, params=[("s", dt)])
        except Exception as exc:  # no NVRTC library on this machine
            if "nvrtc" not in repr(exc).lower():
                raise
            pytest.skip(f"NVRTC unavailable: {exc}")
        assert image


@pytest.mark.parametrize(("call", "shape", "dtype"), [
    (lambda x: t.fft.rfft(x, n=9), (3, 5), t.complex64),
    (lambda x: t.fft.irfftn(x.to(t.complex128), s=(4, 6)), (4, 6), t.float64),
    (lambda x: t.fft.fft2(x), (3, 8), t.complex64),
])
def test_meta_shapes(call, shape, dtype):
    out = call(t.empty(3, 8, device="meta"))
    assert tuple(out.shape) == shape and out.dtype is dtype and out.device.type == "meta"


def test_bessel_series_matches_numpy():
    xs = np.array([0.0, 0.5, 3.0, 12.0, 40.0, 90.0])
    got = np.array([windows.bessel_i0_scalar(x) for x in xs])
    np.testing.assert_allclose(got, np.i0(xs), rtol=1e-13)
    tensor = windows.bessel_i0(t.tensor(xs), 90.0).numpy()
    np.testing.assert_allclose(tensor, np.i0(xs), rtol=1e-13)
