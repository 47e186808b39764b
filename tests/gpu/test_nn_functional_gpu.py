"""refimpl.nn.functional on CUDA against torch on CUDA: values, gradients and that every
result stays on the GPU. torch's TF32 paths (cuDNN convolutions, matmul) are switched off
so both sides compute in full float32. Skipped where no GPU or no CUDA torch exists."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
import refimpl.nn.functional as RF

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()), reason="needs a CUDA device"),
    pytest.mark.usefixtures("torch_without_tf32")]

TOL = {"float32": (2e-5, 2e-5), "float64": (1e-10, 1e-10), "float16": (2e-3, 2e-3),
       "bfloat16": (2e-2, 2e-2)}


def _np(x):
    if isinstance(x, t.Tensor):
        return np.asarray(x.detach().cpu().to(t.float64)._np)
    return x.detach().cpu().double().numpy()


def _one(lib, a, dtype: str):
    if not isinstance(a, np.ndarray):
        return a  # a plain argument (a shape, a number)
    x = lib.tensor(a, device="cuda")
    return x.to(getattr(lib, dtype)) if a.dtype.kind == "f" else x


def _build(arrays, dtype: str, grad: bool):
    ours = [_one(t, a, dtype) for a in arrays]
    theirs = [_one(torch, a, dtype) for a in arrays]
    if grad:
        for x in ours + theirs:
            if hasattr(x, "dtype") and x.dtype.is_floating_point:
                x.requires_grad_(True)
    return ours, theirs


def compare(name: str, arrays, dtype: str = "float32", grad: bool = True, **kw):
    """Run ``name`` on CUDA in refimpl and torch; compare outputs and input gradients."""
    ours, theirs = _build(arrays, dtype, grad)
    r = getattr(RF, name)(*ours, **kw)
    T = getattr(torch.nn.functional, name)(*theirs, **kw)
    rs = list(r) if isinstance(r, tuple) else [r]
    Ts = list(T) if isinstance(T, tuple) else [T]
    rt, at = TOL[dtype]
    for a, b in zip(rs, Ts):
        assert a.device.type == "cuda", f"{name}: result left the GPU"
        assert str(a.dtype) == str(b.dtype) and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=rt, atol=at, err_msg=name)
    if not grad:
        return
    w = np.random.default_rng(1).standard_normal(tuple(rs[0].shape))
    (rs[0] * t.tensor(w, device="cuda").to(rs[0].dtype)).sum().backward()
    (Ts[0] * torch.tensor(w, device="cuda").to(Ts[0].dtype)).sum().backward()
    for a, b in zip(ours, theirs):
        if getattr(b, "grad", None) is not None:
            assert a.grad is not None and a.grad.device.type == "cuda", name
            np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=rt * 5, atol=at * 5,
                                       err_msg=f"{name} grad")


def rn(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_convolutions(dtype):
    compare("conv2d", [rn(2, 4, 9, 9), rn(6, 2, 3, 3, seed=1), rn(6, seed=2)], dtype,
            stride=2, padding=1, dilation=2, groups=2)
    compare("conv1d", [rn(2, 3, 11), rn(5, 3, 3, seed=1)], dtype, padding="same")
    compare("conv3d", [rn(1, 2, 5, 6, 4), rn(3, 2, 2, 3, 2, seed=1)], dtype, stride=(1, 2, 1))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_poolings(dtype):
    compare("max_pool2d", [rn(2, 3, 9, 8)], dtype, kernel_size=3, stride=2, padding=1,
            ceil_mode=True, return_indices=True)
    compare("avg_pool2d", [rn(2, 3, 9, 8)], dtype, kernel_size=3, stride=2, padding=1,
            count_include_pad=False)
    compare("adaptive_avg_pool2d", [rn(2, 3, 9, 8)], dtype, output_size=(4, 3))
    compare("adaptive_max_pool2d", [rn(2, 3, 9, 8)], dtype, output_size=(4, 3))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_normalisations(dtype):
    compare("layer_norm", [rn(4, 6, 8), (8,), rn(8, seed=1), rn(8, seed=2)], dtype)
    compare("group_norm", [rn(4, 6, 5), 3], dtype)
    compare("rms_norm", [rn(4, 8), (8,), rn(8, seed=1)], dtype)


def test_batch_norm_running_statistics_on_the_device():
    x = rn(8, 3, 5)
    rm, rv = t.zeros(3, device="cuda"), t.ones(3, device="cuda")
    Rm, Rv = torch.zeros(3, device="cuda"), torch.ones(3, device="cuda")
    out = RF.batch_norm(t.tensor(x, device="cuda").float(), rm, rv, training=True)
    ref = torch.nn.functional.batch_norm(torch.tensor(x, device="cuda").float(), Rm, Rv,
                                         training=True)
    np.testing.assert_allclose(_np(out), _np(ref), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(_np(rm), _np(Rm), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(_np(rv), _np(Rv), rtol=2e-5, atol=2e-6)
    assert rm.device.type == "cuda"


@pytest.mark.parametrize("name,kw", [
    ("elu", {}), ("selu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("hardsigmoid", {}),
    ("hardswish", {}), ("mish", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
    ("softshrink", {}), ("hardshrink", {}), ("logsigmoid", {}), ("softplus", {}),
])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_activations(name, kw, dtype):
    compare(name, [rn(5, 7) * 3], dtype, **kw)


def test_losses():
    target = np.random.default_rng(3).integers(0, 5, (6,))
    compare("cross_entropy", [rn(6, 5), target], label_smoothing=0.1)
    compare("cross_entropy", [rn(6, 5), target], ignore_index=2)
    compare("mse_loss", [rn(4, 5), rn(4, 5, seed=1)])
    compare("smooth_l1_loss", [rn(4, 5), rn(4, 5, seed=1)], beta=0.5)
    compare("binary_cross_entropy_with_logits", [rn(4, 5), np.abs(rn(4, 5, seed=1)) % 1])
    compare("kl_div", [rn(4, 5), np.abs(rn(4, 5, seed=1)) % 1], reduction="batchmean")


def test_attention_embedding_and_resampling():
    compare("scaled_dot_product_attention", [rn(2, 3, 4, 8), rn(2, 3, 6, 8, seed=1),
                                             rn(2, 3, 6, 5, seed=2)], is_causal=True)
    compare("embedding", [np.array([[0, 2, 4], [1, 1, 3]]), rn(5, 3)], padding_idx=1)
    compare("interpolate", [rn(1, 2, 4, 5)], scale_factor=2, mode="bilinear")
    compare("interpolate", [rn(1, 2, 4, 5)], size=(7, 3), mode="bicubic", align_corners=True)
    compare("pad", [rn(2, 3, 5)], pad=(2, 1), mode="reflect")
    compare("pixel_shuffle", [rn(1, 8, 3, 3)], upscale_factor=2)
    compare("unfold", [rn(1, 2, 5, 5)], kernel_size=2, padding=1)


def test_dropout_masks_come_from_the_device_generator():
    t.cuda.manual_seed(0)
    x = t.ones(400, 250, device="cuda")
    y = RF.dropout(x, 0.3)
    assert y.device.type == "cuda"
    kept = float((y != 0).float().mean())
    assert abs(kept - 0.7) < 0.01
    t.cuda.manual_seed(0)
    assert bool((RF.dropout(x, 0.3) == y).all())
