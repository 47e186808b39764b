"""CUDA kernels of the fused 2-d max pooling and NLL loss ops (one launch per op).

* ``max_pool2d``: one thread per output element walks its window (kernel, stride,
  padding, dilation; padded positions are skipped, not read) and writes the maximum and
  its flat H*W input index: the first maximum wins, a NaN always wins (so a window
  holding NaN gives its last NaN), and a window of only ``-inf`` gives its first valid
  position, as torch's kernel does.
* ``max_pool2d_backward``: one thread per *input* element sums, in output order, the
  gradients of the outputs whose window covers it and picked it. Every input element is
  written (no separate zero fill), no atomics are needed, and overlapping windows give
  the same sum in every run (torch's NCHW kernel gathers the same way).
* ``nll_loss``: one block walks the batch; each thread keeps its own running loss and
  weight sums in a fixed order, then a shared-memory tree adds them, so the loss is the
  same in every run. ``none`` writes each sample's loss on the way. A target out of
  range (and not ``ignore_index``) stops the kernel with a device-side assert, as
  torch's CUDA kernel does (no host check, so no synchronisation).
* ``nll_loss_backward``: one thread per gradient element writes ``-w[t] * g`` at the
  target class and zero elsewhere.

float16/bfloat16 (max pooling only) compute in float; float32 in float; float64 in
double. Index arithmetic is 64-bit; every kernel loops over a grid of bounded size.
"""

from __future__ import annotations

import ctypes

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._kernels import _PRELUDE
from refimpl.cuda._pointwise import load_functions

_BLOCK = 256
_NLL_BLOCK = 512
_MAX_GRID = 1 << 16

