"""The launch plan of the CUDA convolution and linear kernels, checked without a GPU.

``refimpl.cuda._conv_kernels`` computes a convolution as NVRTC kernels (im2col, col2im,
bias, transpose, channel sums) around cuBLAS GEMMs whose operands are strided views of
the kernels' buffers. Here the CUDA launchers run on CPU tensors: each kernel is
replaced by a line-by-line Python model of its CUDA body (same index arithmetic, same
arguments, read from the launch's argument list) and each GEMM by numpy over the
operand views' shapes and strides, as cuBLAS reads them. The results must equal the CPU
kernels' (numpy im2col) for 1-d, 2-d and 3-d, grouped, strided, padded, dilated, empty
and non-contiguous cases, forward and backward under every mask. Each launch's format
(``_driver.launch_packed``'s layout) must spell the kernel's C signature, and the C
kernels themselves, compiled by g++, run on the values as the launcher packs them. The
CUDA source must also compile with NVRTC where the library is installed.
"""

from __future__ import annotations

import ctypes
import re
from types import SimpleNamespace

import numpy as np
import pytest

import refimpl as t
from refimpl import _dtype as D
from refimpl.cuda import _blas, _driver
from refimpl.cuda import _conv_kernels as K
from refimpl.ops import nn_conv_kernel as C
from refimpl.ops import nn_linear_kernel as LK


def _signatures() -> dict[str, list[str]]:
    """Each kernel's C parameter types (``const T*``, ``Geo``, ``long long``...), read off
    the ``extern "C" __global__`` lines of the source's KERNELS macro."""
    macro = K._SOURCE[K._SOURCE.index("#define KERNELS"):].replace("\\\n", " ")
    decls = re.findall(r'extern "C" __global__ void (\w+)_##S\((.*?)\)', macro)
    return {name: [re.sub(r"\s*\w+$", "", p.strip()) for p in params.split(",")]
            for name, params in decls}


SIGNATURES = _signatures()
# the launch format each kernel's signature asks for (``_driver.ParamLayout`` codes)
_CODES = {"const T*": "P", "T*": "P", "long long": "q", "int": "i",
          "Geo": f"{ctypes.sizeof(K._Geo)}s"}
FORMATS = {name: "".join(_CODES[ty] for ty in types) for name, types in SIGNATURES.items()}


def _flat(x) -> np.ndarray:
    """The storage of CPU tensor ``x`` from its offset on, as a flat array of its dtype."""
    return x._storage._data.reshape(-1).view(np.uint8).view(x.dtype.np)[x._offset:]


def _im2col(x, cols, g, layout_b):
    L = g.out[0] * g.out[1] * g.out[2]
    for e in range(g.n * g.c * g.k[0] * g.k[1] * g.k[2] * L):
        r = e
        r, ow = divmod(r, g.out[2])
        r, oh = divmod(r, g.out[1])
        r, od = divmod(r, g.out[0])
        b = 0
        if layout_b:
            r, b = divmod(r, g.n)
        r, kw = divmod(r, g.k[2])
        r, kh = divmod(r, g.k[1])
        r, kd = divmod(r, g.k[0])
        ch = r
        if not layout_b:
            ch, b = r % g.c, r // g.c
        i = [od * g.stride[0] - g.pad[0] + kd * g.dil[0],
             oh * g.stride[1] - g.pad[1] + kh * g.dil[1],
             ow * g.stride[2] - g.pad[2] + kw * g.dil[2]]
        v = 0
        if all(0 <= i[j] < g.inp[j] for j in range(3)):
            v = x[b * g.xs[0] + ch * g.xs[1] + i[0] * g.xs[2] + i[1] * g.xs[3] + i[2] * g.xs[4]]
        cols[e] = v


