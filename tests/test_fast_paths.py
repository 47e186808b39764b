"""The training step's fast paths give what the general paths give (bitwise where the
fast path claims so): vectorised erf against ``math.erf``, ``unfold_backward`` and
``index_add`` against ``np.add.at``, in-place CPU ops and nn.Parameter operands against
the out-of-place results."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refimpl
from refimpl.ops import _special
from refimpl.ops import gather_scatter as G
from refimpl.ops import slicing as S
from refimpl.ops._helpers import compute_np_dtype, np_result


def test_erf_within_two_ulp_of_math_erf():
    x = np.concatenate([np.linspace(-7.0, 7.0, 200_001), np.logspace(-320, 1, 2000),
                        -np.logspace(-320, 1, 2000), [0.0, 6.0, 5.999999, 1e308]])
    ref = np.array([math.erf(v) for v in x])
    got = _special.erf(x)
    ulp = np.abs(got - ref) / np.spacing(np.abs(ref))
    assert ulp.max() <= 2.0
    # float32 inputs (GELU's erf) round to the same float32 as math.erf
    x32 = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    x64 = x32.astype(np.float64)
    ref32 = np.array([math.erf(v) for v in x64]).astype(np.float32)
    assert np.array_equal(_special.erf(x64).astype(np.float32), ref32)


def test_erf_special_points():
    got = _special.erf(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0]))
    assert np.isnan(got[0]) and got[1] == 1.0 and got[2] == -1.0
    assert got[3] == 0.0 and np.signbit(got[3]) and not np.signbit(got[4])


def _add_at_reference(grad, sizes, spec):
    cd = compute_np_dtype(grad.dtype)
    flat = np.zeros(math.prod(sizes), dtype=cd)
    np.add.at(flat, S._view_positions(spec.shape, spec.stride, spec.offset),
              grad._np.astype(cd))
    return np_result(flat.reshape(sizes), grad.dtype)


@pytest.mark.parametrize("sizes,dim,size,step", [
    ((7,), 0, 3, 1), ((7,), 0, 3, 2), ((5, 9), 1, 4, 3), ((5, 9), -2, 2, 1),
    ((3, 4, 10), 2, 10, 1), ((2, 6, 6), 1, 3, 3), ((6,), 0, 2, 7)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64"])
def test_unfold_backward_equals_add_at(sizes, dim, size, step, dtype):
    rng = np.random.default_rng(1)
    dt = getattr(refimpl, dtype)
    shape = refimpl.zeros(*sizes).unfold(dim, size, step).shape
    spec = S.unfold_geometry(*S._contiguous_geom(sizes), dim, size, step)
    for grad in (refimpl.tensor(rng.standard_normal(shape) * 10).to(dt),
                 refimpl.tensor(rng.standard_normal(shape[::-1])).to(dt)
                 .permute(*reversed(range(len(shape))))):
        got = S._unfold_backward_cpu(grad, sizes, dim, size, step)
        assert got.dtype == _add_at_reference(grad, sizes, spec).dtype
        assert np.array_equal(got, _add_at_reference(grad, sizes, spec))


@pytest.mark.parametrize("kind", ["permutation", "repeats", "partial"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_index_add_equals_add_at(kind, dtype):
    rng = np.random.default_rng(2)
    dt = getattr(refimpl, dtype)
    self = refimpl.tensor(rng.standard_normal((3, 8, 5)) * 5).to(dt)
    idx = {"permutation": rng.permutation(8), "repeats": rng.integers(0, 8, 10),
           "partial": rng.permutation(8)[:5]}[kind]
    source = refimpl.tensor(rng.standard_normal((3, idx.size, 5)) * 5).to(dt)
    for alpha in (1, 2):
        got = G._index_add_cpu(self, 1, refimpl.tensor(idx), source, alpha=alpha)
        cd = compute_np_dtype(dt)
        ref = self._np.astype(cd)
        np.add.at(ref, (slice(None), idx), source._np.astype(cd) * alpha)
        assert np.array_equal(got, np_result(ref, dt))


def test_inplace_ops_equal_out_of_place_and_bump_once():
    rng = np.random.default_rng(3)
    a = refimpl.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    b = refimpl.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    for name, args, kwargs in (("add", (b,), {"alpha": 0.5}), ("mul", (0.25,), {}),
                               ("lerp", (b, 0.1), {}), ("addcdiv", (b, b + 3), {"value": -2})):
        expected = getattr(a, name)(*args, **kwargs)
        target = a.clone()
        version = target._version
        assert getattr(target, name + "_")(*args, **kwargs) is target
        assert target._version == version + 1
        assert np.array_equal(target.numpy(), expected.numpy())
    # a non-contiguous self keeps its strides
    t = a.clone().t()
    t.add_(b.t())
    assert t.stride() == (1, 5)
    assert np.array_equal(t.numpy(), (a + b).t().numpy())


def test_parameter_operands_take_plain_paths_with_same_results():
    w = refimpl.nn.Parameter(refimpl.randn(3, 4))
    x = refimpl.randn(3, 4)
    out = w * x + w
    assert type(out) is refimpl.Tensor
    assert np.array_equal(out.detach().numpy(), (w.detach() * x + w.detach()).numpy())
    out.sum().backward()
    assert np.allclose(w.grad.numpy(), x.numpy() + 1)


@pytest.mark.parametrize("default", ["float32", "float64"])
def test_result_type_fast_cases_equal_the_promotion_rules(default):
    from refimpl import _dtype as D
    from refimpl.ops._helpers import result_type

    dtypes = [refimpl.bool, refimpl.uint8, refimpl.int8, refimpl.int64, refimpl.float16,
              refimpl.bfloat16, refimpl.float32, refimpl.float64, refimpl.complex64]
    refimpl.set_default_dtype(getattr(refimpl, default))
    try:
        for a in dtypes:
            x = refimpl.zeros(3, dtype=a)
            others = [refimpl.zeros(3, dtype=b) for b in dtypes] + [
                refimpl.zeros((), dtype=b) for b in dtypes] + [1.5, 2, True, 1j]
            for o in others:
                t = isinstance(o, refimpl.Tensor)
                dims = [a] + ([o.dtype] if t and o.dim() else [])
                zeros = [o.dtype] if t and not o.dim() else []
                assert result_type(x, o) is D.result_type_of(dims, zeros, [] if t else [o])
    finally:
        refimpl.set_default_dtype(refimpl.float32)
