"""The CUDA kernels of the fused convolution and linear ops: im2col, col2im, bias and
layout passes (NVRTC), with the matrix products on cuBLAS (``_blas.gemm``).

Column layouts. The columns of a convolution hold, for each input channel ``c`` and
kernel offset ``k`` (row ``c*K + k``), the input value each output position ``l``
reads (zero where the window hangs over the padding). Two layouts are written:

* ``A``: (N, C*K, L), one matrix per batch element; the forward of an ungrouped
  convolution multiplies the weight (broadcast over the batch) by it in one batched
  GEMM that writes the output (N, C_out, L) directly.
* ``B``: (C*K, N*L), the batch folded into the columns; as rows ``c*K + k`` of a group
  are consecutive, group ``g`` is the row block (Cg*K, N*L) and one GEMM batched over
  the groups covers them all. Grouped forwards and every backward use it.

Small problems skip the columns: ``direct_fwd`` and ``direct_gi`` compute the output
and the input gradient with a thread per result element, ``direct_gw`` the weight
gradient with a block per element (its sum runs over the batch and every output
position: each thread sums every 256th product in order, and the threads' sums meet in
a fixed tree; a 2-d 3x3 kernel with many channel pairs takes a block per pair, see
``gw_tasks``), and ``small_mm`` does the linear layer's small products, bias included
(below ``DIRECT_MACS`` / ``SMALL_MM_MACS`` multiply-adds, where a GEMM call's host time
is the larger cost). A backward whose gradients all fit runs as one launch: ``direct_bw``
(the convolution's input, weight and bias gradients, one after the other; a
bias-gradient channel takes a block too) and ``small_mm_bw`` (the linear layer's; a
bias-gradient thread sums its column in order).
``direct_gi`` and ``direct_gw`` stay for backwards where only one of them fits.

Element type ``T`` is float16 / bfloat16 (2-byte words, arithmetic in float32), float32
or float64 (arithmetic in double). Sums run in a fixed order (the col2im gather visits
kernel offsets in order; the channel sums reduce a block in a fixed tree): no atomics,
results are reproducible. Every launch runs on the current stream of the tensor's device,
every buffer comes from the caching allocator, so the ops can be captured in CUDA graphs.
"""

from __future__ import annotations

import ctypes
import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._blas import dense_copy
from refimpl.cuda._pointwise import load_functions

_BLOCK = 256
_MAX_GRID = 1 << 16

