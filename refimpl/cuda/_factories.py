"""CUDA kernels of the range factories: arange, linspace, logspace, eye.

Values are computed on the device in the accumulation type of the dtype (float for
float32/float16/bfloat16, double for float64, int64 for an integer arange), as torch's
CUDA kernels do: ``arange`` is ``start + i * step``; ``linspace`` fills its first half
from ``start`` and its second half from ``end`` (``end - (steps - 1 - i) * step``) so
that both ends are exact (integer outputs: computed in float, then truncated);
``logspace`` is ``base`` to the power of the same sequence.
``eye`` is a fill of zeros and a fill of ones through the diagonal view.
"""

from __future__ import annotations

import ctypes

from refimpl import _dtype as D
from refimpl._device import device
from refimpl._tensor import Tensor
from refimpl.cuda import _index, _kernels, _nvrtc, streams

_RANGE = r"""
extern "C" __global__ void range_kernel(T* out, long long n, double start, double end,
                                        double step, double base, int kind) {
  GRID_LOOP(i, n) {
    if (kind == 0) {            /* arange */
      out[i] = st((A)((A)start + (A)i * (A)step));
    } else {                    /* linspace (1) and logspace (2) */
      long long half = n / 2; C v;
      if (i < half) v = (C)start + (C)step * (C)i;
      else v = (C)end - (C)step * (C)(n - i - 1);
      if (kind == 2) v = (C)pow(base, (double)v);
      out[i] = st((A)v);
    } } }
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
    # integer outputs compute in float, as torch's CUDA kernel does (its step is a float)
    compute = "float" if out.dtype.category < 2 else "A"
    fn = _nvrtc.get_function(_kernels._PRELUDE + _index.dtype_defs(name)
                             + f"typedef {compute} C;\n" + source, kernel, dev)
    ptr = out._storage._data.ptr
    _kernels._launch(fn, dev, streams.current_stream(dev).cuda_stream, n,
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
    return _launch(out, "range_kernel", _RANGE,
                   [ctypes.c_double(start), ctypes.c_double(0), ctypes.c_double(step),
                    ctypes.c_double(0), ctypes.c_int(0)])


def linspace(start, end, steps: int, dtype: D.dtype, dev: device, base=None) -> Tensor:
    """``steps`` evenly spaced values (``base ** value`` for logspace)."""
    if dtype.is_complex:
        raise NotImplementedError("refimpl has no CUDA linspace/logspace for complex dtypes")
    out = _out(steps, dtype, dev)
    if dtype.category < 2:  # the ends are converted to the integer dtype first
        start, end = int(start), int(end)
    if steps == 1:  # the one value is ``start`` (the kernel's second half counts from end)
        end = start
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    kind = 1 if base is None else 2
    return _launch(out, "range_kernel", _RANGE,
                   [ctypes.c_double(start), ctypes.c_double(end), ctypes.c_double(step),
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
