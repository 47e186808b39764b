"""Sorting, order statistics, unique and searching against torch."""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t

REAL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
        "float64"]
NAN = float("nan")
WITH_NAN = In([[3.0, NAN, 1.0, -np.inf, 2.0, NAN, 1.0], [2.0, 2.0, 0.0, np.inf, 2.0, 0.0, 5.0]])


def data(dtype: str, shape=(3, 7), seed: int = 0) -> In:
    """Data with many ties (small integers) that every dtype holds exactly."""
    if dtype == "bool":
        return randint(0, 2, shape, "bool", seed)
    return randint(0, 4, shape, dtype, seed)


def distinct(shape=(3, 7), dtype: str = "float32", seed: int = 0) -> In:
    """Data without ties, so that the indices of every op are determined."""
    return randn(shape, dtype, seed)


def _gather_consistent(values, indices, x, dim):
    got = np.take_along_axis(x._np.astype(np.float64), indices._np, dim)
    np.testing.assert_array_equal(got, values._np.astype(np.float64))


# -- sort, argsort, msort ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_like_torch(dtype, dim, descending):
    check(lambda m, x: m.sort(x, dim, descending), data(dtype))
    check(lambda m, x: x.sort(dim=dim, descending=descending, stable=True), data(dtype))
    check(lambda m, x: m.argsort(x, dim, descending), data(dtype))


def test_sort_nan_inf_and_edge_cases():
    for desc in (False, True):
        check(lambda m, x, d=desc: m.sort(x, 1, d), WITH_NAN)
        check(lambda m, x, d=desc: x.argsort(descending=d, stable=True), WITH_NAN)
    check(lambda m, x: m.sort(x), In(2.0))
    check(lambda m, x: m.sort(x, 0), In(np.zeros((0, 3))))
    check(lambda m, x: m.sort(x, 2), data("float32"))
    check(lambda m, x: m.sort(x), In([1j, 2.0], "complex64"))
    check(lambda m, x: m.msort(x), data("int64"))

    def with_out(m, x):
        v, i = m.empty(3, 7), m.empty(3, 7, dtype=m.int64)
        r = m.sort(x, out=(v, i))
        return r, v, i
    check(with_out, data("float32"))


# -- topk, kthvalue ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, largest):
    for k in (0, 1, 3, 7):
        check(lambda m, x, k=k: m.topk(x, k, largest=largest), distinct(dtype=dtype)
              if "float" in dtype else In(np.arange(21).reshape(3, 7) % 13, dtype))
    check(lambda m, x: x.topk(2, 0, largest), distinct(dtype="float32"))
    ours = t.topk(t.tensor([[1.0, 2, 2, 1, 2]]), 3, largest=largest)
    _gather_consistent(ours.values, ours.indices, t.tensor([[1.0, 2, 2, 1, 2]]), 1)


def test_topk_errors_and_nan():
    check(lambda m, x: m.topk(x, 8), distinct())
    check(lambda m, x: m.topk(x, -1), distinct())
    check(lambda m, x: m.topk(x, 1), data("bool"))
    check(lambda m, x: m.topk(x, 1), In([1j], "complex64"))
    check(lambda m, x: m.topk(x, 1), In(3.0))
    check(lambda m, x: m.topk(x, 0), In(3.0))
    check(lambda m, x: m.topk(x, 2), In([[NAN, 1.0, 3.0, 2.0]]))
    check(lambda m, x: m.topk(x, 2, largest=False), In([[NAN, 1.0, 3.0, 2.0]]))


@pytest.mark.parametrize("dtype", ["uint8", "int64", "float16", "float32"])
def test_kthvalue(dtype):
    x = distinct(dtype=dtype) if "float" in dtype else In(np.arange(21).reshape(3, 7) % 13,
                                                           dtype)
    for k in (1, 3, 7):
        check(lambda m, x, k=k: m.kthvalue(x, k), x)
        check(lambda m, x, k=k: x.kthvalue(min(k, 3), 0, True), x)
    for k in (0, 8):
        check(lambda m, x, k=k: m.kthvalue(x, k), x)
    check(lambda m, x: m.kthvalue(x, 1), data("bool"))
    check(lambda m, x: m.kthvalue(x, 1), In(2.0))
    check(lambda m, x: m.kthvalue(x, 2), In([NAN, 1.0]))
    ours = t.kthvalue(t.tensor([2.0, 1, 2, 1, 2, 2]), 4)
    assert ours.values.item() == 2.0 and t.tensor([2.0, 1, 2, 1, 2, 2])[ours.indices] == 2.0