_SOURCE = r"""
struct h16 { unsigned short x; };
struct b16 { unsigned short x; };
__device__ __forceinline__ float ld(h16 v) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x)); return f; }
__device__ __forceinline__ float ld(b16 v) { return __uint_as_float(((unsigned int)v.x) << 16); }
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ double ld(double v) { return v; }
template<class T> struct Acc { typedef float type; };
template<> struct Acc<double> { typedef double type; };
template<class T> __device__ __forceinline__ T st(typename Acc<T>::type v);
template<> __device__ __forceinline__ h16 st<h16>(float f) {
  h16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
template<> __device__ __forceinline__ b16 st<b16>(float f) {
  unsigned int u = __float_as_uint(f); b16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) { r.x = 0x7fc0; return r; }
  u += 0x7fffu + ((u >> 16) & 1u); r.x = (unsigned short)(u >> 16); return r; }
template<> __device__ __forceinline__ float st<float>(float v) { return v; }
template<> __device__ __forceinline__ double st<double>(double v) { return v; }

// Geometry of a convolution, spatial dims padded in front to three.
struct Geo {
  long long n, c;
  long long in[3];
  long long xs[5];   // input strides (batch, channel, d, h, w) in elements
  long long k[3], out[3], stride[3], pad[3], dil[3];
};

#define GRID_LOOP(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
    i < (n); i += (long long)gridDim.x * blockDim.x)

// The input index along dim d that output o reads at kernel offset k (outside
// [0, g.in[d]) where the window lies over the padding).
__device__ __forceinline__ long long tap_in(const Geo& g, int d, long long o, long long k) {
  return o * g.stride[d] - g.pad[d] + k * g.dil[d];
}

// The output index along dim d whose window reads input index i at kernel offset k:
// 1 with it in o; 0 when no output does; -1 when no later offset can (the walk stops).
__device__ __forceinline__ int tap_out(const Geo& g, int d, long long i, long long k,
                                       long long& o) {
  const long long t = i + g.pad[d] - k * g.dil[d];
  if (t < 0) return -1;
  if (t % g.stride[d]) return 0;
  o = t / g.stride[d];
  return o < g.out[d] ? 1 : 0;
}

// Calls f(k, l) for each kernel offset (k flat, in order) whose window reads input
// element (id, ih, iw), with l the flat index of that window's output: the walk that
// col2im and the input gradient share (their sums keep this order).
template<class F>
__device__ __forceinline__ void for_taps_reading(const Geo& g, long long id, long long ih,
                                                 long long iw, F f) {
  for (long long kd = 0; kd < g.k[0]; ++kd) {
    long long od;
    const int h0 = tap_out(g, 0, id, kd, od);
    if (h0 < 0) break;
    if (!h0) continue;
    for (long long kh = 0; kh < g.k[1]; ++kh) {
      long long oh;
      const int h1 = tap_out(g, 1, ih, kh, oh);
      if (h1 < 0) break;
      if (!h1) continue;
      for (long long kw = 0; kw < g.k[2]; ++kw) {
        long long ow;
        const int h2 = tap_out(g, 2, iw, kw, ow);
        if (h2 < 0) break;
        if (!h2) continue;
        f((kd * g.k[1] + kh) * g.k[2] + kw, (od * g.out[1] + oh) * g.out[2] + ow);
      }
    }
  }
}

template<class T>
__device__ void im2col_body(const T* __restrict__ x, T* __restrict__ cols, Geo g,
                            int layout_b) {
  const long long L = g.out[0] * g.out[1] * g.out[2];
  const long long total = g.n * g.c * g.k[0] * g.k[1] * g.k[2] * L;
  GRID_LOOP(e, total) {
    long long r = e;
    const long long ow = r % g.out[2]; r /= g.out[2];
    const long long oh = r % g.out[1]; r /= g.out[1];
    const long long od = r % g.out[0]; r /= g.out[0];
    long long b = 0;
    if (layout_b) { b = r % g.n; r /= g.n; }
    const long long kw = r % g.k[2]; r /= g.k[2];
    const long long kh = r % g.k[1]; r /= g.k[1];
    const long long kd = r % g.k[0]; r /= g.k[0];
    long long ch = r;
    if (!layout_b) { ch = r % g.c; b = r / g.c; }
    const long long id = tap_in(g, 0, od, kd);
    const long long ih = tap_in(g, 1, oh, kh);
    const long long iw = tap_in(g, 2, ow, kw);
    T v{};
    if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
      v = x[b * g.xs[0] + ch * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]];
    cols[e] = v;
  }
}

// One thread per input element (contiguous N, C, D, H, W): the sum of the columns that
// read it, kernel offsets in order.
template<class T>
__device__ void col2im_body(const T* __restrict__ cols, T* __restrict__ out, Geo g,
                            int layout_b) {
  typedef typename Acc<T>::type A;
  const long long L = g.out[0] * g.out[1] * g.out[2];
  const long long K = g.k[0] * g.k[1] * g.k[2];
  const long long total = g.n * g.c * g.in[0] * g.in[1] * g.in[2];
  GRID_LOOP(e, total) {
    long long r = e;
    const long long iw = r % g.in[2]; r /= g.in[2];
    const long long ih = r % g.in[1]; r /= g.in[1];
    const long long id = r % g.in[0]; r /= g.in[0];
    const long long ch = r % g.c;
    const long long b = r / g.c;
    A acc = 0;
    for_taps_reading(g, id, ih, iw, [&](long long k, long long l) {
      const long long row = ch * K + k;
      acc += ld(cols[layout_b ? (row * g.n + b) * L + l : (b * g.c * K + row) * L + l]);
    });
    out[e] = st<T>(acc);
  }
}

// dst[e] = src[e] (or 0 without src) + bias[(e / inner) % channels]
template<class T>
__device__ void bias_body(T* dst, const T* src, const T* __restrict__ bias,
                          long long channels, long long inner, long long total) {
  typedef typename Acc<T>::type A;
  GRID_LOOP(e, total) {
    A v = src ? ld(src[e]) : (A)0;
    dst[e] = st<T>(v + ld(bias[(e / inner) % channels]));
  }
}

// dst (B, A, inner) from src (A, B, inner), plus bias[a] when given
template<class T>
__device__ void swap01_body(const T* __restrict__ src, T* __restrict__ dst,
                            const T* __restrict__ bias, long long na, long long nb,
                            long long inner) {
  const long long total = na * nb * inner;
  GRID_LOOP(e, total) {
    const long long l = e % inner;
    const long long r = e / inner;
    const long long a = r % na;
    const long long b = r / na;
    const T v = src[(a * nb + b) * inner + l];
    dst[e] = bias ? st<T>(ld(v) + ld(bias[a])) : v;
  }
}

// out[c] = sum over (o, l) of g[o, c, l] for g (outer, channels, inner): one block per
// channel, a fixed-order tree over the block.
template<class T>
__device__ void channel_sum_body(const T* __restrict__ g, T* __restrict__ out,
                                 long long outer, long long channels, long long inner) {
  typedef typename Acc<T>::type A;
  __shared__ A sh[256];
  const long long count = outer * inner;
  for (long long c = blockIdx.x; c < channels; c += gridDim.x) {
    A acc = 0;
    for (long long i = threadIdx.x; i < count; i += blockDim.x) {
      const long long o = i / inner;
      acc += ld(g[(o * channels + c) * inner + (i - o * inner)]);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[c] = st<T>(sh[0]);
    __syncthreads();
  }
}

// Direct convolution for small problems (a thread per output or input-gradient element,
// a block per weight-gradient element, sums in a fixed order, no columns and no GEMM): the weight w is dense (C_out, Cg, kd, kh, kw), the
// output and gradients dense, x read through its strides.
template<class T>
__device__ void direct_fwd_body(const T* __restrict__ x, const T* __restrict__ w,
                                const T* __restrict__ bias, T* __restrict__ out, Geo g,
                                long long cout, long long groups) {
  typedef typename Acc<T>::type A;
  const long long L = g.out[0] * g.out[1] * g.out[2];
  const long long K = g.k[0] * g.k[1] * g.k[2];
  const long long cg = g.c / groups, og = cout / groups;
  GRID_LOOP(e, g.n * cout * L) {
    const long long l = e % L;
    const long long co = (e / L) % cout;
    const long long b = e / (L * cout);
    const long long ow = l % g.out[2], oh = (l / g.out[2]) % g.out[1];
    const long long od = l / (g.out[2] * g.out[1]);
    const T* xb = x + b * g.xs[0] + (co / og) * cg * g.xs[1];
    const T* wr = w + co * cg * K;
    A acc = 0;
    for (long long ci = 0; ci < cg; ++ci) {
      for (long long kd = 0; kd < g.k[0]; ++kd) {
        const long long id = tap_in(g, 0, od, kd);
        if (id < 0 || id >= g.in[0]) continue;
        for (long long kh = 0; kh < g.k[1]; ++kh) {
          const long long ih = tap_in(g, 1, oh, kh);
          if (ih < 0 || ih >= g.in[1]) continue;
          for (long long kw = 0; kw < g.k[2]; ++kw) {
            const long long iw = tap_in(g, 2, ow, kw);
            if (iw < 0 || iw >= g.in[2]) continue;
            acc += ld(xb[ci * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]])
                 * ld(wr[(ci * g.k[0] + kd) * g.k[1] * g.k[2] + kh * g.k[2] + kw]);
          }
        }
      }
    }
    if (bias) acc += ld(bias[co]);
    out[e] = st<T>(acc);
  }
}

// The input gradient: per input element, the output positions whose windows read it
// (kernel offsets in order, like col2im), at each of them the group's output channels in
// order, times their weights (the walk over the offsets runs once, not once a channel).
// (g.xs is not read: the input gradient is dense, element e of it is computed.)
template<class T>
__device__ typename Acc<T>::type direct_gi_at(long long e, const T* __restrict__ grad,
                                              const T* __restrict__ w, const Geo& g,
                                              long long cout, long long groups) {
  typedef typename Acc<T>::type A;
  const long long L = g.out[0] * g.out[1] * g.out[2];
  const long long K = g.k[0] * g.k[1] * g.k[2];
  const long long cg = g.c / groups, og = cout / groups;
  long long r = e;
  const long long iw = r % g.in[2]; r /= g.in[2];
  const long long ih = r % g.in[1]; r /= g.in[1];
  const long long id = r % g.in[0]; r /= g.in[0];
  const long long ch = r % g.c;
  const long long b = r / g.c;
  const long long grp = ch / cg, ci = ch % cg;
  const T* gr = grad + (b * cout + grp * og) * L;  // output channel o at gr + o * L
  const T* wr = w + (grp * og * cg + ci) * K;      // ... and its weights at wr + o * cg * K
  A acc = 0;
  for_taps_reading(g, id, ih, iw, [&](long long k, long long l) {
    for (long long o = 0; o < og; ++o) acc += ld(gr[o * L + l]) * ld(wr[o * cg * K + k]);
  });
  return acc;
}

template<class T>
__device__ void direct_gi_body(const T* __restrict__ grad, const T* __restrict__ w,
                               T* __restrict__ gi, Geo g, long long cout, long long groups) {
  GRID_LOOP(e, g.n * g.c * g.in[0] * g.in[1] * g.in[2]) {
    gi[e] = st<T>(direct_gi_at<T>(e, grad, w, g, cout, groups));
  }
}

// The sum of v over the block's threads, combined in a fixed tree in shared memory (the
// same total, the same way, in every run); thread 0's result is the sum. blockDim.x is a
// power of two, and every thread of the block must call it.
template<class A>
__device__ A block_sum(A v) {
  __shared__ double raw[256];  // (room for 256 doubles: A is float or double)
  A* part = reinterpret_cast<A*>(raw);
  const unsigned t = threadIdx.x;
  part[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x >> 1; s; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    __syncthreads();
  }
  const A total = part[0];
  __syncthreads();  // (part is reused by the block's next sum)
  return total;
}

// The weight gradient of element e, thread `lane` of `lanes`: over the batch, and the
// output positions lane, lane + lanes, ... (in order), the output gradient times the
// input value its window reads. block_sum of the threads' parts gives the element.
template<class T>
__device__ typename Acc<T>::type direct_gw_part(long long e, long long lane, long long lanes,
                                                const T* __restrict__ grad,
                                                const T* __restrict__ x, const Geo& g,
                                                long long cout, long long groups) {
  typedef typename Acc<T>::type A;
  const long long L = g.out[0] * g.out[1] * g.out[2];
  const long long K = g.k[0] * g.k[1] * g.k[2];
  const long long cg = g.c / groups, og = cout / groups;
  const long long k = e % K;
  const long long ci = (e / K) % cg;
  const long long co = e / (K * cg);
  const long long kw = k % g.k[2], kh = (k / g.k[2]) % g.k[1], kd = k / (g.k[2] * g.k[1]);
  const long long ch = (co / og) * cg + ci;
  // the position p as (od, oh, ow), and the step of `lanes` positions in those digits
  const long long ow0 = lane % g.out[2], oh0 = (lane / g.out[2]) % g.out[1];
  const long long od0 = lane / (g.out[2] * g.out[1]);
  const long long dw = lanes % g.out[2], dh = (lanes / g.out[2]) % g.out[1];
  const long long dd = lanes / (g.out[2] * g.out[1]);
  A acc = 0;
  for (long long b = 0; b < g.n; ++b) {
    const T* gr = grad + (b * cout + co) * L;
    const T* xb = x + b * g.xs[0] + ch * g.xs[1];
    long long od = od0, oh = oh0, ow = ow0;
    for (long long p = lane; p < L; p += lanes) {
      const long long id = tap_in(g, 0, od, kd);
      const long long ih = tap_in(g, 1, oh, kh);
      const long long iw = tap_in(g, 2, ow, kw);
      if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
        acc += ld(gr[p]) * ld(xb[id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]]);
      ow += dw;  // p += lanes, digit by digit with carries
      if (ow >= g.out[2]) { ow -= g.out[2]; ++oh; }
      oh += dh;
      if (oh >= g.out[1]) { oh -= g.out[1]; ++od; }
      od += dd;
    }
  }
  return acc;
}

// The weight gradient of a 2-d 3x3 kernel, thread `lane` of `lanes`'s parts of the nine
// elements of channel pair `pair` (output channel, input channel) at once: each
// output-gradient value is read once for the nine offsets. Per element, the same products
// in the same order as direct_gw_part's (the batch, then positions lane, lane + lanes,
// ...), so block_sum of the parts gives the same bits.
template<class T>
__device__ void direct_gw33_parts(typename Acc<T>::type (&acc)[9], long long pair,
                                  long long lane, long long lanes,
                                  const T* __restrict__ grad, const T* __restrict__ x,
                                  const Geo& g, long long cout, long long groups) {
  const long long L = g.out[1] * g.out[2];  // (2-d: the leading dim of Geo has size 1)
  const long long cg = g.c / groups, og = cout / groups;
  const long long co = pair / cg, ci = pair % cg;
  const long long ch = (co / og) * cg + ci;
#pragma unroll
  for (int j = 0; j < 9; ++j) acc[j] = 0;
  const long long ow0 = lane % g.out[2], oh0 = (lane / g.out[2]) % g.out[1];
  const long long dw = lanes % g.out[2], dh = (lanes / g.out[2]) % g.out[1];
  for (long long b = 0; b < g.n; ++b) {
    const T* gr = grad + (b * cout + co) * L;
    const T* xb = x + b * g.xs[0] + ch * g.xs[1];
    long long oh = oh0, ow = ow0;
    for (long long p = lane; p < L; p += lanes) {
      const auto gv = ld(gr[p]);
      const long long ih0 = tap_in(g, 1, oh, 0), iw0 = tap_in(g, 2, ow, 0);
#pragma unroll
      for (int kh = 0; kh < 3; ++kh) {
        const long long ih = ih0 + kh * g.dil[1];
        if (ih < 0 || ih >= g.in[1]) continue;
#pragma unroll
        for (int kw = 0; kw < 3; ++kw) {
          const long long iw = iw0 + kw * g.dil[2];
          if (iw >= 0 && iw < g.in[2])
            acc[kh * 3 + kw] += gv * ld(xb[ih * g.xs[3] + iw * g.xs[4]]);
        }
      }
      ow += dw;  // p += lanes, digit by digit (a row past the last ends the loop)
      if (ow >= g.out[2]) { ow -= g.out[2]; ++oh; }
      oh += dh;
    }
  }
}

// Thread `lane`'s part of channel c's sum of dense (outer, channels, inner) g: over
// outer, the elements lane, lane + lanes, ... of the channel's inner run (in order).
template<class T>
__device__ typename Acc<T>::type channel_sum_part(long long c, long long lane,
                                                  long long lanes, const T* __restrict__ g,
                                                  long long outer, long long channels,
                                                  long long inner) {
  typename Acc<T>::type acc = 0;
  for (long long o = 0; o < outer; ++o) {
    const T* p = g + (o * channels + c) * inner;
    for (long long i = lane; i < inner; i += lanes) acc += ld(p[i]);
  }
  return acc;
}

// The weight gradient, a block per element; with `pairs3x3` (a 2-d 3x3 kernel) a block
// per channel pair, its nine elements at once.
template<class T>
__device__ void direct_gw_body(const T* __restrict__ grad, const T* __restrict__ x,
                               T* __restrict__ gw, Geo g, long long cout, long long groups,
                               int pairs3x3) {
  if (pairs3x3) {
    const long long pairs = cout * (g.c / groups);
    for (long long pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
      typename Acc<T>::type acc[9];
      direct_gw33_parts<T>(acc, pair, threadIdx.x, blockDim.x, grad, x, g, cout, groups);
#pragma unroll
      for (int j = 0; j < 9; ++j) {
        const auto v = block_sum(acc[j]);
        if (!threadIdx.x) gw[pair * 9 + j] = st<T>(v);
      }
    }
    return;
  }
  const long long nw = cout * (g.c / groups) * g.k[0] * g.k[1] * g.k[2];
  for (long long e = blockIdx.x; e < nw; e += gridDim.x) {
    const auto v = block_sum(direct_gw_part<T>(e, threadIdx.x, blockDim.x, grad, x, g,
                                               cout, groups));
    if (!threadIdx.x) gw[e] = st<T>(v);
  }
}

// A small convolution's backward in one launch: the input gradient's elements (a thread
// each), then the weight gradient's and the bias gradient's (a block each); each part is
// skipped when its pointer is null. The Geo is the input's (shape and strides).
template<class T>
__device__ void direct_bw_body(const T* __restrict__ grad, const T* __restrict__ x,
                               const T* __restrict__ w, T* __restrict__ gi,
                               T* __restrict__ gw, T* __restrict__ gb, Geo g, long long cout,
                               long long groups, int pairs3x3) {
  if (gi) {
    GRID_LOOP(e, g.n * g.c * g.in[0] * g.in[1] * g.in[2]) {
      gi[e] = st<T>(direct_gi_at<T>(e, grad, w, g, cout, groups));
    }
  }
  if (gw) direct_gw_body<T>(grad, x, gw, g, cout, groups, pairs3x3);
  if (gb) {
    const long long L = g.out[0] * g.out[1] * g.out[2];
    for (long long c = blockIdx.x; c < cout; c += gridDim.x) {
      const auto v = block_sum(channel_sum_part<T>(c, threadIdx.x, blockDim.x, grad, g.n,
                                                   cout, L));
      if (!threadIdx.x) gb[c] = st<T>(v);
    }
  }
}

// Element e of a (rows, cols) product a @ b: the sum over p (in order) of a[i, p] * b[p, j].
template<class T>
__device__ typename Acc<T>::type small_mm_at(long long e, const T* __restrict__ a,
                                             const T* __restrict__ b, long long cols,
                                             long long inner, long long sa0, long long sa1,
                                             long long sb0, long long sb1) {
  typename Acc<T>::type acc = 0;
  const T* ar = a + (e / cols) * sa0;
  const T* bc = b + (e % cols) * sb1;
  for (long long p = 0; p < inner; ++p) acc += ld(ar[p * sa1]) * ld(bc[p * sb0]);
  return acc;
}

// A small matrix product, one thread per result element: c[i, j] = sum over p (in order)
// of a[i, p] * b[p, j], plus bias[j] when given; a and b read through their strides, c
// dense (rows, cols). The linear layer's products below the size limit.
template<class T>
__device__ void small_mm_body(const T* __restrict__ a, const T* __restrict__ b,
                              const T* __restrict__ bias, T* __restrict__ c, long long rows,
                              long long cols, long long inner, long long sa0, long long sa1,
                              long long sb0, long long sb1) {
  typedef typename Acc<T>::type A;
  GRID_LOOP(e, rows * cols) {
    A acc = small_mm_at<T>(e, a, b, cols, inner, sa0, sa1, sb0, sb1);
    if (bias) acc += ld(bias[e % cols]);
    c[e] = st<T>(acc);
  }
}

// A small linear layer's backward in one launch, for the output gradient g (m, n), the
// input x (m, k) and the weight w (n, k), all read through their strides: the input
// gradient g @ w, then the weight gradient g^T @ x (small_mm's sums), then the bias
// gradient, g's column sums in row order (each segment absent when its pointer is null).
template<class T>
__device__ void small_mm_bw_body(const T* __restrict__ g, const T* __restrict__ x,
                                 const T* __restrict__ w, T* __restrict__ gi,
                                 T* __restrict__ gw, T* __restrict__ gb, long long m,
                                 long long n, long long k, long long gs0, long long gs1,
                                 long long xs0, long long xs1, long long ws0,
                                 long long ws1) {
  typedef typename Acc<T>::type A;
  const long long ni = gi ? m * k : 0, nw = gw ? n * k : 0, nb = gb ? n : 0;
  GRID_LOOP(e, ni + nw + nb) {
    if (e < ni) {
      gi[e] = st<T>(small_mm_at<T>(e, g, w, k, n, gs0, gs1, ws0, ws1));
    } else if (e < ni + nw) {
      gw[e - ni] = st<T>(small_mm_at<T>(e - ni, g, x, k, m, gs1, gs0, xs0, xs1));
    } else {
      const long long o = e - ni - nw;
      A acc = 0;
      for (long long p = 0; p < m; ++p) acc += ld(g[p * gs0 + o * gs1]);
      gb[o] = st<T>(acc);
    }
  }
}

#define KERNELS(S, T) \
extern "C" __global__ void small_mm_##S(const T* a, const T* b, const T* bias, T* c, \
    long long rows, long long cols, long long inner, long long sa0, long long sa1, \
    long long sb0, long long sb1) { \
  small_mm_body<T>(a, b, bias, c, rows, cols, inner, sa0, sa1, sb0, sb1); } \
extern "C" __global__ void direct_fwd_##S(const T* x, const T* w, const T* bias, T* out, \
    Geo g, long long cout, long long groups) { \
  direct_fwd_body<T>(x, w, bias, out, g, cout, groups); } \
extern "C" __global__ void direct_gi_##S(const T* grad, const T* w, T* gi, Geo g, \
    long long cout, long long groups) { direct_gi_body<T>(grad, w, gi, g, cout, groups); } \
extern "C" __global__ void direct_gw_##S(const T* grad, const T* x, T* gw, Geo g, \
    long long cout, long long groups, int pairs3x3) { \
  direct_gw_body<T>(grad, x, gw, g, cout, groups, pairs3x3); } \
extern "C" __global__ void direct_bw_##S(const T* grad, const T* x, const T* w, T* gi, \
    T* gw, T* gb, Geo g, long long cout, long long groups, int pairs3x3) { \
  direct_bw_body<T>(grad, x, w, gi, gw, gb, g, cout, groups, pairs3x3); } \
extern "C" __global__ void small_mm_bw_##S(const T* g, const T* x, const T* w, T* gi, \
    T* gw, T* gb, long long m, long long n, long long k, long long gs0, long long gs1, \
    long long xs0, long long xs1, long long ws0, long long ws1) { \
  small_mm_bw_body<T>(g, x, w, gi, gw, gb, m, n, k, gs0, gs1, xs0, xs1, ws0, ws1); } \
extern "C" __global__ void im2col_##S(const T* x, T* cols, Geo g, int layout_b) { \
  im2col_body<T>(x, cols, g, layout_b); } \
extern "C" __global__ void col2im_##S(const T* cols, T* out, Geo g, int layout_b) { \
  col2im_body<T>(cols, out, g, layout_b); } \
extern "C" __global__ void bias_##S(T* dst, const T* src, const T* bias, long long channels, \
    long long inner, long long total) { bias_body<T>(dst, src, bias, channels, inner, total); } \
extern "C" __global__ void swap01_##S(const T* src, T* dst, const T* bias, long long na, \
    long long nb, long long inner) { swap01_body<T>(src, dst, bias, na, nb, inner); } \
extern "C" __global__ void channel_sum_##S(const T* g, T* out, long long outer, \
    long long channels, long long inner) { channel_sum_body<T>(g, out, outer, channels, inner); }
KERNELS(f16, h16)
KERNELS(bf16, b16)
KERNELS(f32, float)
KERNELS(f64, double)
"""

