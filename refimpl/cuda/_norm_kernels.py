"""Batch and layer normalisation on CUDA as hand-written NVRTC kernels.

The CUDA kernels of ``_batch_norm_fused``, ``_layer_norm_fused`` and their one-call
backwards (``refimpl/ops/nn_norm_kernel.py``, ``nn_layer_norm_kernel.py``). Each op is
one to three launches on the current stream of the input's device, with its outputs and
scratch buffers from the caching allocator, so that they run inside CUDA graph capture
(no host reads of device data, no synchronisation).

Sums run in the accumulation type (float for float32, double for float64) and in a fixed
order: each thread folds its elements in index order, threads combine in a fixed
shuffle tree, blocks write partial results that a later launch (or the same launch's
blocks, each redundantly) combines in index order. No atomics, so every run of one shape
gives the same bits.

Layouts: contiguous tensors (the callers pass ``.contiguous()`` copies; a channels_last
batch is thus copied once). Index arithmetic is 64-bit.

* Batch norm, input viewed as (N, C, HW): the elements of channel c are split into P
  chunks; the block of (c, p) forms a Welford (count, mean, M2) partial of its chunk
  (``bn_stats``); the launch that normalises (``bn_apply``) merges channel c's P partials
  in double in index order in every block, so the statistics need no third launch. In
  evaluation the apply launch reads the given statistics. The backward forms the
  partial sums of ``g`` and ``g * (x - mean)`` (``bn_bw_sums``) and then the input
  gradient and the weight/bias gradients (``bn_bw_apply``).
  A channel of one chunk (P = 1) runs both steps in one launch (``bn_one``,
  ``bn_bw_one``: the same device code, so the same bits; the one partial stays in the
  block's shared memory, with no scratch tensor).
  In training the running statistics are updated in place by the block that writes a
  channel's batch statistics (the op takes them, as torch's ``native_batch_norm``
  does); ``bn_running`` is the same update as a launch of its own, for
  ``nn_norm._update_running`` (running statistics the op cannot take).
* Layer norm, input viewed as (R, D): one warp per row for D <= 1024, else one block of
  256 threads per row; mean and variance by two passes over the row. The backward's
  input gradient is per row the same way (``ln_bw_rows``); the weight and bias gradients
  are column sums over the rows: blocks of 32 columns by a chunk of rows write partial
  sums (``ln_bw_cols``), summed over the chunks in order by ``ln_bw_cols_final`` (or
  written directly when one chunk covers every row).
"""

from __future__ import annotations

import ctypes
import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._pointwise import load_functions

