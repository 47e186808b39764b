"""CUDA scans along one dim: cumsum, cumprod, cummax, cummin.

A first, simple and exact version: one thread walks one line (all elements that share
every index but the scanned one) from start to end, keeping a running value in the
accumulation type of ``_reduce`` (float for float16/bfloat16/float32, int64 for
integers). As torch's CUDA scans do, the running value of a float16/bfloat16 scan is
rounded to that dtype after every step (torch adds in the tensor's own scalar type).
Neighbouring threads take neighbouring lines, so a scan over any dim but the fastest
moving one reads coalesced memory. ``cummax``/``cummin`` keep the latest index among
equal values; once a NaN is met it propagates, each later NaN taking the index.

A float16/bfloat16 cumsum or cumprod along the last dim of a tensor with more than one
row follows the order of torch's kernel for that case, which rounds differently: each row
is taken in chunks of ``2 * threads_x`` elements (``threads_x`` from the row length and
the row count, 16 to 512), the running total of the earlier chunks joins the chunk's
first element, and the chunk is scanned with Sklansky's tree (at stage ``s`` every
element of the upper half of each ``2s`` block takes the last element of its lower half).
"""

from __future__ import annotations

import ctypes

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, _nvrtc, streams
from refimpl.cuda._reduce import _ACC, PRELUDE, _cast_expr, _converter, _decode

MAX_DIMS = 8
_BLOCK = 128

# how each later element joins the running value ``acc`` (``at``: its index)
_RULES = {
    "cumsum": "acc = acc + v;",
    "cumprod": "acc = acc * v;",
    "cummax": "if (is_nan(acc) ? is_nan(v) : (is_nan(v) || v >= acc)) { acc = v; at = j; }",
    "cummin": "if (is_nan(acc) ? is_nan(v) : (is_nan(v) || v <= acc)) { acc = v; at = j; }",
}

_BODY = r"""
struct SGeo { long long n_lines, n, in_step, out_step; int kdim;
  long long ksize[8], kin[8], kout[8]; };
extern "C" __global__ void scan_kernel(const IN* x, OUT* out, long long* idx, SGeo g) {
  long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (line >= g.n_lines) return;
  long long l = line, xi = 0, oi = 0;
  for (int k = g.kdim - 1; k >= 0; --k) {
    long long c = k ? l % g.ksize[k] : l; l /= g.ksize[k];
    xi += c * g.kin[k]; oi += c * g.kout[k]; }
  ACC acc = ACC_ZERO; long long at = 0;
  for (long long j = 0; j < g.n; ++j) {
    ACC v = r_load(x[xi + j * g.in_step]);
    if (j == 0) acc = v; else { STEP }
    acc = ROUND(acc);
    out[oi + j * g.out_step] = to_out(acc);
    if (idx) idx[oi + j * g.out_step] = at;
  } }
"""

# torch's innermost-dim scan order, one line per thread: element k of a chunk folds, for
# each set bit L of k (ascending), the tree value of the aligned 2^L block just before it
# (its lower half at that stage); ``blk[L]`` keeps the latest completed block of each size
# (a block of size 2^(L+1) ending at k is k's partial fold while k's low bits are all set)
_TREE_BODY = r"""
struct SGeo { long long n_lines, n, in_step, out_step; int kdim;
  long long ksize[8], kin[8], kout[8]; };
DI ACC join(ACC acc, ACC v) { STEP return acc; }
extern "C" __global__ void tree_scan_kernel(const IN* x, OUT* out, SGeo g, int chunk) {
  long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (line >= g.n_lines) return;
  long long l = line, xi = 0, oi = 0;
  for (int k = g.kdim - 1; k >= 0; --k) {
    long long c = k ? l % g.ksize[k] : l; l /= g.ksize[k];
    xi += c * g.kin[k]; oi += c * g.kout[k]; }
  ACC total = INIT, blk[11];
  for (long long c0 = 0; c0 < g.n; c0 += chunk) {
    for (int k = 0; k < chunk && c0 + k < g.n; ++k) {
      ACC v = r_load(x[xi + (c0 + k) * g.in_step]);
      if (k == 0) v = ROUND(join(v, total));
      ACC fresh[11]; fresh[0] = v; int top = 0; bool run = true;
      for (int L = 0; L < 10; ++L) {
        if ((k >> L) & 1) {
          v = ROUND(join(v, blk[L]));
          if (run) { fresh[L + 1] = v; top = L + 1; }
        } else {
          run = false; } }
      for (int L = 0; L <= top; ++L) blk[L] = fresh[L];
      out[oi + (c0 + k) * g.out_step] = to_out(v);
      if (k == chunk - 1) total = v;
    } } }
"""
_TREE_RULES = {"cumsum": ("acc = acc + v;", "ACC_ZERO"), "cumprod": ("acc = acc * v;", "ACC_ONE")}


def _inner_chunk(rows: int, row_size: int) -> int:
    """``2 * threads_x`` of torch's innermost-dim scan: log2 of the row length balanced
    against log2 of the row count around 512 threads, in unsigned 32-bit arithmetic,
    clamped to 16..512 threads."""
    log_x = max(0, (row_size - 1).bit_length())
    log_rows = max(0, (rows - 1).bit_length())
    balanced = ((9 + ((log_x - log_rows) & 0xFFFFFFFF)) & 0xFFFFFFFF) // 2
    return 2 << min(max(4, balanced), 9)


