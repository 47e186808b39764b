"""nn.init (fans, gains, distributions, errors) and nn.utils (clipping, vectors) against
torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

import refimpl
from refimpl import nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2, 2), (6, 2, 3)])
def test_fans_and_gains_match_torch(shape):
    ref = refimpl.empty(*shape)
    assert nn.init._calculate_fan_in_and_fan_out(ref) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    for name, param in [("relu", None), ("tanh", None), ("leaky_relu", 0.2),
                        ("leaky_relu", None), ("selu", None), ("conv2d", None)]:
        assert nn.init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


def test_init_errors_match_torch():
    for fn, args, exc, msg in [
        (lambda lib: lib.nn.init.calculate_gain("foo"), (), ValueError,
         "Unsupported nonlinearity foo"),
        (lambda lib: lib.nn.init.xavier_uniform_(lib.empty(3)), (), ValueError,
         "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"),
        (lambda lib: lib.nn.init.kaiming_normal_(lib.empty(3, 3), mode="fan"), (), ValueError,
         "Mode fan not supported, please use one of \\['fan_in', 'fan_out'\\]"),
        (lambda lib: lib.nn.init.eye_(lib.empty(3)), (), ValueError,
         "Only tensors with 2 dimensions are supported"),
        (lambda lib: lib.nn.init.calculate_gain("leaky_relu", True), (), ValueError,
         "negative_slope True not a valid number"),
    ]:
        for lib in (torch, refimpl):
            with pytest.raises(exc, match=msg):
                fn(lib, *args)


@pytest.mark.parametrize(("fn", "kwargs", "std"), [
    ("xavier_uniform_", {}, math.sqrt(2 / (300 + 200))),
    ("xavier_normal_", {"gain": 2.0}, 2 * math.sqrt(2 / (300 + 200))),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(2 / 6) / math.sqrt(300)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2 / 200)),
    ("trunc_normal_", {"std": 0.02, "a": -0.04, "b": 0.04}, None),
])
def test_initialiser_distributions(fn, kwargs, std):
    x = refimpl.empty(200, 300)
    with refimpl.no_grad():
        getattr(nn.init, fn)(x, **kwargs)
    a = x.numpy()
    if std is not None:
        assert abs(a.std() - std) < 0.05 * std
    else:
        assert a.min() >= -0.04 and a.max() <= 0.04
        assert abs(a.std() - 0.0176) < 0.002  # N(0, 0.02) truncated at 2 std


def test_small_initialisers():
    x = refimpl.empty(3, 3)
    assert nn.init.eye_(x).tolist() == np.eye(3).tolist()
    assert nn.init.constant_(x, 2.5).tolist() == [[2.5] * 3] * 3
    w = refimpl.empty(2, 2, 3, 3)
    nn.init.dirac_(w)
    expected = torch.nn.init.dirac_(torch.empty(2, 2, 3, 3))
    np.testing.assert_array_equal(w.numpy(), expected.numpy())


@pytest.mark.parametrize(("max_norm", "norm_type"), [(1.0, 2.0), (0.1, 1), (5.0, math.inf),
                                                     (0.5, 3.0)])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    rng = np.random.default_rng(2)
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (2, 2)]]

    def run(lib):
        params = [lib.nn.Parameter(lib.zeros(g.shape)) for g in grads]
        for p, g in zip(params, grads, strict=True):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        return [total, *(p.grad for p in params)]

    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6)


def test_clip_grad_value_and_vectors():
    def run(lib):
        params = [lib.nn.Parameter(lib.tensor([[1.0, -3.0]])), lib.nn.Parameter(lib.ones(3))]
        params[0].grad = lib.tensor([[0.5, -2.0]])
        lib.nn.utils.clip_grad_value_(params, 1.0)
        vec = lib.nn.utils.parameters_to_vector(params)
        lib.nn.utils.vector_to_parameters(vec * 2, params)
        return [params[0].grad, vec, params[0], params[1]]

    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy())
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                       "`parameters` is non-finite"):
        p = nn.Parameter(refimpl.ones(2))
        p.grad = refimpl.tensor([float("inf"), 1.0])
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: int"):
        nn.utils.vector_to_parameters(3, [])


@pytest.mark.parametrize("shape", [(6, 4), (3, 8), (4, 2, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    x = nn.init.orthogonal_(refimpl.empty(*shape), gain=2.0)
    flat = x.numpy().reshape(shape[0], -1) / 2.0
    small = min(flat.shape)
    gram = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        nn.init.orthogonal_(refimpl.empty(3))
