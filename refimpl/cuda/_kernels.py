"""Device kernels on raw pointers: fill, strided copy with dtype conversion, sleep.

These are the CUDA kernels the tensor layer calls; they know nothing of tensors. A
buffer is a device address plus a dtype name, a shape, strides and an offset counted
in elements (never bytes). ``device`` is a device ordinal (default: the current
device) and ``stream`` a raw ``CUstream`` handle (default: this thread's current
stream on that device). Every launch is asynchronous on that stream.

Signatures::

    fill(dst, dtype, shape, strides, value, *, offset=0, device=None, stream=None)
    copy(dst, dst_dtype, dst_strides, src, src_dtype, src_strides, shape, *,
         dst_offset=0, src_offset=0, device=None, stream=None)
    sleep(cycles, *, device=None, stream=None)
    get_cycles_per_ms(device=None) -> float

dtype names: ``bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32,
float64, complex64, complex128`` (a dtype object with a ``.name`` works too).

* ``fill`` writes ``value`` converted to ``dtype`` as torch's ``fill_`` does (floats
  truncate towards zero into integers, integers wrap, a complex value keeps its real
  part for a real dtype; range checks are the caller's). A byte pattern of one repeated
  byte on a dense buffer becomes ``cuMemsetD8`` (zeros always do), 2- and 4-byte
  values on dense buffers ``cuMemsetD16/D32``; the rest runs a typed kernel.
* ``copy`` converts between any two dtypes with torch's CUDA casts: half and bfloat16
  go through float32 (round to nearest even), a float reaches ``uint8`` through int64,
  complex to real keeps the real part, anything to bool is ``!= 0``. Dimensions are
  coalesced first; at most 8 may remain. A dense same-dtype copy is one
  ``cuMemcpyDtoDAsync``. Source and destination must not overlap.
* ``sleep`` spins one thread for ``cycles`` clock cycles (``clock64``), to keep a
  stream busy in tests; :func:`get_cycles_per_ms` calibrates it as torch's test
  utility does (the mean of the middle six of ten timed runs of a 1e6-cycle sleep).
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import ml_dtypes
import numpy as np

from refimpl.cuda import _device, _driver, _nvrtc, streams
from refimpl.cuda._lazy import _lazy_init

MAX_DIMS = 8
_BLOCK = 256
_MAX_GRID = 1 << 20

# name -> (C storage type, itemsize, kind, numpy dtype)
_DTYPES: dict[str, tuple[str, int, str, Any]] = {
    "bool": ("unsigned char", 1, "bool", np.bool_),
    "uint8": ("unsigned char", 1, "int", np.uint8),
    "int8": ("signed char", 1, "int", np.int8),
    "int16": ("short", 2, "int", np.int16),
    "int32": ("int", 4, "int", np.int32),
    "int64": ("long long", 8, "int", np.int64),
    "float16": ("unsigned short", 2, "half", np.float16),
    "bfloat16": ("unsigned short", 2, "bf16", ml_dtypes.bfloat16),
    "float32": ("float", 4, "float", np.float32),
    "float64": ("double", 8, "float", np.float64),
    "complex64": ("c64", 8, "complex", np.complex64),
    "complex128": ("c128", 16, "complex", np.complex128),
}
DTYPE_NAMES = tuple(_DTYPES)

_PRELUDE = r"""
struct __align__(8) c64 { float re; float im; };
struct __align__(16) c128 { double re; double im; };
__device__ __forceinline__ float h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float bf2f(unsigned short b) {
  return __uint_as_float(((unsigned int)b) << 16); }
__device__ __forceinline__ unsigned short f2bf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16); }
struct Meta {
  long long n; int ndim;
  long long sizes[8]; long long dst_strides[8]; long long src_strides[8]; };
__device__ __forceinline__ void offsets(const Meta& m, long long i, long long& d, long long& s) {
  d = 0; s = 0;
  for (int k = m.ndim - 1; k >= 0; --k) {
    long long c = i % m.sizes[k]; i /= m.sizes[k];
    d += c * m.dst_strides[k]; s += c * m.src_strides[k]; } }
#define GRID_LOOP(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
  i < (n); i += (long long)gridDim.x * blockDim.x)
