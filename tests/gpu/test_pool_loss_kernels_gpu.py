"""The CUDA kernels of the fused 2-d max pooling and NLL loss ops
(``refimpl.cuda._pool_loss_kernels``) against torch on CUDA and against refimpl's CPU
kernels: values, picked indices, gradients and the summed weight; that each op is the
one kernel launch it claims; that a captured CUDA graph replays them on new data; that a
target out of range is a device-side assert. Skipped where no GPU or no CUDA torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import refimpl as t
import refimpl.nn.functional as RF
from refimpl.cuda import _pool_loss_kernels as K
from refimpl.ops.nn_loss_kernel import nll_loss_backward, nll_loss_fused
from refimpl.ops.nn_pool_kernel import max_pool2d_backward, max_pool2d_fused

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()), reason="needs a CUDA device")

ROOT = Path(__file__).resolve().parents[2]
TOL = {"float32": 2e-6, "float64": 1e-13, "float16": 2e-3, "bfloat16": 2e-2}


@pytest.fixture
def launches(monkeypatch):
    """The names of the kernels this module launches during a test."""
    names: list[str] = []
    real = K._launch
    monkeypatch.setattr(K, "_launch", lambda name, *a, **kw: names.append(name) or real(
        name, *a, **kw))
    return names


def _host(x) -> np.ndarray:
    if isinstance(x, t.Tensor):
        x = x.detach().cpu()
        return np.asarray(x.to(t.float64)._np if x.dtype.is_floating_point else x._np)
    x = x.detach().cpu()
    return (x.double() if x.dtype.is_floating_point else x).numpy()


def _pair(a: np.ndarray, dtype: str, grad: bool = False):
    """The same data as a refimpl and a torch CUDA tensor of ``dtype``."""
    ours = t.tensor(a, device="cuda").to(getattr(t, dtype))
    theirs = torch.tensor(a, device="cuda").to(getattr(torch, dtype))
    if grad:
        ours.requires_grad_(True)
        theirs.requires_grad_(True)
    return ours, theirs


def _close(got, want, dtype: str) -> None:
    np.testing.assert_allclose(_host(got), _host(want), rtol=TOL[dtype], atol=TOL[dtype])


# (shape, kwargs): overlapping and disjoint windows, padding, dilation, ceil mode, an
# unbatched input, odd sizes, one large enough for many blocks
POOLS = [
    ((2, 3, 9, 8), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((4, 5, 17, 13), {"kernel_size": 2, "stride": 2}),
    ((3, 11, 10), {"kernel_size": (3, 2), "stride": 1, "padding": (1, 0), "dilation": 2}),
    ((2, 2, 10, 9), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    ((1, 3, 7, 7), {"kernel_size": 7}),
    ((8, 64, 33, 32), {"kernel_size": 2, "stride": 2}),
]


def _pool_data(shape, seed: int = 0, specials: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # few distinct values: ties inside windows, where the first maximum must win
    a = rng.integers(-4, 5, shape).astype(np.float64) / 4
    if specials:
        flat = a.reshape(-1)
        flat[rng.choice(flat.size, flat.size // 7, replace=False)] = np.nan
        flat[rng.choice(flat.size, flat.size // 5, replace=False)] = -np.inf
    return a


@pytest.mark.parametrize(("shape", "kw"), POOLS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_max_pool2d_matches_torch(shape, kw, dtype, launches):
    x, tx = _pair(_pool_data(shape), dtype, grad=True)
    v, i = RF.max_pool2d(x, return_indices=True, **kw)
    tv, ti = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    assert v.device.type == "cuda" and v.dtype is x.dtype and i.dtype is t.int64
    np.testing.assert_array_equal(_host(v), _host(tv))
    np.testing.assert_array_equal(_host(i), _host(ti))
    g = np.random.default_rng(1).standard_normal(tuple(v.shape))
    gv, tgv = _pair(g, dtype)
    v.backward(gv)
    tv.backward(tgv)
    _close(x.grad, tx.grad, dtype)
    assert launches == [f"pool_fwd_{K._SUFFIX[x.dtype]}", f"pool_bwd_{K._SUFFIX[x.dtype]}"]


@pytest.mark.parametrize(("shape", "kw"), POOLS[:4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_matches_the_cpu_kernel(shape, kw, dtype):
    a = _pool_data(shape, seed=2)
    x = t.tensor(a, device="cuda").to(getattr(t, dtype)).requires_grad_(True)
    c = t.tensor(a).to(getattr(t, dtype)).requires_grad_(True)
    v, i = RF.max_pool2d(x, return_indices=True, **kw)
    cv, ci = RF.max_pool2d(c, return_indices=True, **kw)
    np.testing.assert_array_equal(_host(v), _host(cv))
    np.testing.assert_array_equal(_host(i), _host(ci))
    g = np.random.default_rng(3).standard_normal(tuple(v.shape))
    v.backward(t.tensor(g, device="cuda").to(x.dtype))
    cv.backward(t.tensor(g).to(c.dtype))
    _close(x.grad, c.grad, dtype)


@pytest.mark.parametrize("kw", [{"kernel_size": 3, "stride": 1, "padding": 1},
                                {"kernel_size": 2, "stride": 2}])
def test_max_pool2d_nan_and_inf_pick_torchs_positions(kw):
    x, tx = _pair(_pool_data((3, 4, 12, 11), seed=4, specials=True), "float32")
    v, i = RF.max_pool2d(x, return_indices=True, **kw)
    tv, ti = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    np.testing.assert_array_equal(_host(v), _host(tv))
    np.testing.assert_array_equal(_host(i), _host(ti))


def test_max_pool2d_non_contiguous_and_empty_inputs():
    a = _pool_data((2, 9, 10, 3), seed=5)  # channels last, seen as (2, 3, 9, 10)
    x, tx = _pair(a, "float32", grad=True)
    xs, txs = x.permute(0, 3, 1, 2), tx.permute(0, 3, 1, 2)
    v, i = RF.max_pool2d(xs[:, :, ::2], 2, return_indices=True)
    tv, ti = torch.nn.functional.max_pool2d(txs[:, :, ::2], 2, return_indices=True)
    np.testing.assert_array_equal(_host(v), _host(tv))
    np.testing.assert_array_equal(_host(i), _host(ti))
    # a non-contiguous output gradient
    g = np.random.default_rng(6).standard_normal(tuple(reversed(v.shape)))
    gv, tgv = _pair(g, "float32")
    v.backward(gv.permute(3, 2, 1, 0))
    tv.backward(tgv.permute(3, 2, 1, 0))
    _close(x.grad, tx.grad, "float32")
    e = RF.max_pool2d(t.zeros(0, 3, 8, 8, device="cuda"), 2)
    assert tuple(e.shape) == (0, 3, 4, 4) and e.device.type == "cuda"


def test_max_pool2d_overlapping_backward_is_reproducible():
    x = t.tensor(np.random.default_rng(7).standard_normal((4, 8, 40, 40)), dtype=t.float32,
                 device="cuda")
    v, i = max_pool2d_fused(x, [3, 3], [1, 1], [1, 1], [1, 1], [40, 40])
    g = t.randn(*v.shape, device="cuda")
    first = _host(max_pool2d_backward(g, x, i, [3, 3], [1, 1], [1, 1], [1, 1]))
    for _ in range(3):
        again = _host(max_pool2d_backward(g, x, i, [3, 3], [1, 1], [1, 1], [1, 1]))
        np.testing.assert_array_equal(again, first)


def _nll_data(n: int, c: int, seed: int, ignore: int | None = None):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, c) if n else (c,))
    target = rng.integers(0, c, (n,) if n else ())
    if ignore is not None and n:
        target[rng.random(n) < 0.3] = ignore
    return logits, target, rng.random(c) + 0.5


# (rows, classes, ignore_index): 0 rows is an unbatched (C,) input; more rows than one
# block has threads; an ignore_index that is a class
NLLS = [(6, 5, -100), (0, 7, -100), (1300, 37, -100), (777, 10, 3), (5000, 3, -100)]


@pytest.mark.parametrize(("n", "c", "ignore"), NLLS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nll_loss_matches_torch_and_the_cpu_kernel(n, c, ignore, reduction, weighted, dtype,
                                                   launches):
    logits, target, w = _nll_data(n, c, seed=n + c, ignore=ignore)
    x, tx = _pair(logits, dtype, grad=True)
    y, ty = t.tensor(target, device="cuda"), torch.tensor(target, device="cuda")
    wt, twt = _pair(w, dtype) if weighted else (None, None)
    kw = {"reduction": reduction, "ignore_index": ignore}
    loss = RF.nll_loss(x, y, wt, **kw)
    tloss = torch.nn.functional.nll_loss(tx, ty, twt, **kw)
    _close(loss, tloss, dtype)
    g = np.random.default_rng(8).standard_normal(tuple(loss.shape))
    gl, tgl = _pair(g, dtype)
    loss.backward(gl)
    tloss.backward(tgl)
    _close(x.grad, tx.grad, dtype)
    assert launches == [f"nll_fwd_{K._SUFFIX[x.dtype]}", f"nll_bwd_{K._SUFFIX[x.dtype]}"]
    # the CPU kernel: the loss, the summed weight (the saved statistic) and the gradient
    xc = t.tensor(logits).to(x.dtype)
    wc = None if wt is None else t.tensor(w).to(x.dtype)
    got = nll_loss_fused(x.detach(), y, wt, reduction, ignore)
    want = nll_loss_fused(xc, t.tensor(target), wc, reduction, ignore)
    for a, b in zip(got, want):
        _close(a, b, dtype)
    gx = nll_loss_backward(gl, x.detach(), y, wt, got[1], reduction, ignore)
    gc = nll_loss_backward(t.tensor(g).to(x.dtype), xc, t.tensor(target), wc, want[1],
                           reduction, ignore)
    _close(gx, gc, dtype)


def test_nll_loss_strided_inputs_all_ignored_and_reproducible():
    logits, target, w = _nll_data(900, 12, seed=9)
    x, tx = _pair(np.ascontiguousarray(logits.T), "float32", grad=True)
    y2 = np.stack([target, target[::-1]], 1)  # the target is column 0: stride 2
    y, ty = t.tensor(y2, device="cuda")[:, 0], torch.tensor(y2, device="cuda")[:, 0]
    wt, twt = _pair(np.stack([w, w], 1), "float32")
    loss = RF.nll_loss(x.t(), y, wt[:, 1])
    tloss = torch.nn.functional.nll_loss(tx.t(), ty, twt[:, 1])
    _close(loss, tloss, "float32")
    loss.backward()
    tloss.backward()
    _close(x.grad, tx.grad, "float32")
    runs = {float(RF.nll_loss(x.t(), y, wt[:, 1], reduction="sum")) for _ in range(4)}
    assert len(runs) == 1
    every = t.full((900,), 5, device="cuda")
    nan = RF.nll_loss(x.t(), every, ignore_index=5)
    assert np.isnan(_host(nan)) and np.isnan(_host(torch.nn.functional.nll_loss(
        tx.t(), torch.full((900,), 5, device="cuda"), ignore_index=5)))


@pytest.mark.parametrize("kw", [{}, {"ignore_index": 1}, {"label_smoothing": 0.1}])
def test_cross_entropy_matches_torch(kw):
    logits, target, w = _nll_data(257, 9, seed=10)
    x, tx = _pair(logits, "float32", grad=True)
    y, ty = t.tensor(target, device="cuda"), torch.tensor(target, device="cuda")
    wt, twt = _pair(w, "float32")
    loss = RF.cross_entropy(x, y, wt, **kw)
    tloss = torch.nn.functional.cross_entropy(tx, ty, twt, **kw)
    _close(loss, tloss, "float32")
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(_host(x.grad), _host(tx.grad), rtol=1e-5, atol=1e-7)


def test_a_captured_graph_replays_both_ops_on_new_data(capture_graph):
    rng = np.random.default_rng(11)
    x = t.tensor(rng.standard_normal((2, 3, 10, 10)), dtype=t.float32, device="cuda")
    gy = t.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=t.float32, device="cuda")
    logits = t.tensor(rng.standard_normal((64, 10)), dtype=t.float32, device="cuda")
    y = t.tensor(rng.integers(0, 10, 64), device="cuda")
    one = t.ones((), device="cuda")
    win = ([2, 2], [2, 2], [0, 0], [1, 1])

    def step():
        v, i = max_pool2d_fused(x, *win, [5, 5])
        gx = max_pool2d_backward(gy, x, i, *win)
        loss, total = nll_loss_fused(logits, y, None, "mean", -100)
        gl = nll_loss_backward(one, logits, y, None, total, "mean", -100)
        return v, gx, loss, gl

    step()  # load the kernels before capturing
    t.cuda.synchronize()
    graph, outs = capture_graph(step)
    for seed in (12, 13):
        r = np.random.default_rng(seed)
        x.copy_(t.tensor(r.standard_normal((2, 3, 10, 10)), dtype=t.float32))
        logits.copy_(t.tensor(r.standard_normal((64, 10)), dtype=t.float32))
        y.copy_(t.tensor(r.integers(0, 10, 64)))
        graph.replay()
        t.cuda.synchronize()
        want = step()
        for a, b in zip(outs, want):
            np.testing.assert_array_equal(_host(a), _host(b))
        tl = torch.nn.functional.nll_loss(torch.tensor(_host(logits)),
                                          torch.tensor(_host(y)).long())
        np.testing.assert_allclose(_host(outs[2]), tl.numpy(), rtol=1e-6)


def test_a_target_out_of_range_is_a_device_side_assert():
    code = ("import refimpl as t\nimport refimpl.nn.functional as F\n"
            "x = t.zeros(3, 4, device='cuda')\n"
            "y = F.nll_loss(x, t.tensor([0, 4, 1], device='cuda'))\n"
            "try:\n    t.cuda.synchronize()\nexcept RuntimeError as e:\n"
            "    print('ERR', e)\n    raise SystemExit(0)\nprint('NO ERROR')\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert "ERR CUDA error: device-side assert triggered" in out, out
    assert "cur_target >= 0 && cur_target < n_classes" in out, out
