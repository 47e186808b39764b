"""softmax and log_softmax against torch on the CPU: values, dtypes, errors, autograd
nodes, gradients (first and second order) and forward-mode tangents."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t

FLOATS = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_values_match_torch(name, dtype, dim):
    check(lambda m, x: getattr(m, name)(x, dim), randn((3, 4, 5), dtype, 1))
    check(lambda m, x: getattr(x, name)(dim), randn((3, 4, 5), dtype, 2))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_dtype_argument_converts_first(name):
    check(lambda m, x: getattr(m, name)(x, 1, dtype=m.float64), randn((3, 4), "float32"))
    check(lambda m, x: getattr(m, name)(x, 0, m.float64), randn((3, 4), "float16"))
    check(lambda m, x: getattr(m, name)(x, 0, dtype=m.float32), randint(0, 5, (3, 4)))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_edge_cases(name):
    inf, nan = float("inf"), float("nan")
    check(lambda m, x: getattr(m, name)(x, 0), In([inf, 1.0, -inf], "float32"))
    check(lambda m, x: getattr(m, name)(x, 0), In([-inf, -inf], "float32"))
    check(lambda m, x: getattr(m, name)(x, 1), In([[nan, 1.0], [2.0, 3.0]], "float32"))
    check(lambda m, x: getattr(m, name)(x, 0), In(2.5, "float32"))
    check(lambda m, x: getattr(m, name)(x, -1), In(2.5, "float64"))
    check(lambda m, x: getattr(m, name)(x, 0), randn((0, 3), "float32"))
    check(lambda m, x: getattr(m, name)(x, 1), randn((0, 3), "float32"))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype,shape,dim", [("int64", (3, 2), 0), ("int64", (3, 2), 1),
                                             ("bool", (3,), 0), ("int64", (), 0),
                                             ("complex64", (3,), 0)])
def test_unsupported_dtypes_raise_like_torch(name, dtype, shape, dim):
    data = randn(shape, dtype) if dtype == "complex64" else randint(0, 2, shape, dtype)
    check(lambda m, x: getattr(m, name)(x, dim), data)


def test_dim_errors_match_torch():
    check(lambda m, x: m.softmax(x, 2), randn((3, 4)))
    check(lambda m, x: m.log_softmax(x, 1), In(1.0, "float32"))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_gradients_match_torch(name, dim):
    check(lambda m, x: getattr(m, name)(x, dim), randn((4, 5), "float64", 3), grad=True)
    check_double_backward(lambda m, x: getattr(m, name)(x, dim), randn((3, 4), "float64", 4))


def test_autograd_nodes_are_torchs():
    x = t.randn(3, 4, requires_grad=True)
    assert type(t.softmax(x, 1).grad_fn).__name__ == "SoftmaxBackward0"
    assert type(t.log_softmax(x, 1).grad_fn).__name__ == "LogSoftmaxBackward0"
    y = t.softmax(x, 1, dtype=t.float64)
    assert type(y.grad_fn).__name__ == "SoftmaxBackward0"
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "ToCopyBackward0"


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_jvp_matches_torch_forward_ad(name):
    from refimpl.ops import REGISTRY

    rng = np.random.default_rng(1)
    x, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    op = REGISTRY[name]
    xr = t.tensor(x)
    out = op(xr, 1)
    ctx = SimpleNamespace(args=(xr, 1), kwargs={}, outputs=(out,),
                          needs_input_grad=(True, False))
    tangent = op.jvp(ctx, t.tensor(v), None)
    fn = getattr(torch, name)
    _, expected = torch.func.jvp(lambda a: fn(a, 1), (torch.tensor(x),), (torch.tensor(v),))
    np.testing.assert_allclose(tangent._np, expected.numpy(), rtol=1e-9, atol=1e-12)
