"""CUDA kernels of the range factories: arange, linspace, logspace, eye.

``arange`` is ``start + i * step`` computed in the accumulation type of the dtype (float
for float32/float16/bfloat16, double for float64, int64 for an integer dtype), as torch's
CUDA kernel does. ``linspace`` fills its first half from ``start`` and its second half
from ``end`` (``end - (steps - 1 - i) * step``) so that both ends are exact; like torch's
CUDA kernel it computes in the output's own floating type, rounding every intermediate
(the bounds, the step, each product and sum) to float16/bfloat16 for those dtypes, and
for an integer dtype in float from the bounds truncated to integers, the value then
truncated. ``logspace`` is ``base`` to the power of the same sequence (float ``pow`` for
the half and integer dtypes). ``eye`` is a fill of zeros and a fill of ones through the
diagonal view.
"""

from __future__ import annotations

import ctypes

import numpy as np

from refimpl import _dtype as D
from refimpl._device import device
from refimpl._tensor import Tensor
from refimpl.cuda import _index, _kernels, _nvrtc, streams

_RANGE = r"""
extern "C" __global__ void range_kernel(T* out, long long n, double start, double step) {
  GRID_LOOP(i, n) { out[i] = st((A)((A)start + (A)i * (A)step)); } }
"""
# linspace (kind 1) and logspace (kind 2) of a floating dtype: every operation of torch's
# kernel is one of the output type, so ``R`` rounds each intermediate to it (a no-op for
# float32 and float64)
_SPACE = r"""
__device__ __forceinline__ A R(A x) { return ld(st(x)); }
extern "C" __global__ void space_kernel(T* out, long long n, double start, double end,
                                        double base, int kind) {
  A s = R((A)start), e = R((A)end), b = R((A)base);
  A step = R(R(e - s) / R((A)(n - 1)));
  GRID_LOOP(i, n) {
    A v = i < n / 2 ? R(s + R(step * R((A)i))) : R(e - R(step * R((A)(n - i - 1))));
    out[i] = kind == 2 ? st(pow(b, v)) : st(v); } }
"""
# integer dtypes: the bounds are integers, the step and each value a float, truncated
_INT_SPACE = r"""
extern "C" __global__ void int_space_kernel(T* out, long long n, long long s, long long e,
                                            float base, int kind) {
  float step = (kind == 2 ? (float)(e - s) : (float)e - (float)s) / (float)(n - 1);
  GRID_LOOP(i, n) {
    float v = i < n / 2 ? (float)s + step * (float)i : (float)e - step * (float)(n - i - 1);
    out[i] = (T)(long long)(kind == 2 ? powf(base, v) : v); } }
"""
_INT_RANGE = r"""
extern "C" __global__ void int_range_kernel(T* out, long long n, long long start,
                                            long long step) {
  GRID_LOOP(i, n) { out[i] = (T)(start + i * step); } }
"""


def _launch(out: Tensor, kernel: str, source: str, args: list) -> Tensor:
    n = out.numel()
    if n == 0:
        return out
    dev = out._storage.device.index
    name = _kernels._name(out.dtype)
    fn = _nvrtc.get_function(_kernels._PRELUDE + _index.dtype_defs(name) + source, kernel,
                             dev)
    ptr = out._storage._data.ptr
    _kernels._launch(fn, dev, streams.current_stream_handle(dev), n,
                     [ctypes.c_uint64(ptr), ctypes.c_longlong(n), *args])
    return out


def _out(n: int, dtype: D.dtype, dev: device) -> Tensor:
    if dev.index is None:
        from refimpl.cuda import _device

        dev = device("cuda", _device.current_device())
    return Tensor._empty((n,), dtype, dev)


def arange(n: int, start, step, dtype: D.dtype, dev: device) -> Tensor:
    """``n`` values ``start + i * step`` of ``dtype`` on ``dev``."""
    out = _out(n, dtype, dev)
    if dtype.category < 2 and dtype is not D.bool_:
        return _launch(out, "int_range_kernel", _INT_RANGE,
                       [ctypes.c_longlong(int(start)), ctypes.c_longlong(int(step))])
    if dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA arange for complex dtypes")
    return _launch(out, "range_kernel", _RANGE, [ctypes.c_double(start), ctypes.c_double(step)])


def linspace(start, end, steps: int, dtype: D.dtype, dev: device, base=None) -> Tensor:
    """``steps`` evenly spaced values (``base ** value`` for logspace)."""
    from refimpl.cuda import _tensor_ops

    if dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA linspace/logspace for complex dtypes")
    kind = 1 if base is None else 2
    if dtype is D.bool_:
        name = "linspace_cuda" if base is None else "logspace_cuda"
        raise NotImplementedError(f'"{name}" not implemented for \'Bool\'')
    out = _out(steps, dtype, dev)
    if steps == 1:  # torch fills the one value: start, or base ** start in double
        if out.numel():
            if base is not None:
                with np.errstate(all="ignore"):
                    start = float(np.power(np.float64(base), np.float64(start)))
            _tensor_ops.fill_(out, start)
        return out
    if dtype.category < 2:
        return _launch(out, "int_space_kernel", _INT_SPACE,
                       [ctypes.c_longlong(int(start)), ctypes.c_longlong(int(end)),
                        ctypes.c_float(0 if base is None else base), ctypes.c_int(kind)])
    return _launch(out, "space_kernel", _SPACE,
                   [ctypes.c_double(start), ctypes.c_double(end),
                    ctypes.c_double(0 if base is None else base), ctypes.c_int(kind)])


def eye(n: int, m: int, dtype: D.dtype, dev: device) -> Tensor:
    """An ``n`` by ``m`` identity of ``dtype`` on ``dev``."""
    from refimpl.cuda import _tensor_ops

    if dev.index is None:
        from refimpl.cuda import _device

        dev = device("cuda", _device.current_device())
    out = Tensor._empty((n, m), dtype, dev)
    if out.numel():
        _tensor_ops.fill_(out, 0)
        diag = Tensor._make(out._storage, (min(n, m),), (m + 1,), 0, dtype)
        _tensor_ops.fill_(diag, 1)
    return out
