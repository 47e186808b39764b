"""Index kernels: moving elements through index tensors, with atomics where they collide.

One generic kernel serves every indexing op. It walks an *iteration shape* (the shape of
the op's result for a gather, of its source for a scatter); for each position it reads
the int64 index tensors there (each with its own strides over the iteration shape, zero
where it broadcasts), checks each index against the size of the dim it selects in, and
turns them into an extra element offset into the indexed operand::

    gather:   out[o]         = src[s + sum_k idx_k * stride_k]
    scatter:  out[o + extra] = src[s]                      (store)
    reduce:   out[o + extra] = red(out[o + extra], src[s]) (atomic)

gather, index, index_select, take and take_along_dim are gathers; scatter, index_put,
index_copy, index_fill and put are scatters; scatter_add, index_add, index_put(accumulate)
and scatter_reduce/index_reduce are reductions (sum, prod, amax, amin, mean = sum and a
count). Atomic read-modify-write works on every element size: native ``atomicAdd`` for
float, double and 32/64-bit integer sums, a compare-and-swap loop otherwise (on the
aligned 32-bit word for 1- and 2-byte types). Half and bfloat16 accumulate in float and
round once per update, as torch's atomics do.

Index bounds: an out-of-range index stops the kernel with a device-side assert, as
torch's CUDA kernels do (``CUDA_KERNEL_ASSERT``): the kernel prints the failed
assertion, the context is left in the driver's sticky error state, and the next
synchronizing call (and every CUDA call after it) raises ``CUDA error: device-side
assert triggered``; the process must start over to use the GPU again. Checks torch
makes without an assert (``masked_scatter``'s source size, ``searchsorted``'s sorter)
are recorded instead in a small pinned host record the device writes through unified
addressing; :func:`raise_pending` reads it at the next synchronizing point and raises
torch's error for the op, once.
"""

from __future__ import annotations

import ctypes
from typing import Any

from refimpl.cuda import _driver, _kernels, _nvrtc
from refimpl.cuda._kernels import _DTYPES, _PRELUDE

MAX_DIMS = 8
MAX_INDICES = 8

# -- per-dtype C definitions ---------------------------------------------------------------

# storage type T, accumulation type A, T -> A and A -> T
_ACC = {
    "bool": ("int", "(int)(v != 0)", "(unsigned char)(a != 0)"),
    "half": ("float", "h2f(v)", "f2h(a)"),
    "bf16": ("float", "bf2f(v)", "f2bf(a)"),
}


def dtype_defs(name: str) -> str:
    """C typedefs ``T``/``A`` and ``ld``/``st`` converters for dtype ``name``."""
    ctype, _, kind, _ = _DTYPES[name]
    if kind in _ACC:
        acc, ld, st = _ACC[kind]
    elif kind == "int":
        acc, ld, st = "long long", "(long long)v", f"({ctype})a"
    else:  # float, double and the complex structs accumulate in themselves
        acc, ld, st = ctype, "v", "a"
    return (f"typedef {ctype} T;\ntypedef {acc} A;\n"
            f"__device__ __forceinline__ A ld(T v) {{ return {ld}; }}\n"
            f"__device__ __forceinline__ T st(A a) {{ return {st}; }}\n")


INDEX_PRELUDE = _PRELUDE + r"""
struct Rec { long long code; long long value; long long dim; long long size; };
__device__ void report(long long rec, int code, long long v, long long d, long long s) {
  if (code <= 5) {  // ERRORS codes 1..5, an index out of range: torch's kernels assert
    __assertfail("index out of bounds", "refimpl/cuda/_index.py", __LINE__, "index kernel", 1);
  }
  volatile Rec* r = (volatile Rec*)rec;
  if (r->code == 0) { r->value = v; r->dim = d; r->size = s; __threadfence_system();
    r->code = code; __threadfence_system(); } }
__device__ __forceinline__ void bitcopy(void* dst, const void* src, int n) {
  for (int b = 0; b < n; ++b) ((char*)dst)[b] = ((const char*)src)[b]; }
template <typename U, typename F> __device__ void atomic_update(U* p, F f) {
  if constexpr (sizeof(U) == 8) {
    unsigned long long* w = (unsigned long long*)p;
    unsigned long long old = *w, assumed;
    do { assumed = old; U cur; bitcopy(&cur, &assumed, 8); U nv = f(cur);
      unsigned long long bits; bitcopy(&bits, &nv, 8);
      old = atomicCAS(w, assumed, bits); } while (old != assumed);
  } else if constexpr (sizeof(U) == 4) {
    unsigned int* w = (unsigned int*)p;
    unsigned int old = *w, assumed;
    do { assumed = old; U cur; bitcopy(&cur, &assumed, 4); U nv = f(cur);
      unsigned int bits; bitcopy(&bits, &nv, 4);
      old = atomicCAS(w, assumed, bits); } while (old != assumed);
  } else {
    unsigned long long addr = (unsigned long long)p;
    unsigned int* w = (unsigned int*)(addr & ~3ull);
    unsigned int shift = (unsigned int)(addr & 3ull) * 8u;
    unsigned int mask = (sizeof(U) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *w, assumed;
    do { assumed = old; unsigned int part = (assumed & mask) >> shift; U cur;
      bitcopy(&cur, &part, sizeof(U)); U nv = f(cur); unsigned int bits = 0;
      bitcopy(&bits, &nv, sizeof(U));
      old = atomicCAS(w, assumed, (assumed & ~mask) | ((bits << shift) & mask));
    } while (old != assumed);
  } }
"""

