"""CUDA softmax and log_softmax along one dim: a fused row kernel.

When the softmax dim is the fastest moving one in memory (stride 1), one block takes
one row: each thread loads its share of the row into registers (16-byte vector loads
when the row is aligned), the block reduces the maximum and then the sum of
``exp(x - max)`` (warp shuffles, then shared memory), and each thread writes its
outputs, so the row is read once and written once. Rows too long for the registers
(more than 8 vectors per thread of a 1024-thread block) take the same path reading
the row three times. Any other layout runs one thread per row, which keeps the loads
of neighbouring threads coalesced when the softmax dim is not the fastest moving one.
float16/bfloat16 compute in float, as torch does.
"""

from __future__ import annotations

import ctypes

from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, _nvrtc, streams
from refimpl.cuda._reduce import _ACC, PRELUDE, _converter, _decode
from refimpl.cuda._reduce_scan import _coalesce_pairs

MAX_DIMS = 8
_KS = (1, 2, 4, 8)

_BODY = r"""
struct SGeo { long long rows, n, in_step, out_step; int kdim, vec;
  long long ksize[8], kin[8], kout[8]; };
struct __align__(VEC * sizeof(IN)) VecT { IN v[VEC]; };
struct __align__(VEC * sizeof(OUT)) VecO { OUT v[VEC]; };
DI void offs(const SGeo& g, long long l, long long& xi, long long& oi) {
  xi = 0; oi = 0;
  for (int k = g.kdim - 1; k >= 0; --k) {
    long long c = k ? l % g.ksize[k] : l; l /= g.ksize[k];
    xi += c * g.kin[k]; oi += c * g.kout[k]; } }
DI ACC mx(ACC a, ACC b) { return (b > a || b != b) ? b : a; }
template<bool MAX> DI ACC block_all(ACC v, ACC* sh) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    ACC o = __shfl_xor_sync(0xffffffffu, v, d); v = MAX ? mx(v, o) : v + o; }
  int warps = blockDim.x >> 5, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (warps > 1) {
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < warps ? sh[lane] : (MAX ? NEG_INF : (ACC)0);
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      ACC o = __shfl_xor_sync(0xffffffffu, v, d); v = MAX ? mx(v, o) : v + o; }
  }
  return v; }
DI OUT finish(ACC v, ACC m, ACC s) {
  return LOG ? to_out(v - m - r_log(s)) : to_out(r_exp(v - m) / s); }

template<int K> DI void rows(const IN* x, OUT* out, const SGeo& g) {
  __shared__ ACC sh[32];
  long long xi, oi;
  offs(g, blockIdx.x, xi, oi);
  const IN* xr = x + xi; OUT* orow = out + oi;
  const long long n = g.n, T = blockDim.x, t = threadIdx.x;
  ACC m = NEG_INF, s = 0;
  if (K > 0) {
    ACC v[K > 0 ? K : 1][VEC];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      long long b = ((long long)k * T + t) * VEC;
      if (g.vec && b + VEC <= n) {
        VecT q = *(const VecT*)(xr + b);
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[k][j] = r_load(q.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[k][j] = b + j < n ? r_load(xr[(b + j) * g.in_step]) : NEG_INF;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = mx(m, v[k][j]);
    }
    m = block_all<true>(m, sh);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      long long b = ((long long)k * T + t) * VEC;
#pragma unroll
      for (int j = 0; j < VEC; ++j) if (b + j < n) s += r_exp(v[k][j] - m);
    }
    s = block_all<false>(s, sh);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      long long b = ((long long)k * T + t) * VEC;
      if (g.vec && g.out_step == 1 && b + VEC <= n) {
        VecO q;
#pragma unroll
        for (int j = 0; j < VEC; ++j) q.v[j] = finish(v[k][j], m, s);
        *(VecO*)(orow + b) = q;
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          if (b + j < n) orow[(b + j) * g.out_step] = finish(v[k][j], m, s);
      }
    }
  } else {
    for (long long i = t; i < n; i += T) m = mx(m, r_load(xr[i * g.in_step]));
    m = block_all<true>(m, sh);
    for (long long i = t; i < n; i += T) s += r_exp(r_load(xr[i * g.in_step]) - m);
    s = block_all<false>(s, sh);
    for (long long i = t; i < n; i += T)
      orow[i * g.out_step] = finish(r_load(xr[i * g.in_step]), m, s);
  } }
extern "C" __global__ void __launch_bounds__(1024) row_kernel(const IN* x, OUT* o, SGeo g) {
  rows<CACHE>(x, o, g); }
extern "C" __global__ void lines(const IN* x, OUT* out, SGeo g) {
  long long l = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= g.rows) return;
  long long xi, oi;
  offs(g, l, xi, oi);
  ACC m = NEG_INF, s = 0;
  for (long long i = 0; i < g.n; ++i) m = mx(m, r_load(x[xi + i * g.in_step]));
  for (long long i = 0; i < g.n; ++i) s += r_exp(r_load(x[xi + i * g.in_step]) - m);
  for (long long i = 0; i < g.n; ++i)
    out[oi + i * g.out_step] = finish(r_load(x[xi + i * g.in_step]), m, s); }
"""