# -- median, nanmedian, mode -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float16", "float32",
                                   "float64"])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_lower_median_and_tie_index(dtype, name):
    for seed in range(4):
        x = data(dtype, (4, 9), seed)
        check(lambda m, x: getattr(m, name)(x), x)
        for dim in (0, 1, -1):
            check(lambda m, x, d=dim: getattr(m, name)(x, d), x)
            check(lambda m, x, d=dim: getattr(x, name)(dim=d, keepdim=True), x)


def test_median_nan_and_errors():
    for name in ("median", "nanmedian"):
        check(lambda m, x, n=name: getattr(m, n)(x), WITH_NAN)
        check(lambda m, x, n=name: getattr(m, n)(x, 1), WITH_NAN)
        check(lambda m, x, n=name: getattr(m, n)(x, 0), In([[NAN, NAN], [NAN, 1.0]]))
        check(lambda m, x, n=name: getattr(m, n)(x), In(np.zeros(0)))
        check(lambda m, x, n=name: getattr(m, n)(x, 1), In(np.zeros((2, 0))))
        check(lambda m, x, n=name: getattr(m, n)(x), data("bool"))
        check(lambda m, x, n=name: getattr(m, n)(x), In([1j], "complex64"))
        check(lambda m, x, n=name: getattr(m, n)(x, 0), In(3.0))
        check(lambda m, x, n=name: getattr(x, n)(keepdim=True), data("float32"))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float32"])
def test_mode(dtype):
    # short slices: torch's kernel picks the last occurrence of the mode, as refimpl does
    x = data(dtype, (4, 9), 3)
    for dim in (0, 1, -1):
        check(lambda m, x, d=dim: m.mode(x, d), x)
        check(lambda m, x, d=dim: x.mode(d, True), x)
    check(lambda m, x: m.mode(x), In([5.0, 5, 5, 1, 1, 1]))
    check(lambda m, x: m.mode(x), In([3.0, NAN, 1.0, 2.0]))
    check(lambda m, x: m.mode(x), In(np.zeros(0)))
    check(lambda m, x: m.mode(x), In(2.0))
    check(lambda m, x: m.mode(x), In([1j], "complex64"))


def test_mode_long_slices_values_match():
    x = np.random.default_rng(0).integers(0, 4, (5, 40)).astype(np.float32)
    ours, theirs = t.tensor(x).mode(1), torch.tensor(x).mode(1)
    np.testing.assert_array_equal(ours.values._np, theirs.values.numpy())
    _gather_consistent(ours.values.unsqueeze(1), ours.indices.unsqueeze(1), t.tensor(x), 1)


# -- unique, unique_consecutive -------------------------------------------------------------

@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique(dtype, inverse, counts):
    x = data(dtype)
    kw = {"return_inverse": inverse, "return_counts": counts}
    check(lambda m, x: m.unique(x, **kw), x)
    check(lambda m, x: x.unique(sorted=False, **kw), x)
    check(lambda m, x: m.unique(x, dim=0, **kw), data(dtype, (6, 2)))
    check(lambda m, x: m.unique(x, dim=1, **kw), data(dtype, (2, 6)))
    check(lambda m, x: m.unique_consecutive(x, **kw), x)
    check(lambda m, x: m.unique_consecutive(x, dim=0, **kw), data(dtype, (6, 2)))


def test_unique_edge_cases():
    kw = {"return_inverse": True, "return_counts": True}
    check(lambda m, x: m.unique(x, **kw), In([3.0, NAN, 1.0, 2.0, NAN, 1.0]))
    check(lambda m, x: m.unique(x, **kw), In(3, "int64"))
    check(lambda m, x: m.unique(x, **kw), In(np.zeros(0)))
    check(lambda m, x: m.unique(x, dim=0, **kw), In(np.zeros((0, 3))))
    check(lambda m, x: m.unique(x, dim=2), data("int64"))
    check(lambda m, x: m.unique(x), In([1j, 1j], "complex64"))
    check(lambda m, x: m.unique_consecutive(x, **kw), In([NAN, NAN, 1.0, 1.0]))
    check(lambda m, x: m.unique_consecutive(x, **kw), In([[1, 1, 2], [1, 1, 2], [0, 1, 2]],
                                                          "int64"))
    x = t.ones(3, requires_grad=True)
    u = t.unique(x)
    assert type(u.grad_fn).__name__ == "Unique2Backward0"
    with pytest.raises(NotImplementedError, match="the derivative for '_unique2' is not"):
        u.sum().backward()


# -- searchsorted, bucketize, histc ----------------------------------------------------------