_SOURCE = _PRELUDE + r"""
#define NLL_BLOCK 512
struct h16 { unsigned short b; };
struct bf16 { unsigned short b; };
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ double ld(double v) { return v; }
__device__ __forceinline__ float ld(h16 v) { return h2f(v.b); }
__device__ __forceinline__ float ld(bf16 v) { return bf2f(v.b); }
__device__ __forceinline__ void put(float* p, float a) { *p = a; }
__device__ __forceinline__ void put(double* p, double a) { *p = a; }
__device__ __forceinline__ void put(h16* p, float a) { p->b = f2h(a); }
__device__ __forceinline__ void put(bf16* p, float a) { p->b = f2bf(a); }
__device__ __forceinline__ void lowest(float& a) { a = -__int_as_float(0x7f800000); }
__device__ __forceinline__ void lowest(double& a) {
  a = -__longlong_as_double(0x7ff0000000000000LL); }

struct Pool { long long planes; int h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw; };

// the first window row (column) inside the input: start + a multiple of the dilation
__device__ __forceinline__ int first_inside(int start, int dil) {
  return start >= 0 ? start : start + (-start + dil - 1) / dil * dil; }

template<class T, class A>
__device__ void pool_fwd(const T* x, T* y, long long* ind, Pool g) {
  const long long per = (long long)g.oh * g.ow, total = g.planes * per;
  GRID_LOOP(o, total) {
    const long long plane = o / per;
    const int r = (int)(o - plane * per), oh = r / g.ow, ow = r - oh * g.ow;
    const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
    const int he = min(hs + (g.kh - 1) * g.dh + 1, g.h), we = min(ws + (g.kw - 1) * g.dw + 1, g.w);
    const int h0 = first_inside(hs, g.dh), w0 = first_inside(ws, g.dw);
    const T* xp = x + plane * g.h * g.w;
    long long best = (long long)h0 * g.w + w0;
    A m;
    lowest(m);
    for (int hh = h0; hh < he; hh += g.dh) {
      for (int ww = w0; ww < we; ww += g.dw) {
        const long long at = (long long)hh * g.w + ww;
        const A v = ld(xp[at]);
        if (v > m || v != v) { m = v; best = at; }
      }
    }
    put(y + o, m);
    ind[o] = best;
  } }

template<class T, class A>
__device__ void pool_bwd(const T* gy, const long long* ind, T* gx, Pool g) {
  const long long plane_in = (long long)g.h * g.w, per = (long long)g.oh * g.ow;
  const long long total = g.planes * plane_in;
  GRID_LOOP(i, total) {
    const long long plane = i / plane_in;
    const long long r = i - plane * plane_in;
    const int hh = (int)(r / g.w), ww = (int)(r - (long long)hh * g.w);
    // outputs whose window spans row hh: oh * sh - ph <= hh <= oh * sh - ph + (kh-1) * dh
    const int lo_h = hh + g.ph - (g.kh - 1) * g.dh, lo_w = ww + g.pw - (g.kw - 1) * g.dw;
    const int oh0 = lo_h <= 0 ? 0 : (lo_h + g.sh - 1) / g.sh;
    const int ow0 = lo_w <= 0 ? 0 : (lo_w + g.sw - 1) / g.sw;
    const int oh1 = min((hh + g.ph) / g.sh, g.oh - 1), ow1 = min((ww + g.pw) / g.sw, g.ow - 1);
    const long long base = plane * per;
    A acc = 0;
    for (int oh = oh0; oh <= oh1; ++oh) {
      for (int ow = ow0; ow <= ow1; ++ow) {
        const long long o = base + (long long)oh * g.ow + ow;
        if (ind[o] == r) acc += ld(gy[o]);
      }
    }
    put(gx + i, acc);
  } }

struct Nll { long long n, classes, ignore, xs0, xs1, ts, ws, gs; int reduction; };

// reduction: 0 none, 1 sum, 2 mean; w: the class weights or null
template<class T>
__device__ void nll_fwd(const T* x, const long long* t, const T* w, T* out, T* total, Nll g) {
  __shared__ T sl[NLL_BLOCK], sw[NLL_BLOCK];
  T loss = 0, weight = 0;
  for (long long i = threadIdx.x; i < g.n; i += blockDim.x) {
    const long long c = t[i * g.ts];
    T l = 0, wi = 0;
    if (c != g.ignore) {
      if (c < 0 || c >= g.classes) {
        __assertfail("cur_target >= 0 && cur_target < n_classes",
                     "refimpl/cuda/_pool_loss_kernels.py", __LINE__, "nll_loss kernel", 1);
      }
      wi = w ? w[c * g.ws] : (T)1;
      l = -x[i * g.xs0 + c * g.xs1] * wi;
    }
    if (g.reduction == 0) out[i] = l;
    loss += l;
    weight += wi;
  }
  sl[threadIdx.x] = loss;
  sw[threadIdx.x] = weight;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sl[threadIdx.x] += sl[threadIdx.x + half];
      sw[threadIdx.x] += sw[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *total = sw[0];
    if (g.reduction == 1) *out = sl[0];
    if (g.reduction == 2) *out = sl[0] / sw[0];
  } }

template<class T>
__device__ void nll_bwd(const T* gy, const long long* t, const T* w, const T* total, T* gx,
                        Nll g) {
  GRID_LOOP(e, g.n * g.classes) {
    const long long i = e / g.classes, c = e - i * g.classes;
    const long long tc = t[i * g.ts];
    T v = 0;
    if (tc == c && tc != g.ignore) {
      T gv = gy[i * g.gs];
      if (g.reduction == 2) gv = gv / *total;
      v = -(w ? w[c * g.ws] : (T)1) * gv;
    }
    gx[e] = v;
  } }

#define POOL(S, T, A) \
  extern "C" __global__ void pool_fwd_##S(const T* x, T* y, long long* ind, Pool g) { \
    pool_fwd<T, A>(x, y, ind, g); } \
  extern "C" __global__ void pool_bwd_##S(const T* gy, const long long* ind, T* gx, Pool g) { \
    pool_bwd<T, A>(gy, ind, gx, g); }
#define NLL(S, T) \
  extern "C" __global__ void __launch_bounds__(NLL_BLOCK) nll_fwd_##S(const T* x, \
      const long long* t, const T* w, T* out, T* total, Nll g) { \
    nll_fwd<T>(x, t, w, out, total, g); } \
  extern "C" __global__ void nll_bwd_##S(const T* gy, const long long* t, const T* w, \
      const T* total, T* gx, Nll g) { nll_bwd<T>(gy, t, w, total, gx, g); }
POOL(f32, float, float)
POOL(f64, double, double)
POOL(f16, h16, float)
POOL(bf16, bf16, float)
NLL(f32, float)
NLL(f64, double)
"""

_SUFFIX = {D.float32: "f32", D.float64: "f64", D.float16: "f16", D.bfloat16: "bf16"}
POOL_DTYPES = frozenset(_SUFFIX)
_functions: dict = {}  # (kernel name, device index) -> loaded handle


class _Pool(ctypes.Structure):
    _fields_ = [("planes", ctypes.c_longlong)] + [
        (name, ctypes.c_int) for name in ("h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "ph",
                                          "pw", "dh", "dw")]


class _Nll(ctypes.Structure):
    _fields_ = [(name, ctypes.c_longlong) for name in ("n", "classes", "ignore", "xs0", "xs1",
                                                       "ts", "ws", "gs")] + [
        ("reduction", ctypes.c_int)]


_REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


# The launch layouts (``_driver.ParamLayout``): the pointers as addresses, then the
# geometry struct (Pool, Nll) passed by value as its bytes. Neither depends on the dtype.
_POOL_FMT = f"PPP{ctypes.sizeof(_Pool)}s"  # x, y, ind, g  /  gy, ind, gx, g
_NLL_FMT = f"PPPPP{ctypes.sizeof(_Nll)}s"  # x, t, w, out, total, g  /  gy, t, w, total, gx, g


def _ptr(t: Tensor | None) -> int:
    """The address of ``t``'s first element (0 for None)."""
    return 0 if t is None else t._storage._data.ptr + t._offset * t.dtype.itemsize


