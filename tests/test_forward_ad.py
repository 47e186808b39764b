"""Forward-mode AD (refimpl.autograd.forward_ad) against torch's, op by op.

Each case runs one function on duals built from the same numpy primals and tangents on
refimpl and on torch and compares the output tangents; the jvp rules are also checked
against finite differences by forward-mode gradcheck. The rest covers what the
conformance cases cannot see: level hygiene after errors, and the reverse-mode path
being untouched when no level is active.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl._state import FW

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
A = RNG.uniform(0.2, 0.9, (3, 4))
B = RNG.uniform(0.2, 0.9, (3, 4))
TA = RNG.standard_normal((3, 4))
TB = RNG.standard_normal((3, 4))
SQ = RNG.uniform(0.2, 0.9, (4, 4))
TSQ = RNG.standard_normal((4, 4))

# name -> (function of (lib, *duals), primals, tangents)
CASES = {
    "sin": (lambda m, a: a.sin(), [A], [TA]),
    "exp_log": (lambda m, a: (a.exp() + 1).log(), [A], [TA]),
    "sqrt_rsqrt": (lambda m, a: a.sqrt() * a.rsqrt().pow(2), [A], [TA]),
    "tanh_sigmoid": (lambda m, a: a.tanh() + a.sigmoid(), [A], [TA]),
    "relu": (lambda m, a: (a - 0.5).relu(), [A], [TA]),
    "abs_neg": (lambda m, a: (-(a - 0.5)).abs(), [A], [TA]),
    "clamp": (lambda m, a: a.clamp(0.3, 0.7), [A], [TA]),
    "pow_scalar": (lambda m, a: a.pow(2.5), [A], [TA]),
    "pow_tensor": (lambda m, a, b: a.pow(b), [A, B], [TA, TB]),
    "mul_div": (lambda m, a, b: a * b / (b + 1), [A, B], [TA, TB]),
    "add_sub_alpha": (lambda m, a, b: m.add(a, b, alpha=2) - m.sub(b, a, alpha=3),
                      [A, B], [TA, TB]),
    "atan2": (lambda m, a, b: m.atan2(a, b), [A, B], [TA, TB]),
    "maximum": (lambda m, a, b: m.maximum(a, b), [A, B], [TA, TB]),
    "where": (lambda m, a, b: m.where(a > 0.5, a, b), [A, B], [TA, TB]),
    "broadcast_add": (lambda m, a, b: a + b[0], [A, B], [TA, TB]),
    "sum_mean": (lambda m, a: a.sum(0) + a.mean(1).sum(), [A], [TA]),
    "var_std": (lambda m, a: a.var(0) + a.std(1).sum(), [A], [TA]),
    "prod": (lambda m, a: a.prod(1), [A], [TA]),
    "max_dim": (lambda m, a: a.max(1)[0], [A], [TA]),
    "amax": (lambda m, a: a.amax(0), [A], [TA]),
    "norm": (lambda m, a: a.norm(), [A], [TA]),
    "logsumexp": (lambda m, a: a.logsumexp(1), [A], [TA]),
    "cumsum": (lambda m, a: a.cumsum(1), [A], [TA]),
    "mm": (lambda m, a, b: a @ b.t(), [A, B], [TA, TB]),
    "matmul_batched": (lambda m, a, b: m.matmul(a.unsqueeze(0), b.t().unsqueeze(0)),
                       [A, B], [TA, TB]),
    "views": (lambda m, a: a.t().reshape(2, 6)[1].view(3, 2).permute(1, 0).contiguous(),
              [A], [TA]),
    "expand_narrow": (lambda m, a: a[:, :1].expand(3, 5).narrow(1, 1, 3), [A], [TA]),
    "select_index": (lambda m, a: a[1] + a[:, 2].sum() + a[[0, 2]].sum(), [A], [TA]),
    "cat_stack": (lambda m, a, b: m.cat([a, b], 1).sum(0) + m.stack([a, b]).sum((0, 1))[0],
                  [A, B], [TA, TB]),
    "gather_scatter": (lambda m, a: a.gather(1, m.tensor([[0], [2], [1]]))
                       + m.zeros(3, 4, dtype=m.float64).scatter(
                           1, m.tensor([[1], [0], [3]]), a[:, :1]).sum(1, keepdim=True),
                       [A], [TA]),
    "masked_fill": (lambda m, a: a.masked_fill(a > 0.5, 0.0), [A], [TA]),
    "sort_topk": (lambda m, a: a.sort(1)[0] + a.topk(4, 1)[0], [A], [TA]),
    "flip_roll": (lambda m, a: a.flip(0).roll(1, 1), [A], [TA]),
    "tril_diag": (lambda m, a: a.tril() + a.diagonal().sum(), [SQ], [TSQ]),
    "inverse_det": (lambda m, a: m.inverse(a + 4 * m.eye(4, dtype=m.float64)).sum()
                    + m.det(a + 2 * m.eye(4, dtype=m.float64)), [SQ], [TSQ]),
    "einsum_addmm": (lambda m, a, b: m.einsum("ij,kj->ik", a, b)
                     + m.addmm(a[:, :3], a, b.t()[:, :3]), [A, B], [TA, TB]),
    "to_dtype": (lambda m, a: a.to(m.float32).to(m.float64) * 2, [A], [TA]),
    "inplace_chain": (lambda m, a, b: a.clone().mul_(b).add_(1).sin_().clamp_(0.1, 0.9),
                      [A, B], [TA, TB]),
    "inplace_on_view": (lambda m, a, b: _write_row(a, b), [A, B], [TA, TB]),
    "copy_into_plain": (lambda m, a, b: m.zeros(3, 4, dtype=m.float64).copy_(a * b),
                        [A, B], [TA, TB]),
    "setitem": (lambda m, a, b: _setitem(m, a, b), [A, B], [TA, TB]),
}


def _write_row(a, b):
    x = a.clone()
    x[1].mul_(b[1])
    x.t()[0].add_(b[:, 0])
    return x


def _setitem(m, a, b):
    x = m.ones(3, 4, dtype=m.float64)
    x[0] = a[0] * b[0]
    x[:, 1] = b[:, 2]
    return x


def _run(mod, fn, primals, tangents):
    fwAD = mod.autograd.forward_ad
    with fwAD.dual_level():
        duals = [fwAD.make_dual(mod.tensor(p, dtype=mod.float64),
                                mod.tensor(tg, dtype=mod.float64))
                 for p, tg in zip(primals, tangents)]
        out = fn(mod, *duals)
        primal, tangent = fwAD.unpack_dual(out)
        return (np.array(primal.detach().tolist()),
                None if tangent is None else np.array(tangent.detach().tolist()))


@pytest.mark.parametrize("name", sorted(CASES))
def test_tangents_match_torch(name):
    fn, primals, tangents = CASES[name]
    ours = _run(t, fn, primals, tangents)
    theirs = _run(torch, fn, primals, tangents)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-10)
    assert (ours[1] is None) == (theirs[1] is None)
    if ours[1] is not None:
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9, atol=1e-9)
    assert not FW.active and FW.duals == []


@pytest.mark.parametrize("name", ["sin", "mul_div", "pow_tensor", "var_std", "mm", "views",
                                  "cat_stack", "inplace_chain", "inplace_on_view", "setitem",
                                  "inverse_det", "sort_topk", "logsumexp"])
def test_jvp_rules_match_finite_differences(name):
    fn, primals, _ = CASES[name]
    inputs = tuple(t.tensor(p, dtype=t.float64, requires_grad=True) for p in primals)
    assert t.autograd.gradcheck(lambda *xs: fn(t, *xs), inputs, check_forward_ad=True,
                                check_backward_ad=False)


def test_level_is_left_after_an_error():
    fwAD = t.autograd.forward_ad
    with pytest.raises(ZeroDivisionError), fwAD.dual_level():
        d = fwAD.make_dual(t.ones(2), t.ones(2))
        _ = 1 / 0
    assert not FW.active and fwAD._current_level == -1
    assert fwAD.unpack_dual(d).tangent is None
    with fwAD.dual_level():  # a new level starts clean
        assert fwAD.unpack_dual(d).tangent is None


def test_tangents_are_dropped_when_the_level_exits():
    fwAD = t.autograd.forward_ad
    keep = []
    with fwAD.dual_level():
        d = fwAD.make_dual(t.rand(3), t.rand(3))
        keep += [d, d.sin(), d[1:], d.t()]
    assert all(x._fw_grads is None for x in keep)


def test_reverse_mode_path_has_no_forward_layer_without_a_level():
    # the dispatcher reads one flag; nothing of forward AD runs or is stored
    x = t.rand(3, requires_grad=True)
    y = (x * 2).sin().sum()
    y.backward()
    assert not FW.active
    assert x._fw_grads is None and y._fw_grads is None


def test_reverse_over_forward_and_forward_over_reverse():
    fwAD = t.autograd.forward_ad
    p = t.tensor([0.3, 0.7], dtype=t.float64)
    v = t.tensor([1.0, -2.0], dtype=t.float64, requires_grad=True)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(fwAD.make_dual(p, v).exp()).tangent
    tangent.sum().backward()
    np.testing.assert_allclose(np.array(v.grad.tolist()), np.exp([0.3, 0.7]))
    x = t.tensor([0.3, 0.7], dtype=t.float64, requires_grad=True)
    assert t.autograd.gradgradcheck(lambda a: (a.exp() * a).sum(), (x,), check_fwd_over_rev=True)


def test_forward_mode_jacobian_and_hessian_match_reverse_mode():
    F = t.autograd.functional
    x = t.tensor([0.1, 0.5, 0.9], dtype=t.float64)
    f = lambda a: a.sin() * a.sum()
    fwd = F.jacobian(f, x, strategy="forward-mode", vectorize=True)
    rev = F.jacobian(f, x)
    np.testing.assert_allclose(np.array(fwd.tolist()), np.array(rev.tolist()), rtol=1e-12)
    g = lambda a: (a.exp() * a).sum()
    hf = F.hessian(g, x, outer_jacobian_strategy="forward-mode", vectorize=True)
    hr = F.hessian(g, x)
    np.testing.assert_allclose(np.array(hf.detach().tolist()), np.array(hr.tolist()),
                               rtol=1e-12)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        F.jacobian(f, x, strategy="forward-mode")
