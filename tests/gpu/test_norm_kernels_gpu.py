"""The NVRTC kernels of batch and layer normalisation (refimpl/cuda/_norm_kernels.py)
against torch's CUDA ops and against refimpl's CPU kernels of the same ops: outputs,
saved statistics and gradients, over odd and multi-block shapes, strided inputs, every
gradient mask, float32/float64; plus reproducibility and a CUDA graph replay. The
composed fallback is disabled in these tests, so each CUDA result comes from the
kernels. Skipped where no GPU or no CUDA torch exists."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
import refimpl.ops.nn_layer_norm_kernel as LK
import refimpl.ops.nn_norm_kernel as BK

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()), reason="needs a CUDA device")

TOL = {"float32": 5e-5, "float64": 1e-11}
BN_SHAPES = [(7, 5), (4, 3, 5, 5), (2, 3, 4, 5, 6), (16, 4, 64, 64), (3, 300, 7)]
LN_CASES = [((4, 6, 8), 1), ((3, 5, 7), 2), ((2, 1500), 1), ((1, 3000), 1), ((1300, 24), 1),
            ((513, 64), 1), ((37, 1029), 1), ((2, 3, 4, 50), 3)]
MASKS = [(True, True, True), (True, False, False), (False, True, True), (False, False, True)]


@pytest.fixture(autouse=True)
def _kernels_only(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("the composed CUDA path ran instead of the kernels")

    for mod, name in ((BK, "_ops"), (BK, "_backward_ops"), (LK, "_ops"),
                      (LK, "_backward_from_stats")):
        monkeypatch.setattr(mod, name, refuse)


def rn(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape) * 1.5 + 0.3


def ours(a, dtype, device="cuda"):
    return None if a is None else t.tensor(a, device=device).to(getattr(t, dtype))


def theirs(a, dtype):
    return None if a is None else torch.tensor(a, device="cuda").to(getattr(torch, dtype))


def arr(x):
    if x is None:
        return None
    if isinstance(x, t.Tensor):
        return np.asarray(x.detach().cpu().to(t.float64)._np)
    return x.detach().cpu().double().numpy()


def close(a, ref, dtype, what):
    """``a`` (a CUDA result) equals ``ref`` within the dtype's tolerance, scaled by the
    reference's magnitude (the sums over many elements)."""
    assert a.device.type == "cuda", f"{what}: result left the GPU"
    b = arr(ref)
    tol = TOL[dtype] * max(1.0, float(np.abs(b).max(initial=0)))
    np.testing.assert_allclose(arr(a).reshape(b.shape), b, rtol=TOL[dtype], atol=tol,
                               err_msg=what)


def _close_gradients(got, cpu, ref, mask, dtype) -> None:
    """The (input, weight, bias) gradients against the CPU kernel's and torch's; one not
    asked for is an empty tensor."""
    for i, what in enumerate(("input", "weight", "bias")):
        if not mask[i]:
            assert tuple(got[i].shape) == (0,)
            continue
        close(got[i], cpu[i], dtype, f"{what} gradient against the CPU kernel")
        close(got[i], ref[i], dtype, f"{what} gradient against torch")


