"""refimpl.nn.functional against torch.nn.functional on the CPU: convolutions, poolings,
padding, unfold/fold, pixel shuffles, interpolation and grid sampling. Values, dtypes,
errors (type and message), gradients, second-order gradients and forward-mode
tangents."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t
import refimpl.nn.functional as RF


def fn(name: str, **kw):
    """``fn(m, *args)`` calling ``name`` from refimpl's or torch's functional module."""
    def call(m, *args):
        mod = RF if m is t else m.nn.functional
        return getattr(mod, name)(*args, **kw)
    return call


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


CONV2D = [
    ((2, 3, 7, 8), (4, 3, 3, 2), {}),
    ((2, 4, 9, 9), (6, 2, 3, 3), {"groups": 2, "stride": 2, "padding": 1, "dilation": 2}),
    ((3, 7, 7), (4, 3, 3, 3), {"padding": "same"}),
    ((1, 2, 6, 6), (2, 2, 2, 2), {"padding": "same"}),
    ((2, 3, 6, 5), (3, 3, 2, 2), {"padding": "valid", "stride": (2, 1)}),
    ((2, 6, 5, 5), (6, 1, 3, 3), {"groups": 6, "padding": (1, 2)}),
]


@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d_values_and_gradients(xs, ws, kw):
    bias = randn((ws[0],), "float64", 2)
    check(lambda m, x, w, b: fn("conv2d", **kw)(m, x, w, b), randn(xs, "float64"),
          randn(ws, "float64", 1), bias, grad=True)
    check_double_backward(lambda m, x, w, b: fn("conv2d", **kw)(m, x, w, b),
                          randn(xs, "float64"), randn(ws, "float64", 1), bias)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_conv2d_dtypes(dtype):
    check(fn("conv2d", padding=1), randn((1, 3, 5, 5), dtype), randn((2, 3, 2, 2), dtype, 1))


def test_conv_integer_inputs_compute_exactly():
    check(fn("conv2d"), randint(0, 4, (1, 3, 5, 5)), randint(0, 3, (2, 3, 2, 2)))


def test_conv1d_and_conv3d():
    check(fn("conv1d", stride=2, padding=3, dilation=2), randn((2, 3, 11)),
          randn((5, 3, 3), "float32", 1), grad=True)
    check(fn("conv1d", padding="same", dilation=3), randn((1, 3, 9)), randn((4, 3, 2), "float32",
                                                                           1), grad=True)
    check(fn("conv3d", stride=(1, 2, 1), padding=(1, 0, 1), groups=3), randn((2, 3, 5, 6, 4)),
          randn((6, 1, 2, 3, 2), "float32", 1), grad=True)


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 3), (4, 3, 3, 3), {}),
    ((1, 2, 5, 5), (4, 3, 3, 3), {}),
    ((1, 3, 2, 2), (4, 3, 3, 3), {}),
    ((1, 6, 5, 5), (3, 3, 3, 3), {"groups": 2}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"stride": 0}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"padding": -1}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"dilation": 0}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"stride": 2, "padding": "same"}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"padding": "foo"}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"stride": (1, 2, 3)}),
    ((1, 3, 5, 5), (4, 3, 3, 3), {"groups": 0}),
    ((1, 3, 5, 5), (0, 3, 3, 3), {}),
])
def test_conv2d_errors_match_torch(xs, ws, kw):
    check(fn("conv2d", **kw), randn(xs), randn(ws, "float32", 1))


def test_conv2d_dtype_and_bias_errors():
    check(fn("conv2d"), randn((1, 3, 5, 5), "float64"), randn((4, 3, 3, 3)))
    check(fn("conv2d"), randn((1, 3, 5, 5)), randn((4, 3, 3, 3)), randn((4,), "float64"))
    check(fn("conv2d"), randn((1, 3, 5, 5)), randn((4, 3, 3, 3)), randn((5,)))


def test_conv_same_padding_warns_for_even_kernels():
    x, w = t.randn(1, 3, 5), t.randn(4, 3, 2)
    with pytest.warns(UserWarning, match="padding='same' with even kernel lengths"):
        out = RF.conv1d(x, w, padding="same", dilation=3)
    assert out.shape == (1, 4, 5)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("pads", [(1, 2), (2, 1, 1, 0), (-1, 2)])
def test_pad_modes(mode, pads):
    shape = (2, 3, 4) if len(pads) == 2 else (1, 2, 3, 4)
    check(fn("pad", pad=pads, mode=mode), randn(shape, "float64"), grad=True)


def test_pad_constant_value_and_errors():
    check(fn("pad", pad=(2, 2), value=1.5), randint(0, 3, (1, 1, 3)))
    check(fn("pad", pad=(1, 0, 2, 1, 1, 1), value=-2.0), randn((2, 3, 4)), grad=True)
    for kw in [{"pad": (1,)}, {"pad": (1, 1, 1, 1, 1, 1)}, {"pad": (3, 3), "mode": "reflect"},
               {"pad": (1, 1), "mode": "foo"}, {"pad": (1, 1), "mode": "replicate", "value": 2.0}]:
        check(fn("pad", **kw), randn((1, 3)))
    check(fn("pad", pad=(1, 1), mode="reflect"), randn((3,)))
    check(fn("pad", pad=(4, 1), mode="circular"), randn((1, 1, 3)))
    check(fn("pad", pad=(1, 1), mode="replicate"), randn((1, 1, 0)))
    check(fn("pad", pad=(-4, 1)), randn((1, 1, 3)))


def test_unfold_fold_and_pixel_shuffle():
    check(fn("unfold", kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
          randn((2, 3, 6, 7), "float64"), grad=True)
    check(fn("fold", output_size=(5, 6), kernel_size=(2, 3), dilation=(1, 2), padding=1,
             stride=(2, 1)), randn((2, 12, 6), "float64"), grad=True)
    check(fn("fold", output_size=(4, 4), kernel_size=2), randn((8, 9), "float64"), grad=True)
    check(fn("fold", output_size=(4, 4), kernel_size=2), randn((2, 8, 8)))
    check(fn("pixel_shuffle", upscale_factor=2), randn((2, 8, 3, 3), "float64"), grad=True)
    check(fn("pixel_unshuffle", downscale_factor=2), randn((2, 2, 4, 6), "float64"), grad=True)
    check(fn("pixel_shuffle", upscale_factor=2), randn((2, 6, 3, 3)))
    check(fn("pixel_unshuffle", downscale_factor=2), randn((2, 2, 3, 6)))


MAX_POOL = [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1},
            {"kernel_size": (2, 3), "stride": (2, 1), "dilation": (2, 1), "ceil_mode": True},
            {"kernel_size": 3, "stride": 2, "ceil_mode": True, "padding": 1}]


@pytest.mark.parametrize("kw", MAX_POOL)
def test_max_pool2d_values_indices_gradients(kw):
    check(fn("max_pool2d", return_indices=True, **kw), randn((2, 3, 7, 8), "float64"),
          grad=True)
    check(fn("max_pool2d", **kw), randn((3, 7, 8)), grad=True)


@pytest.mark.parametrize("kw", MAX_POOL)
@pytest.mark.parametrize("include", [True, False])
def test_avg_pool2d(kw, include):
    kw = {k: v for k, v in kw.items() if k != "dilation"}
    check(fn("avg_pool2d", count_include_pad=include, **kw), randn((2, 3, 7, 8), "float64"),
          grad=True)


def test_pool_variants():
    check(fn("avg_pool2d", kernel_size=3, stride=2, padding=1, ceil_mode=True,
             divisor_override=5), randn((2, 3, 7, 8), "float64"), grad=True)
    check(fn("avg_pool2d", kernel_size=2), randint(-9, 9, (2, 3, 7, 8)))
    check(fn("max_pool2d", kernel_size=2), randint(-9, 9, (2, 3, 7, 8)))
    check(fn("max_pool1d", kernel_size=3, stride=2, padding=1, return_indices=True),
          randn((2, 3, 9)), grad=True)
    check(fn("max_pool3d", kernel_size=2, return_indices=True), randn((2, 2, 4, 5, 4)), grad=True)
    check(fn("avg_pool1d", kernel_size=3, stride=2, padding=1, ceil_mode=True,
             count_include_pad=False), randn((2, 3, 9)), grad=True)
    check(fn("avg_pool3d", kernel_size=2, ceil_mode=True), randn((2, 2, 5, 5, 4)), grad=True)


@pytest.mark.parametrize("size", [(2, 3), (3, None), 5, (7, 8), (1, 1)])
def test_adaptive_pools(size):
    check(fn("adaptive_avg_pool2d", output_size=size), randn((2, 3, 7, 8), "float64"),
          grad=True)
    check(fn("adaptive_max_pool2d", output_size=size, return_indices=True),
          randn((2, 3, 7, 8), "float64"), grad=True)


def test_adaptive_pools_1d_3d():
    check(fn("adaptive_avg_pool1d", output_size=4), randn((2, 3, 9)), grad=True)
    check(fn("adaptive_avg_pool3d", output_size=(2, 3, 2)), randn((2, 3, 5, 6, 7)), grad=True)
    check(fn("adaptive_max_pool1d", output_size=4, return_indices=True), randn((2, 3, 9)),
          grad=True)


@pytest.mark.parametrize("kw", [{"kernel_size": 3, "padding": 2}, {"kernel_size": 2, "stride": 0},
                                {"kernel_size": (2, 2, 2)}])
def test_pool_errors(kw):
    check(fn("max_pool2d", **kw), randn((1, 3, 4, 4)))
    check(fn("avg_pool2d", **kw), randn((1, 3, 4, 4)))


def test_pool_input_errors():
    check(fn("max_pool2d", kernel_size=3), randn((1, 3, 2, 2)))
    check(fn("max_pool2d", kernel_size=2), randn((3, 2)))
    check(fn("max_pool2d", kernel_size=2), randint(0, 2, (1, 3, 4, 4), "bool"))
    check(fn("avg_pool2d", kernel_size=2, divisor_override=0), randn((1, 3, 4, 4)))
    check(fn("adaptive_avg_pool2d", output_size=2), randint(0, 2, (1, 3, 4, 4)))
    check(fn("adaptive_avg_pool2d", output_size=(2, 2, 2)), randn((1, 3, 4, 4)))
    check(fn("adaptive_avg_pool2d", output_size=(2, 2)), randn((4,)))


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("kw", [{"size": 7}, {"scale_factor": 2}, {"scale_factor": 1.7},
                                {"scale_factor": 0.6}, {"size": 3},
                                {"scale_factor": 1.7, "recompute_scale_factor": True}])
def test_interpolate(shape, kw):
    linear = {3: "linear", 4: "bilinear", 5: "trilinear"}[len(shape)]
    for mode, corners in [("nearest", None), ("nearest-exact", None), ("area", None),
                          (linear, False), (linear, True)]:
        check(fn("interpolate", mode=mode, align_corners=corners, **kw), randn(shape, "float64"),
              grad=True)
        check(fn("interpolate", mode=mode, align_corners=corners, **kw), randn(shape))


@pytest.mark.parametrize("kw", [{"size": 4, "scale_factor": 2}, {}, {"size": (4, 5, 6)},
                                {"scale_factor": 2, "mode": "linear"},
                                {"scale_factor": 2, "align_corners": True},
                                {"scale_factor": 2, "mode": "foo"}])
def test_interpolate_errors(kw):
    check(fn("interpolate", **kw), randn((1, 2, 4, 5)))


@pytest.mark.parametrize("corners", [False, True])
def test_affine_grid_and_grid_sample(corners):
    check(fn("affine_grid", size=(2, 3, 4, 5), align_corners=corners), randn((2, 2, 3), "float64"),
          grad=True)
    pts = In(np.random.default_rng(0).uniform(-1.2, 1.2, (2, 3, 6, 2)), "float64")
    for mode in ["bilinear", "nearest"]:
        for padding in ["zeros", "border"]:
            check(fn("grid_sample", mode=mode, padding_mode=padding, align_corners=corners),
                  randn((2, 3, 4, 5), "float64"), pts, grad=mode == "bilinear")


def _jvp(mod, f, primals, tangents):
    fw = mod.autograd.forward_ad
    with fw.dual_level():
        duals = [fw.make_dual(mod.tensor(p, dtype=mod.float64), mod.tensor(d, dtype=mod.float64))
                 for p, d in zip(primals, tangents)]
        return np.array(fw.unpack_dual(f(mod, *duals)).tangent.detach().tolist())


@pytest.mark.parametrize("name,kw,shapes", [
    ("conv2d", {"padding": 1, "stride": 2}, [(2, 3, 6, 6), (4, 3, 3, 3)]),
    ("max_pool2d", {"kernel_size": 2}, [(2, 3, 6, 6)]),
    ("avg_pool2d", {"kernel_size": 3, "padding": 1}, [(2, 3, 6, 6)]),
    ("interpolate", {"scale_factor": 2, "mode": "bilinear"}, [(2, 3, 4, 4)]),
])
def test_forward_mode_tangents_match_torch(name, kw, shapes):
    rng = np.random.default_rng(3)
    primals = [rng.standard_normal(s) for s in shapes]
    tangents = [rng.standard_normal(s) for s in shapes]
    ours = _jvp(t, fn(name, **kw), primals, tangents)
    theirs = _jvp(torch, fn(name, **kw), primals, tangents)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)


def test_fake_tensors_give_shapes_without_data():
    from refimpl._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, w = t.empty(2, 3, 9, 9), t.empty(4, 3, 3, 3)
        y = RF.max_pool2d(RF.conv2d(x, w, stride=2, padding=1), 2)
        z = RF.interpolate(y, scale_factor=2, mode="bilinear")
    assert y.shape == (2, 4, 2, 2) and z.shape == (2, 4, 4, 4)


@pytest.mark.parametrize("name,xs,ws,kw", [
    ("conv_transpose2d", (2, 4, 5, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1,
                                                       "output_padding": 1}),
    ("conv_transpose2d", (2, 4, 5, 4), (4, 2, 2, 3), {"groups": 2, "dilation": (2, 1)}),
    ("conv_transpose2d", (4, 5, 5), (4, 3, 3, 3), {}),
    ("conv_transpose1d", (2, 3, 7), (3, 5, 3), {"stride": 3, "padding": 2}),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"stride": (1, 2, 1)}),
])
def test_conv_transpose(name, xs, ws, kw):
    bias = randn((ws[1] * kw.get("groups", 1),), "float64", 2)
    check(lambda m, x, w, b: fn(name, **kw)(m, x, w, b), randn(xs, "float64"),
          randn(ws, "float64", 1), bias, grad=True)


def test_conv_transpose_errors():
    x, w = randn((1, 4, 5, 5)), randn((4, 3, 3, 3), "float32", 1)
    check(fn("conv_transpose2d", stride=2, padding=1, output_padding=2), x, w)
    check(fn("conv_transpose2d"), randn((1, 3, 5, 5)), w)
    check(fn("conv_transpose2d", groups=3), x, w)
    check(fn("conv_transpose2d"), x, w, randn((4,)))
    check(fn("conv_transpose2d", padding="same"), x, w)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("corners", [False, True])
def test_grid_sample_volumes_and_reflection(padding, corners):
    pts = In(np.random.default_rng(2).uniform(-1.3, 1.3, (2, 3, 2, 4, 3)), "float64")
    check(fn("grid_sample", padding_mode=padding, align_corners=corners),
          randn((2, 2, 3, 4, 5), "float64"), pts, grad=True)
    check(fn("grid_sample", mode="nearest", padding_mode=padding, align_corners=corners),
          randn((2, 2, 3, 4, 5), "float64"), pts)
    flat = In(np.random.default_rng(3).uniform(-1.3, 1.3, (2, 3, 4, 2)), "float64")
    check(fn("grid_sample", mode="bicubic", padding_mode=padding, align_corners=corners),
          randn((2, 2, 4, 5), "float64"), flat, grad=True)
