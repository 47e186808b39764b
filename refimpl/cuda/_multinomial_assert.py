"""Device-side checks of multinomial's weights, as torch's CUDA sampler makes them.

torch's ``multinomial`` with replacement and more than one sample checks its weights on
the device only (``CUDA_KERNEL_ASSERT`` in the row renormalisation and the search over
the cumulative weights): a negative, infinite or NaN weight, or a row summing to zero,
stops the kernel with a device-side assert, and the next synchronizing call fails with
``CUDA error: device-side assert triggered``. The kernel here checks the same conditions
with CUDA's ``__assertfail`` (the pattern of ``_device_assert``), before the sampler runs
on the same stream; nothing is checked on the host.
"""

from __future__ import annotations

import ctypes

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _nvrtc, streams

_SOURCE = r"""
// weights: rows x cats, contiguous float64; one thread per row
extern "C" __global__ void check_rows(const double *w, long long rows, long long cats) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    double sum = 0.0;
    for (long long c = 0; c < cats; ++c) {
        double val = w[r * cats + c];
        if (!(val >= 0.0)) {
            __assertfail("val >= zero", "refimpl/cuda/_multinomial_assert.py", __LINE__,
                         "renorm_rows", 1);
        }
        if (isinf(val)) {
            __assertfail("!isinf(val)", "refimpl/cuda/_multinomial_assert.py", __LINE__,
                         "renorm_rows", 1);
        }
        sum += val;
    }
    if (!(sum > 0.0)) {
        __assertfail("sum > 0", "refimpl/cuda/_multinomial_assert.py", __LINE__,
                     "renorm_rows", 1);
    }
}
"""

_BLOCK = 128


def check_rows(rows: Tensor) -> None:
    """Launch (asynchronously, on the current stream) the checks of a 2-D CUDA tensor of
    weights; a failed check leaves the context in torch's device-side-assert state."""
    weights = rows.to(D.float64).contiguous()
    n, cats = weights._shape
    idx = weights._storage._data.device_index
    ptr = weights._storage._data.ptr + weights._offset * weights.dtype.itemsize
    fn = _nvrtc.get_function(_SOURCE, "check_rows", idx)
    grid = max(-(-n // _BLOCK), 1)
    _driver.launch(idx, fn, (grid, 1, 1), (_BLOCK, 1, 1),
                   [ctypes.c_uint64(ptr), ctypes.c_longlong(n), ctypes.c_longlong(cats)],
                   streams.current_stream(idx).cuda_stream)
