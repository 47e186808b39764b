"""A CUDA MLP trained end to end on the GPU gives torch's loss curve.

Forward (matmul, bias, relu, mean squared error), backward through the autograd
engine, and an SGD update written with in-place tensor ops, all on the GPU, for 50
steps from the same initial weights as torch's run of the same program. The loss
of every step must agree within float32 tolerance, and every tensor the step
touches must stay on the GPU. Skipped where no GPU (or no torch with CUDA) exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

BATCH, WIDTH, STEPS, LR = 64, 256, 50, 0.05


def _initial_state(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(WIDTH)
    return {
        "x": rng.standard_normal((BATCH, WIDTH), dtype=np.float32),
        "y": rng.standard_normal((BATCH, 1), dtype=np.float32),
        "w1": (rng.standard_normal((WIDTH, WIDTH)) * scale).astype(np.float32),
        "b1": np.zeros(WIDTH, dtype=np.float32),
        "w2": (rng.standard_normal((WIDTH, WIDTH)) * scale).astype(np.float32),
        "b2": np.zeros(WIDTH, dtype=np.float32),
        "w3": (rng.standard_normal((WIDTH, 1)) * scale).astype(np.float32),
        "b3": np.zeros(1, dtype=np.float32),
    }


def _train(lib, state: dict) -> tuple[list[float], list]:
    """The same training loop for refimpl and torch; returns losses and parameters."""
    dev = "cuda"
    x = lib.tensor(state["x"], device=dev)
    y = lib.tensor(state["y"], device=dev)
    params = [lib.tensor(state[k], device=dev, requires_grad=True)
              for k in ("w1", "b1", "w2", "b2", "w3", "b3")]
    w1, b1, w2, b2, w3, b3 = params
    losses = []
    for _ in range(STEPS):
        h = (x @ w1 + b1).relu()
        h = (h @ w2 + b2).relu()
        out = h @ w3 + b3
        loss = ((out - y) ** 2).mean()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p -= LR * p.grad
                p.grad = None
        losses.append(loss.item())
    return losses, params


def test_mlp_loss_curve_matches_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("the oracle needs torch with CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    state = _initial_state()
    ours, params = _train(t, state)
    theirs, _ = _train(torch, state)
    assert all(p.device.type == "cuda" for p in params)
    assert ours[-1] < ours[0]  # it learns
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)
