"""CUDA reductions from one template: any set of dims, strided inputs, any dtype.

A reduction is described by a :class:`Reducer`: a C *state* type with four rules,
``r_init`` (the identity), ``r_reduce`` (fold one value at its reduce index into a
state), ``r_combine`` (merge two states, in any order) and ``r_store`` (write a final
state to the outputs). :func:`reduce` generates NVRTC kernels from the reducer and the
dtypes at hand and runs them on the current stream of the input's device.

Semantics (those of torch's CUDA reductions):

* values are read from the input (dtype ``In``), converted to the *cast* dtype (the
  ``dtype=`` argument of sum/prod/mean/norm, rounding included), then to the
  accumulation type: ``float`` for float16/bfloat16/float32, ``double`` for float64,
  ``long long`` for bool and integers, complex of the part precision for complex;
* the reduce index handed to ``r_reduce`` is the row-major index over the reduced dims
  in their logical order (so argmax over all dims returns the flat index). Reducers
  that do not read it may have their reduced dims reordered by stride for locality.

Geometry: the kept dims and the reduced dims are each coalesced (size-1 dims dropped,
neighbours that are contiguous merged). One kernel covers every layout with a 2-D
thread block: when the reduced dim is the fastest-moving one in memory, the threads
of ``x`` share one output's reduction (warp shuffles, then shared memory across
warps); otherwise the ``x`` threads take neighbouring outputs (coalesced loads) and
the ``y`` threads split the reduction (a shared-memory tree). Rows that are dense and
16-byte aligned are read with vector loads, four of them in flight per thread; in the
second layout each thread takes a vector of neighbouring outputs instead. When
there are too few outputs to fill the GPU, ``gridDim.y`` blocks split each
reduction; each writes its partial state to a workspace and a second kernel combines
the partials of one output in one block, or in one thread when there are many outputs
(no atomics, so results are deterministic).
Each thread keeps several independent accumulators and the partials are combined in
a tree, so float32 sums are accurate well beyond a sequential sum.
"""

from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, _nvrtc, streams

MAX_DIMS = 8
_THREADS = 256
_SLOT_BYTES = 48  # room for the largest state (Welford of double: 3 x 8, padded)

# dtype name -> accumulation C type
_ACC = {"bool": "long long", "uint8": "long long", "int8": "long long", "int16": "long long",
        "int32": "long long", "int64": "long long", "float16": "float", "bfloat16": "float",
        "float32": "float", "float64": "double", "complex64": "c64", "complex128": "c128"}
_REAL_ACC = {"c64": "float", "c128": "double"}
_INT_LIMITS = {"bool": (0, 1), "uint8": (0, 255), "int8": (-128, 127),
               "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
               "int64": (-2**63, 2**63 - 1)}