@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(right):
    seq = In([1, 3, 3, 5, 7], "int64")
    vals = In([[0, 3, 6], [9, 5, 1]], "int64")
    check(lambda m, s, v: m.searchsorted(s, v, right=right), seq, vals)
    check(lambda m, s, v: m.searchsorted(s, v, side="right" if right else "left"), seq, vals)
    check(lambda m, s, v: m.searchsorted(s, v, right=right, out_int32=True), seq, vals)
    check(lambda m, s: m.searchsorted(s, 4, right=right), seq)
    check(lambda m, s, v: m.searchsorted(s, v, right=right), In([[1, 3], [2, 4]], "int64"),
          In([[2, 3, 4], [0, 3, 9]], "int64"))
    check(lambda m, s, v: m.searchsorted(s, v, right=right), In([1.0, 3.0]), In([2.5], "int64"))
    check(lambda m, s, v: m.searchsorted(s, v, right=right), In([1.0, NAN]), In([NAN, 2.0]))
    check(lambda m, s, v, o: m.searchsorted(s, v, right=right, sorter=o),
          In([5, 1, 3], "int64"), In([2, 4, 6, 0], "int64"), In([1, 2, 0], "int64"))
    check(lambda m, v, b: m.bucketize(v, b, right=right), vals, seq)
    check(lambda m, b: m.bucketize(3, b, right=right), seq)


def test_searchsorted_errors():
    seq, vals = In([1, 3], "int64"), In([2], "int64")
    check(lambda m, s, v: m.searchsorted(s, v, right=True, side="left"), seq, vals)
    check(lambda m, s, v: m.searchsorted(s, v, side="middle"), seq, vals)
    check(lambda m, s, v, o: m.searchsorted(s, v, sorter=o), seq, vals, In([0], "int64"))
    check(lambda m, s, v: m.searchsorted(s, v), In(1, "int64"), vals)
    check(lambda m, s, v: m.searchsorted(s, v), In([[1, 3], [2, 4]], "int64"),
          In([[2]], "int64"))
    check(lambda m, s, v: m.searchsorted(s, v), In([True], "bool"), In([True], "bool"))
    check(lambda m, v, b: m.bucketize(v, b), vals, In([[1, 3]], "int64"))


def test_histc():
    check(lambda m, x: m.histc(x, bins=4, min=0, max=3), In([1.0, 2.0, 1.0]))
    check(lambda m, x: m.histc(x, bins=3), In([1.0, 2.0, 1.0, 4.0]))
    check(lambda m, x: x.histc(2), In([2.0, 2.0]))
    check(lambda m, x: m.histc(x, bins=3, min=0, max=3), In([0.0, 1.0, 3.0, 3.5, -1.0]))
    check(lambda m, x: m.histc(x, bins=10), randn((100,), "float64"))
    check(lambda m, x: m.histc(x, bins=7, min=-1, max=1), randn((50,), "float32", 3))
    check(lambda m, x: m.histc(x, bins=2), In([1, 2], "int64"))
    check(lambda m, x: m.histc(x, bins=2, min=3, max=1), In([2.0]))
    check(lambda m, x: m.histc(x, bins=0), In([2.0]))


# -- gradients -------------------------------------------------------------------------

GRADS = [
    ("sort", lambda m, x: m.sort(x, 1)), ("sort.desc", lambda m, x: m.sort(x, 0, True)),
    ("msort", lambda m, x: m.msort(x)), ("topk", lambda m, x: m.topk(x, 3)),
    ("topk.dim0", lambda m, x: m.topk(x, 2, 0, largest=False)),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1)),
    ("kthvalue.keep", lambda m, x: m.kthvalue(x, 2, 0, True)),
    ("median", lambda m, x: m.median(x)), ("median.dim", lambda m, x: m.median(x, 1)),
    ("nanmedian", lambda m, x: m.nanmedian(x)),
    ("nanmedian.dim", lambda m, x: m.nanmedian(x, 0, True)),
    ("mode", lambda m, x: m.mode(x, 1)),
]


@pytest.mark.parametrize("name,fn", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, fn):
    check(fn, distinct(dtype="float64"), grad=True)


@pytest.mark.parametrize("name,fn", GRADS, ids=[g[0] for g in GRADS])
def test_double_backward(name, fn):
    check_double_backward(lambda m, x: fn(m, x * x), distinct(dtype="float64"))


def test_median_full_gradient_splits_among_ties():
    check(lambda m, x: m.median(x), In([[1.0, 2.0, 2.0], [3.0, 2.0, 0.0]], "float64"),
          grad=True)


def test_grad_node_names():
    x = t.ones(2, 3, requires_grad=True)
    names = {"SortBackward0": x.sort().values, "TopkBackward0": x.topk(1).values,
             "KthvalueBackward0": x.kthvalue(1).values, "MedianBackward0": x.median(),
             "MedianBackward1": x.median(0).values, "NanmedianBackward1": x.nanmedian(1).values,
             "ModeBackward0": x.mode().values}
    for name, out in names.items():
        assert type(out.grad_fn).__name__ == name
    assert not x.argsort().requires_grad and not x.sort().indices.requires_grad
