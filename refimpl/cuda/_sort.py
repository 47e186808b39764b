"""Sorting on CUDA: a bitonic sort of (key, original index) pairs per row, and the ops
built on it (sort, argsort, topk, kthvalue, median, nanmedian, mode, unique,
unique_consecutive), plus searchsorted and histc.

Each row (the sorted dim moved last) is padded to a power of two; one launch runs each
compare-exchange stage of the bitonic network over all rows at once. The comparison is
a total order: keys first (NaN above every number, so last ascending and first
descending, as torch), then the original index, so equal keys keep their order: the
sort is stable in both directions. Padding sorts after everything.

``mode`` takes the smallest of equally frequent values, as refimpl's CPU kernel (torch's
CUDA kernel leaves that choice unspecified), with the index of its last occurrence in
sorted order.
"""

from __future__ import annotations

import ctypes
import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor, contiguous_strides
from refimpl.cuda import _compact, _driver, _index, _kernels, _nvrtc
from refimpl.cuda._index_ops import contiguous, copy_into, device_index, empty, ptr, stream
from refimpl.cuda._movement import view

_TILE = 2048

_SORT = r"""
__device__ __forceinline__ bool order(T ra, long long ia, T rb, long long ib, long long n,
                                      int desc) {
  bool pa = ia >= n, pb = ib >= n;
  if (pa || pb) return pa != pb ? !pa : ia < ib;
  A ka = ld(ra), kb = ld(rb);
  bool na = ka != ka, nb = kb != kb;
  if (na || nb) { if (na && nb) return ia < ib; return desc ? na : nb; }
  if (ka != kb) return desc ? ka > kb : ka < kb;
  return ia < ib; }
__device__ __forceinline__ bool before(const T* keys, const long long* idx, long long a,
                                       long long b, long long n, int desc) {
  return order(keys[a], idx[a], keys[b], idx[b], n, desc); }
/* the stages k (sizes of the sorted runs being merged) from k_lo to k_hi, and within each
   the distances j < TILE, of one tile of TILE elements in shared memory */
#define TILE 2048
extern "C" __global__ void bitonic_local(T* keys, long long* idx, long long n, long long p,
                                         long long tile, long long k_lo, long long k_hi,
                                         int desc) {
  __shared__ T sk[TILE]; __shared__ long long si[TILE];
  long long base = (long long)blockIdx.x * tile;
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    sk[t] = keys[base + t]; si[t] = idx[base + t]; }
  __syncthreads();
  long long start = base % p;  /* the tile's position in its row */
  for (long long k = k_lo; k <= k_hi; k <<= 1) {
    for (long long j = (k >> 1) < tile ? (k >> 1) : (tile >> 1); j >= 1; j >>= 1) {
      for (long long q = threadIdx.x; q < tile / 2; q += blockDim.x) {
        long long i = (q / j) * 2 * j + (q % j), l = i + j;
        bool up = ((start + i) & k) == 0;
        bool swap = up ? order(sk[l], si[l], sk[i], si[i], n, desc)
                       : order(sk[i], si[i], sk[l], si[l], n, desc);
        if (swap) { T tk = sk[i]; sk[i] = sk[l]; sk[l] = tk;
          long long ti = si[i]; si[i] = si[l]; si[l] = ti; } }
      __syncthreads(); } }
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    keys[base + t] = sk[t]; idx[base + t] = si[t]; } }
extern "C" __global__ void init_rows(const T* src, T* keys, long long* idx, long long rows,
                                     long long n, long long p) {
  GRID_LOOP(t, rows * p) { long long r = t / p, j = t % p;
    idx[t] = j; keys[t] = j < n ? src[r * n + j] : T{}; } }
extern "C" __global__ void bitonic_step(T* keys, long long* idx, long long rows, long long n,
                                        long long p, long long k, long long j, int desc) {
  long long half = p / 2;
  GRID_LOOP(t, rows * half) { long long r = t / half, q = t % half;
    long long i = (q / j) * 2 * j + (q % j), l = i + j;
    bool up = (i & k) == 0;
    long long a = r * p + i, b = r * p + l;
    bool swap = up ? before(keys, idx, b, a, n, desc) : before(keys, idx, a, b, n, desc);
    if (swap) { T tk = keys[a]; keys[a] = keys[b]; keys[b] = tk;
      long long ti = idx[a]; idx[a] = idx[b]; idx[b] = ti; } } }
extern "C" __global__ void pick(const T* keys, const long long* idx, long long rows,
                                long long n, long long p, long long k, int how, T* vals,
                                long long* out) {
  GRID_LOOP(r, rows) { const T* row = keys + r * p; long long pos = k;
    if (how > 0) {  /* median (1) / nanmedian (2): the first NaN splits the row */
      long long lo = 0, hi = n;
      while (lo < hi) { long long mid = (lo + hi) / 2; A v = ld(row[mid]);
        if (v != v) hi = mid; else lo = mid + 1; }
      if (how == 1) pos = lo < n ? lo : (n - 1) / 2;
      else pos = lo > 0 ? (lo - 1) / 2 : 0; }
    if (how < 0) {  /* mode: the longest run, the smallest value among equal runs */
      long long best = 0, best_len = 0, start = 0;
      for (long long j = 1; j <= n; ++j) {
        if (j == n || ld(row[j]) != ld(row[start])) {
          if (j - start > best_len) { best_len = j - start; best = j - 1; }
          start = j; } }
      pos = best; }
    vals[r] = row[pos]; out[r] = idx[r * p + pos]; } }
extern "C" __global__ void run_flags(const T* v, long long n, long long* flags) {
  GRID_LOOP(i, n) { flags[i] = i == 0 || !(ld(v[i]) == ld(v[i - 1])); } }
extern "C" __global__ void unique_out(const T* v, const long long* order, const long long* flags,
                                      const long long* pos, long long n, T* vals,
                                      long long* inverse, long long* starts) {
  GRID_LOOP(i, n) { long long p = pos[i] + flags[i] - 1;
    if (flags[i]) { vals[p] = v[i]; starts[p] = i; }
    inverse[order ? order[i] : i] = p; } }
extern "C" __global__ void run_lengths(const long long* starts, long long count, long long n,
                                       long long* counts) {
  GRID_LOOP(j, count) { counts[j] = (j + 1 < count ? starts[j + 1] : n) - starts[j]; } }
extern "C" __global__ void search(const T* bd, const long long* sorter, const T* v,
                                  long long nv, long long m, long long nb, int per_row,
                                  int right, long long* out, long long rec, int code) {
  GRID_LOOP(i, nv) { long long row = per_row ? i / m : 0;
    const T* b = bd + row * nb; const long long* so = sorter ? sorter + row * nb : 0;
    A x = ld(v[i]); long long lo = 0, hi = nb;
    while (lo < hi) { long long mid = (lo + hi) / 2; long long at = mid;
      if (so) { at = so[mid]; if (at < 0 || at >= nb) { report(rec, code, at, 0, nb); break; } }
      A probe = ld(b[at]);
      bool go = right ? !(probe > x) : !(probe >= x);
      if (go) lo = mid + 1; else hi = mid; }
    out[i] = lo; } }
extern "C" __global__ void histogram(const T* v, long long n, double lo, double hi,
                                     long long bins, unsigned long long* counts) {
  GRID_LOOP(i, n) { double x = (double)ld(v[i]);
    if (x >= lo && x <= hi) { long long b = (long long)((x - lo) * bins / (hi - lo));
      if (b > bins - 1) b = bins - 1;
      atomicAdd(counts + b, 1ull); } } }
/* integer inputs bin in integer arithmetic, with integer bounds */
extern "C" __global__ void histogram_int(const T* v, long long n, long long lo, long long hi,
                                         long long bins, unsigned long long* counts) {
  GRID_LOOP(i, n) { long long x = (long long)v[i];
    if (x >= lo && x <= hi) { long long b = (x - lo) * bins / (hi - lo);
      if (b > bins - 1) b = bins - 1;
      atomicAdd(counts + b, 1ull); } } }
"""