"""


class _Meta(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_longlong),
        ("ndim", ctypes.c_int),
        ("sizes", ctypes.c_longlong * MAX_DIMS),
        ("dst_strides", ctypes.c_longlong * MAX_DIMS),
        ("src_strides", ctypes.c_longlong * MAX_DIMS),
    ]


def _name(dtype: Any) -> str:
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name not in _DTYPES:
        raise TypeError(f"no CUDA kernel for dtype {dtype!r}")
    return name


def _load(name: str, src: str) -> tuple[str, str]:
    """Split a source value of dtype ``name`` into (real, imag) C expressions."""
    kind = _DTYPES[name][2]
    if kind == "complex":
        return f"({src}).re", f"({src}).im"
    expr = {"bool": f"(int)(({src}) != 0)", "int": src, "half": f"h2f({src})",
            "bf16": f"bf2f({src})", "float": src}[kind]
    return expr, "0"


def _store(dst_name: str, src_name: str, re: str, im: str) -> str:
    """A C expression of the destination type from (re, im) of the source."""
    ctype, _, kind, _ = _DTYPES[dst_name]
    src_kind = _DTYPES[src_name][2]
    src_floating = src_kind in ("half", "bf16", "float", "complex")
    if kind == "bool":
        nonzero = f"({re}) != 0" + (f" || ({im}) != 0" if src_kind == "complex" else "")
        return f"(unsigned char)({nonzero})"
    if kind == "int":
        if dst_name == "uint8" and src_floating:
            return f"(unsigned char)(long long)({re})"
        return f"({ctype})({re})"
    if kind == "half":
        return f"f2h((float)({re}))"
    if kind == "bf16":
        return f"f2bf((float)({re}))"
    if kind == "float":
        return f"({ctype})({re})"
    part = "float" if dst_name == "complex64" else "double"
    return f"{ctype}{{({part})({re}), ({part})({im})}}"


_copy_sources: dict[tuple[str, str], str] = {}
# copy layouts by (shape, dst strides, src strides): [one contiguous run, coalesced shape,
# dst strides, src strides, the kernel's Meta once built (never written after)]
_copy_layouts: dict[tuple, list] = {}
_COPY_LAYOUTS = 4096
_fill_sources: dict[str, str] = {}
_SLEEP_SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
}
"""


def _copy_source(dst: str, src: str) -> str:
    source = _copy_sources.get((dst, src))
    if source is None:
        re, im = _load(src, "x")
        body = (
            f"extern \"C\" __global__ void copy_kernel({_DTYPES[dst][0]}* dst, "
            f"const {_DTYPES[src][0]}* srcp, Meta m) {{\n"
            "  GRID_LOOP(i, m.n) { long long d, s; offsets(m, i, d, s);\n"
            f"    {_DTYPES[src][0]} x = srcp[s]; dst[d] = {_store(dst, src, re, im)}; }}\n}}\n"
        )
        source = _copy_sources.setdefault((dst, src), _PRELUDE + body)
    return source


def _fill_source(dtype: str) -> str:
    source = _fill_sources.get(dtype)
    if source is None:
        ctype = _DTYPES[dtype][0]
        body = (
            f"extern \"C\" __global__ void fill_kernel({ctype}* dst, {ctype} value, Meta m) {{\n"
            "  GRID_LOOP(i, m.n) { long long d, s; offsets(m, i, d, s); dst[d] = value; }\n}\n"
        )
        source = _fill_sources.setdefault(dtype, _PRELUDE + body)
    return source


