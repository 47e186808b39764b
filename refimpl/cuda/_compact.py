"""Stream compaction on CUDA: an exclusive prefix sum of counts and the ops built on it
(nonzero, masked_select, masked_scatter, repeat_interleave's index vector, unique).

The prefix sum runs in three launches over tiles of ``_TILE`` values: each block sums
its tile, one block scans the tile sums in order (writing the total after the last
tile), then each block scans its tile in shared memory and adds its tile's offset. The
outputs whose size depends on the data (nonzero, masked_select, unique) read the total
on the host: a synchronization, as in torch.
"""

from __future__ import annotations

import ctypes

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _index, _kernels, _nvrtc, _sync_debug
from refimpl.cuda._index_ops import contiguous, copy_into, device_index, empty, ptr, stream

_THREADS = 256
_PER_THREAD = 8
_TILE = _THREADS * _PER_THREAD

_SCAN = _index.INDEX_PRELUDE + r"""
#define THREADS 256
#define PER 8
#define TILE (THREADS * PER)
__device__ long long block_exclusive(long long v, long long* total) {
  __shared__ long long buf[THREADS];
  int t = threadIdx.x; buf[t] = v; __syncthreads();
  for (int off = 1; off < THREADS; off <<= 1) {
    long long x = t >= off ? buf[t - off] : 0; __syncthreads();
    buf[t] += x; __syncthreads(); }
  long long incl = buf[t]; *total = buf[THREADS - 1]; __syncthreads();
  return incl - v; }
extern "C" __global__ void tile_counts(const long long* f, long long n, long long* sums) {
  long long base = (long long)blockIdx.x * TILE + (long long)threadIdx.x * PER, c = 0;
  for (int k = 0; k < PER; ++k) if (base + k < n) c += f[base + k];
  long long total; block_exclusive(c, &total);
  if (threadIdx.x == 0) sums[blockIdx.x] = total; }
extern "C" __global__ void scan_sums(long long* sums, long long tiles) {
  long long carry = 0;
  for (long long start = 0; start < tiles; start += THREADS) {
    long long i = start + threadIdx.x; long long v = i < tiles ? sums[i] : 0, total;
    long long ex = block_exclusive(v, &total);
    if (i < tiles) sums[i] = carry + ex;
    carry += total; }
  if (threadIdx.x == 0) sums[tiles] = carry; }
extern "C" __global__ void tile_positions(const long long* f, long long n,
                                          const long long* sums, long long* pos) {
  long long base = (long long)blockIdx.x * TILE + (long long)threadIdx.x * PER, c = 0;
  for (int k = 0; k < PER; ++k) if (base + k < n) c += f[base + k];
  long long total; long long run = sums[blockIdx.x] + block_exclusive(c, &total);
  for (int k = 0; k < PER; ++k)
    if (base + k < n) { pos[base + k] = run; run += f[base + k]; } }
"""

_USE = r"""
struct Shape { long long n; int ndim; long long sizes[8]; long long strides[8]; };
__device__ long long offset_of(const Shape& s, long long i) {
  long long o = 0;
  for (int d = s.ndim - 1; d >= 0; --d) { o += (i % s.sizes[d]) * s.strides[d]; i /= s.sizes[d]; }
  return o; }
extern "C" __global__ void coords(const unsigned char* f, const long long* pos, Shape s,
                                  long long count, long long* out) {
  GRID_LOOP(i, s.n) { if (!f[i]) continue; long long r = i, p = pos[i];
    for (int d = s.ndim - 1; d >= 0; --d) {
      out[p + d * count] = r % s.sizes[d]; r /= s.sizes[d]; } } }
extern "C" __global__ void select_into(const unsigned char* f, const long long* pos, Shape s,
                                       const T* src, T* out) {
  GRID_LOOP(i, s.n) { if (f[i]) out[pos[i]] = src[offset_of(s, i)]; } }
extern "C" __global__ void scatter_from(const unsigned char* f, const long long* pos, Shape s,
                                        const T* src, long long nsrc, T* out, long long rec,
                                        int code) {
  GRID_LOOP(i, s.n) { if (!f[i]) continue; long long p = pos[i];
    if (p >= nsrc) { report(rec, code, p, 0, nsrc); continue; }
    out[offset_of(s, i)] = src[p]; } }
extern "C" __global__ void expand_counts(const long long* starts, long long groups,
                                         long long total, long long* out) {
  GRID_LOOP(j, total) { long long lo = 0, hi = groups - 1;
    while (lo < hi) { long long mid = (lo + hi + 1) / 2;
      if (starts[mid] <= j) lo = mid; else hi = mid - 1; }
    out[j] = lo; } }
"""