def _source(dtype: D.dtype) -> str:
    if dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA sort for complex tensors")
    return _index.INDEX_PRELUDE + _index.dtype_defs(_kernels._name(dtype)) + _SORT


def _call(dtype: D.dtype, kernel: str, dev: int, n: int, args: list) -> None:
    fn = _nvrtc.get_function(_source(dtype), kernel, dev)
    _kernels._launch(fn, dev, stream(dev), n, args)


def _u(x) -> ctypes.c_uint64:
    return ctypes.c_uint64(ptr(x) if isinstance(x, Tensor) else x)


def _ll(v) -> ctypes.c_longlong:
    return ctypes.c_longlong(int(v))


def sorted_rows(x: Tensor, d: int, descending: bool) -> tuple:
    """(keys, idx, rows, n, p): the rows of ``x`` along ``d`` sorted in ``[rows, p]``
    buffers (the first ``n`` of each row are the data)."""
    shape = tuple(x._shape) or (1,)
    strides = tuple(x._stride) or (1,)
    order = [k for k in range(len(shape)) if k != d] + [d]
    mshape = tuple(shape[k] for k in order)
    moved = view(x, mshape, tuple(strides[k] for k in order), x._offset)
    n = shape[d]
    rows = math.prod(mshape[:-1])
    p = 1 << max(n - 1, 0).bit_length()
    rowsrc = empty(mshape, x.dtype, x)
    copy_into(rowsrc, moved)
    keys = empty((rows, p), x.dtype, x)
    idx = empty((rows, p), D.int64, x)
    dev = device_index(x)
    if rows * p == 0:
        return keys, idx, rows, n, p
    _call(x.dtype, "init_rows", dev, rows * p, [_u(rowsrc), _u(keys), _u(idx), _ll(rows),
                                                _ll(n), _ll(p)])
    if p > 1:
        _bitonic(x.dtype, dev, keys, idx, rows, n, p, int(descending))
    return keys, idx, rows, n, p


