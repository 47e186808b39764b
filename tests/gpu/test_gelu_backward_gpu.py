"""gelu's CUDA derivative is one elementwise kernel and gives torch's CUDA gradients.

Each case differentiates the same values on refimpl's CUDA, on refimpl's CPU (the numpy
formula) and on torch's CUDA, for both approximations, and checks that the composed
formula (``_gelu_grad`` in refimpl ops) did not run on CUDA. Skipped without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.ops import activation

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("shape", [(8, 5), (3, 1000), (2, 3, 4097), (0, 3)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_backward_kernel_matches_torch(shape, approximate, dtype, monkeypatch):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if x.size:
        x.flat[0] = 0.0
        x.flat[-1] = -40.0  # the tails: cdf 0, pdf 0
    g = rng.standard_normal(shape).astype(dtype)
    grads = {}
    for device in ("cpu", "cuda"):
        if device == "cuda":
            def composed(*a):
                raise AssertionError("the composed gelu derivative ran on CUDA")

            monkeypatch.setattr(activation, "_gelu_grad", composed)
        xr = t.tensor(x, device=device, requires_grad=True)
        t.nn.functional.gelu(xr, approximate=approximate).backward(t.tensor(g, device=device))
        grads[device] = xr.grad.cpu().numpy()
    xt = torch.tensor(x, device="cuda", requires_grad=True)
    torch.nn.functional.gelu(xt, approximate=approximate).backward(
        torch.tensor(g, device="cuda"))
    want = xt.grad.cpu().numpy()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(grads["cuda"], want, rtol=tol, atol=tol)
    np.testing.assert_allclose(grads["cpu"], want, rtol=tol, atol=tol)


def test_gelu_backward_kernel_keeps_a_graph_for_double_backward():
    x = t.randn(4, 7, device="cuda", requires_grad=True)
    (gx,) = t.autograd.grad(t.nn.functional.gelu(x).sum(), x, create_graph=True)
    assert gx.grad_fn is not None  # create_graph takes the differentiable formula
    gx.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