def _col2im(cols, out, g, layout_b):
    L, KK = g.out[0] * g.out[1] * g.out[2], g.k[0] * g.k[1] * g.k[2]
    for e in range(g.n * g.c * g.inp[0] * g.inp[1] * g.inp[2]):
        r = e
        pos = [0, 0, 0]
        for j in (2, 1, 0):
            pos[j] = r % g.inp[j]
            r //= g.inp[j]
        ch, b = r % g.c, r // g.c
        acc = 0.0
        for kd in range(g.k[0]):
            td = pos[0] + g.pad[0] - kd * g.dil[0]
            if td < 0:
                break
            if td % g.stride[0] or td // g.stride[0] >= g.out[0]:
                continue
            for kh in range(g.k[1]):
                th = pos[1] + g.pad[1] - kh * g.dil[1]
                if th < 0:
                    break
                if th % g.stride[1] or th // g.stride[1] >= g.out[1]:
                    continue
                for kw in range(g.k[2]):
                    tw = pos[2] + g.pad[2] - kw * g.dil[2]
                    if tw < 0:
                        break
                    if tw % g.stride[2] or tw // g.stride[2] >= g.out[2]:
                        continue
                    k = (kd * g.k[1] + kh) * g.k[2] + kw
                    l = ((td // g.stride[0]) * g.out[1] + th // g.stride[1]) * g.out[2] \
                        + tw // g.stride[2]
                    row = ch * KK + k
                    col = (row * g.n + b) * L + l if layout_b else (b * g.c * KK + row) * L + l
                    acc += cols[col]
        out[e] = acc


def _bias(dst, src, bias, channels, inner, total):
    for e in range(total):
        base = src[e] if src is not None else 0
        dst[e] = base + bias[(e // inner) % channels]


def _swap01(src, dst, bias, na, nb, inner):
    for e in range(na * nb * inner):
        r = e // inner
        a, b = r % na, r // na
        v = src[(a * nb + b) * inner + e % inner]
        dst[e] = v + bias[a] if bias is not None else v


def _channel_sum(g, out, outer, channels, inner):
    for c in range(channels):
        out[c] = sum(g[((i // inner) * channels + c) * inner + i % inner]
                     for i in range(outer * inner))


def _taps(g, o, dim):
    """(kernel offset, input index) pairs in bounds for output index ``o`` along ``dim``."""
    for k in range(g.k[dim]):
        i = o * g.stride[dim] - g.pad[dim] + k * g.dil[dim]
        if 0 <= i < g.inp[dim]:
            yield k, i


def _direct_fwd(x, w, bias, out, g, cout, groups):
    L, KK = g.out[0] * g.out[1] * g.out[2], g.k[0] * g.k[1] * g.k[2]
    cg, og = g.c // groups, cout // groups
    for e in range(g.n * cout * L):
        l, co, b = e % L, (e // L) % cout, e // (L * cout)
        ow, oh, od = l % g.out[2], (l // g.out[2]) % g.out[1], l // (g.out[2] * g.out[1])
        xb, wr = b * g.xs[0] + (co // og) * cg * g.xs[1], co * cg * KK
        acc = 0.0
        for ci in range(cg):
            for kd, i0 in _taps(g, od, 0):
                for kh, i1 in _taps(g, oh, 1):
                    for kw, i2 in _taps(g, ow, 2):
                        acc += x[xb + ci * g.xs[1] + i0 * g.xs[2] + i1 * g.xs[3] + i2 * g.xs[4]] \
                            * w[wr + (ci * g.k[0] + kd) * g.k[1] * g.k[2] + kh * g.k[2] + kw]
        if bias is not None:
            acc += bias[co]
        out[e] = acc


def _direct_gi(grad, w, gi, g, cout, groups):
    L, KK = g.out[0] * g.out[1] * g.out[2], g.k[0] * g.k[1] * g.k[2]
    cg, og = g.c // groups, cout // groups
    for e in range(g.n * g.c * g.inp[0] * g.inp[1] * g.inp[2]):
        r, iw = divmod(e, g.inp[2])
        r, ih = divmod(r, g.inp[1])
        r, i_d = divmod(r, g.inp[0])
        b, ch = divmod(r, g.c)
        grp, ci = divmod(ch, cg)
        acc = 0.0
        for o in range(og):
            co = grp * og + o
            for kd in range(g.k[0]):
                for kh in range(g.k[1]):
                    for kw in range(g.k[2]):
                        t = [i_d + g.pad[0] - kd * g.dil[0], ih + g.pad[1] - kh * g.dil[1],
                             iw + g.pad[2] - kw * g.dil[2]]
                        if any(v < 0 or v % g.stride[j] for j, v in enumerate(t)):
                            continue
                        od, oh, ow = (t[j] // g.stride[j] for j in range(3))
                        if od >= g.out[0] or oh >= g.out[1] or ow >= g.out[2]:
                            continue
                        acc += grad[(b * cout + co) * L + (od * g.out[1] + oh) * g.out[2] + ow] \
                            * w[(co * cg + ci) * KK + (kd * g.k[1] + kh) * g.k[2] + kw]
        gi[e] = acc


def _direct_gw(grad, x, gw, g, cout, groups, pairs3x3):
    # (each element alone: a block per channel pair of a 3x3 kernel changes how the
    # threads share the loads, not any element's sum)
    assert pairs3x3 in (0, 1) and (not pairs3x3 or (g.k[0], g.k[1], g.k[2]) == (1, 3, 3))
    L, KK = g.out[0] * g.out[1] * g.out[2], g.k[0] * g.k[1] * g.k[2]
    cg, og = g.c // groups, cout // groups
    for e in range(cout * cg * KK):
        k, ci, co = e % KK, (e // KK) % cg, e // (KK * cg)
        kw, kh, kd = k % g.k[2], (k // g.k[2]) % g.k[1], k // (g.k[2] * g.k[1])
        ch = (co // og) * cg + ci
        acc = 0.0
        for b in range(g.n):
            for od in range(g.out[0]):
                i0 = od * g.stride[0] - g.pad[0] + kd * g.dil[0]
                for oh in range(g.out[1]):
                    i1 = oh * g.stride[1] - g.pad[1] + kh * g.dil[1]
                    for ow in range(g.out[2]):
                        i2 = ow * g.stride[2] - g.pad[2] + kw * g.dil[2]
                        if not (0 <= i0 < g.inp[0] and 0 <= i1 < g.inp[1]
                                and 0 <= i2 < g.inp[2]):
                            continue
                        acc += grad[(b * cout + co) * L + (od * g.out[1] + oh) * g.out[2] + ow] \
                            * x[b * g.xs[0] + ch * g.xs[1] + i0 * g.xs[2] + i1 * g.xs[3]
                                + i2 * g.xs[4]]
        gw[e] = acc


def _small_mm(a, b, bias, c, rows, cols, inner, sa0, sa1, sb0, sb1):
    for e in range(rows * cols):
        i, j = divmod(e, cols)
        acc = sum(a[i * sa0 + p * sa1] * b[j * sb1 + p * sb0] for p in range(inner))
        c[e] = acc + (bias[j] if bias is not None else 0.0)


def _direct_bw(grad, x, w, gi, gw, gb, g, cout, groups, pairs3x3):
    # the input, weight and bias gradients' segments of one launch (absent ones: None)
    if gi is not None:
        _direct_gi(grad, w, gi, g, cout, groups)
    if gw is not None:
        _direct_gw(grad, x, gw, g, cout, groups, pairs3x3)
    if gb is not None:
        L = g.out[0] * g.out[1] * g.out[2]
        for c in range(cout):
            gb[c] = sum(grad[(b * cout + c) * L + i] for b in range(g.n) for i in range(L))


def _small_mm_bw(g, x, w, gi, gw, gb, m, n, k, gs0, gs1, xs0, xs1, ws0, ws1):
    if gi is not None:  # g @ w: (m, n) @ (n, k)
        for e in range(m * k):
            i, j = divmod(e, k)
            gi[e] = sum(g[i * gs0 + p * gs1] * w[j * ws1 + p * ws0] for p in range(n))
    if gw is not None:  # g^T @ x: (n, m) @ (m, k)
        for e in range(n * k):
            o, j = divmod(e, k)
            gw[e] = sum(g[o * gs1 + p * gs0] * x[j * xs1 + p * xs0] for p in range(m))
    if gb is not None:
        for o in range(n):
            gb[o] = sum(g[p * gs0 + o * gs1] for p in range(m))


_MODELS = {"small_mm": _small_mm, "im2col": _im2col, "col2im": _col2im, "bias": _bias, "swap01": _swap01,
           "channel_sum": _channel_sum, "direct_fwd": _direct_fwd, "direct_gi": _direct_gi,
           "direct_gw": _direct_gw, "direct_bw": _direct_bw, "small_mm_bw": _small_mm_bw}


def _strided(x) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(
        _flat(x), x._shape, [s * x.dtype.itemsize for s in x._stride])


def _gemm(out, a, b, *, alpha=1, beta=0):
    assert out.is_contiguous() and a.dim() == b.dim() == out.dim() in (2, 3)
    assert a.dtype is b.dtype is out.dtype
    o = _strided(out)
    o[...] = np.matmul(_strided(a), _strided(b)) + (beta * o if beta else 0)
    return out


@pytest.fixture()
def launches(monkeypatch):
    """The kernels launched (models run instead), GEMMs as ``gemm``."""
    seen: list[str] = []

    def launch(name, tensor, total, fmt, *args, per_block=False):
        seen.append(name)
        # the format spells the C signature, each value fits its parameter
        assert fmt == FORMATS[name], (name, fmt)
        assert len(args) == len(SIGNATURES[name]), name
        for ty, v in zip(SIGNATURES[name], args):
            if ty.endswith("*"):
                assert v is None or isinstance(v, np.ndarray), (name, ty, v)
            elif ty == "Geo":
                assert isinstance(v, bytes) and len(v) == ctypes.sizeof(K._Geo), name
            else:
                assert isinstance(v, int), (name, ty, v)
        _MODELS[name](*[K._Geo.from_buffer_copy(v) if isinstance(v, bytes) else v
                        for v in args])

    def gemm(*a, **kw):
        seen.append("gemm")
        return _gemm(*a, **kw)

    monkeypatch.setattr(K, "_ptr", lambda x: None if x is None else _flat(x))
    monkeypatch.setattr(K, "_launch", launch)
    monkeypatch.setattr(_blas, "gemm", gemm)
    return seen


RNG = np.random.default_rng(3)

# (input shape, weight shape, stride, pads, dilation, groups, bias, non-contiguous input)
CASES = [
    ((2, 3, 7), (4, 3, 3), [2], [(1, 1)], [2], 1, True, False),
    ((2, 4, 6), (6, 2, 2), [1], [(0, 1)], [1], 2, True, False),
    ((2, 3, 5, 6), (4, 3, 3, 2), [2, 1], [(1, 1), (0, 2)], [1, 2], 1, True, True),
    ((1, 4, 5, 5), (4, 1, 3, 3), [1, 2], [(1, 1), (1, 1)], [1, 1], 4, False, False),
    ((3, 6, 5, 4), (4, 3, 1, 3), [3, 1], [(2, 2), (0, 0)], [1, 1], 2, True, True),
    ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), [1, 2, 1], [(1, 1), (0, 0), (1, 0)], [2, 1, 1], 1,
     True, False),
    ((1, 4, 3, 4, 3), (2, 2, 2, 2, 2), [1, 1, 1], [(0, 0), (1, 1), (0, 0)], [1, 1, 2], 2,
     True, False),
    ((0, 3, 5, 5), (4, 3, 3, 3), [1, 1], [(1, 1), (1, 1)], [1, 1], 1, True, False),
    ((2, 4, 7, 6), (6, 2, 3, 3), [2, 1], [(1, 2), (0, 1)], [1, 2], 2, True, True),
    # more output positions than the emulated block's 32 threads (their steps carry)
    ((1, 2, 11, 9), (4, 2, 3, 3), [1, 1], [(2, 1), (1, 1)], [2, 1], 1, False, False),
]


def _case(xs, ws, bias: bool, strided: bool, path: str, monkeypatch):
    """A case's input, weight and bias; the size limits set so that no convolution fits
    the direct kernels (path "gemm") or every one does ("direct")."""
    monkeypatch.setattr(K, "DIRECT_MACS", 1 << 40 if path == "direct" else 0)
    monkeypatch.setattr(K, "DIRECT_GW_SUM", 1 << 40 if path == "direct" else 0)
    xa = RNG.standard_normal(xs)
    x = t.tensor(xa)
    if strided:  # the same values through a (C, N, ...) buffer
        x = t.tensor(np.ascontiguousarray(np.swapaxes(xa, 0, 1))).transpose(0, 1)
    w = t.tensor(RNG.standard_normal(ws))
    b = t.tensor(RNG.standard_normal(ws[0])) if bias else None
    return x, w, b


@pytest.mark.parametrize("path", ["gemm", "direct"])
@pytest.mark.parametrize(("xs", "ws", "stride", "pads", "dil", "groups", "bias", "strided"),
                         CASES)
def test_conv_launch_plan_matches_cpu_kernels(xs, ws, stride, pads, dil, groups, bias,
                                              strided, path, launches, monkeypatch):
    x, w, b = _case(xs, ws, bias, strided, path, monkeypatch)
    args = (stride, pads, dil, groups)
    got = C._cuda(x, w, b, *args)
    want = C._cpu(x, w, b, *args)
    np.testing.assert_allclose(got._np, want, rtol=1e-12, atol=1e-12)
    if xs[0] and path == "direct":
        assert launches == ["direct_fwd"]
    elif xs[0]:
        last = ("bias",) if groups == 1 and bias else ("swap01",) if groups > 1 else ()
        assert launches == ["im2col", "gemm", *last]
    g = t.tensor(RNG.standard_normal(want.shape))
    for mask in ([True, True, True], [True, False, False], [False, True, False],
                 [False, False, True]):
        launches.clear()
        gots = C._bw_cuda(g, x, w, *args, mask)
        refs = C._bw_cpu(g, x, w, *args, mask)
        for m, a, ref in zip(mask, gots, refs):
            assert tuple(a.shape) == ref.shape
            if m:
                np.testing.assert_allclose(a._np, ref, rtol=1e-12, atol=1e-12)
        if path == "direct":  # every gradient asked for in one launch (none when all empty)
            work = any(m and ref.size for m, ref in zip(mask, refs))
            assert launches == (["direct_bw"] if work else [])


@pytest.mark.parametrize("path", ["gemm", "small_mm"])
@pytest.mark.parametrize(("m", "k", "n"), [(5, 3, 4), (1, 7, 2)])
def test_linear_launch_plan_matches_cpu_kernels(m, k, n, path, launches, monkeypatch):
    monkeypatch.setattr(K, "SMALL_MM_MACS", 1 << 40 if path == "small_mm" else 0)
    x = t.tensor(RNG.standard_normal((k, m))).t()  # a transposed input
    w, b = t.tensor(RNG.standard_normal((n, k))), t.tensor(RNG.standard_normal(n))
    np.testing.assert_allclose(LK._cuda(x, w, b)._np, LK._cpu(x, w, b), rtol=1e-12)
    assert launches == (["bias", "gemm"] if path == "gemm" else ["small_mm"])
    g = t.tensor(RNG.standard_normal((m, n)))
    launches.clear()
    for got, want in zip(LK._bw_cuda(g, x, w, [True] * 3), LK._bw_cpu(g, x, w, [True] * 3)):
        np.testing.assert_allclose(got._np, want, rtol=1e-12)
    assert launches == (["gemm", "gemm", "channel_sum"] if path == "gemm" else ["small_mm_bw"])
    for mask in ([True, False, False], [False, True, False], [False, False, True]):
        launches.clear()
        gots = LK._bw_cuda(g, x, w, mask)
        for m_, got, want in zip(mask, gots, LK._bw_cpu(g, x, w, mask)):
            assert tuple(got.shape) == want.shape
            if m_:
                np.testing.assert_allclose(got._np, want, rtol=1e-12)
        if path == "small_mm":
            assert launches == ["small_mm_bw"]


def test_geometry_pads_spatial_dims_in_front():
    g = K._Geo.from_buffer_copy(K._geo((2, 3, 7), (21, 7, 1), [3], [4], [2], [(1, 2)], [3]))
    assert (g.n, g.c, list(g.inp), list(g.xs)) == (2, 3, [1, 1, 7], [21, 7, 0, 0, 1])
    assert (list(g.k), list(g.out), list(g.stride), list(g.pad), list(g.dil)) == (
        [1, 1, 3], [1, 1, 4], [1, 1, 2], [0, 0, 1], [1, 1, 3])


def test_every_kernel_has_a_launch_format():
    # (the ``launches`` fixture holds every launch to these formats)
    assert set(SIGNATURES) == set(K._NAMES)
    assert FORMATS["im2col"] == "PP200si" and FORMATS["direct_bw"] == "PPPPPP200sqqi"


def test_launch_packs_under_the_kernels_full_name(monkeypatch):
    """``_launch`` itself (the other tests replace it): the kernel of the dtype, the grid,
    and the format and plain values handed to ``launch_packed``."""
    calls = []
    monkeypatch.setattr(K, "_functions", {})
    monkeypatch.setattr(K, "load_functions",
                        lambda src, names, index: [(index, n) for n in names])
    monkeypatch.setattr(K.streams, "current_stream_handle", lambda index: 77)
    monkeypatch.setattr(_driver, "launch_packed", lambda *a: calls.append(a))
    like = SimpleNamespace(dtype=D.float16,
                           _storage=SimpleNamespace(_data=SimpleNamespace(device_index=1)))
    K._launch("swap01", like, 1000, "PPPqqq", 16, 32, 0, 2, 5, 100)
    K._launch("channel_sum", like, 3, "PPqqq", 16, 32, 1, 3, 7, per_block=True)
    assert calls == [
        (1, (1, "swap01_f16"), (4, 1, 1), (256, 1, 1), "PPPqqq", (16, 32, 0, 2, 5, 100), 77,
         0, "swap01_f16"),
        (1, (1, "channel_sum_f16"), (3, 1, 1), (256, 1, 1), "PPqqq", (16, 32, 1, 3, 7), 77,
         0, "channel_sum_f16")]
    assert K._ptr(None) == 0


def test_cuda_source_compiles_with_nvrtc(nvrtc_compile):
    ptx = nvrtc_compile(K._SOURCE, "conv.cu", "compute_80", cubin=False).decode(errors="replace")
    for name in K._NAMES:
        for suffix in ("f16", "bf16", "f32", "f64"):
            assert f".entry {name}_{suffix}(" in ptx


# -- the CUDA C itself, run on the CPU -------------------------------------------------------
# The float32/float64 instances of the kernel source, compiled by the host C++ compiler
# with one CUDA thread (one block, grid-stride loops walk every element), called through
# the launch's own values, packed by ``_driver.param_layout(fmt)`` as ``launch_packed``
# packs them and read back through the kernelParams array (as the driver reads it): the
# same device code the GPU runs and the launcher's packing, checked against the CPU
# kernels without a GPU.

_HOST_PRELUDE = r"""
#include <algorithm>
using std::min;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct dim3 { unsigned x, y, z; };
static dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
inline void __syncthreads() {}
inline float ld(float v) { return v; }
inline double ld(double v) { return v; }
template<class T> struct Acc { typedef float type; };
template<> struct Acc<double> { typedef double type; };
template<class T> inline T st(typename Acc<T>::type v) { return (T)v; }
"""


def _host_wrappers() -> str:
    """``emu_<kernel>_f64(void** a)``: the float64 kernel called with its parameters read
    from a kernelParams array (parameter i at ``a[i]``)."""
    out = []
    for name, types in SIGNATURES.items():
        c_types = [re.sub(r"\bT\b", "double", ty) for ty in types]
        args = ", ".join(f"*({ty}*)a[{i}]" for i, ty in enumerate(c_types))
        out.append(f'extern "C" void emu_{name}_f64(void** a) {{ {name}_f64({args}); }}')
    return "\n".join(out)


def _build_host_kernels(tmp_path_factory, name: str, prelude: str, wrappers: str,
                        threads: bool) -> ctypes.CDLL:
    """The source's float32/float64 instances after ``prelude``, with ``wrappers``, built
    by g++ into a library (``threads``: C++20 with pthreads, for the std::barrier of a
    multi-threaded block)."""
    import shutil
    import subprocess

    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    src = K._SOURCE
    body = src[src.index("// Geometry of a convolution"):]
    body = body.replace("KERNELS(f16, h16)", "").replace("KERNELS(bf16, b16)", "")
    d = tmp_path_factory.mktemp(name)
    (d / "k.cpp").write_text(f"{prelude}{body}\n{wrappers}\n")
    flags = ["-std=c++20", "-pthread"] if threads else ["-std=c++17"]
    built = subprocess.run(["g++", *flags, "-O1", "-shared", "-fPIC", "-w", "-o",
                            str(d / "k.so"), str(d / "k.cpp")],
                           check=False, capture_output=True, text=True)
    if threads and built.returncode and "barrier" in built.stderr:
        pytest.skip("g++ without C++20 <barrier>")
    assert built.returncode == 0, built.stderr
    return ctypes.CDLL(str(d / "k.so"))


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    return _build_host_kernels(tmp_path_factory, "conv_kernels", _HOST_PRELUDE,
                               _host_wrappers(), threads=False)


@pytest.fixture()
def host_launches(monkeypatch, host_kernels):
    """Launches run the compiled float64 kernels on the CPU tensors' memory, their values
    packed by the launcher's own layout."""
    seen: list[str] = []

    def ptr(x):  # K._ptr on a CPU tensor's numpy storage
        return 0 if x is None else x._storage._data.ctypes.data + x._offset * x.dtype.itemsize

    def launch(name, tensor, total, fmt, *args, per_block=False):
        assert tensor.dtype is t.float64
        seen.append(name)
        layout = _driver.param_layout(fmt)
        data, params = layout.buffers()
        layout.struct.pack_into(data, 0, *args)
        getattr(host_kernels, f"emu_{name}_f64")(ctypes.c_void_p(params))

    def gemm(*a, **kw):
        seen.append("gemm")
        return _gemm(*a, **kw)

    monkeypatch.setattr(K, "_ptr", ptr)
    monkeypatch.setattr(K, "_launch", launch)
    monkeypatch.setattr(_blas, "gemm", gemm)
    return seen


@pytest.mark.parametrize("path", ["gemm", "direct"])
@pytest.mark.parametrize(("xs", "ws", "stride", "pads", "dil", "groups", "bias", "strided"),
                         CASES)
def test_conv_cuda_source_matches_cpu_kernels(xs, ws, stride, pads, dil, groups, bias,
                                              strided, path, host_launches, monkeypatch):
    x, w, b = _case(xs, ws, bias, strided, path, monkeypatch)
    args = (stride, pads, dil, groups)
    want = C._cpu(x, w, b, *args)
    np.testing.assert_allclose(C._cuda(x, w, b, *args)._np, want, rtol=1e-12, atol=1e-12)
    g = t.tensor(RNG.standard_normal(want.shape))
    for mask in ([True, True, True], [True, False, False], [False, True, False],
                 [False, False, True]):
        for m, a, ref in zip(mask, C._bw_cuda(g, x, w, *args, mask),
                             C._bw_cpu(g, x, w, *args, mask)):
            if m:
                np.testing.assert_allclose(a._np, ref, rtol=1e-12, atol=1e-12)
    if xs[0]:  # (an empty batch fits the direct kernels under any limit)
        assert any(n.startswith("direct") for n in host_launches) == (path == "direct")


# The direct kernels' block sums (a weight- or bias-gradient element split over the
# block's threads, combined in shared memory between __syncthreads) need real threads:
# this build runs one block of 32 threads, one std::thread each, meeting at a barrier.
_BLOCK_PRELUDE = r"""
#include <algorithm>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>
using std::min;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
struct dim3 { unsigned x, y, z; };
static thread_local dim3 threadIdx = {0, 0, 0};
static dim3 blockIdx = {0, 0, 0}, blockDim = {32, 1, 1}, gridDim = {1, 1, 1};
static std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
static void run_block(const std::function<void()>& kernel) {
  std::barrier<> bar(32);
  block_barrier = &bar;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 32; ++i)
    threads.emplace_back([&, i] { threadIdx = {i, 0, 0}; kernel(); });
  for (auto& th : threads) th.join();
}
inline float ld(float v) { return v; }
inline double ld(double v) { return v; }
template<class T> struct Acc { typedef float type; };
template<> struct Acc<double> { typedef double type; };
template<class T> inline T st(typename Acc<T>::type v) { return (T)v; }
"""


@pytest.fixture(scope="module")
def block_kernels(tmp_path_factory):
    # the direct kernels' wrappers run the kernel call on the block's threads
    wrappers = _host_wrappers().replace("{ direct", "{ run_block([=] { direct")
    wrappers = re.sub(r"(run_block\(\[=\] \{ direct\w+\(.*?\);) \}", r"\1 }); }", wrappers)
    return _build_host_kernels(tmp_path_factory, "conv_kernels_block", _BLOCK_PRELUDE,
                               wrappers, threads=True)


@pytest.mark.parametrize("gw_pairs", [K.GW_PAIRS, 0])
@pytest.mark.parametrize(("xs", "ws", "stride", "pads", "dil", "groups", "bias", "strided"),
                         CASES)
def test_direct_backward_block_sums_match_cpu_kernels(xs, ws, stride, pads, dil, groups,
                                                       bias, strided, gw_pairs, block_kernels,
                                                      host_launches, monkeypatch):
    # the same launches as host_launches, the direct kernels run by a block of 32 threads;
    # with gw_pairs 0 a 3x3 kernel's weight gradient takes a block per channel pair
    def launch(name, tensor, total, fmt, *args, per_block=False):
        host_launches.append(name)
        layout = _driver.param_layout(fmt)
        data, params = layout.buffers()
        layout.struct.pack_into(data, 0, *args)
        getattr(block_kernels, f"emu_{name}_f64")(ctypes.c_void_p(params))

    x, w, _ = _case(xs, ws, bias, strided, "direct", monkeypatch)
    monkeypatch.setattr(K, "_launch", launch)
    monkeypatch.setattr(K, "GW_PAIRS", gw_pairs)
    args = (stride, pads, dil, groups)
    g = t.tensor(RNG.standard_normal(C._cpu(x, w, None, *args).shape))
    for mask in ([True, True, True], [False, True, True], [True, False, False]):
        for m, got, want in zip(mask, C._bw_cuda(g, x, w, *args, mask),
                                C._bw_cpu(g, x, w, *args, mask)):
            if m:
                np.testing.assert_allclose(got._np, want, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(K, "DIRECT_MACS", 1 << 40)
    monkeypatch.setattr(K, "DIRECT_GW_SUM", 1 << 40)
    gw = K.direct_grad_weight(g, x, w._shape, list(g._shape[2:]), *args)
    np.testing.assert_allclose(gw._np, C._bw_cpu(g, x, w, *args, [False, True, False])[1],
                               rtol=1e-12, atol=1e-12)
    if xs[0]:
        assert "direct_bw" in host_launches and "direct_gw" in host_launches


@pytest.mark.parametrize("emulation", ["launches", "host_launches"])
@pytest.mark.parametrize(("macs", "gw_sum", "kernel"),
                         [(1 << 40, 0, "direct_gi"), (300, 1 << 40, "direct_gw")])
def test_conv_backward_with_one_direct_gradient(emulation, macs, gw_sum, kernel, request,
                                                monkeypatch):
    # one gradient fits the direct kernels, the other takes the GEMM path: the separate
    # direct_gi / direct_gw launches (CASES[0]: the input gradient is 42 * 12 = 504
    # multiply-adds, the weight gradient 36 * 6 = 216, a sum of 6)
    seen = request.getfixturevalue(emulation)
    monkeypatch.setattr(K, "DIRECT_MACS", macs)
    monkeypatch.setattr(K, "DIRECT_GW_SUM", gw_sum)
    xs, ws, *args = CASES[0][:6]
    x, w = t.tensor(RNG.standard_normal(xs)), t.tensor(RNG.standard_normal(ws))
    g = t.tensor(RNG.standard_normal(C._cpu(x, w, None, *args).shape))
    seen.clear()
    mask = [True, True, True]
    for got, want in zip(C._bw_cuda(g, x, w, *args, mask), C._bw_cpu(g, x, w, *args, mask)):
        np.testing.assert_allclose(got._np, want, rtol=1e-12, atol=1e-12)
    assert kernel in seen and "direct_bw" not in seen


@pytest.mark.parametrize("small", [False, True])
def test_linear_cuda_source_matches_cpu_kernels(small, host_launches, monkeypatch):
    monkeypatch.setattr(K, "SMALL_MM_MACS", 1 << 40 if small else 0)
    x = t.tensor(RNG.standard_normal((7, 5))).t()
    w, b = t.tensor(RNG.standard_normal((4, 7))), t.tensor(RNG.standard_normal(4))
    np.testing.assert_allclose(LK._cuda(x, w, b)._np, LK._cpu(x, w, b), rtol=1e-12)
    g = t.tensor(RNG.standard_normal((5, 4)))
    for mask in ([True] * 3, [False, True, True], [True, False, False]):
        for m, got, want in zip(mask, LK._bw_cuda(g, x, w, mask), LK._bw_cpu(g, x, w, mask)):
            if m:
                np.testing.assert_allclose(got._np, want, rtol=1e-12)
    assert ("small_mm" in host_launches) == small
    assert ("small_mm_bw" in host_launches) == small


def test_weight_gradient_tasks(monkeypatch):
    # a 2-d 3x3 kernel with many channel pairs: a block per pair, else a block per element
    assert K.gw_tasks((32, 16, 3, 3)) == (1, 512)  # the bench CNN's second convolution
    assert K.gw_tasks((16, 3, 3, 3)) == (0, 432)   # its first: 48 pairs
    assert K.gw_tasks((32, 16, 3, 2)) == (0, 32 * 16 * 6)
    assert K.gw_tasks((32, 16, 3, 3, 3)) == (0, 32 * 16 * 27)
    assert K.gw_tasks((32, 16, 3)) == (0, 32 * 16 * 3)
    monkeypatch.setattr(K, "GW_PAIRS", 0)
    assert K.gw_tasks((2, 1, 3, 3)) == (1, 2)