class _SGeo(ctypes.Structure):
    _fields_ = [("rows", ctypes.c_longlong), ("n", ctypes.c_longlong),
                ("in_step", ctypes.c_longlong), ("out_step", ctypes.c_longlong),
                ("kdim", ctypes.c_int), ("vec", ctypes.c_int),
                ("ksize", ctypes.c_longlong * MAX_DIMS), ("kin", ctypes.c_longlong * MAX_DIMS),
                ("kout", ctypes.c_longlong * MAX_DIMS)]


# the launch layout of row_kernel and lines: x, out, and the SGeo struct's bytes
_FMT = f"PP{ctypes.sizeof(_SGeo)}s"
_sources: dict[tuple, str] = {}


def _source(name: str, log: bool, cache: int) -> str:
    """The kernels for dtype ``name``; ``row_kernel`` keeps ``cache`` vectors per thread
    in registers (0: it reads the row three times)."""
    src = _sources.get((name, log, cache))
    if src is None:
        acc = _ACC[name]
        neg_inf = "(-F_INF)" if acc == "float" else "(-D_INF)"
        ctype = _kernels._DTYPES[name][0]
        vec = max(1, 16 // _kernels._DTYPES[name][1])
        src = "".join([
            _kernels._PRELUDE, PRELUDE, f"typedef {ctype} IN;\ntypedef {ctype} OUT;\n",
            f"typedef {acc} ACC;\n#define VEC {vec}\n#define NEG_INF {neg_inf}\n",
            f"#define LOG {int(log)}\n#define CACHE {cache}\n", _converter("to_out", name),
            f"DI ACC r_load(IN raw) {{ return (ACC)({_decode(name)}); }}\n", _BODY])
        src = _sources.setdefault((name, log, cache), src)
    return src


def softmax(x: Tensor, dim: int, log: bool) -> Tensor:
    """softmax (``log=False``) or log_softmax of the floating tensor ``x`` along ``dim``
    (already wrapped; 0 for a 0-dim tensor), as a new contiguous tensor."""
    out = Tensor._empty(x._shape, x.dtype, x.device)
    if x.numel() == 0:
        return out
    shape, stride, ostride = x._shape or (1,), x._stride or (1,), out._stride or (1,)
    dims = _coalesce_pairs([(shape[i], stride[i], ostride[i]) for i in range(len(shape))
                            if i != dim])
    if len(dims) > MAX_DIMS:
        raise NotImplementedError(f"CUDA softmax takes at most {MAX_DIMS} other dimensions "
                                  "after coalescing")
    g = _SGeo()
    g.n, g.in_step, g.out_step = shape[dim], stride[dim], ostride[dim]
    g.rows = x.numel() // shape[dim]
    g.kdim = len(dims)
    for k, (s, a, b) in enumerate(dims):
        g.ksize[k], g.kin[k], g.kout[k] = s, a, b
    itemsize = x.dtype.itemsize
    vec = max(1, 16 // itemsize)
    base = x._storage._data.ptr + x._offset * itemsize
    idx = x._storage._data.device_index
    if g.in_step == 1 or g.n == 1:
        g.in_step = 1
        g.vec = int(g.n % vec == 0 and base % (vec * itemsize) == 0
                    and all(a % vec == 0 and b % vec == 0 for _, a, b in dims))
        nvec = -(-g.n // vec)
        threads = max(32, min(1024, 1 << max(0, (-(-nvec // 2) - 1).bit_length())))
        per = -(-nvec // threads)
        k = next((k for k in _KS if k >= per), 0)
        name, src = "row_kernel", _source(x.dtype.name, log, k)
        grid, block = (g.rows, 1, 1), (threads, 1, 1)
    else:
        name, src = "lines", _source(x.dtype.name, log, 0)
        grid, block = (-(-g.rows // 128), 1, 1), (128, 1, 1)
    fn = _nvrtc.get_function(src, name, idx)
    _driver.launch_packed(idx, fn, grid, block, _FMT,
                          (base, out._storage._data.ptr, bytes(g)),
                          streams.current_stream_handle(idx), 0, name)
    return out