_SUFFIX = {D.float16: "f16", D.bfloat16: "bf16", D.float32: "f32", D.float64: "f64"}
KERNEL_DTYPES = frozenset(_SUFFIX)
_NAMES = ("im2col", "col2im", "bias", "swap01", "channel_sum", "direct_fwd", "direct_gi",
          "direct_gw", "direct_bw", "small_mm", "small_mm_bw")
_functions: dict = {}  # (name, dtype, device index) -> (kernel handle, full name)


class _Geo(ctypes.Structure):
    """The CUDA ``Geo`` (25 long longs, 200 bytes): the kernels take it by value, so a
    launch passes its bytes, code ``200s`` in the launch formats (see ``_geo``). ``s``
    has no alignment of its own; every signature puts the Geo after pointers, at an
    offset aligned to 8 as the C struct's is."""
    _fields_ = [("n", ctypes.c_longlong), ("c", ctypes.c_longlong),
                ("inp", ctypes.c_longlong * 3), ("xs", ctypes.c_longlong * 5),
                ("k", ctypes.c_longlong * 3), ("out", ctypes.c_longlong * 3),
                ("stride", ctypes.c_longlong * 3), ("pad", ctypes.c_longlong * 3),
                ("dil", ctypes.c_longlong * 3)]


def _ptr(t: Tensor | None) -> int:
    """The address of ``t``'s first element (0 for None)."""
    return 0 if t is None else t._storage._data.ptr + t._offset * t.dtype.itemsize


