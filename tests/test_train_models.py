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


@pytest.fixture
def one_torch_thread():
    # torch's thread pool spinning next to numpy's makes small models crawl on a shared
    # machine; one thread keeps this test at a few seconds
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _final_weights(model) -> dict:
    out = {}
    for k, v in model.state_dict().items():
        a = v.detach().cpu().numpy()
        if k == "attn.in_proj_bias":
            # the key bias shifts every score of a query equally: its true gradient is 0,
            # so AdamW amplifies rounding noise there; compare the query and value parts
            a = np.concatenate([a[:M.TF_DIM], a[2 * M.TF_DIM:]])
        out[k] = a
    return out


@pytest.mark.parametrize("kind", ["cnn", "transformer"])
def test_training_matches_torch(kind, one_torch_thread):
    tm, rm = M.paired_models(kind, torch, refimpl)
    expected = M.train(torch, kind, tm, STEPS)
    actual = M.train(refimpl, kind, rm, STEPS)
    assert expected[-1] < 0.5 * expected[0]  # the model learns: the comparison means something
    np.testing.assert_allclose(actual, expected, rtol=2e-4, atol=2e-5)
    want = _final_weights(tm)
    for k, v in _final_weights(rm).items():
        np.testing.assert_allclose(v, want[k], rtol=2e-3, atol=2e-4, err_msg=k)
