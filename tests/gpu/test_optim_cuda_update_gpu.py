"""The one-kernel CUDA SGD and Adam/AdamW updates give the CPU updates' values.

``refimpl.optim._cuda_update`` runs each parameter's update as one kernel on CUDA.
The same optimizer over the same parameters and gradients on the CPU (numpy
arithmetic, ``_cpu_update``) is the anchor: three steps on both devices must agree
within float32 rounding, the version counters must advance as the in-place ops of
the op path would advance them, and the kernels must run on the current stream.
Skipped where no GPU exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.optim import _cuda_update

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

_CASES = [
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "dampening": 0.2, "maximize": True}),
    ("SGD", {"lr": 0.1}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "maximize": True}),
    ("AdamW", {"lr": 0.01, "betas": (0.3, 0.9), "amsgrad": True}),
]


def _run(name: str, kwargs: dict, device: str, dtype) -> tuple[list, list]:
    rng = np.random.default_rng(0)
    params = [t.nn.Parameter(t.tensor(rng.standard_normal(s), dtype=dtype, device=device))
              for s in ((7, 5), (5,), (300, 33))]
    opt = getattr(t.optim, name)(params, **kwargs)
    for step in range(3):
        for p in params:
            p.grad = t.tensor(rng.standard_normal(tuple(p.shape)) * (step + 1), dtype=dtype,
                              device=device)
        # a gradient laid out transposed (as matmul's weight gradients can be)
        params[0].grad = t.tensor(rng.standard_normal((5, 7)), dtype=dtype, device=device).t()
        opt.step()
    values = [p.detach().cpu().numpy() for p in params]
    versions = [p._version for p in params]
    for p in params:
        versions += [s._version for s in opt.state[p].values() if isinstance(s, t.Tensor)]
    return values, versions


@pytest.mark.parametrize(("name", "kwargs"), _CASES)
@pytest.mark.parametrize("dtype", [t.float32, t.float64])
def test_cuda_update_matches_cpu(name, kwargs, dtype, monkeypatch):
    calls = []
    real = _cuda_update._launch
    monkeypatch.setattr(_cuda_update, "_launch", lambda *a: calls.append(a[0]) or real(*a))
    got, got_versions = _run(name, kwargs, "cuda", dtype)
    assert calls, "the one-kernel update did not run"
    want, want_versions = _run(name, kwargs, "cpu", dtype)
    tol = 1e-5 if dtype is t.float32 else 1e-12
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert got_versions == want_versions


def test_cuda_update_runs_on_current_stream():
    p = t.nn.Parameter(t.ones(1000, device="cuda"))
    opt = t.optim.SGD([p], lr=0.5, momentum=0.9)
    s = t.cuda.Stream()
    with t.cuda.stream(s):
        for _ in range(2):
            p.grad = t.full((1000,), 2.0, device="cuda")
            opt.step()
    s.synchronize()
    # buf: 2, then 0.9 * 2 + 2 = 3.8; p: 1 - 1 - 1.9
    np.testing.assert_allclose(p.detach().cpu().numpy(), np.full(1000, -1.9, np.float32),
                               rtol=1e-6)


@pytest.mark.parametrize(("name", "kwargs"), [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                              ("AdamW", {"lr": 0.01, "amsgrad": True})])
def test_many_parameters_share_few_launches(name, kwargs, monkeypatch):
    """30 parameters of two dtypes and many sizes (one empty): one launch per dtype (24
    tensors at most each), and the CPU update's values."""
    calls = []
    real = _cuda_update._launch
    monkeypatch.setattr(_cuda_update, "_launch",
                        lambda kind, p, items, scalars: calls.append(len(items))
                        or real(kind, p, items, scalars))

    def run(device):
        rng = np.random.default_rng(1)
        params = [t.nn.Parameter(t.tensor(rng.standard_normal((i * 37) % 700),
                                          dtype=t.float64 if i % 5 == 0 else t.float32,
                                          device=device)) for i in range(30)]
        opt = getattr(t.optim, name)(params, **kwargs)
        for _ in range(3):
            for p in params:
                p.grad = t.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype,
                                  device=device)
            opt.step()
        return [p.detach().cpu().numpy() for p in params]

    got = run("cuda")
    # per step: the 24 float32 tensors in one launch, the 5 non-empty float64 ones in
    # another; SGD's first step makes the momentum buffers with ops (torch's clone)
    assert calls == [24, 5] * (2 if name == "SGD" else 3), calls
    want = run("cpu")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