_SOURCE = r"""
template<class A> struct Welford { A n, m, m2; };

template<class A>
__device__ __forceinline__ Welford<A> wf_merge(Welford<A> a, Welford<A> b) {
  A n = a.n + b.n;
  if (n == (A)0) return a;
  A d = b.m - a.m;
  A f = b.n / n;
  Welford<A> r;
  r.n = n;
  r.m = a.m + d * f;
  r.m2 = a.m2 + b.m2 + d * d * a.n * f;
  return r;
}

template<class A>
__device__ __forceinline__ Welford<A> wf_shfl(Welford<A> v, int lane) {
  Welford<A> r;
  r.n = __shfl_xor_sync(0xffffffffu, v.n, lane);
  r.m = __shfl_xor_sync(0xffffffffu, v.m, lane);
  r.m2 = __shfl_xor_sync(0xffffffffu, v.m2, lane);
  return r;
}

template<class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  return v;
}

// Sum over the threads of a row: the warp (blockDim.x == 32) or the 1-D block; every
// thread of the row gets the result. `sh` holds 33 values of A.
template<class A>
__device__ __forceinline__ A row_sum(A v, A* sh) {
  v = warp_sum(v);
  if (blockDim.x == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A s = lane < warps ? sh[lane] : (A)0;
    s = warp_sum(s);
    if (lane == 0) sh[32] = s;
  }
  __syncthreads();
  A r = sh[32];
  __syncthreads();  // sh may be reused by the next call
  return r;
}

// The element j (0 <= j < n*hw) of channel c of a contiguous (N, C, HW) tensor.
__device__ __forceinline__ long long nchw(long long j, long long c, long long C,
                                          long long hw) {
  long long n = j / hw;
  return (n * C + c) * hw + (j - n * hw);
}

// Welford partials of channel c, chunk p: part[(c * P + p) * 3 + {0, 1, 2}].
template<class T, class A>
__device__ void bn_stats(const T* x, A* part, long long C, long long hw, long long M,
                         long long chunk, long long P, long long cs) {
  __shared__ Welford<A> sh[32];
  const long long c = blockIdx.x / P, p = blockIdx.x % P;
  const long long j0 = p * chunk, j1 = min(M, j0 + chunk);
  Welford<A> w = {(A)0, (A)0, (A)0};
  for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    A v = (A)x[nchw(j, c, C, hw)];
    w.n += (A)1;
    A d = v - w.m;
    w.m += d / w.n;
    w.m2 += d * (v - w.m);
  }
  for (int k = 16; k > 0; k >>= 1) w = wf_merge(w, wf_shfl(w, k));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = w;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < (int)(blockDim.x >> 5); ++i) w = wf_merge(w, sh[i]);
    A* out = part + c * cs + p * 3;
    out[0] = w.n; out[1] = w.m; out[2] = w.m2;
  }
}

// The running statistics' update of channel c in place, rounded as the ops mul_ then
// add_ (alpha) round it: rm = rm * keep + momentum * mean; rv = rv * keep + momentum *
// (var * factor). ``bn_running`` runs it over every channel (a launch of its own); the
// training forward runs it in the block that writes channel c's batch statistics.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template<class T>
__device__ __forceinline__ void bn_running_one(T* rm, T* rv, T mean, T var, long long c,
                                               T keep, T momentum, T factor) {
  T r = mul_rn(rm[c], keep);
  rm[c] = r + momentum * mean;
  T u = mul_rn(var, factor);
  T s = mul_rn(rv[c], keep);
  rv[c] = s + momentum * u;
}

// y = (x - mean) * (invstd * w) + b over chunk p of channel c; the statistics merged
// from the P Welford partials (written out, and the running statistics updated when rm
// is given, by the chunk-0 block) or read from mean/var.
template<class T, class A>
__device__ void bn_apply(const T* x, T* y, const A* part, long long P, long long cs,
                         const T* mean_in,
                         const T* var_in, const T* w, const T* b, T* mean_out, T* var_out,
                         long long C, long long hw, long long M, long long chunk,
                         long long Pa, A eps, T* rm, T* rv, T keep, T momentum, T factor) {
  __shared__ A st[2];
  const long long c = blockIdx.x / Pa, p = blockIdx.x % Pa;
  if (threadIdx.x == 0) {
    A mean, var;
    if (part) {
      Welford<double> acc = {0.0, 0.0, 0.0};
      for (long long i = 0; i < P; ++i) {
        const A* q = part + c * cs + i * 3;
        Welford<double> o = {(double)q[0], (double)q[1], (double)q[2]};
        acc = wf_merge(acc, o);
      }
      mean = (A)acc.m;
      var = (A)(acc.m2 / acc.n);
      if (p == 0) {
        mean_out[c] = (T)mean;
        var_out[c] = (T)var;
        if (rm) bn_running_one(rm, rv, (T)mean, (T)var, c, keep, momentum, factor);
      }
    } else {
      mean = (A)mean_in[c];
      var = (A)var_in[c];
    }
    A scale = (A)1 / sqrt(var + eps);
    if (w) scale = scale * (A)w[c];
    st[0] = mean;
    st[1] = scale;
  }
  __syncthreads();
  const A mean = st[0], scale = st[1], shift = b ? (A)b[c] : (A)0;
  const long long j0 = p * chunk, j1 = min(M, j0 + chunk);
  for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const long long i = nchw(j, c, C, hw);
    y[i] = (T)(((A)x[i] - mean) * scale + shift);
  }
}

// Partial sums of g and g * (x - mean) of channel c, chunk p: part[(c * P + p) * 2 + k].
template<class T, class A>
__device__ void bn_bw_sums(const T* g, const T* x, const T* mean, A* part, long long C,
                           long long hw, long long M, long long chunk, long long P,
                           long long cs) {
  __shared__ A sh[33];
  const long long c = blockIdx.x / P, p = blockIdx.x % P;
  const long long j0 = p * chunk, j1 = min(M, j0 + chunk);
  const A m = (A)mean[c];
  A s = (A)0, sd = (A)0;
  for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const long long i = nchw(j, c, C, hw);
    A gv = (A)g[i];
    s += gv;
    sd += gv * ((A)x[i] - m);
  }
  s = row_sum(s, sh);
  sd = row_sum(sd, sh);
  if (threadIdx.x == 0) {
    A* out = part + c * cs + p * 2;
    out[0] = s; out[1] = sd;
  }
}

// The input gradient over chunk p of channel c and (chunk-0 blocks) the weight and bias
// gradients, from the P partials of bn_bw_sums (absent in evaluation without them).
template<class T, class A>
__device__ void bn_bw_apply(const T* g, const T* x, const T* mean, const T* var,
                            const T* w, const A* part, long long P, long long cs, T* gi,
                            T* gw, T* gb,
                            long long C, long long hw, long long M, long long chunk,
                            long long Pa, A eps, int training) {
  __shared__ A st[4];
  const long long c = blockIdx.x / Pa, p = blockIdx.x % Pa;
  if (threadIdx.x == 0) {
    const A invstd = (A)1 / sqrt((A)var[c] + eps);
    A gsum = (A)0, gdot = (A)0;
    if (part) {
      double s = 0.0, sd = 0.0;
      for (long long i = 0; i < P; ++i) {
        s += (double)part[c * cs + i * 2];
        sd += (double)part[c * cs + i * 2 + 1];
      }
      gsum = (A)s;
      gdot = (A)(sd * (double)invstd);
      if (p == 0 && gw) gw[c] = (T)gdot;
      if (p == 0 && gb) gb[c] = (T)gsum;
    }
    st[0] = invstd;
    st[1] = w ? invstd * (A)w[c] : invstd;
    st[2] = gsum / (A)M;
    st[3] = gdot / (A)M;
  }
  __syncthreads();
  if (!gi) return;
  const A invstd = st[0], scale = st[1], gmean = st[2], gxmean = st[3];
  const A m = (A)mean[c];
  const long long j0 = p * chunk, j1 = min(M, j0 + chunk);
  for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    const long long i = nchw(j, c, C, hw);
    A gv = (A)g[i];
    if (training) gv = gv - gmean - ((A)x[i] - m) * invstd * gxmean;
    gi[i] = (T)(gv * scale);
  }
}

// Layer norm forward: one row per (threadIdx.y, blockIdx.x); blockDim.x threads a row.
template<class T, class A>
__device__ void ln_fwd(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                       long long R, long long D, A eps) {
  __shared__ A sh[33];
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= R) return;
  const T* xr = x + r * D;
  T* yr = y + r * D;
  A s = (A)0;
  for (long long j = threadIdx.x; j < D; j += blockDim.x) s += (A)xr[j];
  const A m = row_sum(s, sh) / (A)D;
  A q = (A)0;
  for (long long j = threadIdx.x; j < D; j += blockDim.x) {
    A d = (A)xr[j] - m;
    q += d * d;
  }
  const A rs = (A)1 / sqrt(row_sum(q, sh) / (A)D + eps);
  if (threadIdx.x == 0) { mean[r] = (T)m; rstd[r] = (T)rs; }
  for (long long j = threadIdx.x; j < D; j += blockDim.x) {
    A v = ((A)xr[j] - m) * rs;
    if (w) v = v * (A)w[j];
    if (b) v = v + (A)b[j];
    yr[j] = (T)v;
  }
}

// Layer norm input gradient, rows as ln_fwd: gx = g * w,
// gi = (gx - mean(gx) - xhat * mean(gx * xhat)) * rstd.
template<class T, class A>
__device__ void ln_bw_rows(const T* g, const T* x, const T* w, const T* mean,
                           const T* rstd, T* gi, long long R, long long D) {
  __shared__ A sh[33];
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= R) return;
  const T *gr = g + r * D, *xr = x + r * D;
  const A m = (A)mean[r], rs = (A)rstd[r];
  A s = (A)0, sd = (A)0;
  for (long long j = threadIdx.x; j < D; j += blockDim.x) {
    A gx = w ? (A)gr[j] * (A)w[j] : (A)gr[j];
    s += gx;
    sd += gx * (((A)xr[j] - m) * rs);
  }
  const A a = row_sum(s, sh) / (A)D;
  const A bb = row_sum(sd, sh) / (A)D;
  T* out = gi + r * D;
  for (long long j = threadIdx.x; j < D; j += blockDim.x) {
    A gx = w ? (A)gr[j] * (A)w[j] : (A)gr[j];
    out[j] = (T)((gx - a - ((A)xr[j] - m) * rs * bb) * rs);
  }
}

// Weight/bias gradient partials: block (32, 8) for columns 32*blockIdx.x.. and the rows
// of chunk blockIdx.y; written as T into gw/gb when one chunk covers every row.
template<class T, class A>
__device__ void ln_bw_cols(const T* g, const T* x, const T* mean, const T* rstd, A* pw,
                           A* pb, T* gw, T* gb, long long R, long long D, long long rows) {
  __shared__ A sw[8][33], sb[8][33];
  const long long col = (long long)blockIdx.x * 32 + threadIdx.x;
  const long long r0 = (long long)blockIdx.y * rows, r1 = min(R, r0 + rows);
  A aw = (A)0, ab = (A)0;
  if (col < D) {
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) {
      A gv = (A)g[r * D + col];
      ab += gv;
      aw += gv * (((A)x[r * D + col] - (A)mean[r]) * (A)rstd[r]);
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y != 0 || col >= D) return;
  for (int k = 1; k < 8; ++k) { aw += sw[k][threadIdx.x]; ab += sb[k][threadIdx.x]; }
  if (gridDim.y == 1) {
    if (gw) gw[col] = (T)aw;
    if (gb) gb[col] = (T)ab;
  } else {
    if (pw) pw[blockIdx.y * D + col] = aw;
    if (pb) pb[blockIdx.y * D + col] = ab;
  }
}

template<class T, class A>
__device__ void ln_bw_cols_final(const A* pw, const A* pb, T* gw, T* gb, long long D,
                                 long long chunks) {
  for (long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x; col < D;
       col += (long long)gridDim.x * blockDim.x) {
    A aw = (A)0, ab = (A)0;
    for (long long k = 0; k < chunks; ++k) {
      if (pw) aw += pw[k * D + col];
      if (pb) ab += pb[k * D + col];
    }
    if (gw) gw[col] = (T)aw;
    if (gb) gb[col] = (T)ab;
  }
}

template<class T>
__device__ void bn_running(T* rm, T* rv, const T* mean, const T* var, long long C, T keep,
                           T momentum, T factor) {
  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < C;
       c += (long long)gridDim.x * blockDim.x)
    bn_running_one(rm, rv, mean[c], var[c], c, keep, momentum, factor);
}

#define NORM_KERNELS(S, T, A) \
extern "C" __global__ void bn_running_##S(T* rm, T* rv, const T* mean, const T* var, \
    long long C, T keep, T momentum, T factor) { \
  bn_running<T>(rm, rv, mean, var, C, keep, momentum, factor); } \
extern "C" __global__ void bn_stats_##S(const T* x, A* part, long long C, long long hw, \
    long long M, long long chunk, long long P) { \
  bn_stats<T, A>(x, part, C, hw, M, chunk, P, P * 3); } \
extern "C" __global__ void bn_apply_##S(const T* x, T* y, const A* part, long long P, \
    const T* mi, const T* vi, const T* w, const T* b, T* mo, T* vo, long long C, \
    long long hw, long long M, long long chunk, long long Pa, A eps, T* rm, T* rv, \
    T keep, T momentum, T factor) { \
  bn_apply<T, A>(x, y, part, P, P * 3, mi, vi, w, b, mo, vo, C, hw, M, chunk, Pa, eps, \
                 rm, rv, keep, momentum, factor); } \
extern "C" __global__ void bn_one_##S(const T* x, T* y, const T* w, const T* b, \
    T* mo, T* vo, long long C, long long hw, long long M, A eps, T* rm, T* rv, T keep, \
    T momentum, T factor) { \
  __shared__ A part[3]; /* the block's one partial, kept by its thread 0 */ \
  bn_stats<T, A>(x, part, C, hw, M, M, 1, 0); \
  bn_apply<T, A>(x, y, part, 1, 0, nullptr, nullptr, w, b, mo, vo, C, hw, M, M, 1, eps, \
                 rm, rv, keep, momentum, factor); } \
extern "C" __global__ void bn_bw_one_##S(const T* g, const T* x, const T* mean, \
    const T* var, const T* w, T* gi, T* gw, T* gb, long long C, long long hw, \
    long long M, A eps, int training) { \
  __shared__ A part[2]; /* the block's one pair of sums, kept by its thread 0 */ \
  bn_bw_sums<T, A>(g, x, mean, part, C, hw, M, M, 1, 0); \
  bn_bw_apply<T, A>(g, x, mean, var, w, part, 1, 0, gi, gw, gb, C, hw, M, M, 1, eps, \
                    training); } \
extern "C" __global__ void bn_bw_sums_##S(const T* g, const T* x, const T* mean, \
    A* part, long long C, long long hw, long long M, long long chunk, long long P) { \
  bn_bw_sums<T, A>(g, x, mean, part, C, hw, M, chunk, P, P * 2); } \
extern "C" __global__ void bn_bw_apply_##S(const T* g, const T* x, const T* mean, \
    const T* var, const T* w, const A* part, long long P, T* gi, T* gw, T* gb, \
    long long C, long long hw, long long M, long long chunk, long long Pa, A eps, \
    int training) { \
  bn_bw_apply<T, A>(g, x, mean, var, w, part, P, P * 2, gi, gw, gb, C, hw, M, chunk, Pa, eps, \
                    training); } \
extern "C" __global__ void ln_fwd_##S(const T* x, const T* w, const T* b, T* y, \
    T* mean, T* rstd, long long R, long long D, A eps) { \
  ln_fwd<T, A>(x, w, b, y, mean, rstd, R, D, eps); } \
extern "C" __global__ void ln_bw_rows_##S(const T* g, const T* x, const T* w, \
    const T* mean, const T* rstd, T* gi, long long R, long long D) { \
  ln_bw_rows<T, A>(g, x, w, mean, rstd, gi, R, D); } \
extern "C" __global__ void ln_bw_cols_##S(const T* g, const T* x, const T* mean, \
    const T* rstd, A* pw, A* pb, T* gw, T* gb, long long R, long long D, long long rows) { \
  ln_bw_cols<T, A>(g, x, mean, rstd, pw, pb, gw, gb, R, D, rows); } \
extern "C" __global__ void ln_bw_cols_final_##S(const A* pw, const A* pb, T* gw, T* gb, \
    long long D, long long chunks) { \
  ln_bw_cols_final<T, A>(pw, pb, gw, gb, D, chunks); }

NORM_KERNELS(f32, float, float)
NORM_KERNELS(f64, double, double)
"""

