"""The CUDA C of ``refimpl/cuda/_norm_kernels.py`` run on the CPU, without a GPU.

The kernel source is compiled by the host C++ compiler with a small emulation of the
CUDA subset it uses (one thread per CUDA thread, blocks one after another,
``__syncthreads`` and warp shuffles through barriers), and the module's launchers run
on it with numpy buffers standing for device memory. Their results must match refimpl's
CPU kernels of the same ops: the indexing, chunking, reductions and masks of the CUDA
path are checked on any machine with g++ (C++20). The source also compiles with NVRTC
where that library is installed. The GPU tests
(``tests/gpu/test_norm_kernels_gpu.py``) check the same kernels on the device.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

import refimpl as t
import refimpl.ops.nn_layer_norm_kernel as LK
import refimpl.ops.nn_norm_kernel as BK
from refimpl import _dtype as D
from refimpl.cuda import _driver
from refimpl.cuda import _norm_kernels as K

_SHIM = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
using std::min; using std::sqrt;
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* block_bar;
static std::vector<std::barrier<>*> warp_bars;
static unsigned char lanes[32][32][8];
#define __global__
#define __device__
#define __forceinline__
#define __shared__ static
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
inline void __syncthreads() { block_bar->arrive_and_wait(); }
template <class V> V __shfl_xor_sync(unsigned, V v, int mask) {
  int tid = threadIdx.x + threadIdx.y * blockDim.x, w = tid / 32, l = tid % 32;
  std::memcpy(lanes[w][l], &v, sizeof(V));
  warp_bars[w]->arrive_and_wait();
  V r;
  std::memcpy(&r, lanes[w][l ^ mask], sizeof(V));
  warp_bars[w]->arrive_and_wait();
  return r;
}
static void run(unsigned gx, unsigned gy, unsigned bx, unsigned by,
                const std::function<void()>& kernel) {
  gridDim = {gx, gy, 1};
  blockDim = {bx, by, 1};
  const unsigned n = bx * by;
  std::barrier<> bar(n);
  block_bar = &bar;
  std::vector<std::barrier<>*> wb;
  for (unsigned i = 0; i < n / 32; ++i) wb.push_back(new std::barrier<>(32));
  warp_bars = wb;
  std::vector<std::thread> threads;
  for (unsigned k = 0; k < n; ++k) threads.emplace_back([&, k] {
    threadIdx = {k % bx, k / bx, 1};
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        blockIdx = {x, y, 1};
        kernel();
        bar.arrive_and_wait();  // the block's shared memory is reused by the next one
      }
  });
  for (auto& th : threads) th.join();
  for (auto* b : wb) delete b;
}
"""


def _wrappers() -> str:
    """``emu_<kernel>(gx, gy, bx, by, void** args)`` for every kernel of the source."""
    macro = K._SOURCE[K._SOURCE.index("#define NORM_KERNELS"):].replace("\\\n", " ")
    decls = re.findall(r'extern "C" __global__ void (\w+)_##S\((.*?)\)', macro)
    out = []
    for suffix, ctype in (("f32", "float"), ("f64", "double")):
        for name, params in decls:
            args = []
            for i, p in enumerate(params.split(",")):
                ty = re.sub(r"\s*\w+$", "", p.strip())
                ty = re.sub(r"\b[TA]\b", ctype, ty)
                args.append(f"*({ty}*)a[{i}]")
            out.append(f'extern "C" void emu_{name}_{suffix}(unsigned gx, unsigned gy, '
                       f'unsigned bx, unsigned by, void** a) {{ run(gx, gy, bx, by, [=] '
                       f'{{ {name}_{suffix}({", ".join(args)}); }}); }}')
    assert len(out) == 2 * len(K.KERNELS)
    return "\n".join(out)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    d = tmp_path_factory.mktemp("norm_kernels")
    (d / "k.cpp").write_text(f"{_SHIM}\n{K._SOURCE}\n{_wrappers()}")
    built = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-w",
                            "-o", str(d / "k.so"), str(d / "k.cpp")],
                           check=False, capture_output=True, text=True)
    if built.returncode and "barrier" in built.stderr:
        pytest.skip("g++ without C++20 <barrier>")
    assert built.returncode == 0, built.stderr
    return ctypes.CDLL(str(d / "k.so"))