def _launch(name: str, t: Tensor, total: int, fmt: str, *args, per_block: bool = False) -> None:
    """Launch kernel ``name`` for ``t``'s dtype on its device's current stream: a grid
    over ``total`` elements (or ``total`` blocks with ``per_block``). ``fmt`` spells the
    kernel's parameters as ``_driver.ParamLayout`` does (``P`` pointer, ``q`` long long,
    ``i`` int, ``200s`` a Geo) and ``args`` are plain values; the dtype changes only
    what the pointers point to, so one format serves every instance of a kernel."""
    index = t._storage._data.device_index
    key = (name, t.dtype, index)
    entry = _functions.get(key)
    if entry is None:
        full = tuple(f"{n}_{_SUFFIX[t.dtype]}" for n in _NAMES)
        fns = load_functions(_SOURCE, full, index)
        for n, f, full_name in zip(_NAMES, fns, full):
            _functions[(n, t.dtype, index)] = (f, full_name)
        entry = _functions[key]
    fn, full_name = entry
    grid = min(max(total if per_block else -(-total // _BLOCK), 1), _MAX_GRID)
    _driver.launch_packed(index, fn, (grid, 1, 1), (_BLOCK, 1, 1), fmt, args,
                          streams.current_stream_handle(index), 0, full_name)


def view(t: Tensor, shape, stride, offset: int = 0) -> Tensor:
    """A raw view of ``t``'s storage (no autograd, no version tracking) for an operand."""
    return Tensor._make(t._storage, shape, stride, t._offset + offset, t.dtype)


def dense(t: Tensor) -> Tensor:
    """``t`` itself when contiguous, else a raw contiguous copy."""
    return t if t.is_contiguous() else dense_copy(t)


def _prod(xs) -> int:
    r = 1
    for v in xs:
        r *= int(v)
    return r


_GEOS: dict = {}  # the call's geometry (as tuples) -> its _Geo's bytes


def _geo(x_shape, x_stride, kernel, out_sizes, stride, pads, dilation) -> bytes:
    """The bytes of the geometry struct (``_new_geo``), as a launch passes it by value
    (kept per geometry: a training step asks for the same few again and again, and a
    launch packs the bytes as they are). ``_Geo.from_buffer_copy`` reads them back."""
    key = (x_shape, x_stride, *kernel, -1, *out_sizes, -1, *stride, -1,
           *[p for pair in pads for p in pair], -1, *dilation)
    g = _GEOS.get(key)
    if g is None:
        if len(_GEOS) > 256:
            _GEOS.clear()
        g = _GEOS[key] = bytes(_new_geo(x_shape, x_stride, kernel, out_sizes, stride,
                                        pads, dilation))
    return g


def _new_geo(x_shape, x_stride, kernel, out_sizes, stride, pads, dilation) -> _Geo:
    """The geometry struct, spatial dims padded in front to three."""
    lead = 3 - len(kernel)
    g = _Geo()
    g.n, g.c = int(x_shape[0]), int(x_shape[1])
    g.inp[:] = [1] * lead + [int(s) for s in x_shape[2:]]
    g.xs[:] = [int(x_stride[0]), int(x_stride[1])] + [0] * lead + [int(s) for s in x_stride[2:]]
    g.k[:] = [1] * lead + [int(k) for k in kernel]
    g.out[:] = [1] * lead + [int(o) for o in out_sizes]
    g.stride[:] = [1] * lead + [int(s) for s in stride]
    g.pad[:] = [0] * lead + [int(p[0]) for p in pads]
    g.dil[:] = [1] * lead + [int(d) for d in dilation]
    return g


def im2col(x: Tensor, kernel, out_sizes, stride, pads, dilation, layout_b: bool) -> Tensor:
    """The columns of ``x`` (any strides): (N, C*K, L) in layout A, (C*K, N*L) in B."""
    batch, c = x._shape[:2]
    k, length = c * _prod(kernel), _prod(out_sizes)
    shape = (k, batch * length) if layout_b else (batch, k, length)
    cols = Tensor._empty(shape, x.dtype, x.device)
    total = batch * k * length
    if total:
        g = _geo(x._shape, x._stride, kernel, out_sizes, stride, pads, dilation)
        _launch("im2col", x, total, "PP200si", _ptr(x), _ptr(cols), g, int(layout_b))
    return cols


def col2im(cols: Tensor, x_shape, kernel, out_sizes, stride, pads, dilation,
           layout_b: bool) -> Tensor:
    """The input-shaped sum of the columns ``cols`` (layout A or B) over their windows."""
    out = Tensor._empty(tuple(x_shape), cols.dtype, cols.device)
    total = out.numel()
    if total:
        g = _geo(x_shape, out._stride, kernel, out_sizes, stride, pads, dilation)
        _launch("col2im", cols, total, "PP200si", _ptr(cols), _ptr(out), g, int(layout_b))
    return out


def add_bias(dst: Tensor, src: Tensor | None, bias: Tensor, inner: int) -> Tensor:
    """``dst = src + bias`` (``src`` may be ``dst``; without ``src``, ``dst = bias``) over
    contiguous (outer, channels, inner) tensors, the bias broadcast along the channels."""
    total = dst.numel()
    if total:
        bias = dense(bias)
        _launch("bias", dst, total, "PPPqqq", _ptr(dst), _ptr(src), _ptr(bias), bias.numel(),
                inner, total)
    return dst


def swap01(src: Tensor, na: int, nb: int, inner: int, out_shape,
           bias: Tensor | None = None) -> Tensor:
    """The contiguous (nb, na, inner) transpose of contiguous (na, nb, inner) ``src``
    (shaped ``out_shape``), plus ``bias[a]`` when given."""
    out = Tensor._empty(tuple(out_shape), src.dtype, src.device)
    total = na * nb * inner
    if total:
        if bias is not None:
            bias = dense(bias)
        _launch("swap01", src, total, "PPPqqq", _ptr(src), _ptr(out), _ptr(bias), na, nb,
                inner)
    return out


def channel_sum(g: Tensor, outer: int, channels: int, inner: int) -> Tensor:
    """(channels,) sums of contiguous (outer, channels, inner) ``g`` over outer and inner."""
    out = Tensor._empty((channels,), g.dtype, g.device)
    if channels:
        _launch("channel_sum", g, channels, "PPqqq", _ptr(g), _ptr(out), outer, channels,
                inner, per_block=True)
    return out


# -- direct convolution of small problems ------------------------------------------------
# Below these sizes a convolution's three parts (im2col, GEMM, bias) cost more host time
# than the arithmetic takes on the device: one direct kernel does the whole product.
# (Multiply-adds of the result, and the length of a weight-gradient element's sum.)
# Measured on an H200, configurations interleaved in one process
# (bench/results/h200/direct_limits.txt): up to 2**26 multiply-adds the direct kernels
# shorten the bench-size training steps (the CNN's by 10%), and leave the test sizes as
# they were. A weight-gradient sum is a block's (256 threads); up to 2**16 products each
# thread sums at most 256 of them.
DIRECT_MACS = 1 << 26
DIRECT_GW_SUM = 1 << 16


def direct_fits(results: int, per_result: int) -> bool:
    """Whether a direct kernel takes ``results`` outputs of ``per_result`` products each."""
    return results * per_result <= DIRECT_MACS


def direct_forward(x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor, out_sizes, stride,
                   pads, dilation, groups: int) -> Tensor:
    """``out`` (dense (N, C_out, *out_sizes)) = the convolution of ``x`` (any strides) with
    the dense weight ``w``, plus ``bias``, in one kernel."""
    kernel = list(w._shape[2:])
    g = _geo(x._shape, x._stride, kernel, out_sizes, stride, pads, dilation)
    _launch("direct_fwd", x, out.numel(), "PPPP200sqq", _ptr(x), _ptr(w), _ptr(bias),
            _ptr(out), g, w._shape[0], groups)
    return out


def direct_grad_input(grad: Tensor, w: Tensor, x_shape, out_sizes, stride, pads, dilation,
                      groups: int) -> Tensor:
    """The input gradient (dense, ``x_shape``) for the dense output gradient ``grad``."""
    gi = Tensor._empty(tuple(x_shape), grad.dtype, grad.device)
    kernel = list(w._shape[2:])
    g = _geo(gi._shape, gi._stride, kernel, out_sizes, stride, pads, dilation)
    _launch("direct_gi", gi, gi.numel(), "PPP200sqq", _ptr(grad), _ptr(w), _ptr(gi), g,
            w._shape[0], groups)
    return gi


def direct_grad_weight(grad: Tensor, x: Tensor, w_shape, out_sizes, stride, pads, dilation,
                       groups: int) -> Tensor:
    """The weight gradient (dense, ``w_shape``) for the dense output gradient ``grad`` and
    the input ``x`` (any strides)."""
    gw = Tensor._empty(tuple(w_shape), grad.dtype, grad.device)
    kernel = list(w_shape[2:])
    g = _geo(x._shape, x._stride, kernel, out_sizes, stride, pads, dilation)
    pairs3x3, tasks = gw_tasks(w_shape)
    _launch("direct_gw", gw, tasks, "PPP200sqqi", _ptr(grad), _ptr(x), _ptr(gw), g,
            w_shape[0], groups, pairs3x3, per_block=True)
    return gw


# A 2-d 3x3 weight gradient takes a block per channel pair (its nine elements at once,
# each output-gradient value read once for them) when there are at least this many
# pairs: two blocks per SM of an H100/H200. Fewer pairs keep a block per element, which
# spreads the work over nine times as many blocks. The elements' sums are the same
# either way (the same products in the same order, joined in the same tree).
GW_PAIRS = 256


def gw_tasks(w_shape) -> tuple[int, int]:
    """(1 for a block per channel pair of a 3x3 kernel, else 0; the blocks' tasks) of the
    weight gradient of weight shape ``w_shape``."""
    pairs = w_shape[0] * w_shape[1]
    if len(w_shape) == 4 and w_shape[2] == w_shape[3] == 3 and pairs >= GW_PAIRS:
        return 1, pairs
    return 0, pairs * math.prod(w_shape[2:])


def direct_backward(grad: Tensor, x: Tensor, w: Tensor, mask, out_sizes, stride, pads,
                    dilation, groups: int) -> tuple:
    """(input, weight, bias) gradients of a small convolution in one ``direct_bw`` launch,
    None for those ``mask`` does not ask for; ``grad`` and ``w`` dense, ``x`` any strides.
    An input-gradient element takes a thread, a weight-gradient element or a bias-gradient
    channel a block."""
    dev, dt = grad._storage.device, grad.dtype
    cout = w._shape[0]
    gi = Tensor._empty(x._shape, dt, dev) if mask[0] else None
    gw = Tensor._empty(w._shape, dt, dev) if mask[1] else None
    gb = Tensor._empty((cout,), dt, dev) if mask[2] else None
    # blocks: enough for a thread per input-gradient element, and one per weight- or
    # bias-gradient element (the kernel loops over each part with all of its blocks)
    pairs3x3, tasks = gw_tasks(w._shape)
    blocks = max(-(-gi.numel() // _BLOCK) if gi is not None else 0,
                 tasks if gw is not None else 0, cout if gb is not None else 0)
    if blocks:
        g = _geo(x._shape, x._stride, list(w._shape[2:]), out_sizes, stride, pads, dilation)
        _launch("direct_bw", grad, blocks, "PPPPPP200sqqi", _ptr(grad), _ptr(x), _ptr(w),
                _ptr(gi), _ptr(gw), _ptr(gb), g, cout, groups, pairs3x3, per_block=True)
    return gi, gw, gb


# Matrix products of at most this many multiply-adds, and sums of at most this length,
# run as one small_mm kernel rather than a cuBLAS call (whose host time is the larger;
# measured with DIRECT_MACS).
SMALL_MM_MACS = 1 << 24
SMALL_MM_INNER = 2048


def small_mm_fits(rows: int, cols: int, inner: int) -> bool:
    """Whether ``small_mm`` takes a (rows, inner) @ (inner, cols) product."""
    return inner <= SMALL_MM_INNER and rows * cols * inner <= SMALL_MM_MACS


def small_mm(out: Tensor, a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """``out`` (dense, 2-d) = ``a @ b`` (+ ``bias`` along the columns), 2-d operands of any
    strides, in one kernel."""
    rows, cols = out._shape
    inner = a._shape[1]
    if rows * cols:
        if bias is not None:
            bias = dense(bias)
        _launch("small_mm", out, rows * cols, "PPPPqqqqqqq", _ptr(a), _ptr(b), _ptr(bias),
                _ptr(out), rows, cols, inner, *a._stride, *b._stride)
    return out


def small_mm_backward(grad: Tensor, x: Tensor, w: Tensor, mask) -> tuple:
    """(input, weight, bias) gradients of a small linear layer ``x @ w.T + b`` in one
    ``small_mm_bw`` launch, None for those ``mask`` does not ask for; ``grad`` (m, n),
    ``x`` (m, k) and ``w`` (n, k) of any strides. The bias gradient is each column's sum
    in row order (one thread a column)."""
    dev, dt = grad._storage.device, grad.dtype
    (m, n), k = grad._shape, x._shape[1]
    gi = Tensor._empty((m, k), dt, dev) if mask[0] else None
    gw = Tensor._empty((n, k), dt, dev) if mask[1] else None
    gb = Tensor._empty((n,), dt, dev) if mask[2] else None
    total = sum(t.numel() for t in (gi, gw, gb) if t is not None)
    if total:
        _launch("small_mm_bw", grad, total, "PPPPPPqqqqqqqqq", _ptr(grad), _ptr(x), _ptr(w),
                _ptr(gi), _ptr(gw), _ptr(gb), m, n, k, *grad._stride, *x._stride, *w._stride)
    return gi, gw, gb


def gemm(out: Tensor, a: Tensor, b: Tensor, beta=0) -> Tensor:
    """``_blas.gemm``, a batch of one taken as a plain 2-D product."""
    from refimpl.cuda import _blas

    if out.dim() == 3 and out._shape[0] == 1:
        out, a, b = (view(t, t._shape[1:], t._stride[1:]) for t in (out, a, b))
    return _blas.gemm(out, a, b, beta=beta)


__all__ = ["DIRECT_GW_SUM", "DIRECT_MACS", "KERNEL_DTYPES", "add_bias", "channel_sum", "col2im",
           "dense", "direct_backward", "direct_fits", "direct_forward", "direct_grad_input",
           "direct_grad_weight", "gemm", "im2col", "small_mm", "small_mm_backward",
           "small_mm_fits", "swap01", "view"]
