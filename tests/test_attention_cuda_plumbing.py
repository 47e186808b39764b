"""The host side of the CUDA attention and matmul paths, checked without a GPU.

``refimpl.cuda._attention_kernels`` and ``refimpl.cuda._matmul_direct`` hand strided views
(batch folding, transposes, broadcast batch strides, copies where no single stride works)
to cuBLAS and to two NVRTC kernels. Here the GEMM, the dense copy and the two kernels are
replaced by numpy versions that read the same pointers' worth of information (shape,
strides, offset, the kernels' mask strides and modes), and the paths run on CPU tensors:
their results must equal numpy's attention / matmul on the original tensors. The CUDA C
itself runs in tests/gpu/test_attention_kernels_gpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl._tensor import Tensor
from refimpl.cuda import _attention_kernels as K
from refimpl.cuda import _blas
from refimpl.cuda import _matmul_direct as MD
from refimpl.ops import nn_attention_kernel as A


def _gemm(out, a, b, *, alpha=1, beta=0):
    assert out.is_contiguous() and out.dim() in (2, 3)
    assert a.dim() == b.dim() == out.dim()
    if a.dim() == 3:  # one batch stride each (0 broadcasts), as cuBLAS's strided batches
        assert a._shape[0] == b._shape[0] == out._shape[0]
    prod = np.matmul(a._np.astype(np.float64), b._np.astype(np.float64))
    out._np[...] = alpha * prod + (beta * out._np if beta else 0)
    return out


def _dense_copy(x):
    out = Tensor._empty(x._shape, x.dtype, x.device)
    out._np[...] = x._np
    return out


def _softmax(w, mask, causal):
    """The forward kernel's rows, read through the mask strides the launcher passes."""
    b, h, length, source = w._shape
    s = w._np
    m0, m1, m2, m3 = K._mask_strides(mask) if mask is not None else (0, 0, 0, 0)
    flat = None
    if mask is not None:
        flat = np.ndarray((mask._storage._nbytes // mask.dtype.itemsize,), mask.dtype.np,
                          mask._storage._data)
    for i in np.ndindex(b, h, length):
        row = s[i].astype(np.float64)
        for j in range(source):
            if causal and j > i[2]:
                row[j] = -np.inf
            elif flat is not None:
                v = flat[mask._offset + i[0] * m0 + i[1] * m1 + i[2] * m2 + j * m3]
                row[j] = (row[j] if v else -np.inf) if mask.dtype is t.bool else row[j] + v
        top = row.max()
        if top == -np.inf:
            s[i] = 0
            continue
        e = np.exp(row - top)
        s[i] = e / e.sum()


def _softmax_backward(gs, w, scale):
    g, wa = gs._np, w._np
    g[...] = wa * (g - (g * wa).sum(-1, keepdims=True)) * scale


def _flat(x) -> np.ndarray:
    """The storage of CPU tensor ``x`` from its offset on (what a kernel pointer reads)."""
    return x._storage._data.reshape(-1).view(np.uint8).view(x.dtype.np)[x._offset:]


def _bmm_kernel(name, like, rows, fmt, *args):
    """bmm_small's CUDA body, line by line, over the launch's arguments."""
    assert name.startswith("sdpa_bmm_") and fmt == K._BMM_FMT and len(args) == len(fmt)
    assert rows * 32 >= args[3]
    a, b, c = args[:3]
    total, h, r, cols, inner = args[3:8]
    a0, a1, a2, a3, b0, b1, b2, b3 = args[8:16]
    alpha = args[16]
    for e in range(total):
        j, i, z = e % cols, (e // cols) % r, e // (r * cols)
        ar = (z // h) * a0 + (z % h) * a1 + i * a2
        bc = (z // h) * b0 + (z % h) * b1 + j * b3
        c[e] = alpha * sum(a[ar + p * a3] * b[bc + p * b2] for p in range(inner))


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(K, "_launch", _bmm_kernel)
    monkeypatch.setattr(K, "_ptr", _flat)
    monkeypatch.setattr(_blas, "gemm", _gemm)
    monkeypatch.setattr(_blas, "dense_copy", _dense_copy)
    monkeypatch.setattr(K, "_softmax", _softmax)
    monkeypatch.setattr(K, "_softmax_backward", _softmax_backward)


def _packed(rng, n, length, heads, hd):
    """q, k, v as the head views of a packed projection (no stride folds N and H)."""
    x = t.tensor(rng.standard_normal((n, length, 3, heads, hd)))
    return x.permute(2, 0, 3, 1, 4).unbind(0)


_MASKS = ["none", "bool2", "bool4b", "add4", "add2", "causal", "dead"]


@pytest.mark.parametrize("path", ["gemm", "small"])
@pytest.mark.parametrize("kind", _MASKS)
@pytest.mark.parametrize("layout", ["dense", "packed", "transposed"])
def test_attention_paths_match_cpu_kernel(emulated, monkeypatch, kind, layout, path):
    # the size limit picks the products: cuBLAS GEMMs, or bmm_small through the strides
    monkeypatch.setattr(K, "SMALL_MACS", 1 << 40 if path == "small" else 0)
    copies = []
    copy = _blas.dense_copy
    monkeypatch.setattr(_blas, "dense_copy", lambda x: copies.append(1) or copy(x))
    rng = np.random.default_rng(0)
    n, heads, length, source, hd = 2, 3, 5, 5, 4
    if layout == "packed":
        q, k, v = _packed(rng, n, length, heads, hd)
    elif layout == "transposed":
        q, k, v = (t.tensor(rng.standard_normal((n, length, heads, hd))).transpose(1, 2)
                   for _ in range(3))
    else:
        source = 7
        q = t.tensor(rng.standard_normal((n, heads, length, hd)))
        k, v = (t.tensor(rng.standard_normal((n, heads, source, hd))) for _ in range(2))
    mask, causal = None, kind == "causal"
    if kind == "bool2":
        mask = t.tensor(rng.random((length, source)) > 0.3)
    elif kind == "bool4b":
        mask = t.tensor(rng.random((n, 1, length, source)) > 0.3)
    elif kind == "add4":
        mask = t.tensor(rng.standard_normal((n, heads, source, length))).transpose(-1, -2)
    elif kind == "add2":
        mask = t.tensor(rng.standard_normal((1, source))).expand(length, source)
    elif kind == "dead":
        m = np.ones((length, source), bool)
        m[1] = False
        mask = t.tensor(m)
    scale = 0.37
    out, w = K.forward(q, k, v, mask, scale, causal)
    want_out, want_w = A._cpu(q, k, v, mask, scale, causal)
    assert out.is_contiguous() and w.is_contiguous()
    np.testing.assert_allclose(w._np, want_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out._np, want_out, rtol=1e-12, atol=1e-12)
    if kind == "dead":
        assert (w._np[:, :, 1] == 0).all()
    g = t.tensor(rng.standard_normal(tuple(out.shape))).transpose(0, 1).contiguous().transpose(0, 1)
    for mask3 in ([True, True, True], [False, True, False], [True, False, False]):
        got = K.backward(g, q, k, v, w, scale, mask3)
        want = A._bw_cpu(g, q, k, v, t.tensor(want_w), scale, mask3)
        for gg, ww, need in zip(got, want, mask3):
            if need:
                assert gg.is_contiguous()
                np.testing.assert_allclose(gg._np, ww, rtol=1e-11, atol=1e-11)
            else:
                assert gg is None
    if path == "small":  # head views and transposes are read in place
        assert not copies
    elif layout == "packed":
        assert copies


_SHAPES = [
    ((2, 3, 4, 5), (2, 3, 5, 6)), ((4, 5), (2, 3, 5, 6)), ((2, 3, 4, 5), (5, 6)),
    ((2, 1, 4, 5), (3, 5, 6)), ((5,), (2, 5, 6)), ((2, 3, 4, 5), (5,)), ((5,), (5, 6)),
    ((3, 4, 5), (1, 5, 6)), ((1, 4, 5), (3, 5, 6)), ((2, 3, 4, 0), (2, 3, 0, 6)),
    ((0, 4, 5), (5, 6)), ((2, 3, 1, 5), (5, 1)),
]


@pytest.mark.parametrize(("sa", "sb"), _SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "permuted"])
def test_matmul_direct_matches_numpy(emulated, monkeypatch, sa, sb, layout):
    monkeypatch.setattr(MD, "_direct_ok", lambda a, b: True)
    rng = np.random.default_rng(1)

    def make(shape):
        arr = rng.standard_normal(shape)
        if layout == "transposed" and len(shape) >= 2:
            return t.tensor(arr.swapaxes(-1, -2).copy()).transpose(-1, -2), arr
        if layout == "permuted" and len(shape) >= 3:
            perm = tuple(reversed(range(len(shape))))
            return t.tensor(arr.transpose(perm).copy()).permute(*perm), arr
        return t.tensor(arr), arr

    a, an = make(sa)
    b, bn = make(sb)
    got = MD.matmul_direct(a, b, a.dim(), b.dim())
    assert got is not None and got.is_contiguous()
    np.testing.assert_allclose(got._np, np.matmul(an, bn), rtol=1e-12, atol=1e-12)


def test_matmul_direct_declines_invalid_shapes(emulated, monkeypatch):
    monkeypatch.setattr(MD, "_direct_ok", lambda a, b: True)
    a, b = t.ones(2, 3, 4), t.ones(3, 5, 6)
    assert MD.matmul_direct(a, b, 3, 3) is None
    assert MD.matmul_direct(t.ones(2, 4, 5), t.ones(3, 5, 6), 3, 3) is None


def test_matmul_direct_only_on_cuda_without_graph():
    a = t.ones(2, 3, 4, requires_grad=True)
    assert not MD._direct_ok(a, t.ones(4, 5))
