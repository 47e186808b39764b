"""Differential tests of scatter_reduce / index_reduce and of unsafe_split /
unsafe_split_with_sizes / unsafe_chunk against torch (spec TENSOR-407, TENSOR-308).

Values and dtypes for every reduction and dtype family, torch's errors in torch's order,
the autograd node, first and second gradients (including ties for amax/amin and zeros
for prod), the in-place forms, and the non-view outputs of the unsafe splits.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t

SR = ("sum", "prod", "mean", "amax", "amin")
IR = ("prod", "mean", "amax", "amin")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # index_reduce's beta warning
        yield


def L(m, data, dtype="int64"):
    """An index tensor built in module ``m``."""
    return m.tensor(data, dtype=getattr(m, dtype))


def _with(value, fn):
    return fn(value)


def _node(x):
    fn = x.grad_fn
    return None if fn is None else fn.name()


# small integers, so that ties (amax/amin) and exact products happen
X = In(np.random.default_rng(1).integers(-3, 4, (3, 4)).astype(float), "float64")
S = In(np.random.default_rng(2).integers(-3, 4, (2, 4)).astype(float), "float64")
IDX = [[0, 2, 2, 1], [2, 0, 2, 1]]
X3 = randn((2, 3, 4), "float64", seed=3)
S3 = randn((2, 5, 4), "float64", seed=4)
IDX3 = np.random.default_rng(5).integers(0, 3, (2, 5, 4)).tolist()


# -- scatter_reduce values ---------------------------------------------------------------------

@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", SR)
def test_scatter_reduce_values_grads(reduce, include_self):
    fn = lambda m, x, s: m.scatter_reduce(x, 0, L(m, IDX), s, reduce,
                                          include_self=include_self)
    check(fn, X, S, grad=True)
    fn1 = lambda m, x, s: x.scatter_reduce(1, L(m, IDX3), s, reduce,
                                           include_self=include_self)
    check(fn1, X3, S3, grad=True)
    fn2 = lambda m, x, s: m.scatter_reduce(x, -1, L(m, [[1, 1], [0, 1], [3, 3]]), s,
                                           reduce=reduce, include_self=include_self)
    check(fn2, X, randn((3, 2), "float64", seed=6), grad=True)
    check(fn2, X, randn((3, 5), "float64", seed=6))  # a larger src: values only


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool", "complex64", "complex128"])
@pytest.mark.parametrize("reduce", SR)
def test_scatter_reduce_dtypes(reduce, dtype):
    x = randint(0, 7, (3, 4), dtype, seed=7)
    s = randint(0, 7, (4, 4), dtype, seed=8)
    for include_self in (True, False):
        check(lambda m, x, s, inc=include_self: m.scatter_reduce(x, 0, L(m, IDX), s, reduce,
                                                                 include_self=inc), x, s)


def test_scatter_reduce_integer_mean_floors_and_wraps():
    x, s = In([-1, 0, 7], "int64"), In([-3, -1, -5, 1], "int64")
    for inc in (True, False):
        check(lambda m, x, s, inc=inc: m.scatter_reduce(x, 0, L(m, [0, 0, 1, 2]), s, "mean",
                                                        include_self=inc), x, s)
    u, su = In([250, 5], "uint8"), In([250, 250], "uint8")
    for r in ("sum", "mean", "prod"):
        check(lambda m, x, s, r=r: m.scatter_reduce(x, 0, L(m, [0, 0]), s, r), u, su)


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum", "prod", "mean"])
def test_scatter_reduce_nan(reduce):
    x = In([1.0, np.nan, 3.0, 4.0])
    s = In([np.nan, 5.0, np.nan, 1.0, 2.0])
    for inc in (True, False):
        check(lambda m, x, s, inc=inc: m.scatter_reduce(x, 0, L(m, [0, 0, 1, 2, 2]), s,
                                                        reduce, include_self=inc), x, s)
    inf = In([-np.inf, np.inf])
    check(lambda m, x, s: m.scatter_reduce(x, 0, L(m, [0, 1]), s, reduce, include_self=False),
          In([1.0, 2.0]), inf)


@pytest.mark.parametrize("case", [
    "zero_dim", "zero_dim_index", "zero_dim_src", "empty_index", "empty_index_bad_shape",
    "empty_self", "expanded_index", "noncontig_src", "int32_index", "src_larger",
])
def test_scatter_reduce_shapes(case):
    progs = {
        "zero_dim": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, 0), s, "sum"),
                     In(1.0), In(5.0)),
        "zero_dim_index": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, [0, 0]), s, "prod"),
                           In(2.0), In([3.0, 4.0])),
        "zero_dim_src": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, [1]), s, "amax"),
                         In([1.0, 2.0, 3.0]), In(7.0)),
        "empty_index": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, []), s, "mean",
                                                         include_self=False),
                        In([1.0, 2.0]), In([3.0])),
        "empty_index_bad_shape": (
            lambda m, x, s: m.scatter_reduce(x, 0, m.zeros(0, 5, dtype=m.long), s, "amin"),
            In([1.0, 2.0]), In([[3.0]])),
        "empty_self": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, []), s, "sum"),
                       In(np.zeros(0)), In([1.0])),
        "expanded_index": (
            lambda m, x, s: m.scatter_reduce(x, 0, L(m, [0, 1, 1]).expand(2, 3), s, "prod"),
            randn((2, 3), seed=1), randn((2, 3), seed=2)),
        "noncontig_src": (
            lambda m, x, s: m.scatter_reduce(x, 1, L(m, [[0, 2, 2], [1, 1, 0]]), s.t(), "mean"),
            randn((2, 3), seed=1), randn((3, 2), seed=2)),
        "int32_index": (
            lambda m, x, s: m.scatter_reduce(x, 0, L(m, [2, 0, 2], "int32"), s, "amax"),
            randn((3,), seed=1), randn((3,), seed=2)),
        "src_larger": (lambda m, x, s: m.scatter_reduce(x, 0, L(m, [1, 1]), s, "sum"),
                       randn((3,), seed=1), randn((5,), seed=2)),
    }
    fn, *inputs = progs[case]
    check(fn, *inputs, grad=case not in ("src_larger", "empty_self"))


SR_ERRORS = {
    "reduce_name": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1), "foo"),
    "reduce_add": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1), "add"),
    "src_dtype": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1).double(), "sum"),
    "index_dtype": lambda m: m.scatter_reduce(m.zeros(3), 0, m.zeros(1), m.ones(1), "sum"),
    "index_uint8": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1], "uint8"), m.ones(1),
                                              "sum"),
    "bounds": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [3]), m.ones(1), "sum"),
    "bounds_neg": lambda m: m.scatter_reduce(m.zeros(2, 3), 0, L(m, [[-5]]), m.ones(1, 1),
                                             "amax"),
    "self_dims": lambda m: m.scatter_reduce(m.zeros(2, 3), 0, L(m, [0]), m.ones(2, 3), "sum"),
    "src_fewer_dims": lambda m: m.scatter_reduce(m.zeros(2, 3), 0, L(m, [[0, 1]]), m.ones(3),
                                                 "sum"),
    "src_more_dims": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1, 1), "sum"),
    "src_dims_before_size": lambda m: m.scatter_reduce(m.zeros(3, 4), 0, m.zeros(2, 5).long(),
                                                       m.ones(2, 5, 4), "sum"),
    "src_size_before_dims": lambda m: m.scatter_reduce(m.zeros(3, 4, 5), 0,
                                                       m.zeros(1, 1, 1).long(), m.ones(1, 1),
                                                       "sum"),
    "too_large": lambda m: m.scatter_reduce(m.zeros(2, 3), 1, m.zeros(3, 3, dtype=m.long),
                                            m.ones(2, 3), "sum"),
    "src_too_small": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [0, 1, 0, 0]), m.ones(2),
                                                "sum"),
    "zero_dim_src_too_small": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [0, 1]),
                                                         m.tensor(1.0), "sum"),
    "dim": lambda m: m.scatter_reduce(m.zeros(3), 2, L(m, [1]), m.ones(1), "foo"),
    "order_shape_before_reduce": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [0] * 4),
                                                            m.ones(2), "foo"),
    "order_src_dims_before_reduce": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]),
                                                               m.ones(1, 1), "foo"),
    "order_dtype_before_reduce": lambda m: m.scatter_reduce(m.zeros(3), 0, m.zeros(1),
                                                            m.ones(1).double(), "foo"),
    "bool_mean": lambda m: m.scatter_reduce(m.zeros(3).bool(), 0, L(m, [1]),
                                            m.ones(1).bool(), "mean"),
    "bool_mean_empty": lambda m: m.scatter_reduce(m.zeros(3).bool(), 0, L(m, []),
                                                  m.ones(1).bool(), "mean"),
    "complex_amax": lambda m: m.scatter_reduce(m.zeros(3).to(m.complex64), 0, L(m, [5]),
                                               m.ones(1).to(m.complex64), "amax"),
    "bounds_exclude_bool_mean": lambda m: m.scatter_reduce(
        m.zeros(3).bool(), 0, L(m, [-1]), m.ones(1).bool(), "mean", include_self=False),
    "bounds_exclude_complex_amax": lambda m: m.scatter_reduce(
        m.zeros(3).to(m.complex64), 0, L(m, [3]), m.ones(1).to(m.complex64), "amax",
        include_self=False),
    "complex_autograd": lambda m: m.scatter_reduce(
        m.zeros(3, dtype=m.complex64, requires_grad=True), 0, L(m, [1]),
        m.ones(1, dtype=m.complex64), "sum"),
    "scalar_src": lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), 1.0, "sum"),
    "inplace_dtype": lambda m: m.zeros(3).long().scatter_reduce_(0, L(m, [1]), m.ones(1),
                                                                 "amax"),
    "inplace_leaf": lambda m: m.zeros(3, requires_grad=True).scatter_reduce_(
        0, L(m, [1]), m.ones(1), "amax"),
    "inplace_overlap": lambda m: m.zeros(1).expand(3).scatter_reduce_(0, L(m, [1]),
                                                                      m.ones(1), "foo"),
    "inplace_overlap_after_shape": lambda m: m.zeros(1).expand(3).scatter_reduce_(
        0, L(m, [1] * 4), m.ones(1), "sum"),
    "inplace_src_alias": lambda m: _with(
        m.zeros(3), lambda z: z.scatter_reduce_(0, L(m, [1]), z[1:2], "foo")),
    "inplace_src_same": lambda m: _with(
        m.zeros(3), lambda z: z.scatter_reduce_(0, L(m, [1, 0, 2]), z, "sum")),
    "inplace_index_alias": lambda m: _with(
        m.zeros(3, dtype=m.long), lambda z: z.scatter_reduce_(0, z[:1], L(m, [1]), "sum")),
    "out_requires_grad": lambda m: m.scatter_reduce(
        m.zeros(3, requires_grad=True), 0, L(m, [1]), m.ones(1), "sum", out=m.empty(3)),
}


@pytest.mark.parametrize("name", sorted(SR_ERRORS))
def test_scatter_reduce_errors(name):
    assert isinstance(check(SR_ERRORS[name]), Exception)


def test_scatter_reduce_inplace_ok_cases():
    check(lambda m: _with(m.arange(3.0),
                          lambda z: z[:2].scatter_reduce_(0, L(m, [1]), z[2:], "sum")))
    check(lambda m: _with(m.arange(9.0).reshape(3, 3),
                          lambda z: z[0].scatter_reduce_(0, L(m, [1, 0]), z[:2, 1], "amax")))
    check(lambda m: m.scatter_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1), "amax",
                                     out=m.empty(3)))
    check(lambda m: m.scatter_reduce(m.zeros(3).to(m.complex64), 0, L(m, []),
                                     m.ones(1).to(m.complex64), "amin"))


# -- index_reduce values -----------------------------------------------------------------------

XI = In(np.random.default_rng(11).integers(-3, 4, (4, 3)).astype(float), "float64")
SI = In(np.random.default_rng(12).integers(-3, 4, (5, 3)).astype(float), "float64")
II = [0, 3, 3, 1, 0]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", IR)
def test_index_reduce_values_grads(reduce, include_self):
    check(lambda m, x, s: m.index_reduce(x, 0, L(m, II), s, reduce, include_self=include_self),
          XI, SI, grad=True)
    check(lambda m, x, s: x.index_reduce(-1, L(m, [2, 2, 0]), s, reduce,
                                         include_self=include_self),
          randn((2, 3, 4), "float64", seed=1), randn((2, 3, 3), "float64", seed=2), grad=True)
    check(lambda m, x, s: m.index_reduce(x, 1, L(m, [1, 0], "int32"), s, reduce=reduce),
          randn((2, 3, 4), "float64", seed=1), randn((2, 2, 4), "float64", seed=2), grad=True)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int32", "int8",
                                   "uint8", "bool", "complex64"])
@pytest.mark.parametrize("reduce", IR)
def test_index_reduce_dtypes(reduce, dtype):
    x = randint(0, 7, (4, 3), dtype, seed=7)
    s = randint(0, 7, (5, 3), dtype, seed=8)
    for include_self in (True, False):
        check(lambda m, x, s, inc=include_self: m.index_reduce(x, 0, L(m, II), s, reduce,
                                                               include_self=inc), x, s)


def test_index_reduce_integer_mean_and_nan():
    x, s = In([-1, 0, 7], "int64"), In([-3, -1, -5, 1], "int64")
    for inc in (True, False):
        check(lambda m, x, s, inc=inc: m.index_reduce(x, 0, L(m, [0, 0, 1, 2]), s, "mean",
                                                      include_self=inc), x, s)
    xn, sn = In([1.0, np.nan, 2.0]), In([np.nan, 1.0, 5.0, np.nan])
    for r in IR:
        for inc in (True, False):
            check(lambda m, x, s, r=r, inc=inc: m.index_reduce(x, 0, L(m, [0, 1, 2, 2]), s, r,
                                                               include_self=inc), xn, sn)


@pytest.mark.parametrize("case", ["zero_dim", "zero_dim_index", "zero_dim_index_2d",
                                  "empty_index", "one_index"])
def test_index_reduce_shapes(case):
    progs = {
        "zero_dim": (lambda m, x, s: m.index_reduce(x, 0, L(m, 0), s, "prod"),
                     In(2.0, "float64"), In(3.0, "float64")),
        "zero_dim_index": (lambda m, x, s: m.index_reduce(x, 0, L(m, [0]), s, "amax",
                                                          include_self=False),
                           In(2.0, "float64"), In(3.0, "float64")),
        "zero_dim_index_2d": (lambda m, x, s: m.index_reduce(x, 0, L(m, 1), s, "mean"),
                              randn((3, 4), "float64"), randn((1, 4), "float64", seed=1)),
        "empty_index": (lambda m, x, s: m.index_reduce(x, 0, L(m, []), s, "amin"),
                        randn((3, 2), "float64"), In(np.zeros((0, 2)), "float64")),
        "one_index": (lambda m, x, s: m.index_reduce(x, 0, L(m, [2]), s, "prod"),
                      randn((3, 4), "float64"), randn((1, 4), "float64", seed=1)),
    }
    fn, *inputs = progs[case]
    check(fn, *inputs, grad=True)


IR_ERRORS = {
    "reduce_sum": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1), "sum"),
    "reduce_before_dim": lambda m: m.index_reduce(m.zeros(3), 4, m.zeros(2), m.ones(2), "foo"),
    "dim": lambda m: m.index_reduce(m.zeros(3), 1, L(m, [1]), m.ones(1), "prod"),
    "index_2d": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [[1]]), m.ones(1), "prod"),
    "index_dtype": lambda m: m.index_reduce(m.zeros(3), 0, m.zeros(1), m.ones(1), "prod"),
    "source_dtype": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [1]), m.ones(1).double(),
                                             "prod"),
    "source_dim": lambda m: m.index_reduce(m.zeros(3, 2), 1, L(m, [0, 1]), m.ones(2), "prod"),
    "source_dim_0d": lambda m: m.index_reduce(m.zeros(3, 2), 1, L(m, [1]), m.tensor(1.0),
                                              "prod"),
    "count": lambda m: m.index_reduce(m.zeros(3, 2), 0, L(m, [0, 1, 2]), m.ones(2, 2), "mean"),
    "count_0d_source": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [0, 1]), m.tensor(1.0),
                                                "mean"),
    "count_0d_index": lambda m: m.index_reduce(m.zeros(3, 4), 0, L(m, 2), m.ones(4), "amax"),
    "shape": lambda m: m.index_reduce(m.zeros(3, 4), 0, L(m, [0, 1]), m.ones(2, 3), "amax"),
    "shape_0d_source": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [1]), m.tensor(1.0),
                                                "amax"),
    "shape_0d_self": lambda m: m.index_reduce(m.tensor(1.0), 0, L(m, [0]), m.ones(1), "amax"),
    "bounds": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [3]), m.ones(1), "amin"),
    "bounds_negative": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [-1]), m.ones(1), "amin"),
    "bool": lambda m: m.index_reduce(m.zeros(3).bool(), 0, L(m, [5]), m.ones(1).bool(), "amax"),
    "bool_exclude": lambda m: m.index_reduce(m.zeros(3).bool(), 0, L(m, []),
                                             m.ones(0).bool(), "mean", include_self=False),
    "complex": lambda m: m.index_reduce(m.zeros(3).to(m.complex64), 0, L(m, [1]),
                                        m.ones(1).to(m.complex64), "prod"),
    "scalar_source": lambda m: m.index_reduce(m.zeros(3), 0, L(m, [1]), 1.0, "prod"),
    "inplace_leaf": lambda m: m.zeros(3, requires_grad=True).index_reduce_(
        0, L(m, [1]), m.ones(1), "amax"),
    "inplace_overlap_after_checks": lambda m: m.zeros(1).expand(3).index_reduce_(
        0, L(m, [1, 1]), m.ones(1), "amax"),
    "inplace_overlap": lambda m: m.zeros(1).bool().expand(3).index_reduce_(
        0, L(m, [1]), m.ones(1).bool(), "amax"),
    "inplace_source_alias": lambda m: _with(
        m.zeros(3), lambda z: z.index_reduce_(0, L(m, [1]), z[1:2], "amax")),
    "int32_index_exclude_grad": lambda m: m.autograd.grad(m.index_reduce(
        m.ones(3, requires_grad=True), 0, L(m, [0, 2], "int32"), m.ones(2), "mean",
        include_self=False).sum(), []),
}


@pytest.mark.parametrize("name", sorted(IR_ERRORS))
def test_index_reduce_errors(name):
    assert isinstance(check(IR_ERRORS[name]), Exception)


def test_index_reduce_beta_warning():
    from refimpl.ops import scatter_reduce as mod

    mod._beta_warned.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t.index_reduce(t.zeros(3), 0, L(t, [1]), t.ones(1), "amax")
        t.index_reduce(t.zeros(3), 0, L(t, [1]), t.ones(1), "amax")
    msgs = [str(x.message) for x in w]
    assert msgs == ["index_reduce() is in beta and the API may change at any time."]


# -- autograd -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["scatter_reduce", "index_reduce"])
def test_nodes_and_saved_versions(fn):
    reduces = SR if fn == "scatter_reduce" else IR
    for m in (t, torch):
        for r in reduces:
            a = m.randn(3, requires_grad=True)
            y = getattr(m, fn)(a * 1, 0, L(m, [0, 1, 0]), a * 2, r)
            assert _node(y) == ("ScatterReduceBackward0" if fn == "scatter_reduce"
                                else "IndexReduceBackward0")
            z = a.detach().clone()
            z.requires_grad_(False)
            y2 = getattr(z, fn + "_")(0, L(m, [1]), a[:1] * 3, r)
            assert y2 is z and z._version == 1 and _node(z) == _node(y)

    def modified(m, which, fn, r):
        a = m.ones(3, requires_grad=True)
        x, s, i = a * 1, a * 2, L(m, [0, 1, 0])
        y = getattr(m, fn)(x, 0, i, s, r)
        {"self": x, "src": s, "out": y, "index": i}[which].add_(1)
        y.sum().backward()

    for r in reduces:
        for which in ("self", "src", "out", "index"):
            check(lambda m, which=which, r=r: modified(m, which, fn, r))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("fn", ["scatter_reduce", "index_reduce"])
def test_inplace_grads(fn, include_self):
    for r in (SR if fn == "scatter_reduce" else IR):
        def prog(m, x, s, r=r):
            y = x * 1
            getattr(y, fn + "_")(0, L(m, [0, 3, 3, 1, 0]), s, r, include_self=include_self)
            return y

        def view_prog(m, x, s, r=r):
            y = x * 1
            getattr(y[1:], fn + "_")(0, L(m, [0, 2, 2, 1, 0]), s, r, include_self=include_self)
            return y

        check(prog, XI, SI, grad=True)
        check(view_prog, XI, SI, grad=True)


@pytest.mark.parametrize("include_self", [True, False])
def test_prod_zeros(include_self):
    x = In([[0.0, 2.0, 3.0], [1.0, 0.0, 0.5]], "float64")
    s = In([[0.0, 2.0, 0.0], [4.0, 0.0, 0.0], [3.0, 1.5, 0.0]], "float64")
    check(lambda m, x, s: m.scatter_reduce(x, 0, L(m, [[0, 1, 1], [1, 1, 0], [1, 0, 1]]), s,
                                           "prod", include_self=include_self), x, s, grad=True)
    check(lambda m, x, s: m.index_reduce(x, 0, L(m, [0, 1, 1]), s, "prod",
                                         include_self=include_self), x, s, grad=True)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", SR)
def test_scatter_reduce_double_backward(reduce, include_self):
    x = randn((3, 4), "float64", seed=21)
    s = randn((2, 4), "float64", seed=22)
    check_double_backward(lambda m, x, s: m.scatter_reduce(x, 0, L(m, IDX), s, reduce,
                                                           include_self=include_self), x, s)
    if reduce == "prod":  # a single zero per position still differentiates twice
        s0 = In([[0.0, 1.5, 2.0, -1.0], [3.0, 0.5, 0.0, 2.0]], "float64")
        check_double_backward(lambda m, x, s: m.scatter_reduce(
            x, 0, L(m, IDX), s, reduce, include_self=include_self), x, s0)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", IR)
def test_index_reduce_double_backward(reduce, include_self):
    check_double_backward(lambda m, x, s: m.index_reduce(x, 0, L(m, II), s, reduce,
                                                         include_self=include_self),
                          randn((4, 3), "float64", seed=23), randn((5, 3), "float64", seed=24))


@pytest.mark.parametrize("fn", ["scatter_reduce", "index_reduce"])
def test_prod_double_backward_error(fn):
    def prog(m):
        inp = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        src = m.tensor([0.0, 0.0, 3.0], dtype=m.float64, requires_grad=True)
        y = getattr(m, fn)(inp, 0, L(m, [0, 0, 1]), src, "prod")
        g = m.autograd.grad(y.sum(), (inp, src), create_graph=True)
        assert _node(g[1]) in ("Error", "torch::autograd::Error")
        m.autograd.grad(g[0].sum(), (inp, src), allow_unused=True)  # self's part is fine
        return m.autograd.grad(g[1].sum(), (inp, src))

    err = check(prog)
    assert "Double backward is unsupported for" in str(err)


def test_gradcheck_and_gradgradcheck():
    x = t.randn(2, 3, dtype=t.float64, requires_grad=True)
    src = x.detach().clone().requires_grad_(True)
    for fn in (t.scatter_reduce, t.index_reduce):
        for r in ("amin", "amax", "mean", "prod"):
            idx = t.arange(2)
            if fn is t.scatter_reduce:
                idx = idx.unsqueeze(-1).expand((2, 3))
            assert t.autograd.gradcheck(fn, (x, 0, idx, src, r), check_batched_grad=False)
    s = t.randn(3, 3, dtype=t.float64, requires_grad=True)
    for fn, idx in ((t.scatter_reduce, t.tensor([[0, 1, 0], [1, 1, 0], [0, 0, 1]])),
                    (t.index_reduce, t.tensor([0, 1, 0]))):
        for r in ("mean", "prod"):
            assert t.autograd.gradgradcheck(lambda a, b, fn=fn, idx=idx, r=r: fn(a, 0, idx, b, r),
                                            (x, s))


# -- unsafe_split / unsafe_split_with_sizes / unsafe_chunk ----------------------------------------

UNSAFE = {
    "split": lambda m, x: m.unsafe_split(x, 2),
    "split_dim": lambda m, x: x.unsafe_split(3, dim=1),
    "split_kw": lambda m, x: m.unsafe_split(x, split_size=2, dim=-1),
    "split_big": lambda m, x: x.unsafe_split(10),
    "with_sizes": lambda m, x: m.unsafe_split_with_sizes(x, [1, 2, 0]),
    "with_sizes_dim": lambda m, x: x.unsafe_split_with_sizes((1, 3), 1),
    "with_sizes_kw": lambda m, x: x.unsafe_split_with_sizes(split_sizes=[2, 1], dim=0),
    "chunk": lambda m, x: m.unsafe_chunk(x, 2),
    "chunk_dim": lambda m, x: x.unsafe_chunk(3, 1),
    "chunk_many": lambda m, x: m.unsafe_chunk(x, 5, dim=1),
    "chunk_empty": lambda m, x: m.unsafe_chunk(x[:0], 2),
    "split_empty": lambda m, x: m.unsafe_split(x[:0], 0),
    "of_view": lambda m, x: x[:, 1:].unsafe_split(1, 1),
}


def _unsafe_meta(outs, src):
    root = src if src._base is None else src._base
    ptr = root.untyped_storage().data_ptr()
    return [(tuple(o.shape), tuple(o.stride()), o.storage_offset(), o._base is None,
             o.untyped_storage().data_ptr() == ptr, o._version, _node(o), o.requires_grad)
            for o in outs]


@pytest.mark.parametrize("name", sorted(UNSAFE))
def test_unsafe_split_values_meta_grads(name):
    fn = UNSAFE[name]
    x = randn((3, 4), seed=31)
    check(fn, x, grad=True)
    for rg in (True, False):
        metas = []
        for m in (t, torch):
            base = x.build(m, rg)
            src = base * 1 if rg else base
            metas.append(_unsafe_meta(fn(m, src), src))
        assert metas[0] == metas[1]


def test_unsafe_split_inplace_allowed():
    def prog(m, a, w):
        a = a.detach().requires_grad_(True)
        out = []
        for f in (lambda x: x.unsafe_split(1), lambda x: x.unsafe_split_with_sizes((1, 1, 1)),
                  lambda x: x.unsafe_chunk(3), lambda x: m.unsafe_split(x, 2, 1)):
            b = a + a
            s1, s2 = f(b)[:2]
            s1.mul_(s2)
            # the pieces alias b's memory but have versions of their own
            out += [_node(s1), _node(s2), b._version, s1._version, s2._version, b.clone()]
            (s1 * w[: s1.shape[0], : s1.shape[1]]).sum().backward()
            out.append(a.grad.clone())
            a.grad = None
        return out

    res = check(lambda m, a, w: tuple(prog(m, a, w)), randn((3, 3), seed=1),
                randn((3, 3), seed=2), grad=False)
    assert res[0] == "MulBackward0"


def test_unsafe_split_leaf_and_no_grad():
    def prog(m, leaf):
        p = leaf.unsafe_split(2)
        p[0].add_(1)  # an output of UnsafeSplitBackward0, not a view of the leaf: allowed
        with m.no_grad():
            q = leaf.unsafe_split(2)
        q[1].mul_(2)
        return (_node(p[0]), q[1].requires_grad, leaf.detach().clone(), leaf._version)

    check(prog, randn((4,), seed=3), grad=True)


UNSAFE_ERRORS = {
    "split_zero": lambda m: m.unsafe_split(m.zeros(3, 4), 0),
    "split_negative": lambda m: m.unsafe_split(m.zeros(3, 4), -1),
    "split_0d": lambda m: m.unsafe_split(m.tensor(1.0), 1),
    "split_list": lambda m: m.unsafe_split(m.zeros(3, 4), [1, 2]),
    "split_dim": lambda m: m.unsafe_split(m.zeros(3, 4), 2, 5),
    "chunk_0d": lambda m: m.unsafe_chunk(m.tensor(1.0), 1),
    "chunk_zero": lambda m: m.unsafe_chunk(m.zeros(3), 0),
    "chunk_dim": lambda m: m.zeros(3).unsafe_chunk(2, 1),
    "sizes_sum": lambda m: m.unsafe_split_with_sizes(m.zeros(3, 4), [1, 1]),
    "sizes_negative": lambda m: m.unsafe_split_with_sizes(m.zeros(3, 4), [4, -1]),
    "sizes_int": lambda m: m.unsafe_split_with_sizes(m.zeros(3, 4), 3),
    "sizes_0d": lambda m: m.unsafe_split_with_sizes(m.tensor(1.0), [1]),
}


@pytest.mark.parametrize("name", sorted(UNSAFE_ERRORS))
def test_unsafe_split_errors(name):
    assert isinstance(check(UNSAFE_ERRORS[name]), Exception)


def test_unsafe_split_double_backward_and_meta():
    check_double_backward(lambda m, x: tuple(p * p for p in m.unsafe_chunk(x, 2, 1)),
                          randn((3, 4), "float64", seed=5))
    x = t.empty(3, 4, device="meta")
    assert [tuple(p.shape) for p in x.unsafe_split(2)] == [(2, 4), (1, 4)]
    assert [p.device.type for p in t.unsafe_chunk(x, 2, 1)] == ["meta", "meta"]


# -- forward-mode rules (refimpl's forward AD engine is not there yet: the rules directly) ----

class _Ctx:
    def __init__(self, args, kwargs, outputs) -> None:
        self.args, self.kwargs, self.outputs = args, kwargs, outputs
        self.needs_input_grad = tuple(isinstance(a, t.Tensor) for a in args)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", SR)
@pytest.mark.parametrize("which", ["both", "self", "src"])
def test_scatter_reduce_jvp(reduce, include_self, which):
    import torch.autograd.forward_ad as fwad

    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (3, 4)).astype(float)
    s = rng.integers(-2, 3, (2, 4)).astype(float)
    tx, ts = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    op = t.ops.REGISTRY["scatter_reduce"]
    args = (t.tensor(x), 0, t.tensor(IDX), t.tensor(s), reduce)
    kwargs = {"include_self": include_self}
    out = op(*args, **kwargs)
    got = op.jvp(_Ctx(args, kwargs, (out,)), t.tensor(tx) if which != "src" else None, None,
                 None, t.tensor(ts) if which != "self" else None)
    with fwad.dual_level():
        dx = fwad.make_dual(torch.tensor(x), torch.tensor(tx)) if which != "src" else \
            torch.tensor(x)
        ds = fwad.make_dual(torch.tensor(s), torch.tensor(ts)) if which != "self" else \
            torch.tensor(s)
        expected = fwad.unpack_dual(torch.scatter_reduce(dx, 0, torch.tensor(IDX), ds, reduce,
                                                         include_self=include_self)).tangent
    if expected is None:
        assert got is None
    else:
        np.testing.assert_allclose(got._np, expected.numpy(), rtol=1e-9, atol=1e-12)


def test_other_jvp_rules():
    op = t.ops.REGISTRY["index_reduce"]
    args = (t.zeros(3), 0, L(t, [1]), t.ones(1), "amax")
    with pytest.raises(NotImplementedError, match="forward AD with index_reduce"):
        op.jvp(_Ctx(args, {}, (op(*args),)), t.ones(3), None, None, None)
    for name, arg in (("unsafe_split", 2), ("unsafe_split_with_sizes", [1, 2])):
        op = t.ops.REGISTRY[name]
        x = t.arange(6.0).reshape(3, 2)
        got = op.jvp(_Ctx((x, arg, 0), {}, op(x, arg, 0)), x * 2)
        assert [g.tolist() for g in got] == [g.tolist() for g in (x * 2).split(arg)]


def test_index_reduce_one_dim_dtypes():
    for dtype in ("bool", "complex64", "float16", "int8"):
        x, s = randint(0, 3, (4,), dtype, seed=1), randint(0, 3, (3,), dtype, seed=2)
        for r in IR:
            for inc in (True, False):
                for idx in ([0, 3, 3], [], [5, 0, 0]):
                    n = len(idx)
                    check(lambda m, x, s, idx=idx, n=n, r=r, inc=inc: m.index_reduce(
                        x, 0, L(m, idx), s[:n], r, include_self=inc), x, s)


def test_index_reduce_complex_two_dims():
    z = In(np.arange(12).reshape(4, 3) + 1j, "complex64")
    zs = In(np.ones((3, 3)) * (2 - 1j), "complex64")
    for r in IR:
        for idx in ([0, 3, 3], [7, 0, 0], [0, 7, 0]):
            check(lambda m, x, s, idx=idx, r=r: m.index_reduce(x, 0, L(m, idx), s, r), z, zs)
    # differentiable complex inputs: the forward runs, then torch refuses
    check(lambda m, x, s: m.index_reduce(x, 0, L(m, [0, 3, 3]), s, "prod"), z, zs, grad=True)
    check(lambda m, x, s: m.scatter_reduce(x, 0, L(m, [[0, 3, 3]]), s, "amax"), z, zs,
          grad=True)


def test_meta_device():
    def prog(m, reduce, fn="scatter_reduce"):
        x = m.empty(3, 4, device="meta")
        i = m.zeros(2, 4, dtype=m.long, device="meta")
        if fn == "index_reduce":
            i = i[:, 0]
        out = getattr(m, fn)(x, 0, i, m.empty(2, 4, device="meta"), reduce)
        return (tuple(out.shape), str(out.device), str(out.dtype))

    for r in ("sum", "amax", "foo"):
        check(lambda m, r=r: prog(m, r))
    for r in ("mean", "foo"):
        check(lambda m, r=r: prog(m, r, "index_reduce"))
