"""A CUDA program of elementwise ops, forward and backward, computes on the GPU only:
every op's CPU kernel is made to raise while it runs (spec: no silent CPU fallback).
Results are checked against torch CUDA where available, else against the same program
run on the CPU afterwards. Skipped where no GPU is present."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.ops._registry import REGISTRY

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


def _program(ns, x, y, w):
    """Elementwise ops only (no reductions: the loss gradient is seeded explicitly)."""
    h = ns.tanh(x * w + y) + ns.sigmoid(x - 0.5) * ns.exp(-y * y)
    h = ns.where(h > 0, h, h * 0.1)
    h = ns.clamp(h, -2.0, 2.0) + ns.relu(x) ** 2 - (w / (1 + y.abs())).log1p()
    return h * ns.rsqrt(1 + h * h)


def _refuse_cpu_kernels(monkeypatch) -> None:
    """Replace every registered CPU kernel with one that fails the test."""
    for name, op in list(REGISTRY.items()):
        for target in [op] + ([op.base] if op.base is not None else []):
            if target.cpu is not None:
                def refuse(*args, _name=name, **kwargs):
                    raise AssertionError(f"CPU kernel of '{_name}' ran during a CUDA program")
                monkeypatch.setattr(target, "cpu", refuse)


def _reference(xs, ys, ws) -> list:
    """The same program on torch CUDA, or on refimpl's CPU kernels without torch."""
    try:
        import torch

        if torch.cuda.is_available():
            tx, ty, tw = (torch.tensor(v, device="cuda", requires_grad=True)
                          for v in (xs, ys, ws))
            out = _program(torch, tx, ty, tw)
            out.backward(torch.ones_like(out))
            return [out.detach().cpu().numpy(), tx.grad.cpu().numpy(), ty.grad.cpu().numpy(),
                    tw.grad.cpu().numpy()]
    except ImportError:
        pass
    cx, cy, cw = (t.tensor(v, requires_grad=True) for v in (xs, ys, ws))
    out = _program(t, cx, cy, cw)
    out.backward(t.ones_like(out))
    return [out.detach()._np, cx.grad._np, cy.grad._np, cw.grad._np]


def test_forward_and_backward_stay_on_the_gpu(monkeypatch):
    rng = np.random.default_rng(0)
    xs, ys, ws = (rng.standard_normal((64, 33)).astype(np.float32) for _ in range(3))
    x, y, w = (t.tensor(v).cuda().requires_grad_() for v in (xs, ys, ws))
    seed = t.ones((64, 33), device="cuda")
    _refuse_cpu_kernels(monkeypatch)
    out = _program(t, x, y, w)
    out.backward(seed)
    assert out.device.type == "cuda"
    for p in (x, y, w):
        assert p.grad is not None and p.grad.device.type == "cuda"
    monkeypatch.undo()
    got = [out.detach().cpu()._np, x.grad.cpu()._np, y.grad.cpu()._np, w.grad.cpu()._np]
    for g, want in zip(got, _reference(xs, ys, ws)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)