def _local(dtype, dev, keys, idx, rows, n, p, tile, k_lo, k_hi, desc) -> None:
    """Run stages ``k_lo..k_hi`` (distances below ``tile``) in shared memory."""
    fn = _nvrtc.get_function(_source(dtype), "bitonic_local", dev)
    threads = min(tile // 2, 1024)
    _driver.launch(dev, fn, (rows * p // tile, 1, 1), (threads, 1, 1), [
        _u(keys), _u(idx), _ll(n), _ll(p), _ll(tile), _ll(k_lo), _ll(k_hi),
        ctypes.c_int(desc)], stream(dev))


def _bitonic(dtype, dev, keys, idx, rows, n, p, desc) -> None:
    """The bitonic network over rows of ``p`` (a power of two): the stages whose
    compare distance fits a shared-memory tile run there, the longer ones in global
    memory, one launch per distance."""
    tile = min(p, _TILE)
    _local(dtype, dev, keys, idx, rows, n, p, tile, 2, tile, desc)
    k = tile * 2
    while k <= p:
        j = k // 2
        while j >= tile:
            _call(dtype, "bitonic_step", dev, rows * p // 2, [
                _u(keys), _u(idx), _ll(rows), _ll(n), _ll(p), _ll(k), _ll(j),
                ctypes.c_int(desc)])
            j //= 2
        _local(dtype, dev, keys, idx, rows, n, p, tile, k, k, desc)
        k *= 2


def _back(buf: Tensor, x: Tensor, d: int, p: int, width: int) -> Tensor:
    """The first ``width`` of each sorted row, laid out like ``x`` with ``width`` at ``d``."""
    shape = list(x._shape) or [1]
    shape[d] = width
    out = empty(tuple(shape) if x._shape else (), buf.dtype, x)
    if not out.numel():
        return out
    order = [k for k in range(len(shape)) if k != d] + [d]
    ostr = contiguous_strides(tuple(shape))
    mshape = [shape[k] for k in order]
    rstr = list(contiguous_strides(tuple(mshape[:-1]) + (p,)))
    copy_into(view(out, mshape, [ostr[k] for k in order], 0), view(buf, mshape, rstr, 0))
    return out


def sort(x: Tensor, d: int, descending: bool) -> tuple:
    """(values, indices) of ``x`` sorted (stably) along ``d``."""
    keys, idx, _, n, p = sorted_rows(x, d, descending)
    return _back(keys, x, d, p, n), _back(idx, x, d, p, n)


def topk(x: Tensor, k: int, d: int, largest: bool) -> tuple:
    """The first ``k`` of the sorted rows (largest first when ``largest``)."""
    keys, idx, _, _, p = sorted_rows(x, d, largest)
    return _back(keys, x, d, p, k), _back(idx, x, d, p, k)