PRELUDE = r"""
#define DI __device__ __forceinline__
#define F_INF __int_as_float(0x7f800000)
#define D_INF __longlong_as_double(0x7ff0000000000000LL)
DI c64 mkc64(float re, float im) { c64 r; r.re = re; r.im = im; return r; }
DI c128 mkc128(double re, double im) { c128 r; r.re = re; r.im = im; return r; }
DI c64 operator+(c64 a, c64 b) { return mkc64(a.re + b.re, a.im + b.im); }
DI c128 operator+(c128 a, c128 b) { return mkc128(a.re + b.re, a.im + b.im); }
DI c64 operator*(c64 a, c64 b) {
  return mkc64(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
DI c128 operator*(c128 a, c128 b) {
  return mkc128(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
DI c64 scale(c64 a, double f) { return mkc64(a.re * (float)f, a.im * (float)f); }
DI c128 scale(c128 a, double f) { return mkc128(a.re * f, a.im * f); }
DI float scale(float a, double f) { return a * (float)f; }
DI double scale(double a, double f) { return a * f; }
DI float r_sqrt(float v) { return sqrtf(v); }
DI double r_sqrt(double v) { return sqrt(v); }
DI float r_exp(float v) { return expf(v); }
DI double r_exp(double v) { return exp(v); }
DI float r_log(float v) { return logf(v); }
DI double r_log(double v) { return log(v); }
DI float r_pow(float a, double b) { return powf(a, (float)b); }
DI double r_pow(double a, double b) { return pow(a, b); }
DI bool is_nan(c64 v) { return v.re != v.re || v.im != v.im; }
DI bool is_nan(c128 v) { return v.re != v.re || v.im != v.im; }
template<class T> DI bool is_nan(T v) { return v != v; }
DI int nz(c64 v) { return v.re != 0 || v.im != 0; }
DI int nz(c128 v) { return v.re != 0 || v.im != 0; }
template<class T> DI int nz(T v) { return v != 0; }
DI float absval(c64 v) { return hypotf(v.re, v.im); }
DI double absval(c128 v) { return hypot(v.re, v.im); }
DI float absval(float v) { return fabsf(v); }
DI double absval(double v) { return fabs(v); }
DI long long absval(long long v) { return v < 0 ? -v : v; }
template<class T> DI T shfl_down(T v, int d) {
  constexpr int W = (sizeof(T) + 3) / 4;
  union { T t; int w[W]; } u;
  u.t = v;
#pragma unroll
  for (int i = 0; i < W; ++i) u.w[i] = __shfl_down_sync(0xffffffffu, u.w[i], d);
  return u.t; }
struct Geo {
  long long n_out, n_red; int kdim, rdim, out_x, vec;
  long long ksize[8], kstride[8], rsize[8], rstride[8]; };
DI long long koff(const Geo& g, long long o) {
  long long off = 0;
  for (int k = g.kdim - 1; k >= 0; --k) {
    long long c = k ? o % g.ksize[k] : o; o /= g.ksize[k]; off += c * g.kstride[k]; }
  return off; }
DI long long roff(const Geo& g, long long r) {
  if (g.rdim == 1) return r * g.rstride[0];
  long long off = 0;
  for (int k = g.rdim - 1; k >= 0; --k) {
    long long c = k ? r % g.rsize[k] : r; r /= g.rsize[k]; off += c * g.rstride[k]; }
  return off; }
struct P { double n, inv_n, c, q; };
"""

