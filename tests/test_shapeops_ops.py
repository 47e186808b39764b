"""The view copies, scatter ops, shape utilities, statistics and distributions of
issue #10, where the conformance cases cannot look: meta and fake tensors, ``out=``,
forward-mode rules, autograd node names, double backward, and torch as the oracle of
the gradients whose convention is torch's own (as_strided_scatter)."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
import refimpl.autograd.forward_ad as fwAD

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(10)
X = RNG.standard_normal((3, 4))
S = RNG.standard_normal((2, 4))


@pytest.mark.parametrize("call", [
    lambda m, x: m.permute_copy(x, (1, 0)),
    lambda m, x: m.expand_copy(x[:1], (5, 4)),
    lambda m, x: m.narrow_copy(x, 1, 1, 2),
    lambda m, x: m.unfold_copy(x, 1, 2, 1),
    lambda m, x: m.view_copy(x, (2, 6)),
    lambda m, x: m.squeeze_copy(x[:1], 0),
    lambda m, x: m.split_with_sizes_copy(x, [1, 2], 0)[1],
    lambda m, x: m.slice_scatter(x, m.zeros(3, 2, dtype=x.dtype, device=x.device), 1, 0, 4, 2),
    lambda m, x: m.diagonal_scatter(x, m.zeros(3, dtype=x.dtype, device=x.device), 1),
])
def test_meta_shapes_match_cpu(call):
    """The meta functions give the CPU kernels' shapes and dtypes without data."""
    cpu = call(t, t.tensor(X))
    meta = call(t, t.empty(3, 4, dtype=t.float64, device="meta"))
    assert meta.device.type == "meta"
    assert tuple(meta.shape) == tuple(cpu.shape) and meta.dtype is cpu.dtype


def test_copy_ops_take_out():
    x = t.tensor(X)
    out = t.empty(0, dtype=t.float64)
    r = t.permute_copy(x, (1, 0), out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), X.T)


def test_node_names_are_torch_s():
    x = t.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    for name, args in [("permute_copy", ((1, 0),)), ("transpose_copy", (0, 1)),
                       ("unsqueeze_copy", (0,))]:
        assert type(getattr(t, name)(x, *args).grad_fn).__name__ == \
            type(getattr(torch, name)(tx, *args).grad_fn).__name__


def test_jvp_of_copies_and_scatters():
    tangent = RNG.standard_normal((3, 4))
    with fwAD.dual_level():
        d = fwAD.make_dual(t.tensor(X), t.tensor(tangent))
        out = fwAD.unpack_dual(t.transpose_copy(d, 0, 1)).tangent
        sc = fwAD.unpack_dual(t.select_scatter(d, t.zeros(4, dtype=t.float64), 0, 1)).tangent
    np.testing.assert_allclose(out.numpy(), tangent.T)
    want = tangent.copy()
    want[1] = 0
    np.testing.assert_allclose(sc.numpy(), want)


def test_as_strided_scatter_gradient_follows_torch():
    """torch gives self the gradient inside the written view (zeros outside): refimpl
    follows torch, not the textbook rule the other scatters use."""
    w = np.cos(np.arange(9.0)).reshape(3, 3)

    def grads(m):
        x = m.tensor(np.zeros((3, 3)), requires_grad=True)
        s = m.tensor(S[:, :2].copy(), requires_grad=True)
        y = m.as_strided_scatter(x, s, (2, 2), (1, 2))
        return [g.detach().numpy() for g in m.autograd.grad((y * m.tensor(w)).sum(), (x, s))]

    for a, b in zip(grads(t), grads(torch)):
        np.testing.assert_allclose(a, b)


def test_double_backward_through_a_composite():
    x = t.tensor(X[0], requires_grad=True)
    (g,) = t.autograd.grad(t.logcumsumexp(x, 0).sum(), x, create_graph=True)
    (gg,) = t.autograd.grad(g.sum(), x)
    tx = torch.tensor(X[0], requires_grad=True)
    (tg,) = torch.autograd.grad(torch.logcumsumexp(tx, 0).sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-12)


def test_random_functional_forms_leave_input_untouched():
    x = t.zeros(1000, dtype=t.float64)
    t.manual_seed(0)
    y = t.ops.aten.cauchy.default(x, 0.0, 1.0)
    assert float(x.abs().sum()) == 0.0 and float(y.abs().sum()) > 0.0
    assert t.ops.aten.geometric.default(x, 0.5).min().item() >= 1


def test_distribution_draws_advance_the_generator():
    """Two draws in a row differ; the generator state after a draw is where the next
    draw starts (so reseeding repeats the pair)."""
    t.manual_seed(5)
    a = t.empty(50, dtype=t.float64).log_normal_()
    b = t.empty(50, dtype=t.float64).log_normal_()
    state = t.get_rng_state()
    c = t.empty(50, dtype=t.float64).log_normal_()
    t.set_rng_state(state)
    d = t.empty(50, dtype=t.float64).log_normal_()
    assert not np.array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(c.numpy(), d.numpy())


def test_histogram_rejects_cuda_like_torch():
    x = t.empty(4, device="meta")
    with pytest.raises(NotImplementedError, match="aten::histogram"):
        t.histogram(x, 3)


def _out_calls(m):
    x = m.tensor([[1.0, 4.0, 9.0], [2.0, 3.0, 5.0]])
    results = []
    for call in (lambda o: m.diff(x, out=o), lambda o: m.kron(x, m.ones(2), out=o),
                 lambda o: m.logcumsumexp(x, 1, out=o),
                 lambda o: m.quantile(x, 0.5, dim=1, out=o)):
        o = m.empty(0)
        assert call(o) is o
        results.append(o.numpy().copy())
    hist = (m.empty(0), m.empty(0))
    r = m.histogram(x, 3, out=hist)
    assert r[0] is hist[0] and type(r).__name__ == "histogram_out"
    results += [hist[0].numpy().copy(), hist[1].numpy().copy()]
    errors = []
    for call in (lambda: m.diff(x.clone().requires_grad_(), out=m.empty(0)),
                 lambda: m.kron(x.clone().requires_grad_(), m.ones(2), out=m.empty(0)),
                 lambda: m.diff(x, out=m.empty(0, dtype=m.int64))):
        with pytest.raises(RuntimeError) as e:
            call()
        errors.append(str(e.value))
    return results, errors


def test_composites_write_out_as_torch():
    """out= of the composites: resized and written, torch's messages naming the op that
    torch's own composite writes out with (sub for diff, mul for kron)."""
    got, got_errors = _out_calls(t)
    want, want_errors = _out_calls(torch)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert got_errors == want_errors


@pytest.mark.parametrize("name, good, bad", [
    ("cauchy_", (), (0.0, 0.0)), ("log_normal_", (), (0.0, 0.0)), ("geometric_", (0.3,), (2.0,)),
])
def test_distributions_on_meta_tensors_check_and_return_self(name, good, bad):
    x = t.empty(3, device="meta")
    assert getattr(x, name)(*good) is x
    with pytest.raises(RuntimeError, match="expects"):
        getattr(x, name)(*bad)


def test_composites_under_fake_tensor_mode():
    from refimpl._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = t.empty(3, 4)
        shapes = [tuple(t.cdist(x, x).shape), tuple(t.kron(x, x).shape),
                  tuple(t.quantile(x, 0.5, dim=1).shape), tuple(t.rot90(x).shape),
                  tuple(t.slice_scatter(x, x[:1], 0, 0, 1).shape)]
    assert shapes == [(3, 3), (9, 16), (3,), (4, 3), (3, 4)]
