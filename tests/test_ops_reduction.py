"""Reductions and scans against torch: values, dtypes, shapes, errors and gradients."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
ALL = ["bool", *INTS, *FLOATS, "complex64"]
DIMS = [None, 0, 1, -1, (0, 2), [2, 0, 1], ()]
NAN = float("nan")


def data(dtype: str, shape=(2, 3, 4), seed: int = 0) -> In:
    """Values that every dtype can hold exactly (small, positive for unsigned)."""
    if dtype == "bool":
        return randint(0, 2, shape, "bool", seed)
    if dtype in INTS:
        return randint(0 if dtype == "uint8" else -4, 5, shape, dtype, seed)
    return randn(shape, dtype, seed)


def _call(name, dim, keepdim, **kw):
    def fn(m, x):
        f = getattr(m, name)
        if dim is None and not keepdim:
            return f(x, **kw)
        return f(x, dim, keepdim, **kw)
    return fn


# -- sum, mean, prod, nansum, nanmean ----------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dtypes_dims(dtype, dim, keepdim):
    check(_call("sum", dim, keepdim), data(dtype))
    check(lambda m, x: x.sum(*(() if dim is None else (dim, keepdim))), data(dtype))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("out", ["float64", "int32", "bool", "complex128"])
def test_sum_dtype_argument_casts_first(dtype, out):
    check(lambda m, x: m.sum(x, dtype=getattr(m, out)), In([[1.5, -2.5], [3.0, 0.0]], dtype))
    check(lambda m, x: m.sum(x, 1, dtype=getattr(m, out)), In([[1.5, -2.5], [3.0, 0.0]], dtype))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", DIMS)
def test_mean_dtypes_and_error(dtype, dim):
    check(_call("mean", dim, False), data(dtype))
    check(lambda m, x: m.mean(x, dtype=m.float64), data(dtype))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod(dtype, dim, keepdim):
    check(_call("prod", dim, keepdim), data(dtype, (2, 3)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex64"])
def test_nansum_nanmean(dtype):
    x = In([[1.0, NAN, 3.0], [NAN, NAN, 2.0]] if dtype != "int64" else [[1, 2], [3, 4]], dtype)
    for dim in (None, 0, 1, (0, 1)):
        check(_call("nansum", dim, False), x)
        check(_call("nanmean", dim, False), x)


def test_half_accumulates_in_float32():
    big = In(np.full(3000, 60000.0), "float16")
    check(lambda m, x: m.mean(x), big)
    check(lambda m, x: m.sum(x), big)
    check(lambda m, x: m.sum(x), In([1000.0, 2000.0, 60000.0], "float16"))
    check(lambda m, x: m.sum(x), In(np.full(4096, 0.1), "bfloat16"), rtol=1e-2)


def test_empty_reductions():
    e = In(np.zeros((0, 3)))
    for name in ("sum", "mean", "prod", "nansum", "logsumexp", "all", "any", "count_nonzero"):
        for dim in (0, 1, (0, 1)):
            check(lambda m, x, n=name, d=dim: getattr(m, n)(x, d), e)
    for name in ("sum", "mean", "prod", "all", "any", "count_nonzero"):
        check(lambda m, x, n=name: getattr(m, n)(x), e)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "var", "logsumexp", "all",
                                  "count_nonzero", "nansum", "std"])
@pytest.mark.parametrize("dim", [3, -4, (0, 0), (1, -2)])
def test_dim_errors(name, dim):
    check(lambda m, x: getattr(m, name)(x, dim), data("float32"))


def test_zero_dim_inputs():
    s = In(3.5)
    for name in ("sum", "mean", "prod", "amax", "logsumexp", "argmax", "max", "var", "std",
                 "cumsum", "cumprod", "cummax", "all", "count_nonzero"):
        for dim in (0, -1):
            check(lambda m, x, n=name, d=dim: getattr(m, n)(x, d), s)
        check(lambda m, x, n=name: getattr(m, n)(x, 1), s)
    check(lambda m, x: m.sum(x, 0, keepdim=True), s)


def test_argument_errors():
    x = data("float32")
    check(lambda m, x: x.sum(keepdim=True), x)
    check(lambda m, x: x.prod((0, 1)), x)
    check(lambda m, x: x.max((0, 1)), x)
    check(lambda m, x: x.var(0, unbiased=True, correction=1), x)
    check(lambda m, x: x.median(keepdim=True), x)


# -- max, min, amax, amin, aminmax, argmax, argmin ---------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min(dtype, name):
    x = data(dtype)
    check(lambda m, x: getattr(m, name)(x), x)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check(lambda m, x, d=dim, k=keepdim: getattr(m, name)(x, d, k), x)
            check(lambda m, x, d=dim, k=keepdim: getattr(x, name)(dim=d, keepdim=k), x)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["amax", "amin", "argmax", "argmin"])
def test_amax_argmax(dtype, name):
    for dim in ((None, (), 0, (0, 2), [-1, 1]) if name[1] == "m" else (None, 0, -1)):
        for keepdim in (False, True):
            if dim is None and name[1] == "m":
                check(lambda m, x: getattr(m, name)(x), data(dtype))
                continue
            check(lambda m, x, d=dim, k=keepdim: getattr(m, name)(x, d, k), data(dtype))


@pytest.mark.parametrize("dtype", ALL)
def test_aminmax(dtype):
    check(lambda m, x: m.aminmax(x), data(dtype))
    check(lambda m, x: m.aminmax(x, dim=1), data(dtype))
    check(lambda m, x: m.aminmax(x, dim=-1, keepdim=True), data(dtype))


def test_max_nan_and_ties():
    x = In([[1.0, NAN, 3.0, NAN], [3.0, 1.0, 1.0, 3.0]])
    for name in ("max", "min", "argmax", "argmin", "amax", "amin"):
        check(lambda m, x, n=name: getattr(m, n)(x, 1), x)
        check(lambda m, x, n=name: getattr(m, n)(x), x)
    check(lambda m, x: m.aminmax(x, dim=1), x)


def test_max_empty_errors():
    e = In(np.zeros((0, 3)))
    for name in ("max", "min", "amax", "amin", "argmax", "argmin", "aminmax", "median",
                 "mode"):
        for args in ((), (0,), (1,)):
            if name == "aminmax":
                check(lambda m, x, a=args: m.aminmax(x, **({"dim": a[0]} if a else {})), e)
            else:
                check(lambda m, x, n=name, a=args: getattr(m, n)(x, *a), e)
    check(lambda m, x: m.amax(x, (0, 1)), In(np.zeros((2, 0, 3))))
    check(lambda m, x: m.amax(x, (2, 1)), In(np.zeros((2, 0, 3))))


def test_max_binary_and_out():
    a, b = randn((2, 3)), randn((2, 3), seed=1)
    check(lambda m, x, y: m.max(x, y), a, b)
    check(lambda m, x, y: x.min(y), a, b)

    def with_out(m, x):
        v, i = m.empty(2), m.empty(2, dtype=m.int64)
        r = m.max(x, 1, out=(v, i))
        return r, v, i
    check(with_out, a)


def test_return_types():
    r = t.max(t.tensor([[1.0, 5.0], [7.0, 2.0]]), 1)
    assert r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
    assert type(r).__name__ == "max" and isinstance(r, tuple)
    assert repr(r).startswith("torch.return_types.max(\nvalues=tensor(")
    assert type(pickle.loads(pickle.dumps(r))).__name__ == "max"
    assert t.return_types.sort is type(t.sort(t.tensor([2.0, 1.0])))


# -- var, std, norm, logsumexp -----------------------------------------------------------

@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "int64"])
def test_var_std(name, dtype):
    x = data(dtype)
    f = getattr
    check(lambda m, x: f(m, name)(x), x)
    check(lambda m, x: f(m, name)(x, 1), x)
    check(lambda m, x: f(m, name)(x, (0, 2), True, True), x)
    check(lambda m, x: f(m, name)(x, False), x)
    check(lambda m, x: f(m, name)(x, dim=1, correction=0, keepdim=True), x)
    check(lambda m, x: f(m, name)(x, correction=2.5), x)


def test_var_degrees_of_freedom_warning():
    for name in ("var", "std", "var_mean", "std_mean"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = getattr(t, name)(t.ones(1))
        torch_w = []
        with warnings.catch_warnings(record=True) as tw:
            warnings.simplefilter("always")
            getattr(torch, name)(torch.ones(1))
            torch_w = [str(x.message).split(" (Triggered")[0] for x in tw]
        assert [str(x.message) for x in w] == torch_w
        assert math.isnan((r[0] if isinstance(r, tuple) else r).item())
    check(lambda m, x: m.var(x, 0, correction=5), data("float32"))


@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, -1, float("inf"), -float("inf"), "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_norm(p, dim):
    check(lambda m, x: m.norm(x, p, dim), data("float32"))
    check(lambda m, x: x.norm(p, dim, True), data("float64"))
    check(lambda m, x: m.linalg_vector_norm(x, p if p != "fro" else 2, dim)
          if m is t else m.linalg.vector_norm(x, p if p != "fro" else 2, dim), data("float32"))


def test_norm_dtypes_and_errors():
    check(lambda m, x: x.norm(), data("int64"))
    check(lambda m, x: x.norm(), data("bool"))
    check(lambda m, x: x.norm(), data("complex64"))
    check(lambda m, x: x.norm(), data("float16"))
    check(lambda m, x: x.norm(dtype=m.float64), data("float32"))
    check(lambda m, x: x.norm(dtype=m.float16), data("float32"))
    check(lambda m, x: x.norm(dtype=m.int64), data("float32"))
    check(lambda m, x: x.norm(dtype=m.complex64), data("float32"))
    check(lambda m, x: x.norm("abc"), data("float32"))
    check(lambda m, x: x.norm("fro", (0, 1, 2)), data("float32"))
    for p in (float("inf"), -float("inf"), -1, 0, 2):
        check(lambda m, x, p=p: x.norm(p), In(np.zeros(0)))
        check(lambda m, x, p=p: x.norm(p, 0), In(np.zeros((0, 3))))
    check(lambda m, x, y: m.dist(x, y, 3), data("float32"), data("float32", seed=1))
    check(lambda m, x, y: m.dist(x, y), data("int64"), data("int64", seed=1))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64", "bool",
                                   "complex64"])
def test_logsumexp(dtype):
    for dim in (0, -1, (0, 1)):
        for keepdim in (False, True):
            check(lambda m, x, d=dim, k=keepdim: m.logsumexp(x, d, k), data(dtype))
    check(lambda m, x: m.logsumexp(x, 0), In([[math.inf, 1.0], [-math.inf, -math.inf]]))


# -- all, any, count_nonzero -------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any(dtype, name):
    x = data(dtype, seed=3)
    check(lambda m, x: getattr(m, name)(x), x)
    for dim in (0, -1, (0, 2)):
        check(lambda m, x, d=dim: getattr(m, name)(x, d), x)
        check(lambda m, x, d=dim: getattr(x, name)(d, keepdim=True), x)


@pytest.mark.parametrize("dtype", ALL)
def test_count_nonzero(dtype):
    x = data(dtype, seed=4)
    for dim in (None, 0, -1, (0, 2)):
        check(lambda m, x, d=dim: m.count_nonzero(x, d), x)
    check(lambda m, x: m.count_nonzero(x, 0, keepdim=True), x)


# -- scans ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumsum_cumprod(dtype, name):
    x = data(dtype, (2, 5))
    for dim in (0, 1, -1):
        check(lambda m, x, d=dim: getattr(m, name)(x, d), x)
    check(lambda m, x: getattr(m, name)(x, 1, dtype=m.float64), x)
    check(lambda m, x: getattr(m, name)(x, 1, dtype=m.bool), x)
    check(lambda m, x: getattr(m, name)(x, 2), x)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float32",
                                   "complex64"])
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin(dtype, name):
    for dim in (0, 1):
        check(lambda m, x, d=dim: getattr(m, name)(x, d), data(dtype, (3, 6), seed=5))
    x = In([3.0, NAN, 1.0, 2.0, NAN, 5.0, 5.0, 1.0])
    check(lambda m, x: getattr(m, name)(x, 0), x)
    check(lambda m, x: getattr(m, name)(x, 0), In([1.0, 3.0, 3.0, 2.0, 3.0, 1.0, 1.0]))


# -- gradients -------------------------------------------------------------------------

GRAD_CASES = [
    ("sum", lambda m, x: m.sum(x)), ("sum.dim", lambda m, x: m.sum(x, (0, 2))),
    ("sum.keepdim", lambda m, x: x.sum(1, keepdim=True)),
    ("sum.dtype", lambda m, x: m.sum(x, 1, dtype=m.float64)),
    ("mean", lambda m, x: m.mean(x)), ("mean.dim", lambda m, x: m.mean(x, -1, True)),
    ("nansum", lambda m, x: m.nansum(x, 1)), ("nanmean", lambda m, x: m.nanmean(x, 1)),
    ("prod", lambda m, x: m.prod(x)), ("prod.dim", lambda m, x: m.prod(x, 1)),
    ("prod.dim.keep", lambda m, x: x.prod(-1, keepdim=True)),
    ("max", lambda m, x: m.max(x)), ("max.dim", lambda m, x: m.max(x, 1)),
    ("min.dim.keep", lambda m, x: m.min(x, 0, True)), ("amax", lambda m, x: m.amax(x, (0, 1))),
    ("amin", lambda m, x: m.amin(x, -1)), ("aminmax", lambda m, x: m.aminmax(x, dim=1)),
    ("aminmax.full", lambda m, x: m.aminmax(x)),
    ("var", lambda m, x: m.var(x)), ("var.dim", lambda m, x: m.var(x, 1, keepdim=True)),
    ("std", lambda m, x: m.std(x, 2, correction=0)), ("var_mean", lambda m, x: m.var_mean(x, 1)),
    ("std_mean", lambda m, x: m.std_mean(x)),
    ("norm", lambda m, x: m.norm(x)), ("norm1", lambda m, x: m.norm(x, 1, 1)),
    ("norm3", lambda m, x: m.norm(x, 3, 2)), ("norm.5", lambda m, x: m.norm(x, 0.5)),
    ("norm1.5", lambda m, x: m.norm(x, 1.5, 0)), ("norminf", lambda m, x: m.norm(x, math.inf, 1)),
    ("norm-inf", lambda m, x: m.norm(x, -math.inf)),
    ("logsumexp", lambda m, x: m.logsumexp(x, (0, 1))),
    ("cumsum", lambda m, x: m.cumsum(x, 1)), ("cumprod", lambda m, x: m.cumprod(x, 2)),
    ("cummax", lambda m, x: m.cummax(x, 1)), ("cummin", lambda m, x: m.cummin(x, 0)),
]


@pytest.mark.parametrize("name,fn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients(name, fn, dtype):
    check(fn, data(dtype), grad=True, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,fn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_with_zeros_ties_and_nans(name, fn):
    x = In([[[0.0, 1.0, 1.0, 2.0], [2.0, 0.0, 0.0, 3.0], [1.0, 1.0, 1.0, 1.0]],
            [[0.0, 0.0, 0.0, 0.0], [5.0, -5.0, 5.0, 1.0], [2.0, 2.0, 0.5, 0.5]]], "float64")
    check(fn, x, grad=True)
    if name in ("sum", "nansum", "nanmean", "max", "amax", "cumsum"):
        check(fn, In([[[NAN, 1.0], [1.0, NAN]]], "float64"), grad=True)


@pytest.mark.parametrize("name,fn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_double_backward(name, fn):
    check_double_backward(fn, data("float64"))


def test_grad_node_names():
    x = t.ones(2, 3, requires_grad=True)
    names = {
        "SumBackward0": x.sum(), "SumBackward1": x.sum(0), "MeanBackward0": x.mean(),
        "MeanBackward1": x.mean(1), "ProdBackward0": x.prod(), "ProdBackward1": x.prod(1),
        "MaxBackward1": x.max(), "MaxBackward0": x.max(0).values, "MinBackward1": x.min(),
        "AmaxBackward0": x.amax(1), "VarBackward0": x.var(), "StdBackward0": x.std(0),
        "VarMeanBackward0": t.var_mean(x)[0], "LinalgVectorNormBackward0": x.norm(),
        "LogsumexpBackward0": x.logsumexp(1), "CumsumBackward0": x.cumsum(0),
        "CumprodBackward0": x.cumprod(1), "CummaxBackward0": x.cummax(0).values,
        "NansumBackward0": x.nansum(), "AminmaxBackward0": t.aminmax(x).min,
    }
    for name, out in names.items():
        assert type(out.grad_fn).__name__ == name
    assert not x.argmax().requires_grad and not x.max(0).indices.requires_grad


def test_select_backward_ignores_inplace_change_of_input():
    def fn(m, x):
        y = x * 1
        v = y.max(1).values
        y.add_(1)
        return v
    check(fn, data("float64"), grad=True)


JVP_CASES = [
    ("sum", (), {}, lambda x: x.sum()),
    ("sum.dim_IntList", ((0, 2),), {}, lambda x: x.sum((0, 2))),
    ("mean.dim", (1, True), {}, lambda x: x.mean(1, True)),
    ("nansum", (1,), {}, lambda x: x.nansum(1)),
    ("prod", (), {}, lambda x: x.prod()), ("prod.dim_int", (2,), {}, lambda x: x.prod(2)),
    ("max", (), {}, lambda x: x.max()), ("max.dim", (1,), {}, lambda x: x.max(1)[0]),
    ("amax", ((0, 1),), {}, lambda x: x.amax((0, 1))),
    ("aminmax", (), {"dim": 1}, lambda x: torch.aminmax(x, dim=1)[0]),
    ("var", (1,), {"correction": 0}, lambda x: x.var(1, correction=0)),
    ("std", (), {}, lambda x: x.std()),
    ("var_mean", (2,), {}, lambda x: torch.var_mean(x, 2)[0]),
    ("std_mean", (2,), {}, lambda x: torch.std_mean(x, 2)[0]),
    ("linalg_vector_norm", (3, 1), {}, lambda x: torch.linalg.vector_norm(x, 3, 1)),
    ("linalg_vector_norm", (math.inf,), {}, lambda x: torch.linalg.vector_norm(x, math.inf)),
    ("linalg_vector_norm", (0.5, 2), {}, lambda x: torch.linalg.vector_norm(x, 0.5, 2)),
    ("logsumexp", (1,), {}, lambda x: x.logsumexp(1)),
    ("cumsum", (1,), {}, lambda x: x.cumsum(1)), ("cumprod", (2,), {}, lambda x: x.cumprod(2)),
    ("cummax", (1,), {}, lambda x: x.cummax(1)[0]),
]


@pytest.mark.parametrize("name,args,kwargs,tfn", JVP_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(JVP_CASES)])
@pytest.mark.parametrize("zeros", [False, True])
def test_jvp_rules_match_torch_forward_ad(name, args, kwargs, tfn, zeros):
    from types import SimpleNamespace

    from refimpl.ops import REGISTRY

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4))
    if zeros:
        x[0, 1] = 0.0
        x[1, :, 2] = 1.5
    v = rng.standard_normal((2, 3, 4))
    op = REGISTRY[name]
    xr = t.tensor(x)
    out = op(xr, *args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    ctx = SimpleNamespace(args=(xr, *args), kwargs=kwargs, outputs=outs,
                          needs_input_grad=(True,) + (False,) * len(args))
    tangent = op.jvp(ctx, t.tensor(v), *([None] * len(args)))
    if isinstance(tangent, tuple):
        tangent = tangent[0]
    _, expected = torch.func.jvp(tfn, (torch.tensor(x),), (torch.tensor(v),))
    np.testing.assert_allclose(tangent._np, expected.numpy(), rtol=1e-9, atol=1e-12)


STRIDED_OPS = [
    lambda m, v: m.sum(v, 1), lambda m, v: v.mean((0, 2)), lambda m, v: m.prod(v, 2),
    lambda m, v: v.amax(0), lambda m, v: m.max(v, 1), lambda m, v: v.argmin(2),
    lambda m, v: m.var(v, 0), lambda m, v: v.norm(3, 1), lambda m, v: m.logsumexp(v, 2),
    lambda m, v: v.cumsum(1), lambda m, v: m.cumprod(v, 0), lambda m, v: v.cummax(2),
    lambda m, v: m.all(v, 1), lambda m, v: v.count_nonzero(0), lambda m, v: m.sum(v),
    lambda m, v: m.nansum(v, 2), lambda m, v: m.aminmax(v, dim=1),
]


@pytest.mark.parametrize("k", range(len(STRIDED_OPS)))
def test_non_contiguous_inputs(k):
    op = STRIDED_OPS[k]
    check(lambda m, x: op(m, x.transpose(0, 2)[1:, ::2]), data("float64", (4, 5, 6)),
          grad=True)


def test_large_sum_and_mean_match_torch_accuracy():
    x = np.random.default_rng(0).random(2 ** 20 + 77).astype(np.float32)
    exact = x.astype(np.float64).sum()
    for dtype in ("float32", "float64"):
        ours = float(t.tensor(x, dtype=getattr(t, dtype)).sum())
        theirs = float(torch.tensor(x).to(getattr(torch, dtype)).sum())
        assert abs(ours - exact) <= max(4 * abs(theirs - exact), 1e-6 * exact)
        assert abs(float(t.tensor(x, dtype=getattr(t, dtype)).mean()) * x.size - exact) <= \
            max(4 * abs(theirs - exact), 1e-6 * exact)