def _bn_args(shape, affine, seed=0):
    c = shape[1]
    x = rn(*shape, seed=seed)
    w, b = (rn(c, seed=seed + 1), rn(c, seed=seed + 2)) if affine else (None, None)
    mean, var = rn(c, seed=seed + 3), np.abs(rn(c, seed=seed + 4)) + 0.5
    return x, w, b, mean, var


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_forward(dtype, shape, training, affine):
    x, w, b, mean, var = _bn_args(shape, affine)
    stats = (None, None) if training else (mean, var)
    args = [ours(a, dtype) for a in (x, w, b, *stats)]
    out, m, v = BK.batch_norm_fused(*args, training, 1e-5)
    cpu = BK.batch_norm_fused(*[ours(a, dtype, "cpu") for a in (x, w, b, *stats)],
                              training, 1e-5)
    for got, want, what in zip((out, m, v), cpu, ("out", "mean", "var")):
        close(got, want, dtype, f"{what} against the CPU kernel")
        assert got.is_contiguous() and got.dtype is getattr(t, dtype)
    X = theirs(x, dtype)
    ref = torch.nn.functional.batch_norm(X, *[theirs(a, dtype) for a in (*stats, w, b)],
                                         training=training, eps=1e-5)
    close(out, ref, dtype, "out against torch")
    if training:
        dims = [0, *range(2, len(shape))]
        tv, tm = torch.var_mean(X.double(), dims, correction=0)
        close(m, tm, dtype, "mean against torch")
        close(v, tv, dtype, "var against torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("mask", MASKS)
def test_batch_norm_backward(dtype, shape, training, mask):
    x, w, _, mean, var = _bn_args(shape, True, seed=5)
    g = rn(*shape, seed=9)
    eps = 1e-5
    if training:
        X = theirs(x, dtype)
        _, sm, sinv = torch.native_batch_norm(X, theirs(w, dtype), None, None, None, True,
                                              0.1, eps)
        mean, var = arr(sm), 1 / arr(sinv) ** 2 - eps  # the statistics torch saved
    args = [ours(a, dtype) for a in (g, x, w, mean, var)]
    got = BK.batch_norm_backward(*args, training, eps, list(mask))
    cpu = BK.batch_norm_backward(*[ours(a, dtype, "cpu") for a in (g, x, w, mean, var)],
                                 training, eps, list(mask))
    if training:
        ref = torch.ops.aten.native_batch_norm_backward(
            theirs(g, dtype), X, theirs(w, dtype), None, None, sm, sinv, True, eps, list(mask))
    else:  # torch's CUDA backward op wants saved statistics: autograd of the eval forward
        leaves = [theirs(a, dtype).requires_grad_(True) for a in (x, w, np.zeros(shape[1]))]
        out = torch.nn.functional.batch_norm(leaves[0], theirs(mean, dtype),
                                             theirs(var, dtype), *leaves[1:], eps=eps)
        ref = torch.autograd.grad(out, leaves, theirs(g, dtype))
    _close_gradients(got, cpu, ref, mask, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_strided_input_autograd_and_running_stats(dtype):
    a = rn(4, 6, 5, 3)
    w, b = rn(3, seed=1), rn(3, seed=2)
    # channels_last-like strides: an NHWC array viewed as NCHW
    xb, XB = ours(a, dtype).requires_grad_(True), theirs(a, dtype).requires_grad_(True)
    x, X = xb.permute(0, 3, 1, 2), XB.permute(0, 3, 1, 2)
    assert not x.is_contiguous()
    W, B = ours(w, dtype).requires_grad_(True), ours(b, dtype).requires_grad_(True)
    TW, TB = theirs(w, dtype).requires_grad_(True), theirs(b, dtype).requires_grad_(True)
    rm, rv = t.zeros(3, device="cuda").to(getattr(t, dtype)), t.ones(3, device="cuda").to(
        getattr(t, dtype))
    RM, RV = torch.zeros(3, device="cuda").to(getattr(torch, dtype)), torch.ones(
        3, device="cuda").to(getattr(torch, dtype))
    out = t.nn.functional.batch_norm(x, rm, rv, W, B, training=True, momentum=0.3)
    ref = torch.nn.functional.batch_norm(X, RM, RV, TW, TB, training=True, momentum=0.3)
    close(out, ref, dtype, "out")
    close(rm, RM, dtype, "running_mean")
    close(rv, RV, dtype, "running_var")
    gw = rn(*out.shape, seed=4)
    (out * ours(gw, dtype)).sum().backward()
    (ref * theirs(gw, dtype)).sum().backward()
    for mine, want, what in ((xb.grad, XB.grad, "x"), (W.grad, TW.grad, "w"),
                             (B.grad, TB.grad, "b")):
        close(mine, want, dtype, f"grad {what}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,n", LN_CASES)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward(dtype, shape, n, affine):
    norm = shape[len(shape) - n:]
    x = rn(*shape)
    w, b = (rn(*norm, seed=1), rn(*norm, seed=2)) if affine else (None, None)
    out, mean, rstd = LK.layer_norm_fused(*[ours(a, dtype) for a in (x, w, b)], n, 1e-5)
    cpu = LK.layer_norm_fused(*[ours(a, dtype, "cpu") for a in (x, w, b)], n, 1e-5)
    ref = torch.native_layer_norm(theirs(x, dtype), list(norm), theirs(w, dtype),
                                  theirs(b, dtype), 1e-5)
    for got, c, r, what in zip((out, mean, rstd), cpu, ref, ("out", "mean", "rstd")):
        assert tuple(got.shape) == tuple(c.shape) and got.is_contiguous()
        close(got, c, dtype, f"{what} against the CPU kernel")
        close(got, r, dtype, f"{what} against torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,n", LN_CASES)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_backward(dtype, shape, n, mask, affine):
    norm = shape[len(shape) - n:]
    x, g = rn(*shape), rn(*shape, seed=7)
    w = rn(*norm, seed=1) if affine else None
    mask = (mask[0], mask[1] and affine, mask[2] and affine)
    X = theirs(x, dtype)
    _, tm, tr = torch.native_layer_norm(X, list(norm), theirs(w, dtype), None, 1e-5)
    mean, rstd = arr(tm), arr(tr)
    got = LK.layer_norm_backward(*[ours(a, dtype) for a in (g, x, w, mean, rstd)], n,
                                 list(mask))
    cpu = LK.layer_norm_backward(*[ours(a, dtype, "cpu") for a in (g, x, w, mean, rstd)], n,
                                 list(mask))
    bias = None if w is None else theirs(np.zeros(norm), dtype)
    ref = torch.ops.aten.native_layer_norm_backward(
        theirs(g, dtype), X, list(norm), tm, tr, theirs(w, dtype), bias, list(mask))
    _close_gradients(got, cpu, ref, mask, dtype)


def test_layer_norm_strided_input_autograd():
    a = rn(6, 40, 24)
    xb, XB = ours(a, "float32").requires_grad_(True), theirs(a, "float32").requires_grad_(True)
    x, X = xb.transpose(0, 1), XB.transpose(0, 1)
    w, b = rn(24, seed=1), rn(24, seed=2)
    W, B = ours(w, "float32").requires_grad_(True), ours(b, "float32").requires_grad_(True)
    TW, TB = theirs(w, "float32").requires_grad_(True), theirs(b, "float32").requires_grad_(True)
    out = t.nn.functional.layer_norm(x, (24,), W, B)
    ref = torch.nn.functional.layer_norm(X, (24,), TW, TB)
    close(out, ref, "float32", "out")
    gw = rn(40, 6, 24, seed=3)
    (out * ours(gw, "float32")).sum().backward()
    (ref * theirs(gw, "float32")).sum().backward()
    for mine, want, what in ((xb.grad, XB.grad, "x"), (W.grad, TW.grad, "w"),
                             (B.grad, TB.grad, "b")):
        close(mine, want, "float32", f"grad {what}")


def test_reductions_are_reproducible():
    x, w, b, _, _ = _bn_args((16, 4, 64, 64), True)
    g = rn(16, 4, 64, 64, seed=8)
    args = [ours(a, "float32") for a in (x, w, b)]
    runs = []
    for _ in range(2):
        out, m, v = BK.batch_norm_fused(*args, None, None, True, 1e-5)
        grads = BK.batch_norm_backward(ours(g, "float32"), args[0], args[1], m, v, True, 1e-5,
                                       [True, True, True])
        lx, lw = ours(rn(513, 64), "float32"), ours(rn(64, seed=1), "float32")
        lo, lm, lr = LK.layer_norm_fused(lx, lw, None, 1, 1e-5)
        lg = LK.layer_norm_backward(ours(rn(513, 64, seed=2), "float32"), lx, lw, lm, lr, 1,
                                    [True, True, True])
        runs.append([arr(a) for a in (out, m, v, *grads, lo, lm, lr, *lg)])
    for a, b in zip(*runs):
        assert np.array_equal(a, b)


def test_graph_replay_runs_the_kernels_on_new_data(capture_graph):
    x = ours(rn(8, 3, 10, 10), "float32")
    w, b = ours(rn(3, seed=1), "float32"), ours(rn(3, seed=2), "float32")
    y = ours(rn(300, 40), "float32")
    lw = ours(rn(40, seed=3), "float32")

    def step():
        out, m, v = BK.batch_norm_fused(x, w, b, None, None, True, 1e-5)
        gx = BK.batch_norm_backward(out, x, w, m, v, True, 1e-5, [True, True, True])
        lo, lm, lr = LK.layer_norm_fused(y, lw, None, 1, 1e-5)
        lg = LK.layer_norm_backward(lo, y, lw, lm, lr, 1, [True, True, False])
        return (out, m, v, *gx, lo, lm, lr, lg[0], lg[1])

    step()  # load the kernels before the capture
    t.cuda.synchronize()
    graph, outs = capture_graph(step)
    x.copy_(ours(rn(8, 3, 10, 10, seed=11), "float32"))
    y.copy_(ours(rn(300, 40, seed=12), "float32"))
    graph.replay()
    t.cuda.synchronize()
    eager = step()
    for replayed, again in zip(outs, eager):
        np.testing.assert_array_equal(arr(replayed), arr(again))
    cpu = BK.batch_norm_fused(x.cpu(), w.cpu(), b.cpu(), None, None, True, 1e-5)
    close(outs[0], cpu[0], "float32", "replayed output against the CPU kernel")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_running_statistics_update_rounds_as_the_ops(dtype):
    from refimpl.cuda._norm_kernels import update_running

    x = ours(rn(9, 70, 3), dtype)
    _, mean, var = BK.batch_norm_fused(x, None, None, None, None, True, 1e-5)
    rm, rv = ours(rn(70, seed=1), dtype), ours(np.abs(rn(70, seed=2)), dtype)
    rm2, rv2 = rm.clone(), rv.clone()
    v0 = rm._version
    with t.no_grad():  # as batch_norm calls it
        assert update_running(rm, rv, mean, var, 0.1, 27)
    assert rm._version == v0  # torch's batch norm kernels bump no version either
    rm2.mul_(1 - 0.1).add_(mean, alpha=0.1)
    rv2.mul_(1 - 0.1).add_(var * (27 / 26), alpha=0.1)
    ulp = 1.2e-7 if dtype == "float32" else 2.3e-16  # at most one rounding apart
    np.testing.assert_allclose(arr(rm), arr(rm2), rtol=ulp, atol=0)
    np.testing.assert_allclose(arr(rv), arr(rv2), rtol=ulp, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 6, 5, 5), (16, 4, 64, 64)])  # bn_one; bn_apply