_REDUCE = {
    "sum": "a + b",
    "mean": "a + b",
    "prod": "a * b",
    "amax": "(a != a || a > b) ? a : b",
    "amin": "(a != a || a < b) ? a : b",
}


def _update_code(name: str, reduce: str | None) -> str:
    """C statements combining ``src[s]`` into ``*p`` for the scatter modes."""
    if reduce is None:
        return "*p = src[s];"
    kind = _DTYPES[name][2]
    if kind == "complex":
        if reduce not in ("sum", "mean"):
            raise NotImplementedError(
                f"refimpl has no CUDA '{reduce}' reduction for complex tensors")
        return "atomicAdd(&p->re, src[s].re); atomicAdd(&p->im, src[s].im);"
    if reduce in ("sum", "mean") and name in ("float32", "float64", "int32"):
        return "atomicAdd(p, src[s]);"
    if reduce in ("sum", "mean") and name == "int64":
        return ("atomicAdd((unsigned long long*)p, (unsigned long long)src[s]);")
    return (f"A b = ld(src[s]); atomic_update(p, [b](T c) {{ A a = ld(c); "
            f"return st({_REDUCE[reduce]}); }});")


_INDEX_BODY = r"""
struct IMeta {
  long long n; long long rec; int ndim; int nidx; int wrap; int err;
  long long sizes[8]; long long out_strides[8]; long long src_strides[8];
  long long idx_strides[8][8]; long long idx_ptr[8]; long long isize[8];
  long long istride[8]; long long idim[8]; };
extern "C" __global__ void index_kernel(T* out, const T* src, IMeta m) {
  GRID_LOOP(i, m.n) {
    long long o = 0, s = 0, io[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    IT r = (IT)i;
#pragma unroll
    for (int d = NDIM - 1; d >= 0; --d) {
      long long c = (long long)(r % (IT)m.sizes[d]); r /= (IT)m.sizes[d];
      o += c * m.out_strides[d]; s += c * m.src_strides[d];
#pragma unroll
      for (int k = 0; k < NIDX; ++k) io[k] += c * m.idx_strides[k][d]; }
    long long extra = 0; bool ok = true;
#pragma unroll
    for (int k = 0; k < NIDX; ++k) {
      long long v = ((const long long*)m.idx_ptr[k])[io[k]], w = v;
      if (w < 0 && m.wrap) w += m.isize[k];
      if (w < 0 || w >= m.isize[k]) { report(m.rec, m.err, v, m.idim[k], m.isize[k]);
        ok = false; break; }
      extra += w * m.istride[k]; }
#if MODE == 0
    if (ok) out[o] = src[s + extra]; else out[o] = T{};
#else
    if (ok) { T* p = out + o + extra; UPDATE }
#endif
  } }
"""

_sources: dict[tuple, str] = {}


def _index_source(name: str, mode: int, reduce: str | None, small: bool = False,
                  ndim: int = MAX_DIMS, nidx: int = MAX_INDICES) -> str:
    key = (name, mode, reduce, small, ndim, nidx)
    source = _sources.get(key)
    if source is None:
        update = _update_code(name, reduce) if mode else ""
        # 32-bit position arithmetic where the element count allows it: 64-bit division
        # is many times slower on the GPU
        it = "unsigned int" if small else "long long"
        # the dim and index counts are compiled in: loops with constant bounds unroll
        # and keep the per-element offsets in registers
        source = (INDEX_PRELUDE + dtype_defs(name) + f"#define MODE {mode}\n"
                  f"#define NDIM {ndim}\n#define NIDX {nidx}\n"
                  f"typedef {it} IT;\n#define UPDATE {update}\n" + _INDEX_BODY)
        _sources[key] = source
    return source


class _IMeta(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_longlong), ("rec", ctypes.c_longlong),
        ("ndim", ctypes.c_int), ("nidx", ctypes.c_int),
        ("wrap", ctypes.c_int), ("err", ctypes.c_int),
        ("sizes", ctypes.c_longlong * MAX_DIMS),
        ("out_strides", ctypes.c_longlong * MAX_DIMS),
        ("src_strides", ctypes.c_longlong * MAX_DIMS),
        ("idx_strides", (ctypes.c_longlong * MAX_DIMS) * MAX_INDICES),
        ("idx_ptr", ctypes.c_longlong * MAX_INDICES),
        ("isize", ctypes.c_longlong * MAX_INDICES),
        ("istride", ctypes.c_longlong * MAX_INDICES),
        ("idim", ctypes.c_longlong * MAX_INDICES),
    ]