def _launch(name: str, like: Tensor, items: int, fmt: str, *args, block: int = _BLOCK,
            grid: int | None = None) -> None:
    """Launch kernel ``name`` on ``like``'s device and current stream, ``items`` threads'
    worth of work (a grid-stride loop covers the rest) unless ``grid`` is given; ``args``
    are plain values packed by ``fmt`` (``_driver.launch_packed``)."""
    index = like._storage.device.index
    fn = _functions.get((name, index))
    if fn is None:
        fn = _functions[(name, index)] = load_functions(_SOURCE, (name,), index)[0]
    if grid is None:
        grid = min(max(-(-items // block), 1), _MAX_GRID)
    _driver.launch_packed(index, fn, (grid, 1, 1), (block, 1, 1), fmt, args,
                          streams.current_stream_handle(index), 0, name)


def _pool_geometry(planes: int, sizes, out, k, s, p, d) -> _Pool:
    return _Pool(planes, *sizes, *out, *k, *s, *p, *d)


def max_pool2d(input: Tensor, k, s, p, d, out) -> tuple[Tensor, Tensor]:
    """(values, flat H*W indices) of 2-d max pooling over the last two dims of the CUDA
    tensor ``input`` (float16/bfloat16/float32/float64, at least one element), as new
    contiguous tensors of shape (*lead, *out)."""
    x = input if input.is_contiguous() else input.contiguous()
    lead = tuple(x._shape[:-2])
    planes = x.numel() // (x._shape[-2] * x._shape[-1])
    dev = x._storage.device
    values = Tensor._empty((*lead, *out), x.dtype, dev)
    indices = Tensor._empty((*lead, *out), D.int64, dev)
    if values.numel():
        g = _pool_geometry(planes, x._shape[-2:], out, k, s, p, d)
        _launch(f"pool_fwd_{_SUFFIX[x.dtype]}", x, values.numel(), _POOL_FMT,
                _ptr(x), _ptr(values), _ptr(indices), bytes(g))
    return values, indices


def max_pool2d_backward(grad: Tensor, input: Tensor, idx: Tensor, k, s, p, d) -> Tensor:
    """The gradient of ``input`` for 2-d max pooling that picked ``idx`` (contiguous, of
    the output's shape), given the output gradient ``grad``, as a new contiguous tensor."""
    g = grad if grad.is_contiguous() else grad.contiguous()
    dev = input._storage.device
    gx = Tensor._empty(tuple(input._shape), input.dtype, dev)
    if gx.numel():
        planes = gx.numel() // (input._shape[-2] * input._shape[-1])
        geo = _pool_geometry(planes, input._shape[-2:], idx._shape[-2:], k, s, p, d)
        _launch(f"pool_bwd_{_SUFFIX[input.dtype]}", gx, gx.numel(), _POOL_FMT,
                _ptr(g), _ptr(idx), _ptr(gx), bytes(geo))
    return gx


def _nll_geometry(input: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                  ignore_index: int, grad: Tensor | None = None) -> _Nll:
    two_d = input.dim() == 2
    n = input._shape[0] if two_d else 1
    classes = input._shape[-1]
    xs0 = input.stride(0) if two_d else 0
    gs = grad.stride(0) if grad is not None and grad.dim() == 1 else 0
    return _Nll(n, classes, ignore_index, xs0, input.stride(-1),
                target.stride(0) if target.dim() else 0,
                weight.stride(0) if weight is not None else 0, gs, _REDUCTIONS[reduction])


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
             ignore_index: int) -> tuple[Tensor, Tensor]:
    """(loss, summed weight) of the negative log likelihood of the float32/float64 CUDA
    input (N, C) or (C,) at the int64 ``target`` classes: the loss per sample for
    ``reduction='none'``, else 0-d."""
    dev = input._storage.device
    loss = Tensor._empty(tuple(target._shape) if reduction == "none" else (), input.dtype, dev)
    total = Tensor._empty((), input.dtype, dev)
    geo = _nll_geometry(input, target, weight, reduction, ignore_index)
    _launch(f"nll_fwd_{_SUFFIX[input.dtype]}", input, 0, _NLL_FMT,
            _ptr(input), _ptr(target), _ptr(weight), _ptr(loss), _ptr(total), bytes(geo),
            block=_NLL_BLOCK, grid=1)
    return loss, total


def nll_loss_backward(grad: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                      total: Tensor, reduction: str, ignore_index: int) -> Tensor:
    """The gradient of ``input`` for ``nll_loss`` given the loss gradient ``grad`` (of the
    loss's shape) and the forward's summed weight ``total``, as a new contiguous tensor."""
    gx = Tensor._empty(tuple(input._shape), input.dtype, input._storage.device)
    geo = _nll_geometry(input, target, weight, reduction, ignore_index, grad)
    _launch(f"nll_bwd_{_SUFFIX[input.dtype]}", gx, gx.numel(), _NLL_FMT,
            _ptr(grad), _ptr(target), _ptr(weight), _ptr(total), _ptr(gx), bytes(geo))
    return gx