# The kernels every reducer shares. ``S`` is the state, ``ACC`` the accumulation type,
# ``VEC`` the vector width of dense rows.
_BODY = r"""
struct __align__(VEC * sizeof(IN)) VecT { IN v[VEC]; };

DI S block_reduce(S s, bool r_along_x, S* sh) {
  int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  if (r_along_x) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) s = r_combine(s, shfl_down(s, d));
    int warps = bx >> 5;
    if (warps > 1) {
      int lane = tx & 31, w = tx >> 5;
      if (lane == 0) sh[ty * warps + w] = s;
      __syncthreads();
      s = (lane < warps) ? sh[ty * warps + lane] : r_init();
      if (w == 0) {
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) s = r_combine(s, shfl_down(s, d));
      }
    }
  } else if (by > 1) {
    sh[ty * bx + tx] = s;
    __syncthreads();
    for (int st = by >> 1; st > 0; st >>= 1) {
      if (ty < st) sh[ty * bx + tx] = r_combine(sh[ty * bx + tx], sh[(ty + st) * bx + tx]);
      __syncthreads();
    }
    s = sh[tx];
  }
  return s; }

extern "C" __global__ void __launch_bounds__(256) reduce_kernel(
    const IN* __restrict__ x, OUT* out, OUT2* out2, S* part, Geo g, P p) {
  __shared__ S sh[256];
  int tx = threadIdx.x, ty = threadIdx.y;
  bool ox = g.out_x != 0;
  int ol = ox ? tx : ty, ols = ox ? blockDim.x : blockDim.y;
  int rl = ox ? ty : tx, rls = ox ? blockDim.y : blockDim.x;
  long long o = (long long)blockIdx.x * ols + ol;
  long long r0 = (long long)blockIdx.y * rls + rl, step = (long long)gridDim.y * rls;
  if (VEC > 1 && g.vec == 2) {
    /* outputs along x, VEC neighbouring outputs per thread: one vector load per row */
    S a[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) a[j] = r_init();
    long long first = o * VEC;
    if (first < g.n_out) {
      const IN* base = x + koff(g, first);
      long long r = r0;
      for (; r + 3 * step < g.n_red; r += 4 * step) {
        VecT v0 = *(const VecT*)(base + roff(g, r));
        VecT v1 = *(const VecT*)(base + roff(g, r + step));
        VecT v2 = *(const VecT*)(base + roff(g, r + 2 * step));
        VecT v3 = *(const VecT*)(base + roff(g, r + 3 * step));
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          a[j] = r_reduce(a[j], r_load(v0.v[j]), r, p);
          a[j] = r_reduce(a[j], r_load(v1.v[j]), r + step, p);
          a[j] = r_reduce(a[j], r_load(v2.v[j]), r + 2 * step, p);
          a[j] = r_reduce(a[j], r_load(v3.v[j]), r + 3 * step, p); }
      }
      for (; r < g.n_red; r += step) {
        VecT v0 = *(const VecT*)(base + roff(g, r));
#pragma unroll
        for (int j = 0; j < VEC; ++j) a[j] = r_reduce(a[j], r_load(v0.v[j]), r, p);
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      S s = block_reduce(a[j], false, sh);
      __syncthreads();
      if (rl == 0 && first < g.n_out) {
        if (gridDim.y == 1) r_store(out, out2, first + j, s, p);
        else part[blockIdx.y * g.n_out + first + j] = s;
      }
    }
    return;
  }
  S s = r_init();
  if (o < g.n_out) {
    const IN* base = x + koff(g, o);
    if (VEC > 1 && g.vec == 1) {
      S a[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) a[j] = r_init();
      long long nch = g.n_red / VEC, c = r0;
      const VecT* vb = (const VecT*)base;
      for (; c + 3 * step < nch; c += 4 * step) {
        VecT v0 = vb[c], v1 = vb[c + step], v2 = vb[c + 2 * step], v3 = vb[c + 3 * step];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          a[j] = r_reduce(a[j], r_load(v0.v[j]), c * VEC + j, p);
          a[j] = r_reduce(a[j], r_load(v1.v[j]), (c + step) * VEC + j, p);
          a[j] = r_reduce(a[j], r_load(v2.v[j]), (c + 2 * step) * VEC + j, p);
          a[j] = r_reduce(a[j], r_load(v3.v[j]), (c + 3 * step) * VEC + j, p); }
      }
      for (; c < nch; c += step) {
        VecT v0 = vb[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) a[j] = r_reduce(a[j], r_load(v0.v[j]), c * VEC + j, p);
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) s = r_combine(s, a[j]);
    } else {
      S a[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) a[j] = r_init();
      long long r = r0;
      for (; r + 3 * step < g.n_red; r += 4 * step) {
        IN v0 = base[roff(g, r)], v1 = base[roff(g, r + step)];
        IN v2 = base[roff(g, r + 2 * step)], v3 = base[roff(g, r + 3 * step)];
        a[0] = r_reduce(a[0], r_load(v0), r, p);
        a[1] = r_reduce(a[1], r_load(v1), r + step, p);
        a[2] = r_reduce(a[2], r_load(v2), r + 2 * step, p);
        a[3] = r_reduce(a[3], r_load(v3), r + 3 * step, p);
      }
      for (; r < g.n_red; r += step) a[0] = r_reduce(a[0], r_load(base[roff(g, r)]), r, p);
      s = r_combine(r_combine(a[0], a[1]), r_combine(a[2], a[3]));
    }
  }
  s = block_reduce(s, !ox, sh);
  if (rl == 0 && o < g.n_out) {
    if (gridDim.y == 1) r_store(out, out2, o, s, p);
    else part[blockIdx.y * g.n_out + o] = s;
  } }

extern "C" __global__ void __launch_bounds__(256) finish_kernel(
    const S* part, OUT* out, OUT2* out2, long long n_out, int n_part, P p) {
  __shared__ S sh[256];
  long long o = blockIdx.x;
  S s = r_init();
  for (int i = threadIdx.x; i < n_part; i += blockDim.x) s = r_combine(s, part[i * n_out + o]);
  s = block_reduce(s, true, sh);
  if (threadIdx.x == 0) r_store(out, out2, o, s, p); }

extern "C" __global__ void finish_each_kernel(
    const S* part, OUT* out, OUT2* out2, long long n_out, int n_part, P p) {
  long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= n_out) return;
  S s = part[o];
  for (int i = 1; i < n_part; ++i) s = r_combine(s, part[i * n_out + o]);
  r_store(out, out2, o, s, p); }
"""