class _Shape(ctypes.Structure):
    _fields_ = [("n", ctypes.c_longlong), ("ndim", ctypes.c_int),
                ("sizes", ctypes.c_longlong * 8), ("strides", ctypes.c_longlong * 8)]


def _shape_arg(shape, strides) -> _Shape:
    if len(shape) > 8:
        raise NotImplementedError("refimpl's CUDA compaction takes at most 8 dims")
    s = _Shape()
    s.n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    s.ndim = len(shape)
    for d, (n, st) in enumerate(zip(shape, strides)):
        s.sizes[d], s.strides[d] = n, st
    return s


def use_source(dtype: D.dtype | None) -> str:
    """The source of the compaction consumers for element type ``dtype``."""
    ctype = _kernels._DTYPES[_kernels._name(dtype)][0] if dtype is not None else "char"
    return _index.INDEX_PRELUDE + f"typedef {ctype} T;\n" + _USE


def _fn(source: str, name: str, dev: int) -> int:
    return _nvrtc.get_function(source, name, dev)


def flags_of(x: Tensor, shape=None) -> Tensor:
    """``x != 0`` (broadcast to ``shape``) as a contiguous bool tensor."""
    shape = tuple(x._shape) if shape is None else tuple(shape)
    out = empty(shape, D.bool_, x)
    copy_into(out, x)
    return out


