"""The CUDA kernels of the fused convolution and linear ops (``refimpl.cuda._conv_kernels``)
against torch's CUDA results and refimpl's CPU kernels.

Each case runs the op forward and backward on CUDA, and checks the output and the
gradients of input, weight and bias against torch on CUDA (TF32 off on both sides, so
float32 is computed in full precision) in the same dtype, and against refimpl on the CPU
in float64 from the same (rounded) inputs, on both paths the size limits choose between:
im2col and GEMMs, or the direct kernels of small problems. A recorder checks the
launches: the fused forward is one im2col kernel, one GEMM and one bias launch (or one
direct kernel); the backward is at most four kernels and two GEMMs (or three direct
kernels). One test replays a captured CUDA graph of the ops on new inputs.
Skipped where no GPU or no CUDA torch exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
import refimpl.nn.functional as RF
from refimpl.cuda import _blas
from refimpl.cuda import _conv_kernels as K
from refimpl.ops import nn_conv_kernel

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()), reason="needs a CUDA device"),
    pytest.mark.usefixtures("torch_without_tf32")]

# (max |got - want|) / (1 + max |want|) allowed, per dtype; gradients get 4x
TOL = {"float32": 2e-5, "float64": 1e-11, "float16": 4e-3, "bfloat16": 3e-2}
DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.fixture(params=["gemm", "direct"])
def path(request, monkeypatch):
    """Force one convolution path: no problem fits the direct kernels, or every one does."""
    big = 1 << 40 if request.param == "direct" else 0
    monkeypatch.setattr(K, "DIRECT_MACS", big)
    monkeypatch.setattr(K, "DIRECT_GW_SUM", big)
    return request.param


@pytest.fixture()
def calls(monkeypatch):
    """The kernel names and GEMMs the fused ops launch, in order."""
    seen: list[str] = []
    launch, gemm = K._launch, _blas.gemm

    def rec_launch(name, *a, **kw):
        seen.append(name)
        return launch(name, *a, **kw)

    def rec_gemm(*a, **kw):
        seen.append("gemm")
        return gemm(*a, **kw)

    monkeypatch.setattr(K, "_launch", rec_launch)
    monkeypatch.setattr(_blas, "gemm", rec_gemm)
    return seen


def _host(x) -> np.ndarray:
    return np.asarray(x.detach().cpu().to(t.float64)._np)


def _thost(x) -> np.ndarray:
    return x.detach().cpu().double().numpy()


def _close(got: np.ndarray, want: np.ndarray, tol: float, what: str) -> None:
    assert got.shape == want.shape, what
    if want.size:
        err = np.abs(got - want).max() / (1 + np.abs(want).max())
        assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def _rounded(a: np.ndarray, dtype: str) -> np.ndarray:
    """``a`` rounded to ``dtype`` (the values both libraries start from), as float64."""
    return _thost(torch.tensor(a).to(getattr(torch, dtype)))


def _leaves(lib, arrays, dtype, device, need, layout):
    """The arguments (the first through ``layout``) and the leaves that take gradients."""
    leaves, args = [], []
    for a, n in zip(arrays, need):
        x = None if a is None else lib.tensor(a, device=device).to(getattr(lib, dtype))
        if x is not None and n:
            x.requires_grad_(True)
        leaves.append(x)
        args.append(layout(x) if layout is not None and x is not None and not args else x)
    return leaves, args


def _run(lib, fn, arrays, dtype, device, need, grad_np, layout=None):
    """Forward and backward of ``fn`` in ``lib``: (output, gradients of the leaves)."""
    leaves, args = _leaves(lib, arrays, dtype, device, need, layout)
    out = fn(*args)
    g = lib.tensor(grad_np, device=device).to(getattr(lib, dtype))
    if any(need):
        (out * g).sum().backward()
    return out, [None if x is None or not n else x.grad for x, n in zip(leaves, need)]


def _compare(t_fn, torch_fn, arrays, dtype, need=(True, True, True), layout=None, seed=0):
    """The op on CUDA against torch on CUDA and refimpl's CPU float64 kernel."""
    rounded = [None if a is None else _rounded(a, dtype) for a in arrays]
    with t.no_grad():
        shape = tuple(t_fn(*_leaves(t, rounded, "float64", "cpu", need, layout)[1]).shape)
    grad_np = _rounded(np.random.default_rng(seed + 7).standard_normal(shape), dtype)
    out, grads = _run(t, t_fn, rounded, dtype, "cuda", need, grad_np, layout)
    assert out.device.type == "cuda" and out.dtype is getattr(t, dtype)
    assert out.is_contiguous()
    want, wgrads = _run(torch, torch_fn, rounded, dtype, "cuda", need, grad_np, layout)
    cpu, cgrads = _run(t, t_fn, rounded, "float64", "cpu", need, grad_np, layout)
    tol = TOL[dtype]
    _close(_host(out), _thost(want), tol, "output vs torch")
    _close(_host(out), _host(cpu), tol, "output vs refimpl cpu")
    for i, (a, b, c) in enumerate(zip(grads, wgrads, cgrads)):
        if b is None:
            assert a is None
            continue
        assert a.device.type == "cuda" and a.dtype is out.dtype
        _close(_host(a), _thost(b), 4 * tol, f"grad {i} vs torch")
        _close(_host(a), _host(c), 4 * tol, f"grad {i} vs refimpl cpu")


