"""Issue 14's done-when on the GPU: the CNN and the transformer block train 100 steps on
refimpl's CUDA tensors with the losses of torch (run on the CPU, float32: no TF32),
from torch's initial weights."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl
from bench import train_models as M

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not refimpl.cuda.is_available(), reason="needs a CUDA GPU")
STEPS = 100


@pytest.mark.parametrize("kind", ["cnn", "transformer"])
def test_training_on_cuda_matches_torch(kind):
    tm, rm = M.paired_models(kind, torch, refimpl, device="cuda")
    assert all(p.device.type == "cuda" for p in rm.parameters())
    expected = M.train(torch, kind, tm, STEPS)
    actual = M.train(refimpl, kind, rm, STEPS, device="cuda")
    assert expected[-1] < 0.5 * expected[0]
    np.testing.assert_allclose(actual, expected, rtol=5e-4, atol=5e-5)
