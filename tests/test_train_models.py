"""Issue 14's done-when on the CPU: a small CNN (SGD with momentum) and a small
transformer block (AdamW) train 100 steps on refimpl with torch's losses, starting from
torch's initial weights loaded through ``load_state_dict``."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl
from bench import train_models as M

torch = pytest.importorskip("torch")
STEPS = 100


@pytest.mark.parametrize("kind", ["cnn", "transformer"])
def test_training_matches_torch(kind):
    tm, rm = M.paired_models(kind, torch, refimpl)
    expected = M.train(torch, kind, tm, STEPS)
    actual = M.train(refimpl, kind, rm, STEPS)
    assert expected[-1] < 0.5 * expected[0]  # the model learns: the comparison means something
    np.testing.assert_allclose(actual, expected, rtol=2e-4, atol=2e-5)
    final = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    for k, v in rm.state_dict().items():
        np.testing.assert_allclose(v.numpy(), final[k], rtol=2e-3, atol=2e-4, err_msg=k)