def _rn(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


# (conv name, input, weight shape, bias, keyword arguments)
CONV_CASES = [
    ("conv1d", (2, 3, 11), (5, 3, 3), True, {"padding": "same"}),
    ("conv1d", (3, 4, 17), (6, 2, 4), True, {"stride": 2, "padding": 3, "dilation": 2,
                                            "groups": 2}),
    ("conv2d", (2, 4, 9, 9), (6, 2, 3, 3), True, {"padding": 1, "groups": 2}),
    ("conv2d", (3, 5, 13, 10), (7, 5, 3, 2), False, {"stride": (2, 1), "padding": (1, 2),
                                                    "dilation": (1, 3)}),
    ("conv2d", (2, 6, 8, 7), (6, 1, 3, 3), True, {"padding": 1, "groups": 6}),
    ("conv2d", (8, 16, 33, 35), (32, 16, 3, 3), True, {"padding": 1}),
    ("conv2d", (0, 3, 5, 5), (4, 3, 3, 3), True, {"padding": 1}),
    ("conv3d", (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), True, {"stride": (1, 2, 1)}),
    ("conv3d", (2, 4, 4, 5, 3), (4, 2, 3, 2, 2), True, {"padding": 1, "dilation": (1, 2, 1),
                                                        "groups": 2}),
]


def _conv_fns(name, kw):
    return (lambda x, w, b: getattr(RF, name)(x, w, b, **kw),
            lambda x, w, b: getattr(torch.nn.functional, name)(x, w, b, **kw))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "xs", "ws", "bias", "kw"), CONV_CASES)
def test_conv_matches_torch_and_cpu(name, xs, ws, bias, kw, dtype, path, calls):
    arrays = [_rn(*xs), _rn(*ws, seed=1), _rn(ws[0], seed=2) if bias else None]
    _compare(*_conv_fns(name, kw), arrays, dtype, need=(True, True, bias))
    depthwise_half = dtype in ("float16", "bfloat16") and ws[1] == 1 and xs[1] > 1
    if xs[0] and not depthwise_half:  # the fused kernels of the path ran
        assert calls[0] == ("im2col" if path == "gemm" else "direct_fwd"), calls


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_noncontiguous_input_and_expanded_grad(dtype, path):
    x = _rn(3, 2, 9, 8)
    fns = _conv_fns("conv2d", {"stride": 2, "padding": 1})
    arrays = [x, _rn(4, 2, 3, 3, seed=1), _rn(4, seed=2)]
    # the input laid out (C, N, H, W) and its last two dims swapped: any strides
    _compare(*fns, [np.ascontiguousarray(x.transpose(1, 0, 3, 2)), *arrays[1:]], dtype,
             layout=lambda v: v.transpose(0, 1).transpose(2, 3))
    w = t.tensor(arrays[1], device="cuda").to(getattr(t, dtype)).requires_grad_(True)
    xin = t.tensor(x, device="cuda").to(getattr(t, dtype)).requires_grad_(True)
    fns[0](xin, w, None).sum().backward()  # the output gradient is an expanded 1
    tw = torch.tensor(arrays[1], device="cuda").to(getattr(torch, dtype)).requires_grad_(True)
    tx = torch.tensor(x, device="cuda").to(getattr(torch, dtype)).requires_grad_(True)
    fns[1](tx, tw, None).sum().backward()
    _close(_host(xin.grad), _thost(tx.grad), 4 * TOL[dtype], "input grad")
    _close(_host(w.grad), _thost(tw.grad), 4 * TOL[dtype], "weight grad")


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False),
                                  (False, False, True)])
def test_conv_backward_honours_the_mask(need, path):
    arrays = [_rn(2, 4, 7, 6), _rn(6, 2, 3, 3, seed=1), _rn(6, seed=2)]
    _compare(*_conv_fns("conv2d", {"padding": 1, "groups": 2}), arrays, "float32", need=need)


def test_conv_launch_counts(calls, monkeypatch):
    monkeypatch.setattr(K, "DIRECT_MACS", 0)  # the im2col and GEMM path
    x = t.tensor(_rn(2, 4, 9, 9), device="cuda", requires_grad=True)
    w = t.tensor(_rn(6, 4, 3, 3), device="cuda", requires_grad=True)
    b = t.tensor(_rn(6), device="cuda", requires_grad=True)
    out = RF.conv2d(x, w, b, padding=1)
    assert calls == ["im2col", "gemm", "bias"]
    wg = t.tensor(_rn(6, 2, 3, 3), device="cuda", requires_grad=True)
    calls.clear()
    RF.conv2d(x, wg, b, padding=1, groups=2)
    assert calls == ["im2col", "gemm", "swap01"]
    calls.clear()
    (out * out).sum().backward()
    assert sorted(calls) == sorted(["channel_sum", "swap01", "im2col", "gemm", "gemm",
                                    "col2im"]), calls


