"""The CUDA host fast paths give numpy's values: constant padding outside autograd (one
fill and one copy), strided elementwise launches and device copies whose layouts are
remembered by shape and strides, and reductions whose launch geometry is remembered.
Each layout runs twice (the second run takes the remembered one) and once more with a
neighbouring layout of the same shape. Skipped where no GPU exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


def _rn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("grad", [False, True])
def test_constant_pad_matches_numpy(grad):
    a = _rn(2, 3, 4, 5)
    x = t.tensor(a, device="cuda", requires_grad=grad)
    for pad, width in (([1, 2], [(0, 0)] * 3 + [(1, 2)]),
                       ([1, 1, 0, 3], [(0, 0), (0, 0), (0, 3), (1, 1)]),
                       ([2, 0, 1, 1, 1, 0], [(0, 0), (1, 0), (1, 1), (2, 0)])):
        for _ in range(2):
            y = t.nn.functional.pad(x, pad, value=-1.5)
            assert y.is_cuda and y.is_contiguous()
            np.testing.assert_array_equal(y.detach().cpu().numpy(),
                                          np.pad(a, width, constant_values=-1.5))
            assert y.requires_grad == grad
    if grad:
        t.nn.functional.pad(x, [1, 1, 1, 1]).sum().backward()
        np.testing.assert_array_equal(x.grad.cpu().numpy(), np.ones_like(a))


def test_strided_pointwise_layouts():
    a, b = _rn(6, 5, 4), _rn(5, 4, seed=1)
    x, y = t.tensor(a, device="cuda"), t.tensor(b, device="cuda")
    for _ in range(2):
        np.testing.assert_allclose((x.transpose(0, 2) + y.t()[:, :, None]).cpu().numpy(),
                                   a.transpose(2, 1, 0) + b.T[:, :, None], rtol=1e-6)
        np.testing.assert_allclose((x.permute(1, 0, 2) * y[:, None]).cpu().numpy(),
                                   a.transpose(1, 0, 2) * b[:, None], rtol=1e-6)
        np.testing.assert_allclose((x[:, ::2] - 1).cpu().numpy(), a[:, ::2] - 1, rtol=1e-6)


def test_copy_layouts():
    a = _rn(4, 6, 5)
    x = t.tensor(a, device="cuda")
    for _ in range(2):
        np.testing.assert_array_equal(x.permute(2, 0, 1).contiguous().cpu().numpy(),
                                      a.transpose(2, 0, 1))
        np.testing.assert_array_equal(x.transpose(0, 1).contiguous().cpu().numpy(),
                                      a.transpose(1, 0, 2))
        np.testing.assert_array_equal(x[:, 1:4].double().cpu().numpy(),
                                      a[:, 1:4].astype(np.float64))


def test_reduction_geometries():
    a = _rn(8, 33, 17)
    x = t.tensor(a, device="cuda")
    for _ in range(2):
        for dims in ((0,), (1,), (2,), (0, 2), (0, 1, 2)):
            np.testing.assert_allclose(x.sum(dims).cpu().numpy(), a.sum(dims), rtol=1e-5,
                                       atol=1e-5)
        np.testing.assert_allclose(x.transpose(0, 2).amax(1).cpu().numpy(),
                                   a.transpose(2, 1, 0).max(1))
        # an input 4 bytes off a 16-byte boundary: its own geometry
        np.testing.assert_allclose(x.reshape(-1)[1:].sum().cpu().numpy(),
                                   a.reshape(-1)[1:].sum(), rtol=1e-5)