def positions(counts: Tensor) -> tuple[Tensor, Tensor]:
    """(exclusive prefix sum of the vector ``counts`` (bool or integer), 1-element total)
    on the device."""
    counts = contiguous(counts, D.int64)
    n = counts.numel()
    dev = device_index(counts)
    st = stream(dev)
    tiles = max((n + _TILE - 1) // _TILE, 1)
    sums = empty((tiles + 1,), D.int64, counts)
    pos = empty((max(n, 1),), D.int64, counts)
    total = Tensor._make(sums._storage, (1,), (1,), tiles, D.int64)
    if n == 0:
        from refimpl.cuda import _tensor_ops

        _tensor_ops.fill_(sums, 0)
        return pos, total
    f, nn = ctypes.c_uint64(ptr(counts)), ctypes.c_longlong(n)
    _driver.launch(dev, _fn(_SCAN, "tile_counts", dev), (tiles, 1, 1), (_THREADS, 1, 1),
                   [f, nn, ctypes.c_uint64(ptr(sums))], st)
    _driver.launch(dev, _fn(_SCAN, "scan_sums", dev), (1, 1, 1), (_THREADS, 1, 1),
                   [ctypes.c_uint64(ptr(sums)), ctypes.c_longlong(tiles)], st)
    _driver.launch(dev, _fn(_SCAN, "tile_positions", dev), (tiles, 1, 1), (_THREADS, 1, 1),
                   [f, nn, ctypes.c_uint64(ptr(sums)), ctypes.c_uint64(ptr(pos))], st)
    return pos, total


def read_count(total: Tensor) -> int:
    """The value of a 1-element int64 device tensor: a synchronization, after which any
    index error a kernel recorded is raised."""
    dev = device_index(total)
    host = np.zeros(1, np.int64)
    _sync_debug.check()
    _driver.memcpy_dtoh_async(dev, host.ctypes.data, ptr(total), 8, stream(dev))
    _driver.stream_synchronize(dev, stream(dev))
    _index.raise_pending()
    return int(host[0])


def nonzero(x: Tensor) -> Tensor:
    """torch.nonzero: the ``[count, ndim]`` int64 coordinates, laid out column-major."""
    shape = tuple(x._shape)
    flags = flags_of(x)
    pos, total = positions(flags)
    count = read_count(total)
    ndim = len(shape)
    buf = empty((max(count * ndim, 0),), D.int64, x)
    if count and ndim:
        dev = device_index(x)
        _kernels._launch(_fn(use_source(None), "coords", dev), dev, stream(dev),
                         flags.numel(), [ctypes.c_uint64(ptr(flags)), ctypes.c_uint64(ptr(pos)),
                                         _shape_arg(shape, shape), ctypes.c_longlong(count),
                                         ctypes.c_uint64(ptr(buf))])
    return Tensor._make(buf._storage, (count, ndim), (1, count), 0, D.int64)


def nonzero_columns(mask: Tensor) -> list:
    """The coordinates of a mask's True entries as one int64 vector per mask dim."""
    nz = nonzero(mask)
    count = nz._shape[0]
    return [Tensor._make(nz._storage, (count,), (1,), k * count, D.int64)
            for k in range(mask.dim())]


def masked_select(self: Tensor, mask: Tensor, shape) -> Tensor:
    """The elements of ``self`` (broadcast to ``shape``) where ``mask`` is True, in order."""
    from refimpl.cuda._tensor_ops import _expanded_strides

    flags = flags_of(mask, shape)
    pos, total = positions(flags)
    count = read_count(total)
    out = empty((count,), self.dtype, self)
    if count:
        dev = device_index(self)
        fn = _fn(use_source(self.dtype), "select_into", dev)
        sa = _shape_arg(tuple(shape), _expanded_strides(self, tuple(shape)))
        _kernels._launch(fn, dev, stream(dev), flags.numel(), [
            ctypes.c_uint64(ptr(flags)), ctypes.c_uint64(ptr(pos)), sa,
            ctypes.c_uint64(ptr(self)), ctypes.c_uint64(ptr(out))])
    return out


def masked_scatter(self: Tensor, mask: Tensor, source: Tensor, shape) -> Tensor:
    """``self`` (broadcast to ``shape``) with the True positions of ``mask`` taking the
    leading elements of ``source`` in order. Too few source elements is reported at the
    next synchronization (no synchronization here)."""
    out = empty(shape, self.dtype, self)
    copy_into(out, self)
    if not out.numel():
        return out
    flags = flags_of(mask, shape)
    pos, _ = positions(flags)
    src = contiguous(source)
    dev = device_index(self)
    fn = _fn(use_source(self.dtype), "scatter_from", dev)
    sa = _shape_arg(tuple(shape), out._stride)
    _kernels._launch(fn, dev, stream(dev), flags.numel(), [
        ctypes.c_uint64(ptr(flags)), ctypes.c_uint64(ptr(pos)), sa, ctypes.c_uint64(ptr(src)),
        ctypes.c_longlong(source.numel()), ctypes.c_uint64(ptr(out)),
        ctypes.c_longlong(_index.error_record()),
        ctypes.c_int(_index.error_code("masked_scatter"))])
    return out


def repeat_indices(repeats: Tensor, output_size: int | None = None) -> Tensor:
    """``[0] * r0 + [1] * r1 + ...`` for the int vector ``repeats``, built on the device
    (the total is read back unless ``output_size`` gives it)."""
    starts, total = positions(repeats)
    n = read_count(total) if output_size is None else int(output_size)
    out = empty((n,), D.int64, repeats)
    if n:
        dev = device_index(repeats)
        _kernels._launch(_fn(use_source(None), "expand_counts", dev), dev, stream(dev), n, [
            ctypes.c_uint64(ptr(starts)), ctypes.c_longlong(repeats.numel()),
            ctypes.c_longlong(n), ctypes.c_uint64(ptr(out))])
    return out