def _coalesce(shape: list[int], *strides: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every buffer."""
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            if all(p == s * n for p, s in zip(pst, st)):
                merged[-1] = (pn * n, st)
                continue
        merged.append((n, st))
    if not merged:
        merged = [(1, [0] * len(strides))]
    return [n for n, _ in merged], [[st[k] for _, st in merged] for k in range(len(strides))]


def _resolve(device: int | None, stream: int | None) -> tuple[int, int]:
    _lazy_init()
    idx = _device._tls_device() if device is None else int(device)
    if stream is None:
        stream = streams.current_stream_handle(idx)
    return idx, int(stream)


def _launch(fn: int, idx: int, stream: int, n: int, args: list[Any]) -> None:
    grid = min(max(math.ceil(n / _BLOCK), 1), _MAX_GRID)
    _driver.launch(idx, fn, (grid, 1, 1), (_BLOCK, 1, 1), args, stream)


def _launch_packed(fn: int, idx: int, stream: int, n: int, fmt: str, args: tuple,
                   name: str) -> None:
    """``_launch`` with plain values packed by ``fmt`` (``_driver.launch_packed``): the
    hot copies and fills."""
    grid = min(max(math.ceil(n / _BLOCK), 1), _MAX_GRID)
    _driver.launch_packed(idx, fn, (grid, 1, 1), (_BLOCK, 1, 1), fmt, args, stream, 0, name)


_COPY_FMT = f"PP{ctypes.sizeof(_Meta)}s"


def _meta(n: int, shape: list[int], dst_strides: list[int], src_strides: list[int]) -> _Meta:
    if len(shape) > MAX_DIMS:
        raise ValueError(
            f"strided kernels take at most {MAX_DIMS} dimensions after coalescing, "
            f"got {len(shape)}")
    m = _Meta()
    m.n, m.ndim = n, len(shape)
    for k, size in enumerate(shape):
        m.sizes[k], m.dst_strides[k], m.src_strides[k] = size, dst_strides[k], src_strides[k]
    return m


def _value_bytes(dtype: str, value: Any) -> bytes:
    """``value`` as one element of ``dtype``, converted the way torch's fill_ does."""
    kind, np_dtype = _DTYPES[dtype][2], _DTYPES[dtype][3]
    if kind == "complex":
        return np.array(complex(value), dtype=np_dtype).tobytes()
    if isinstance(value, complex):
        value = value.real
    if kind == "bool":
        return np.array(bool(value), dtype=np.bool_).tobytes()
    if kind == "int":
        v = int(value) if isinstance(value, (bool, int, np.integer)) else math.trunc(value)
        bits = 8 * _DTYPES[dtype][1]
        v &= (1 << bits) - 1
        return v.to_bytes(bits // 8, "little")
    if dtype == "float64":
        return np.array(float(value), dtype=np.float64).tobytes()
    # float16 and bfloat16 round through float32, as c10::Half(float(double)) does.
    return np.array(float(value), dtype=np.float32).astype(np_dtype).tobytes()


def fill(dst: int, dtype: Any, shape: list[int], strides: list[int], value: Any, *,
         offset: int = 0, device: int | None = None, stream: int | None = None) -> None:
    """Set every element of the strided buffer to ``value`` (see the module docstring)."""
    name = _name(dtype)
    itemsize = _DTYPES[name][1]
    n = math.prod(shape)
    if n == 0:
        return
    idx, stream = _resolve(device, stream)
    dst += offset * itemsize
    raw = _value_bytes(name, value)
    if n == 1:  # one element (a 0-d tensor, backward's implicit gradient): contiguous
        cshape, cstrides = [1], [1]
    else:
        cshape, (cstrides,) = _coalesce(list(shape), list(strides))
    if len(cshape) == 1 and cstrides[0] == 1:
        if raw == raw[:1] * itemsize:
            _driver.memset_async(idx, dst, raw[0], n * itemsize, 1, stream)
            return
        if itemsize in (2, 4):
            word = int.from_bytes(raw, "little")
            _driver.memset_async(idx, dst, word, n, itemsize, stream)
            return
    fn = _nvrtc.get_function(_fill_source(name), "fill_kernel", idx)
    meta = bytes(_meta(n, cshape, cstrides, [0] * len(cshape)))
    _launch_packed(fn, idx, stream, n, f"P{itemsize}s{len(meta)}s", (dst, raw, meta),
                   "fill_kernel")


def copy(dst: int, dst_dtype: Any, dst_strides: list[int], src: int, src_dtype: Any,
         src_strides: list[int], shape: list[int], *, dst_offset: int = 0,
         src_offset: int = 0, device: int | None = None, stream: int | None = None) -> None:
    """``dst[i] = convert(src[i])`` for every index of ``shape`` (strides in elements)."""
    dname, sname = _name(dst_dtype), _name(src_dtype)
    n = math.prod(shape)
    if n == 0:
        return
    idx, stream = _resolve(device, stream)
    dst += dst_offset * _DTYPES[dname][1]
    src += src_offset * _DTYPES[sname][1]
    key = (tuple(shape), tuple(dst_strides), tuple(src_strides))
    layout = _copy_layouts.get(key)
    if layout is None:
        cshape, (dstr, sstr) = _coalesce(list(shape), list(dst_strides), list(src_strides))
        layout = [len(cshape) == 1 and dstr[0] == 1 and sstr[0] == 1, cshape, dstr, sstr, None]
        if len(_copy_layouts) < _COPY_LAYOUTS:
            _copy_layouts[key] = layout
    if layout[0] and dname == sname:
        _driver.memcpy_dtod_async(idx, dst, src, n * _DTYPES[dname][1], stream)
        return
    fn = _nvrtc.get_function(_copy_source(dname, sname), "copy_kernel", idx)
    meta = layout[4]
    if meta is None:  # (the Meta struct's bytes, as the launch passes it)
        meta = layout[4] = bytes(_meta(n, layout[1], layout[2], layout[3]))
    _launch_packed(fn, idx, stream, n, _COPY_FMT, (dst, src, meta), "copy_kernel")


def sleep(cycles: int, *, device: int | None = None, stream: int | None = None) -> None:
    """Keep ``stream`` busy for about ``cycles`` GPU clock cycles."""
    idx, stream = _resolve(device, stream)
    fn = _nvrtc.get_function(_SLEEP_SOURCE, "spin", idx)
    _driver.launch(idx, fn, (1, 1, 1), (1, 1, 1), [ctypes.c_longlong(int(cycles))], stream)


def _sleep(cycles: int) -> None:
    """torch.cuda._sleep: spin the current stream for ``cycles`` cycles."""
    sleep(cycles)


_cycles_per_ms: dict[int, float] = {}


def get_cycles_per_ms(device: int | None = None) -> float:
    """GPU clock cycles per millisecond of :func:`sleep`, measured once per device."""
    _lazy_init()
    idx = _device._tls_device() if device is None else int(device)
    cached = _cycles_per_ms.get(idx)
    if cached is not None:
        return cached
    with _device.device(idx):
        vals = []
        for _ in range(10):
            start = streams.Event(enable_timing=True)
            end = streams.Event(enable_timing=True)
            start.record()
            sleep(1_000_000)
            end.record()
            end.synchronize()
            vals.append(1_000_000 / start.elapsed_time(end))
    vals.sort()
    result = sum(vals[2:8]) / 6
    _cycles_per_ms[idx] = result
    return result