def test_small_conv_takes_the_direct_kernels(calls):
    # the training step's sizes fit the default limits: one kernel for the forward, one
    # for the three gradients
    x = t.tensor(_rn(8, 8, 6, 6), device="cuda", requires_grad=True)
    w = t.tensor(_rn(16, 8, 3, 3), device="cuda", requires_grad=True)
    b = t.tensor(_rn(16), device="cuda", requires_grad=True)
    out = RF.conv2d(x, w, b, padding=1)
    assert calls == ["direct_fwd"]
    calls.clear()
    (out * out).sum().backward()
    assert calls == ["direct_bw"], calls
    # so do the bench sizes' (batch 32, 16 -> 32 channels over 16 x 16)
    calls.clear()
    RF.conv2d(t.randn(32, 16, 16, 16, device="cuda"), t.randn(32, 16, 3, 3, device="cuda"),
              None, padding=1)
    assert calls == ["direct_fwd"]
    # a problem past DIRECT_MACS multiply-adds keeps the GEMMs
    calls.clear()
    x, w = t.randn(16, 32, 65, 67, device="cuda"), t.randn(64, 32, 3, 3, device="cuda")
    assert 16 * 64 * 65 * 67 * 32 * 9 > K.DIRECT_MACS
    RF.conv2d(x, w, None, padding=1)
    assert calls == ["im2col", "gemm"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("xs", "out_features"), [((5, 7), 3), ((4, 6, 33), 65),
                                                  ((300, 129), 257)])
@pytest.mark.parametrize("small", [False, True])
def test_linear_matches_torch_and_cpu(xs, out_features, dtype, small, calls, monkeypatch):
    # the size limit picks the path: cuBLAS GEMMs, or one small_mm kernel for the forward
    # and one small_mm_bw for the three gradients
    monkeypatch.setattr(K, "SMALL_MM_MACS", 1 << 40 if small else 0)
    arrays = [_rn(*xs), _rn(out_features, xs[-1], seed=1), _rn(out_features, seed=2)]
    _compare(RF.linear, torch.nn.functional.linear, arrays, dtype)
    forward = ["small_mm"] if small else ["bias", "gemm"]
    backward = ["small_mm_bw"] if small else ["channel_sum", "gemm", "gemm"]
    assert calls[:len(forward)] == forward, calls
    assert sorted(calls[len(forward):]) == sorted(backward), calls


def test_small_linear_takes_one_kernel_each_way(calls):
    x = t.tensor(_rn(48, 16), device="cuda", requires_grad=True)
    w = t.tensor(_rn(64, 16), device="cuda", requires_grad=True)
    b = t.tensor(_rn(64), device="cuda", requires_grad=True)
    out = RF.linear(x, w, b)
    assert calls == ["small_mm"]
    calls.clear()
    (out * out).sum().backward()
    assert calls == ["small_mm_bw"], calls


def test_linear_transposed_input():
    x = _rn(9, 6)
    arrays = [np.ascontiguousarray(x.T), _rn(4, 6, seed=1), _rn(4, seed=2)]
    _compare(RF.linear, torch.nn.functional.linear, arrays, "float32",
             layout=lambda v: v.t())


def test_captured_graph_replays_on_new_inputs(capture_graph):
    x = t.tensor(_rn(2, 4, 9, 9), device="cuda")
    w = t.tensor(_rn(6, 2, 3, 3, seed=1), device="cuda")
    b = t.tensor(_rn(6, seed=2), device="cuda")
    lx = t.tensor(_rn(5, 9), device="cuda")
    lw = t.tensor(_rn(3, 9, seed=1), device="cuda")
    args = ([1, 2], [(1, 1), (1, 1)], [1, 1], 2)

    def step():
        out = nn_conv_kernel.conv_im2col(x, w, b, *args)
        grads = nn_conv_kernel.conv_backward(out, x, w, *args, [True, True, True])
        return (out, *grads, RF.linear(lx, lw, b[:3]))

    with t.no_grad():
        step()  # loads the kernels and the cuBLAS handle outside the capture
        g, outs = capture_graph(step)
        for seed in (5, 6):
            for v in (x, w, lx):
                v.copy_(t.tensor(_rn(*v.shape, seed=seed), device="cuda"))
            g.replay()
            t.cuda.synchronize()
            for got, want in zip(outs, step()):
                np.testing.assert_allclose(_host(got), _host(want), rtol=1e-12, atol=1e-12)
