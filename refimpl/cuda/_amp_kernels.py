"""CUDA kernels of the gradient-scaling ops (``refimpl/ops/amp_ops.py``).

Both run asynchronously on the current stream and never read a value back to the host:
the found-inf flag and the scale stay on the device, which is what lets GradScaler skip
steps without a synchronization.

* :func:`unscale_` multiplies one strided gradient in place by ``*inv_scale`` (read on
  the device) and stores 1.0 into ``*found_inf`` when an element is infinite or NaN
  before the multiplication. Half-precision values are widened to float for the check
  and the product, float64 multiplies in double, as torch's opmath does; an inverse scale
  of exactly 1.0 leaves the values untouched.
* :func:`update_scale_` is one thread that applies torch's update rule to the scale and
  the growth tracker (see ``amp_ops._amp_update_scale_``).
"""

from __future__ import annotations

import ctypes
import math

from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, _nvrtc
from refimpl.cuda._index_ops import device_index, ptr, stream

# dtype name -> (C storage type, C compute type, load macro, store macro)
_TYPES = {
    "float16": ("unsigned short", "float", "h2f(x)", "f2h(v)"),
    "float32": ("float", "float", "(x)", "(v)"),
    "float64": ("double", "double", "(x)", "(v)"),
}

_UNSCALE_BODY = r"""
extern "C" __global__ void unscale(T* data, Meta m, float* found_inf, const float* inv_scale) {
  const float inv = *inv_scale;
  GRID_LOOP(i, m.n) {
    long long d, s; offsets(m, i, d, s);
    T x = data[d];
    A v = LOAD;
    if (!isfinite(v)) *found_inf = 1.0f;
    if (inv != 1.0f) { v = v * (A)inv; data[d] = STORE; }
  }
}
"""

_UPDATE_SOURCE = r"""
extern "C" __global__ void update_scale(float* scale, int* growth_tracker,
                                        const float* found_inf, double growth_factor,
                                        double backoff_factor, int growth_interval) {
  if (*found_inf) {
    *scale = (float)((double)*scale * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  int successful = *growth_tracker + 1;
  if (successful == growth_interval) {
    float grown = (float)((double)*scale * growth_factor);
    if (isfinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}
"""

_sources: dict[str, str] = {}


def unscale_source(dtype_name: str) -> str:
    """The CUDA C of the unscale kernel for one gradient dtype."""
    source = _sources.get(dtype_name)
    if source is None:
        ctype, acc, load, store = _TYPES[dtype_name]
        body = _UNSCALE_BODY.replace("LOAD", load).replace("STORE", store)
        source = _kernels._PRELUDE + f"typedef {ctype} T;\ntypedef {acc} A;\n" + body
        _sources[dtype_name] = source
    return source


def update_source() -> str:
    """The CUDA C of the single-thread scale update kernel."""
    return _UPDATE_SOURCE


def unscale_(grad: Tensor, found_inf: Tensor, inv_scale: Tensor) -> None:
    """Check ``grad`` for inf/NaN into ``found_inf`` and multiply it by ``inv_scale``."""
    n = grad.numel()
    if n == 0:
        return
    dev = device_index(grad)
    shape, (strides,) = _kernels._coalesce(list(grad._shape), list(grad._stride))
    meta = _kernels._meta(n, shape, strides, [0] * len(shape))
    fn = _nvrtc.get_function(unscale_source(grad.dtype.name), "unscale", dev)
    grid = min(max(math.ceil(n / _kernels._BLOCK), 1), _kernels._MAX_GRID)
    _driver.launch(dev, fn, (grid, 1, 1), (_kernels._BLOCK, 1, 1),
                   [ctypes.c_uint64(ptr(grad)), meta, ctypes.c_uint64(ptr(found_inf)),
                    ctypes.c_uint64(ptr(inv_scale))], stream(dev))


def update_scale_(scale: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                  growth_factor: float, backoff_factor: float, growth_interval: int) -> None:
    """Apply the scale update rule on the device (one thread, no host read)."""
    dev = device_index(scale)
    fn = _nvrtc.get_function(_UPDATE_SOURCE, "update_scale", dev)
    _driver.launch(dev, fn, (1, 1, 1), (1, 1, 1),
                   [ctypes.c_uint64(ptr(scale)), ctypes.c_uint64(ptr(growth_tracker)),
                    ctypes.c_uint64(ptr(found_inf)), ctypes.c_double(float(growth_factor)),
                    ctypes.c_double(float(backoff_factor)),
                    ctypes.c_int(int(growth_interval))], stream(dev))