def test_training_updates_running_statistics_in_the_forward_launch(monkeypatch, dtype,
                                                                    shape):
    # given the running statistics and a momentum, the launch that writes the batch's
    # statistics updates them: bit for bit the separate update_running launch, no launch
    # of its own, no version bump
    from refimpl.cuda import _norm_kernels as K

    x = ours(rn(*shape), dtype)
    w, b = ours(rn(shape[1], seed=1), dtype), ours(rn(shape[1], seed=2), dtype)
    rm, rv = ours(rn(shape[1], seed=3), dtype), ours(np.abs(rn(shape[1], seed=4)), dtype)
    rm2, rv2 = rm.clone(), rv.clone()
    v0 = rm._version
    seen = []
    launch = K._launch
    monkeypatch.setattr(K, "_launch", lambda name, *a: seen.append(name) or launch(name, *a))
    out, mean, var = BK.batch_norm_fused(x, w, b, rm, rv, True, 1e-5, 0.1)
    assert "bn_running" not in seen and seen[-1] in ("bn_one", "bn_apply")
    assert rm._version == v0 and rv._version == v0
    with t.no_grad():
        assert K.update_running(rm2, rv2, mean, var, 0.1, x.numel() // shape[1])
    np.testing.assert_array_equal(arr(rm), arr(rm2))
    np.testing.assert_array_equal(arr(rv), arr(rv2))
    # the CPU op from the same running statistics
    cpu_rm, cpu_rv = ours(rn(shape[1], seed=3), dtype, "cpu"), ours(
        np.abs(rn(shape[1], seed=4)), dtype, "cpu")
    cpu = BK.batch_norm_fused(x.cpu(), w.cpu(), b.cpu(), cpu_rm, cpu_rv, True, 1e-5, 0.1)
    close(out, cpu[0], dtype, "output")
    close(rm, cpu_rm, dtype, "running mean against the CPU op")
    close(rv, cpu_rv, dtype, "running variance against the CPU op")


def test_module_training_updates_running_statistics_in_its_forward_launch(monkeypatch):
    # BatchNorm2d in training, grad mode on outside: the running statistics are updated
    # by the op's own launch, not by a launch of their own nor the mul_/add_ ops
    from refimpl.cuda import _norm_kernels as K

    seen = []
    launch = K._launch
    monkeypatch.setattr(K, "_launch", lambda name, *a: seen.append(name) or launch(name, *a))
    bn = t.nn.BatchNorm2d(6).cuda()
    tbn = torch.nn.BatchNorm2d(6).cuda()
    data = rn(4, 6, 5, 5).astype(np.float32)
    x = t.tensor(data, device="cuda", requires_grad=True)
    bn(x).sum().backward()
    tbn(torch.tensor(data, device="cuda")).sum()
    assert seen == ["bn_one", "bn_bw_one"]
    close(bn.running_mean, tbn.running_mean, "float32", "running mean against torch")
    close(bn.running_var, tbn.running_var, "float32", "running variance against torch")