# -- the error record ------------------------------------------------------------------------

# code -> (exception type, message template); the code is stored by the kernel
ERRORS: dict[str, tuple[int, type, str]] = {
    "index": (1, IndexError, ("index {value} is out of bounds for dimension {dim} with size "
                             "{size}")),
    "bounds": (2, RuntimeError, ("index {value} is out of bounds for dimension {dim} with size "
                                "{size}")),
    "select": (3, IndexError, "index out of range in self"),
    "copy": (4, IndexError, ("index_copy_(): index {value} is out of bounds for dimension "
                            "{dim} with size {size}")),
    "take": (5, IndexError, ("out of range: tried to access index {value} on a tensor of "
                            "{size} elements.")),
    "masked_scatter": (6, RuntimeError, ("Number of elements of source < number of ones in "
                                        "mask")),
    "searchsorted": (7, RuntimeError, "torch.searchsorted(): sorter index out of range"),
}
_BY_CODE = {code: (exc, msg) for code, exc, msg in ERRORS.values()}
# Codes 1..5 (an index out of range) stop the kernel with a device-side assert, as torch's
# CUDA_KERNEL_ASSERT does (INDEX_PRELUDE's report()); the others are recorded and raised
# at the next synchronization.
_record: list = []


def error_record() -> int:
    """Address of the pinned host record the kernels report a bad index into."""
    if not _record:
        address = _driver.host_alloc(32)
        ctypes.memset(address, 0, 32)
        _record.append(address)
    return _record[0]


def error_code(kind: str) -> int:
    """The code a kernel stores for an error of ``kind`` (a key of :data:`ERRORS`)."""
    return ERRORS[kind][0]


def raise_pending() -> None:
    """Raise (once) the error a finished kernel recorded; call after a synchronization."""
    if not _record:
        return
    fields = (ctypes.c_longlong * 4).from_address(_record[0])
    code = fields[0]
    if not code:
        return
    value, dim, size = fields[1], fields[2], fields[3]
    ctypes.memset(_record[0], 0, 32)
    exc, msg = _BY_CODE.get(code, (RuntimeError, "device-side index check failed"))
    raise exc(msg.format(value=value, dim=dim, size=size))


# -- launch ------------------------------------------------------------------------------------

class IndexArg:
    """One int64 index tensor as the kernel sees it: its data address, its strides over
    the iteration shape, and the size/stride of the dim it selects in (``dim`` is the dim
    number the error message reports)."""

    __slots__ = ("dim", "ptr", "size", "stride", "strides")

    def __init__(self, ptr: int, strides, size: int, stride: int, dim: int) -> None:
        self.ptr, self.strides, self.size, self.stride, self.dim = (
            ptr, list(strides), size, stride, dim)


def _squeeze(shape, out_strides, src_strides, indices) -> tuple:
    """Drop size-1 dims and merge neighbours contiguous in every operand (up to 8 left)."""
    all_strides = [list(out_strides), list(src_strides)] + [a.strides for a in indices]
    cshape, cstrides = _kernels._coalesce(list(shape), *all_strides)
    if len(cshape) > MAX_DIMS:
        raise NotImplementedError(
            f"refimpl's CUDA index kernel takes at most {MAX_DIMS} dims after coalescing, "
            f"got {len(cshape)}")
    return cshape, cstrides[0], cstrides[1], cstrides[2:]


def launch(mode: str, dtype: Any, out: int, out_strides, src: int, src_strides, shape,
           indices: list[IndexArg], *, wrap: bool, err: str, reduce: str | None = None,
           device: int, stream: int) -> None:
    """Run the index kernel (``mode`` "gather" or "scatter"; ``reduce`` for atomics).

    ``out``/``src`` are element-0 addresses (offsets applied); strides are in elements
    over ``shape``."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return
    if len(indices) > MAX_INDICES:
        raise NotImplementedError(f"refimpl's CUDA index kernel takes at most {MAX_INDICES} "
                                  "index tensors")
    name = _kernels._name(dtype)
    cshape, ostr, sstr, istrs = _squeeze(shape, out_strides, src_strides, indices)
    m = _IMeta()
    m.n, m.rec, m.ndim, m.nidx = n, error_record(), len(cshape), len(indices)
    m.wrap, m.err = int(wrap), error_code(err)
    for d, size in enumerate(cshape):
        m.sizes[d], m.out_strides[d], m.src_strides[d] = size, ostr[d], sstr[d]
    for k, a in enumerate(indices):
        for d, st in enumerate(istrs[k]):
            m.idx_strides[k][d] = st
        m.idx_ptr[k], m.isize[k], m.istride[k], m.idim[k] = a.ptr, a.size, a.stride, a.dim
    code = 0 if mode == "gather" else (2 if reduce else 1)
    source = _index_source(name, code, reduce, small=n < 2 ** 31, ndim=len(cshape),
                           nidx=len(indices))
    fn = _nvrtc.get_function(source, "index_kernel", device)
    _kernels._launch(fn, device, stream, n, [ctypes.c_uint64(out), ctypes.c_uint64(src), m])