class _SGeo(ctypes.Structure):
    _fields_ = [("n_lines", ctypes.c_longlong), ("n", ctypes.c_longlong),
                ("in_step", ctypes.c_longlong), ("out_step", ctypes.c_longlong),
                ("kdim", ctypes.c_int), ("ksize", ctypes.c_longlong * MAX_DIMS),
                ("kin", ctypes.c_longlong * MAX_DIMS), ("kout", ctypes.c_longlong * MAX_DIMS)]


_sources: dict[tuple, str] = {}


def _source(op: str, in_name: str, cast: str, out_name: str, tree: bool = False) -> str:
    key = (op, in_name, cast, out_name, tree)
    src = _sources.get(key)
    if src is None:
        acc = _ACC[cast]
        zero = {"c64": "mkc64(0, 0)", "c128": "mkc128(0, 0)"}.get(acc, "(ACC)0")
        one = {"c64": "mkc64(1, 0)", "c128": "mkc128(1, 0)"}.get(acc, "(ACC)1")
        load = _cast_expr(in_name, cast, _decode(in_name))
        body = (_TREE_BODY.replace("STEP", _TREE_RULES[op][0]).replace("INIT",
                                                                        _TREE_RULES[op][1])
                if tree else _BODY.replace("STEP", _RULES[op]))
        kind = _kernels._DTYPES[out_name][2]
        rounding = {"half": "h2f(f2h(v))", "bf16": "bf2f(f2bf(v))"}.get(kind, "v")
        src = "".join([
            _kernels._PRELUDE, PRELUDE,
            f"typedef {_kernels._DTYPES[in_name][0]} IN;\n",
            f"typedef {_kernels._DTYPES[out_name][0]} OUT;\n",
            f"typedef {acc} ACC;\n#define ACC_ZERO {zero}\n#define ACC_ONE {one}\n",
            f"DI ACC ROUND(ACC v) {{ return {rounding}; }}\n",
            _converter("to_out", out_name),
            f"DI ACC r_load(IN raw) {{ return {load}; }}\n", body])
        src = _sources.setdefault(key, src)
    return src


def scan(op: str, x: Tensor, dim: int, out_dtype: D.dtype, cast: D.dtype | None = None,
         with_indices: bool = False) -> Tensor | tuple:
    """``op`` (cumsum, cumprod, cummax, cummin) of ``x`` along ``dim``; the output is
    contiguous in ``out_dtype`` (plus int64 indices for cummax/cummin)."""
    out = Tensor._empty(x._shape, out_dtype, x.device)
    idx = Tensor._empty(x._shape, D.int64, x.device) if with_indices else None
    n_total = x.numel()
    if n_total:
        shape = x._shape or (1,)
        stride = x._stride or (1,)
        ostride = out._stride or (1,)
        kept = [(shape[i], stride[i], ostride[i]) for i in range(len(shape)) if i != dim]
        dims = _coalesce_pairs(kept)
        if len(dims) > MAX_DIMS:
            raise NotImplementedError(f"CUDA scans take at most {MAX_DIMS} other dimensions "
                                      "after coalescing")
        g = _SGeo()
        g.n, g.in_step, g.out_step = shape[dim], stride[dim], ostride[dim]
        g.n_lines = n_total // shape[dim]
        g.kdim = len(dims)
        for k, (s, a, b) in enumerate(dims):
            g.ksize[k], g.kin[k], g.kout[k] = s, a, b
        index = x._storage._data.device_index
        base = x._storage._data.ptr + x._offset * x.dtype.itemsize
        grid = -(-g.n_lines // _BLOCK)
        if op in _TREE_RULES and out_dtype in (D.float16, D.bfloat16) and \
                dim == len(shape) - 1 and g.n_lines > 1:
            fn = _nvrtc.get_function(_source(op, x.dtype.name, (cast or x.dtype).name,
                                             out_dtype.name, tree=True),
                                     "tree_scan_kernel", index)
            _driver.launch(index, fn, (grid, 1, 1), (_BLOCK, 1, 1),
                           [ctypes.c_uint64(base), ctypes.c_uint64(out._storage._data.ptr), g,
                            ctypes.c_int(_inner_chunk(g.n_lines, g.n))],
                           streams.current_stream_handle(index))
            return out
        fn = _nvrtc.get_function(
            _source(op, x.dtype.name, (cast or x.dtype).name, out_dtype.name), "scan_kernel",
            index)
        _driver.launch(index, fn, (grid, 1, 1), (_BLOCK, 1, 1),
                       [ctypes.c_uint64(base), ctypes.c_uint64(out._storage._data.ptr),
                        ctypes.c_uint64(idx._storage._data.ptr if idx is not None else 0), g],
                       streams.current_stream_handle(index))
    return (out, idx) if with_indices else out


def _coalesce_pairs(dims: list) -> list:
    """Coalesce (size, input stride, output stride) triples contiguous in both."""
    out: list = []
    for s, a, b in dims:
        if s == 1:
            continue
        if out and out[-1][1] == a * s and out[-1][2] == b * s:
            out[-1] = (out[-1][0] * s, a, b)
        else:
            out.append((s, a, b))
    return out