class _Buffer:
    """A numpy array standing for a contiguous CUDA tensor (what the launchers read)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = np.ascontiguousarray(a)
        self.shape = self._shape = self.a.shape
        self._stride = tuple(st // self.a.itemsize for st in self.a.strides)
        self.dtype = D.float32 if self.a.dtype == np.float32 else D.float64
        self.device = SimpleNamespace(type="cuda", index=0)
        self._storage = SimpleNamespace(_data=SimpleNamespace(ptr=self.a.ctypes.data),
                                        device=self.device)
        self._offset = 0
        self._version_counter = SimpleNamespace(version=0)

    @classmethod
    def _empty(cls, shape, dtype, dev):
        return cls(np.full(shape, np.nan, np.float32 if dtype is D.float32 else np.float64))

    def is_contiguous(self) -> bool:
        return True

    def numel(self) -> int:
        return self.a.size

    def dim(self) -> int:
        return self.a.ndim


@pytest.fixture
def emu(lib, monkeypatch):
    def launch(name, like, grid, block, fmt, *args):
        # the launcher's own packing (``_driver.ParamLayout``), read by the emulated
        # kernel through its kernelParams array as the driver reads it
        fn = getattr(lib, f"emu_{name}_{K._SUFFIX[like.dtype][0]}")
        layout = _driver.param_layout(fmt.replace("F", "f" if like.dtype is D.float32 else "d"))
        data, params = layout.buffers()
        layout.struct.pack_into(data, 0, *args)
        fn(*(ctypes.c_uint(v) for v in (grid[0], grid[1], block[0], block[1])),
           ctypes.c_void_p(params))

    monkeypatch.setattr(K, "Tensor", _Buffer)
    monkeypatch.setattr(K, "_launch", launch)
    monkeypatch.setattr("refimpl.optim._cuda_update.plain", lambda *a, **k: True)


def _b(a):
    return None if a is None else _Buffer(a)


def _c(a):
    return None if a is None else t.tensor(a)


def _close(got, want, dtype) -> None:
    w = np.asarray(want._np)
    assert got.a.shape == w.shape
    tol = 1e-12 if dtype is np.float64 else 3e-5
    np.testing.assert_allclose(got.a, w, rtol=tol, atol=tol * max(1.0, np.abs(w).max(initial=0)))


MASKS = [[True, True, True], [True, False, False], [False, True, False], [False, False, True]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (2, 2, 30, 30), (1, 1, 2100)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernels(emu, dtype, shape, training):
    rng = np.random.default_rng(sum(shape))
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    stats = (None, None) if training else (rng.standard_normal(c).astype(dtype),
                                           (rng.random(c) + 0.5).astype(dtype))
    got = K.batch_norm(_b(x), _b(w), _b(b), *map(_b, stats), training, 1e-5)
    want = BK.batch_norm_fused(_c(x), _c(w), _c(b), *map(_c, stats), training, 1e-5)
    for i in range(3):
        _close(got[i], want[i], dtype)
    mean, var = want[1]._np, want[2]._np
    for weight, mask in [(w, m) for m in MASKS] + [(None, MASKS[0])]:
        got = K.batch_norm_backward(_b(g), _b(x), _b(weight), _b(mean), _b(var), training,
                                    1e-5, mask)
        want = BK.batch_norm_backward(_c(g), _c(x), _c(weight), _c(mean), _c(var), training,
                                      1e-5, mask)
        for i in range(3):
            _close(got[i], want[i], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,n", [((4, 6, 8), 1), ((3, 5, 7), 2), ((2, 1100), 1),
                                     ((200, 40), 1), ((5, 1), 1), ((1300, 3), 1)])
def test_layer_norm_kernels(emu, dtype, shape, n):
    # (1300 rows: more than one chunk of rows, summed by ln_bw_cols_final)
    rng = np.random.default_rng(sum(shape))
    norm = shape[len(shape) - n:]
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(norm).astype(dtype), rng.standard_normal(norm).astype(dtype)
    for weight, bias in ((w, b), (None, None)):
        got = K.layer_norm(_b(x), _b(weight), _b(bias), n, 1e-5)
        want = LK.layer_norm_fused(_c(x), _c(weight), _c(bias), n, 1e-5)
        for i in range(3):
            _close(got[i], want[i], dtype)
    mean, rstd = want[1]._np, want[2]._np
    for mask in MASKS:
        got = K.layer_norm_backward(_b(g), _b(x), _b(w), _b(mean), _b(rstd), n, mask)
        want = LK.layer_norm_backward(_c(g), _c(x), _c(w), _c(mean), _c(rstd), n, mask)
        for i in range(3):
            _close(got[i], want[i], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_running_statistics_kernel(emu, dtype):
    rng = np.random.default_rng(3)
    rm, rv, mean, var = (rng.standard_normal(300).astype(dtype) for _ in range(4))
    var = np.abs(var)
    got = [_Buffer(a.copy()) for a in (rm, rv, mean, var)]
    want = [a.copy() for a in (rm, rv, mean, var)]
    assert K.update_running(*got, 0.3, 37)
    BK.update_running_np(*want, 0.3, 37)
    for i in range(2):
        _close(got[i], t.tensor(want[i]), dtype)
        # no version bump, as torch's batch norm kernels
        assert got[i]._version_counter.version == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (2, 2, 30, 30), (1, 3, 2100)])
def test_batch_norm_updates_running_statistics_in_its_launch(emu, dtype, shape):
    # training with running statistics and a momentum: the launch that writes the
    # batch's statistics updates them (bn_one, or bn_apply's first block of a channel),
    # as the CPU op does, and bit for bit as the separate bn_running launch would
    rng = np.random.default_rng(sum(shape) + 1)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    rm, rv = rng.standard_normal(c).astype(dtype), (rng.random(c) + 0.5).astype(dtype)
    got_rm, got_rv = _Buffer(rm.copy()), _Buffer(rv.copy())
    got = K.batch_norm(_b(x), _b(w), _b(b), got_rm, got_rv, True, 1e-5, 0.3)
    want_rm, want_rv = t.tensor(rm.copy()), t.tensor(rv.copy())
    want = BK.batch_norm_fused(_c(x), _c(w), _c(b), want_rm, want_rv, True, 1e-5, 0.3)
    for i in range(3):
        _close(got[i], want[i], dtype)
    _close(got_rm, want_rm, dtype)
    _close(got_rv, want_rv, dtype)
    assert not np.array_equal(got_rm.a, rm)  # (the update happened)
    separate = [_Buffer(rm.copy()), _Buffer(rv.copy())]
    n = x.size // c
    assert K.update_running(*separate, got[1], got[2], 0.3, n)
    assert np.array_equal(separate[0].a, got_rm.a) and np.array_equal(separate[1].a, got_rv.a)
    # without a momentum the running statistics are left alone
    still = [_Buffer(rm.copy()), _Buffer(rv.copy())]
    K.batch_norm(_b(x), _b(w), _b(b), *still, True, 1e-5)
    assert np.array_equal(still[0].a, rm) and np.array_equal(still[1].a, rv)


def test_source_compiles_with_nvrtc(nvrtc_compile):
    assert nvrtc_compile(K._SOURCE, "norm.cu")


@pytest.mark.parametrize("c,m", [(1, 1), (3, 1023), (3, 1025), (16, 8192), (1, 10**6),
                                 (512, 49), (4096, 3)])
def test_chunks_cover_each_channel_once(c, m):
    p, chunk = K._chunks(c, m)
    starts = [i * chunk for i in range(p)]
    assert all(s < m for s in starts) and p * chunk >= m  # every chunk non-empty, all covered
    assert c * p <= max(c, 2048) + c


@pytest.mark.parametrize(("shape", "fwd", "bwd"), [
    ((8, 16, 6, 6), ["bn_one"], ["bn_bw_one"]),  # one chunk a channel: one launch a pass
    ((1, 1, 2100), ["bn_stats", "bn_apply"], ["bn_bw_sums", "bn_bw_apply"]),
])
def test_batch_norm_launches_per_pass(emu, monkeypatch, shape, fwd, bwd):
    seen = []
    launch = K._launch
    monkeypatch.setattr(K, "_launch", lambda name, *a: seen.append(name) or launch(name, *a))
    rng = np.random.default_rng(5)
    x, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(shape[1]).astype(np.float32)
    _, mean, var = K.batch_norm(_b(x), _b(w), _b(w), None, None, True, 1e-5)
    assert seen == fwd
    seen.clear()
    K.batch_norm_backward(_b(g), _b(x), _b(w), mean, var, True, 1e-5, [True, True, True])
    assert seen == bwd
