"""The one-kernel CUDA softmax/log_softmax derivatives give torch's CUDA gradients.

``refimpl.cuda._softmax_backward`` runs the derivative along a contiguous last dim as
one row kernel; other dims compose ops. Each case differentiates the same values on
refimpl's CUDA, on refimpl's CPU (the numpy formula) and on torch's CUDA, and checks
that the row kernel (not the composed path) ran where it applies. Skipped without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.cuda import _softmax_backward

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("shape", [(8, 5), (3, 1000), (2, 3, 2049), (70000, 3), (4, 0)])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_row_kernel_matches_torch(shape, log, dtype, dim, monkeypatch):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    calls = []
    real = _softmax_backward.backward
    monkeypatch.setattr(_softmax_backward, "backward",
                        lambda *a: calls.append(1) or real(*a))
    name = "log_softmax" if log else "softmax"
    grads = {}
    for device in ("cuda", "cpu"):
        xr = t.tensor(x, device=device, requires_grad=True)
        getattr(xr, name)(dim).backward(t.tensor(g, device=device))
        grads[device] = xr.grad.cpu().numpy()
    xt = torch.tensor(x, device="cuda", requires_grad=True)
    getattr(xt, name)(dim).backward(torch.tensor(g, device="cuda"))
    want = xt.grad.cpu().numpy()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(grads["cuda"], want, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads["cpu"], want, rtol=tol, atol=tol)
    last = dim == -1 or len(shape) == 1
    assert bool(calls) == last


def test_row_kernel_is_captured_by_a_graph():
    x = t.randn(16, 33, device="cuda", requires_grad=True)
    g = t.randn(16, 33, device="cuda")
    y = x.log_softmax(-1).detach()
    from refimpl.ops.softmax import log_softmax_backward_fused

    static = log_softmax_backward_fused(g, y, 1)
    graph = t.cuda.CUDAGraph()
    with t.cuda.graph(graph):
        out = log_softmax_backward_fused(g, y, 1)
    g.copy_(t.randn(16, 33, device="cuda"))
    graph.replay()
    want = log_softmax_backward_fused(g, y, 1)
    np.testing.assert_allclose(out.cpu().numpy(), want.cpu().numpy(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(static.cpu().numpy(), want.cpu().numpy())
