"""Fused and capturable optimizer steps (refimpl.optim._capturable) and ASGD, against
torch 2.13 on the CPU: fused Adam/AdamW/SGD with GradScaler's grad_scale/found_inf, ASGD
step for step, and the capturable arithmetic (device counters) against torch's
non-capturable results (torch allows capturable only on accelerators)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import refimpl
from refimpl.optim import _capturable

torch = pytest.importorskip("torch")


def _run(mod, cls: str, kwargs: dict, steps: int = 5, scale=None, infs=()):
    rng = np.random.default_rng(0)
    ws = [mod.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
          for s in ((5, 5), (3,), ())]
    opt = getattr(mod.optim, cls)(ws, **kwargs)
    for i in range(steps):
        for w in ws:
            g = rng.standard_normal(tuple(w.shape)).astype(np.float32)
            w.grad = mod.tensor(g * (scale or 1.0))
        if scale is not None:
            opt.grad_scale = mod.tensor(float(scale))
            opt.found_inf = mod.tensor(1.0 if i in infs else 0.0)
        opt.step()
    return ([w.detach().numpy() for w in ws], [w.grad.numpy() for w in ws],
            {k: v.numpy() for k, v in opt.state[ws[0]].items()})


FUSED = [("Adam", {"lr": 0.1, "fused": True}),
         ("Adam", {"lr": 0.1, "fused": True, "amsgrad": True, "weight_decay": 0.1,
                   "maximize": True}),
         ("AdamW", {"lr": 0.1, "fused": True}),
         ("SGD", {"lr": 0.1, "fused": True, "momentum": 0.9, "nesterov": True,
                  "weight_decay": 0.1}),
         ("Adagrad", {"lr": 0.1, "fused": True, "lr_decay": 0.01, "weight_decay": 0.1})]


@pytest.mark.parametrize(("cls", "kwargs"), FUSED)
@pytest.mark.parametrize(("scale", "infs"), [(None, ()), (4.0, (1, 3))])
def test_fused_matches_torch(cls, kwargs, scale, infs):
    ours = _run(refimpl, cls, kwargs, scale=scale, infs=infs)
    theirs = _run(torch, cls, kwargs, scale=scale, infs=infs)
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for key in theirs[2]:
        np.testing.assert_allclose(ours[2][key], theirs[2][key], rtol=1e-5, atol=1e-6)


def test_fused_skip_leaves_everything_unchanged():
    w = refimpl.ones(4, requires_grad=True)
    w.grad = refimpl.full((4,), 8.0)
    opt = refimpl.optim.Adam([w], lr=0.1, fused=True)
    opt.grad_scale, opt.found_inf = refimpl.tensor(2.0), refimpl.tensor(1.0)
    opt.step()
    assert w.tolist() == [1.0] * 4 and w.grad.tolist() == [8.0] * 4
    assert opt.state[w]["step"].item() == 0.0 and opt.state[w]["exp_avg"].tolist() == [0.0] * 4


@pytest.mark.parametrize("kwargs", [{"lr": 0.1}, {"lr": 0.1, "t0": 2, "weight_decay": 0.1}])
def test_asgd_matches_torch(kwargs):
    ours, theirs = _run(refimpl, "ASGD", kwargs), _run(torch, "ASGD", kwargs)
    for a, b in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for key in ("step", "eta", "mu", "ax"):
        np.testing.assert_allclose(ours[2][key], theirs[2][key], rtol=1e-5, atol=1e-6)


CAPTURABLE = [("ASGD", {"t0": 2}), ("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
              ("AdamW", {}), ("Adamax", {"weight_decay": 0.1}), ("NAdam", {"weight_decay": 0.1}),
              ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True}),
              ("RAdam", {"weight_decay": 0.1}), ("Adadelta", {}), ("RMSprop", {}), ("Rprop", {})]


@pytest.mark.parametrize(("cls", "kwargs"), CAPTURABLE)
def test_capturable_arithmetic_matches_torch(monkeypatch, cls, kwargs):
    # the capturable path runs on CPU tensors here only to check its arithmetic
    monkeypatch.setattr(_capturable, "CAPTURABLE_DEVICES", ["cpu"])
    ours = _run(refimpl, cls, dict(kwargs, lr=1e-2, capturable=True), steps=8)
    theirs = _run(torch, cls, dict(kwargs, lr=1e-2), steps=8)
    for a, b in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)


def test_capturable_needs_an_accelerator():
    w = refimpl.ones(2, requires_grad=True)
    w.grad = refimpl.ones(2)
    with pytest.raises(AssertionError, match="If capturable=True, params and state_steps must "
                                             "be on supported devices"):
        refimpl.optim.Adam([w], capturable=True).step()


def test_non_fused_rejects_grad_scale():
    w = refimpl.ones(2, requires_grad=True)
    w.grad = refimpl.ones(2)
    opt = refimpl.optim.Adam([w], capturable=True)
    opt.grad_scale = refimpl.tensor(2.0)
    with warnings.catch_warnings(), pytest.raises(AssertionError,
                                                  match="Expected grad_scale and found_inf"):
        opt.step()


def test_bool_addr_matches_torch():
    rng = np.random.default_rng(3)
    a, v1, v2 = rng.random((3, 4)) > 0.5, rng.random(3) > 0.5, rng.random(4) > 0.5
    for beta, alpha in ((3, 2), (0, 2), (3, 0)):
        ours = refimpl.addr(refimpl.tensor(a), refimpl.tensor(v1), refimpl.tensor(v2),
                            beta=beta, alpha=alpha)
        theirs = torch.addr(torch.tensor(a), torch.tensor(v1), torch.tensor(v2), beta=beta,
                            alpha=alpha)
        assert ours.tolist() == theirs.tolist()