def select(x: Tensor, d: int, keepdim: bool, *, k: int = 0, how: int = 0) -> tuple:
    """One element per row after an ascending sort: position ``k`` (how 0), the median
    (1), the median ignoring NaN (2) or the mode (-1); (values, indices) reduced at ``d``."""
    keys, idx, rows, n, p = sorted_rows(x, d, False)
    shape = list(x._shape) or [1]
    shape[d] = 1
    vals = empty((rows,), x.dtype, x)
    out = empty((rows,), D.int64, x)
    if rows:
        dev = device_index(x)
        _call(x.dtype, "pick", dev, rows, [_u(keys), _u(idx), _ll(rows), _ll(n), _ll(p),
                                           _ll(k), ctypes.c_int(how), _u(vals), _u(out)])
    full = tuple(shape)
    if not x._shape:
        final = ()
    elif keepdim:
        final = full
    else:
        final = full[:d] + full[d + 1:]
    # rows are in the order of the other dims: the same as the reduced shape's
    return (view(vals, final, contiguous_strides(final), 0),
            view(out, final, contiguous_strides(final), 0))


def unique(x: Tensor, consecutive: bool) -> tuple:
    """(values, inverse, counts) of the flattened ``x``: sorted distinct values, or runs
    of equal neighbours when ``consecutive``. Synchronizes for the count."""
    flat = contiguous(x).reshape(-1) if x.numel() else empty((0,), x.dtype, x)
    n = flat.numel()
    dev = device_index(x)
    if consecutive:
        v, order = flat, None
    else:
        keys, idx, _, _, _ = sorted_rows(flat, 0, False)
        v, order = keys, idx
    flags = empty((max(n, 1),), D.int64, x)
    if n:
        _call(x.dtype, "run_flags", dev, n, [_u(v), _ll(n), _u(flags)])
    pos, total = _compact.positions(Tensor._make(flags._storage, (n,), (1,), 0, D.int64))
    count = _compact.read_count(total)
    vals = empty((count,), x.dtype, x)
    inverse = empty(tuple(x._shape), D.int64, x)
    starts = empty((max(count, 1),), D.int64, x)
    counts = empty((count,), D.int64, x)
    if n:
        order_ptr = _u(order if order is not None else 0)
        _call(x.dtype, "unique_out", dev, n, [_u(v), order_ptr, _u(flags), _u(pos), _ll(n),
                                              _u(vals), _u(inverse), _u(starts)])
        _call(x.dtype, "run_lengths", dev, count, [_u(starts), _ll(count), _ll(n),
                                                   _u(counts)])
    return vals, inverse, counts


def searchsorted(seq: Tensor, values: Tensor, right: bool, sorter, out_int32: bool) -> Tensor:
    """Insertion points of ``values`` into the rows of ``seq`` (torch's comparisons)."""
    dtype = D.promote_types(seq.dtype, values.dtype)
    bd = contiguous(seq, dtype)
    v = contiguous(values, dtype)
    so = contiguous(sorter, D.int64) if sorter is not None else None
    out = empty(tuple(values._shape), D.int64, values)
    nv = v.numel()
    if nv:
        nb = seq._shape[-1]
        m = values._shape[-1] if values.dim() else 1
        dev = device_index(values)
        _call(dtype, "search", dev, nv, [
            _u(bd), _u(so if so is not None else 0), _u(v), _ll(nv), _ll(m), _ll(nb),
            ctypes.c_int(int(seq.dim() > 1)), ctypes.c_int(int(right)), _u(out),
            _ll(_index.error_record()), ctypes.c_int(_index.error_code("searchsorted"))])
    return contiguous(out, D.int32) if out_int32 else out


def histc(x: Tensor, bins: int, lo: float, hi: float) -> Tensor:
    """Counts of the elements of ``x`` in ``bins`` equal bins over ``[lo, hi]``."""
    from refimpl.cuda import _tensor_ops

    flat = contiguous(x)
    counts = empty((bins,), D.int64, x)
    _tensor_ops.fill_(counts, 0)
    n = flat.numel()
    if n:
        dev = device_index(x)
        if x.dtype.is_floating_point:
            _call(x.dtype, "histogram", dev, n, [_u(flat), _ll(n), ctypes.c_double(lo),
                                                 ctypes.c_double(hi), _ll(bins), _u(counts)])
        else:
            _call(x.dtype, "histogram_int", dev, n, [_u(flat), _ll(n), _ll(int(lo)),
                                                     _ll(int(hi)), _ll(bins), _u(counts)])
    return contiguous(counts, x.dtype)