KERNELS = ("bn_running", "bn_stats", "bn_apply", "bn_bw_sums", "bn_bw_apply", "bn_one",
           "bn_bw_one", "ln_fwd", "ln_bw_rows", "ln_bw_cols", "ln_bw_cols_final")
_SUFFIX = {D.float32: ("f32", ctypes.c_float), D.float64: ("f64", ctypes.c_double)}
_BLOCK = 256
# (name, dtype, device index) -> (kernel handle, full name, {launch fmt: packed fmt})
_functions: dict = {}


def takes(*tensors) -> bool:
    """Whether these kernels apply: float32/float64 CUDA tensors (``None`` allowed) of
    one dtype, on one device."""
    first = tensors[0]
    dev = first._storage.device
    if first.dtype not in _SUFFIX or dev.type != "cuda":
        return False
    dtype = first.dtype
    for t in tensors:
        if t is not None and (t.dtype is not dtype or (
                t._storage.device is not dev and t._storage.device != dev)):
            return False
    return True


def _ptr(t: Tensor | None) -> int:
    """The address of ``t``'s first element (0 for None)."""
    return 0 if t is None else t._storage._data.ptr + t._offset * t.dtype.itemsize


def _plain(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.is_contiguous() else t.contiguous()


def _launch(name: str, like: Tensor, grid: tuple, block: tuple, fmt: str, *args) -> None:
    """Launch ``name`` for ``like``'s dtype; ``fmt`` spells its parameters as
    ``_driver.ParamLayout`` does, with ``F`` for the dtype's own float (T or A)."""
    index = like._storage.device.index
    key = (name, like.dtype, index)
    entry = _functions.get(key)
    if entry is None:
        suffix = _SUFFIX[like.dtype][0]
        fn = load_functions(_SOURCE, (f"{name}_{suffix}",), index)[0]
        entry = _functions[key] = (fn, f"{name}_{suffix}", {})
    fn, full, fmts = entry
    layout = fmts.get(fmt)
    if layout is None:
        layout = fmts[fmt] = fmt.replace("F", "f" if like.dtype is D.float32 else "d")
    _driver.launch_packed(index, fn, grid, block, layout, args,
                          streams.current_stream_handle(index), 0, full)


def _chunks(c: int, m: int) -> tuple[int, int]:
    """(chunks per channel, elements per chunk) for c channels of m elements: about 2048
    elements a block, at most ~2048 blocks in all. A function of the shape only, so the
    summation order (and the bits) never depend on the device."""
    p = max(1, min(-(-m // 2048), -(-2048 // max(c, 1))))
    chunk = -(-m // p)
    return -(-m // chunk), chunk


def _acc(t: Tensor) -> D.dtype:
    return D.float64 if t.dtype is D.float64 else D.float32


def batch_norm(input: Tensor, weight, bias, mean, var, training: bool,
               eps: float, momentum: float | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(output, mean, biased variance) of a non-empty (N, C, *) input; ``mean``/``var``
    are the statistics to use in evaluation (returned as given). In training they are
    the running statistics, or None: given with a ``momentum``, the launch that writes
    the batch's statistics also updates them in place, as ``update_running`` would."""
    x, weight, bias = _plain(input), _plain(weight), _plain(bias)
    c, dev, dt = x._shape[1], x._storage.device, x.dtype
    m = x.numel() // c
    hw = m // x._shape[0]
    p, chunk = _chunks(c, m)
    y = Tensor._empty(x._shape, dt, dev)
    if training:
        if momentum is not None and mean is not None and var is not None:  # running update
            running = (_ptr(mean), _ptr(var), 1 - momentum, momentum, m / (m - 1))
        else:
            running = (0, 0, 0.0, 0.0, 0.0)
        mean, var = Tensor._empty((c,), dt, dev), Tensor._empty((c,), dt, dev)
        if p == 1:  # one chunk a channel: statistics and normalisation in one launch
            _launch("bn_one", x, (c, 1, 1), (_BLOCK, 1, 1), "PPPPPPqqqFPPFFF",
                    _ptr(x), _ptr(y), _ptr(weight), _ptr(bias), _ptr(mean), _ptr(var),
                    c, hw, m, eps, *running)
            return y, mean, var
        part = Tensor._empty((c * p * 3,), _acc(x), dev)
        _launch("bn_stats", x, (c * p, 1, 1), (_BLOCK, 1, 1), "PPqqqqq",
                _ptr(x), _ptr(part), c, hw, m, chunk, p)
        mi = vi = None
    else:
        part, mi, vi = None, _plain(mean), _plain(var)
        running = (0, 0, 0.0, 0.0, 0.0)
    _launch("bn_apply", x, (c * p, 1, 1), (_BLOCK, 1, 1), "PPPqPPPPPPqqqqqFPPFFF",
            _ptr(x), _ptr(y), _ptr(part), p, _ptr(mi), _ptr(vi), _ptr(weight), _ptr(bias),
            _ptr(mean if training else None), _ptr(var if training else None),
            c, hw, m, chunk, p, eps, *running)
    return y, mean, var


def update_running(running_mean: Tensor, running_var: Tensor, mean: Tensor, var: Tensor,
                   momentum: float, n: int) -> bool:
    """``running_mean``/``running_var`` updated in place with the batch's ``mean`` and
    biased ``var`` of ``n`` values a channel, in one launch; rounded as the ops
    ``running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)`` and
    ``running_var.mul_(1 - momentum).add_(var * (n / (n - 1)), alpha=momentum)`` round
    it, with no version bump (as torch's batch norm kernels). False (nothing done) unless all
    four are plain contiguous CUDA tensors of one float32/float64 dtype, shape and device
    (a profiler or dispatch mode sees no ops of the update, as in torch's batch norm)."""
    from refimpl.optim._cuda_update import plain

    if n < 2 or not running_var.is_contiguous() \
            or not plain(running_mean, mean, running_var, var, inside_op=True):
        return False
    c = running_mean.numel()
    if c:
        _launch("bn_running", mean, (-(-c // _BLOCK), 1, 1), (_BLOCK, 1, 1), "PPPPqFFF",
                _ptr(running_mean), _ptr(running_var), _ptr(mean), _ptr(var), c,
                1 - momentum, momentum, n / (n - 1))
    return True


def batch_norm_backward(grad: Tensor, input: Tensor, weight, mean: Tensor, var: Tensor,
                        training: bool, eps: float, mask) -> tuple[Tensor, Tensor, Tensor]:
    """(input, weight, bias) gradients of a non-empty (N, C, *) input; an unmasked one is
    an empty tensor."""
    x, g, weight = _plain(input), _plain(grad), _plain(weight)
    mean, var = _plain(mean), _plain(var)
    c, dev, dt = x._shape[1], x._storage.device, x.dtype
    m = x.numel() // c
    hw = m // x._shape[0]
    p, chunk = _chunks(c, m)
    gi = Tensor._empty(x._shape, dt, dev) if mask[0] else None
    gw = Tensor._empty((c,), dt, dev) if mask[1] else None
    gb = Tensor._empty((c,), dt, dev) if mask[2] else None
    part = None
    if mask[1] or mask[2] or (mask[0] and training):
        if p == 1:  # one chunk a channel: sums and gradients in one launch
            _launch("bn_bw_one", x, (c, 1, 1), (_BLOCK, 1, 1), "PPPPPPPPqqqFi",
                    _ptr(g), _ptr(x), _ptr(mean), _ptr(var), _ptr(weight), _ptr(gi),
                    _ptr(gw), _ptr(gb), c, hw, m, eps, bool(training))
            mask = (False, False, False)  # every gradient asked for is written
        else:
            part = Tensor._empty((c * p * 2,), _acc(x), dev)
            _launch("bn_bw_sums", x, (c * p, 1, 1), (_BLOCK, 1, 1), "PPPPqqqqq",
                    _ptr(g), _ptr(x), _ptr(mean), _ptr(part), c, hw, m, chunk, p)
    if part is not None or mask[0]:
        pa = p if mask[0] else 1  # without the input gradient one block per channel
        _launch("bn_bw_apply", x, (c * pa, 1, 1), (_BLOCK, 1, 1), "PPPPPPqPPPqqqqqFi",
                _ptr(g), _ptr(x), _ptr(mean), _ptr(var), _ptr(weight), _ptr(part), p,
                _ptr(gi), _ptr(gw), _ptr(gb), c, hw, m, chunk, pa, eps, bool(training))
    if gi is None or gw is None or gb is None:  # an unmasked gradient: an empty tensor
        empty = Tensor._empty((0,), dt, dev)
        return (gi if gi is not None else empty, gw if gw is not None else empty,
                gb if gb is not None else empty)
    return gi, gw, gb


_ONE_CHUNK_ROWS = 1024


def _row_shape(d: int, r: int) -> tuple[tuple, tuple]:
    """(grid, block) of the row kernels: a warp per row (4 rows a block) for short rows,
    else 256 threads per row."""
    if d <= 1024:
        return (-(-r // 4), 1, 1), (32, 4, 1)
    return (r, 1, 1), (_BLOCK, 1, 1)


def layer_norm(input: Tensor, weight, bias, n: int,
               eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(output, mean, rstd) over the last ``n`` dims of a non-empty input; the statistics
    have the input's shape with those dims kept as 1."""
    x, weight, bias = _plain(input), _plain(weight), _plain(bias)
    dev, dt = x._storage.device, x.dtype
    lead = tuple(x._shape[:x.dim() - n])
    d = math.prod(x._shape[x.dim() - n:])
    r = x.numel() // d
    y = Tensor._empty(x._shape, dt, dev)
    stat = (*lead, *([1] * n))
    mean, rstd = Tensor._empty(stat, dt, dev), Tensor._empty(stat, dt, dev)
    grid, block = _row_shape(d, r)
    _launch("ln_fwd", x, grid, block, "PPPPPPqqF",
            _ptr(x), _ptr(weight), _ptr(bias), _ptr(y), _ptr(mean), _ptr(rstd), r, d, eps)
    return y, mean, rstd


def layer_norm_backward(grad: Tensor, input: Tensor, weight, mean: Tensor, rstd: Tensor,
                        n: int, mask) -> tuple[Tensor, Tensor, Tensor]:
    """(input, weight, bias) gradients of a non-empty input normalised over its last
    ``n`` dims; an unmasked one is an empty tensor."""
    x, g, weight = _plain(input), _plain(grad), _plain(weight)
    mean, rstd = _plain(mean), _plain(rstd)
    dev, dt = x._storage.device, x.dtype
    norm = tuple(x._shape[x.dim() - n:])
    d = math.prod(norm)
    r = x.numel() // d
    empty = Tensor._empty((0,), dt, dev)
    gi = gw = gb = empty
    if mask[0]:
        gi = Tensor._empty(x._shape, dt, dev)
        grid, block = _row_shape(d, r)
        _launch("ln_bw_rows", x, grid, block, "PPPPPPqq",
                _ptr(g), _ptr(x), _ptr(weight), _ptr(mean), _ptr(rstd), _ptr(gi), r, d)
    if mask[1] or mask[2]:
        gw = Tensor._empty(norm, dt, dev) if mask[1] else None
        gb = Tensor._empty(norm, dt, dev) if mask[2] else None
        cols = -(-d // 32)
        # chunks of rows in parallel, summed by a second launch; up to _ONE_CHUNK_ROWS rows
        # one chunk (one launch, no partial buffers: the launches cost more than the sums)
        chunks = 1 if r <= _ONE_CHUNK_ROWS else max(1, min(-(-r // 16), -(-512 // cols), 65535))
        rows = -(-r // chunks)
        chunks = -(-r // rows)
        acc = _acc(x)
        pw = Tensor._empty((chunks * d,), acc, dev) if mask[1] and chunks > 1 else None
        pb = Tensor._empty((chunks * d,), acc, dev) if mask[2] and chunks > 1 else None
        _launch("ln_bw_cols", x, (cols, chunks, 1), (32, 8, 1), "PPPPPPPPqqq",
                _ptr(g), _ptr(x), _ptr(mean), _ptr(rstd), _ptr(pw), _ptr(pb), _ptr(gw),
                _ptr(gb), r, d, rows)
        if chunks > 1:
            _launch("ln_bw_cols_final", x, (min(-(-d // _BLOCK), 4096), 1, 1),
                    (_BLOCK, 1, 1), "PPPPqq", _ptr(pw), _ptr(pb), _ptr(gw), _ptr(gb), d,
                    chunks)
        gw = empty if gw is None else gw
        gb = empty if gb is None else gb
    return gi, gw, gb
