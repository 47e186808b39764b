"""The fused max pooling / NLL loss CUDA kernels without a GPU: their source compiles with
NVRTC into every kernel the launchers name, and the launchers pass the geometry the
kernels expect (strides, window, reduction; the launch itself is recorded, not run).
Also the CPU side of the fused ops: which inputs take them, and an empty batch."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
import refimpl.nn.functional as F
from refimpl.cuda import _pool_loss_kernels as K
from refimpl.ops import nn_loss_kernel, nn_pool_kernel

torch = pytest.importorskip("torch")


def test_the_source_compiles_into_every_kernel_the_launchers_name(nvrtc_compile):
    ptx = nvrtc_compile(K._SOURCE, "pool_loss.cu", "compute_90", cubin=False).decode()
    entries = {line.split(".entry ")[1].split("(")[0] for line in ptx.splitlines()
               if ".entry " in line}
    want = {f"{kind}_{suffix}" for kind in ("pool_fwd", "pool_bwd")
            for suffix in ("f32", "f64", "f16", "bf16")}
    want |= {f"{kind}_{suffix}" for kind in ("nll_fwd", "nll_bwd") for suffix in ("f32", "f64")}
    assert entries == want


@pytest.fixture
def recorded(monkeypatch):
    """Launches recorded as (kernel name, items, args, block, grid); CPU tensors stand in
    for CUDA ones (pointers become the storage offsets)."""
    calls: list = []
    monkeypatch.setattr(K, "_launch", lambda name, like, items, args, block=K._BLOCK,
                        grid=None: calls.append((name, items, args, block, grid)))
    monkeypatch.setattr(K, "_ptr", lambda x: None if x is None else x._offset)
    return calls


def test_nll_launch_passes_the_strides_of_a_transposed_input(recorded):
    x = t.zeros(7, 5).t()  # (5, 7): rows 1 apart, classes 5 apart
    y = t.tensor([[0, 9], [3, 9], [6, 9], [2, 9], [1, 9]])[:, 0]
    w = t.ones(7, 2)[:, 1]
    loss, total = K.nll_loss(x, y, w, "mean", -100)
    assert tuple(loss.shape) == () and tuple(total.shape) == ()
    (name, _, args, block, grid), = recorded
    g = args[-1]
    assert (name, block, grid) == ("nll_fwd_f32", 512, 1)
    assert (g.n, g.classes, g.ignore, g.xs0, g.xs1, g.ts, g.ws, g.reduction) == (
        5, 7, -100, 1, 5, 2, 2, 2)
    assert args[2] == 1  # the weight's offset: column 1
    grad = t.ones(10)[::2]  # stride 2
    K.nll_loss_backward(t.ones(()), x, y, None, total, "sum", 3)
    K.nll_loss_backward(grad, x, y, None, total, "none", 3)
    sums, nones = recorded[1][2][-1], recorded[2][2][-1]
    assert (sums.gs, sums.reduction, sums.ignore, sums.ws) == (0, 1, 3, 0)
    assert (nones.gs, nones.reduction) == (2, 0)
    assert recorded[1][1] == 35  # one thread per gradient element


def test_nll_launch_of_an_unbatched_input(recorded):
    K.nll_loss(t.zeros(6), t.tensor(2), None, "none", -100)
    g = recorded[0][2][-1]
    assert (g.n, g.classes, g.xs0, g.xs1, g.ts, g.reduction) == (1, 6, 0, 1, 0, 0)


def test_pool_launches_pass_the_window_and_walk_every_element(recorded):
    x = t.zeros(2, 3, 11, 10)
    values, idx = K.max_pool2d(x, [3, 2], [2, 1], [1, 0], [2, 1], [5, 9])
    assert tuple(values.shape) == (2, 3, 5, 9) and idx.dtype is t.int64
    K.max_pool2d_backward(t.zeros(2, 3, 5, 9), x, idx, [3, 2], [2, 1], [1, 0], [2, 1])
    (fwd, n_out, a, _, _), (bwd, n_in, b, _, _) = recorded
    assert (fwd, n_out, bwd, n_in) == ("pool_fwd_f32", 270, "pool_bwd_f32", 660)
    for g in (a[-1], b[-1]):
        assert (g.planes, g.h, g.w, g.oh, g.ow) == (6, 11, 10, 5, 9)
        assert (g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw) == (3, 2, 2, 1, 1, 0, 2, 1)
    K.max_pool2d(t.zeros(0, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], [4, 4])
    assert len(recorded) == 2  # nothing to launch for an empty batch


def test_which_inputs_take_the_fused_ops():
    assert nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4))
    assert not nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4, dtype=t.float16))  # CUDA only
    assert not nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4, dtype=t.int32))
    x, y = t.zeros(3, 4), t.tensor([0, 1, 2])
    assert nn_loss_kernel.use_fused(x, y, t.ones(4))
    assert not nn_loss_kernel.use_fused(x, y, t.ones(5))  # one weight per class only


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2,
                                                      "padding": 1}])
def test_max_pool2d_of_an_empty_batch(kw):
    x = t.zeros(0, 3, 9, 8, requires_grad=True)
    tx = torch.zeros(0, 3, 9, 8, requires_grad=True)
    v, i = F.max_pool2d(x, return_indices=True, **kw)
    tv, ti = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    assert tuple(v.shape) == tuple(tv.shape) and tuple(i.shape) == tuple(ti.shape)
    assert i.dtype is t.int64
    assert v.grad_fn.name() == tv.grad_fn.name()
    v.sum().backward()
    tv.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 9, 8)
    np.testing.assert_array_equal(np.asarray(x.grad._np), tx.grad.numpy())