@dataclass(frozen=True)
class Reducer:
    """One reduction as C snippets (bodies of functions; ``ACC`` is the accumulation
    type (``RACC`` its real part's type), ``S`` the state, ``OUT``/``OUT2`` the output storage types, converters
    ``to_out``/``to_out2`` and constants ``LOWEST``/``HIGHEST``/``ACC_ZERO``/``ACC_ONE``
    are defined; ``r_combine`` is declared before ``r_reduce``). ``state`` is the C
    type of ``S`` (``struct { ... }`` or a scalar type); ``uses_index``
    keeps the reduced dims in logical order; ``abs`` reads ``|x|`` into a real
    accumulator (norms)."""

    name: str
    init: str
    reduce: str
    combine: str
    store: str
    state: str = "ACC"
    uses_index: bool = False
    abs: bool = False


def _np2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _coalesce(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return out


class _Geo(ctypes.Structure):
    _fields_ = [("n_out", ctypes.c_longlong), ("n_red", ctypes.c_longlong),
                ("kdim", ctypes.c_int), ("rdim", ctypes.c_int), ("out_x", ctypes.c_int),
                ("vec", ctypes.c_int),
                ("ksize", ctypes.c_longlong * MAX_DIMS), ("kstride", ctypes.c_longlong * MAX_DIMS),
                ("rsize", ctypes.c_longlong * MAX_DIMS), ("rstride", ctypes.c_longlong * MAX_DIMS)]


_P_STRUCT = struct.Struct("@dddd")  # struct P of the source: n, inv_n, c, q


def _cast_expr(src: str, dst: str, v: str) -> str:
    """C expression: the decoded value ``v`` of dtype ``src`` cast to dtype ``dst`` (as
    torch's ``.to(dst)``), in ``dst``'s compute type."""
    skind, dkind = _kernels._DTYPES[src][2], _kernels._DTYPES[dst][2]
    if src == dst:
        return v
    if skind == "complex" and dkind != "complex":
        v = f"({v}).re"
    if dkind == "bool":
        return f"(long long)nz({v})"
    if dkind == "int":
        ctype = _kernels._DTYPES[dst][0]
        if dst == "uint8" and skind in ("half", "bf16", "float", "complex"):
            return f"(long long)(unsigned char)(long long)({v})"
        return f"(long long)({ctype})({v})"
    if dkind == "half":
        return f"h2f(f2h((float)({v})))"
    if dkind == "bf16":
        return f"bf2f(f2bf((float)({v})))"
    if dkind == "float":
        return f"({_kernels._DTYPES[dst][0]})({v})"
    mk = "mkc64" if dst == "complex64" else "mkc128"
    part = "float" if dst == "complex64" else "double"
    if skind == "complex":
        return f"{mk}(({part})({v}).re, ({part})({v}).im)"
    return f"{mk}(({part})({v}), 0)"


def _decode(name: str) -> str:
    kind = _kernels._DTYPES[name][2]
    return {"bool": "(long long)(raw != 0)", "int": "(long long)raw", "half": "h2f(raw)",
            "bf16": "bf2f(raw)", "float": "raw", "complex": "raw"}[kind]


def _converter(fn: str, name: str) -> str:
    """``to_out``-style overloads: any accumulator value to dtype ``name``'s storage."""
    ctype, _, kind, _ = _kernels._DTYPES[name]
    if kind == "complex":
        mk = "mkc64" if name == "complex64" else "mkc128"
        part = "float" if name == "complex64" else "double"
        real = f"return {mk}(({part})x, 0);"
        return (f"DI {ctype} {fn}(double x) {{ {real} }}\n"
                f"DI {ctype} {fn}(long long x) {{ {real} }}\n"
                f"DI {ctype} {fn}(int x) {{ {real} }}\n"
                f"DI {ctype} {fn}(c64 x) {{ return {mk}(({part})x.re, ({part})x.im); }}\n"
                f"DI {ctype} {fn}(c128 x) {{ return {mk}(({part})x.re, ({part})x.im); }}\n")
    body = {"bool": "(unsigned char)(x != 0)", "int": f"({ctype})(x)",
            "half": "f2h((float)(x))", "bf16": "f2bf((float)(x))",
            "float": f"({ctype})(x)"}[kind]
    return (f"DI {ctype} {fn}(double x) {{ return {body}; }}\n"
            f"DI {ctype} {fn}(long long x) {{ return {body}; }}\n"
            f"DI {ctype} {fn}(int x) {{ return {body}; }}\n"
            f"DI {ctype} {fn}(c64 x) {{ return {fn}((double)x.re); }}\n"
            f"DI {ctype} {fn}(c128 x) {{ return {fn}(x.re); }}\n")


def _limits(acc: str, cast: str) -> tuple[str, str]:
    if acc == "float":
        return "(-F_INF)", "F_INF"
    if acc == "double":
        return "(-D_INF)", "D_INF"
    lo, hi = _INT_LIMITS.get(cast, (-2**63, 2**63 - 1))
    lo_s = f"({lo + 1}LL - 1)" if lo == -2**63 else f"{lo}LL"
    return lo_s, f"{hi}LL"


_sources: dict[tuple, str] = {}


def source(r: Reducer, in_dtype: str, cast: str, out: str, out2: str) -> str:
    """The CUDA source of reducer ``r`` for these dtype names (cached)."""
    key = (r, in_dtype, cast, out, out2)
    src = _sources.get(key)
    if src is not None:
        return src
    acc = _ACC[cast]
    if r.abs:
        acc = _REAL_ACC.get(acc, acc)
        load = f"absval({_cast_expr(in_dtype, cast, _decode(in_dtype))})"
        if _ACC[cast] == "long long":
            load = f"(ACC)({load})"
    else:
        load = _cast_expr(in_dtype, cast, _decode(in_dtype))
    lowest, highest = _limits(acc, cast)
    itemsize = _kernels._DTYPES[in_dtype][1]
    vec = max(1, min(16 // itemsize, 8))
    zero = {"c64": "mkc64(0, 0)", "c128": "mkc128(0, 0)"}.get(acc, "(ACC)0")
    one = {"c64": "mkc64(1, 0)", "c128": "mkc128(1, 0)"}.get(acc, "(ACC)1")
    src = "".join([
        _kernels._PRELUDE, PRELUDE,
        f"typedef {_kernels._DTYPES[in_dtype][0]} IN;\n",
        f"typedef {_kernels._DTYPES[out][0]} OUT;\n",
        f"typedef {_kernels._DTYPES[out2][0]} OUT2;\n",
        f"typedef {acc} ACC;\ntypedef {_REAL_ACC.get(acc, acc)} RACC;\n#define VEC {vec}\n",
        f"#define LOWEST {lowest}\n#define HIGHEST {highest}\n",
        f"#define ACC_ZERO {zero}\n#define ACC_ONE {one}\n",
        _converter("to_out", out), _converter("to_out2", out2),
        f"DI ACC r_load(IN raw) {{ return (ACC)({load}); }}\n" if acc not in ("c64", "c128")
        else f"DI ACC r_load(IN raw) {{ return {load}; }}\n",
        f"typedef {r.state} S;\nDI S r_combine(S a, S b);\n",
        f"DI S r_init() {{ {r.init} }}\n",
        f"DI S r_reduce(S a, ACC v, long long i, const P& p) {{ {r.reduce} }}\n",
        f"DI S r_combine(S a, S b) {{ {r.combine} }}\n",
        f"DI void r_store(OUT* out, OUT2* out2, long long o, S a, const P& p) {{ {r.store} }}\n",
        _BODY,
    ])
    return _sources.setdefault(key, src)


_sm_counts: dict[int, int] = {}


def _sm_count(idx: int) -> int:
    n = _sm_counts.get(idx)
    if n is None:
        n = _sm_counts[idx] = _driver.device_attribute(idx, "MULTIPROCESSOR_COUNT")
    return n


def _ptr(t: Tensor | None) -> int:
    return 0 if t is None else t._storage._data.ptr + t._offset * t.dtype.itemsize


# the launch layouts: the geometry and the scalars travel as their structs' bytes
_REDUCE_FMT = f"PPPP{ctypes.sizeof(_Geo)}s{_P_STRUCT.size}s"
_FINISH_FMT = f"PPPqi{_P_STRUCT.size}s"


# launch geometries by (shape, strides, axes, index use, itemsize, base alignment, device,
# outputs): (_Geo, reduced count, block x, block y, grid x, grid y); a _Geo is never
# written once built
_geometries: dict[tuple, tuple] = {}
_GEOMETRIES = 4096


def _geometry(r: Reducer, x: Tensor, axes, n_out: int, base: int, idx: int) -> tuple:
    """The kernel's geometry (coalesced kept/reduced dims, vectorisation, block and grid
    sizes) for reducing ``x`` over ``axes``; a function of the shapes, strides, the
    input's alignment and the device's SM count only."""
    kept = [(x._shape[i], x._stride[i]) for i in range(x.dim()) if i not in axes]
    red = [(x._shape[i], x._stride[i]) for i in axes]
    n_red = math.prod(s for s, _ in red)
    if not r.uses_index:
        red.sort(key=lambda d: -d[1])
    kept, red = _coalesce(kept), _coalesce(red)
    if len(kept) > MAX_DIMS or len(red) > MAX_DIMS:
        raise NotImplementedError(
            f"CUDA reductions take at most {MAX_DIMS} kept and {MAX_DIMS} reduced dimensions "
            "after coalescing")
    g = _Geo()
    g.n_out, g.n_red, g.kdim, g.rdim = n_out, n_red, len(kept), len(red)
    for k, (s, st) in enumerate(kept):
        g.ksize[k], g.kstride[k] = s, st
    for k, (s, st) in enumerate(red):
        g.rsize[k], g.rstride[k] = s, st
    r_inner = red[-1][1] if red else 1
    k_inner = kept[-1][1] if kept else 0
    g.out_x = int(n_out > 1 and r_inner != 1 and k_inner < r_inner)
    itemsize = x.dtype.itemsize
    vec = max(1, min(16 // itemsize, 8))
    g.vec = int(not g.out_x and vec > 1 and len(red) == 1 and r_inner == 1
                and n_red % vec == 0 and base % (vec * itemsize) == 0
                and all(st % vec == 0 for _, st in kept))
    if g.out_x and vec > 1 and k_inner == 1 and kept[-1][0] % vec == 0 \
            and base % (vec * itemsize) == 0 and all(st % vec == 0 for _, st in kept[:-1]) \
            and all(st % vec == 0 for _, st in red):
        g.vec = 2  # each thread takes vec neighbouring outputs
    units = n_red // vec if g.vec == 1 else n_red
    groups = n_out // vec if g.vec == 2 else n_out
    if g.out_x:
        bx = min(_np2(groups), 32)
        by = max(1, min(_THREADS // bx, _np2(n_red)))
        o_lanes, r_lanes = bx, by
    else:
        bx = max(32, min(_np2(-(-units // 8)), _THREADS))
        by = max(1, min(_THREADS // bx, _np2(n_out)))
        o_lanes, r_lanes = by, bx
    grid_x = -(-groups // o_lanes)
    target = _sm_count(idx) * (2048 // (bx * by))
    grid_y = 1
    if grid_x < target:
        grid_y = max(1, min(-(-target // grid_x), units // (r_lanes * 16), 65535))
    return g, n_red, bx, by, grid_x, grid_y


def reduce(r: Reducer, x: Tensor, axes: tuple, out: Tensor | None, out2: Tensor | None = None,
           *, cast: D.dtype | None = None, correction: float = 0.0, q: float = 0.0) -> None:
    """Reduce ``x`` over ``axes`` into the contiguous ``out`` (and ``out2``) with reducer
    ``r``. Outputs hold the kept dims in logical order (keepdim or not). ``cast`` is the
    dtype values are converted to before accumulating (default: ``x``'s); the kernel
    sees ``p.n`` (elements per output), ``p.inv_n``, ``p.c`` (``correction``) and
    ``p.q`` (``q``, a norm's order)."""
    first = out if out is not None else out2
    n_out = first.numel()
    if n_out == 0:
        return
    in_name = x.dtype.name
    cast_name = (cast or x.dtype).name
    out_name = out.dtype.name if out is not None else "int64"
    out2_name = out2.dtype.name if out2 is not None else "int64"
    itemsize = x.dtype.itemsize
    base = x._storage._data.ptr + x._offset * itemsize
    idx = x._storage._data.device_index
    key = (x._shape, x._stride, tuple(axes), r.uses_index, itemsize, base % 16, idx, n_out)
    geometry = _geometries.get(key)
    if geometry is None:
        geometry = _geometry(r, x, axes, n_out, base, idx)
        geometry = (bytes(geometry[0]), *geometry[1:])  # the _Geo as the launch passes it
        if len(_geometries) < _GEOMETRIES:
            _geometries[key] = geometry
    g, n_red, bx, by, grid_x, grid_y = geometry
    p = _P_STRUCT.pack(float(n_red), 1.0 / n_red if n_red else math.inf, float(correction),
                       float(q))
    src = source(r, in_name, cast_name, out_name, out2_name)
    stream = streams.current_stream_handle(idx)
    part = None
    if grid_y > 1:
        part = Tensor._empty((grid_y * n_out * _SLOT_BYTES,), D.uint8, x.device)
    fn = _nvrtc.get_function(src, "reduce_kernel", idx)
    _driver.launch_packed(idx, fn, (grid_x, grid_y, 1), (bx, by, 1), _REDUCE_FMT,
                          (base, _ptr(out), _ptr(out2), _ptr(part), g, p), stream, 0,
                          "reduce_kernel")
    if part is not None:
        args = (_ptr(part), _ptr(out), _ptr(out2), n_out, grid_y, p)
        if n_out >= _THREADS:  # many outputs: one thread each, reading coalesced partials
            fin = _nvrtc.get_function(src, "finish_each_kernel", idx)
            _driver.launch_packed(idx, fin, (-(-n_out // _THREADS), 1, 1), (_THREADS, 1, 1),
                                  _FINISH_FMT, args, stream, 0, "finish_each_kernel")
        else:
            fin = _nvrtc.get_function(src, "finish_kernel", idx)
            _driver.launch_packed(idx, fin, (n_out, 1, 1), (_THREADS, 1, 1), _FINISH_FMT, args,
                                  stream, 0, "finish_kernel")
