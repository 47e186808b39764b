"""Device-side assertions: a kernel that stops the GPU the way CUDA's ``assert`` does.

torch's CUDA kernels check some conditions on the device (``CUDA_KERNEL_ASSERT``). A
failed check calls CUDA's ``__assertfail``: the kernel prints the failed condition,
and the context is left in a sticky error state, so the next synchronizing call (and
every CUDA call after it) fails with ``CUDA error: device-side assert triggered``
(``CUDA_ERROR_ASSERT``). The kernels here call the same function, so a refimpl program
fails exactly where and how torch's does; nothing is checked on the host.
"""

from __future__ import annotations

import ctypes

from refimpl.cuda import _driver, _nvrtc

# NVRTC declares __assertfail (what CUDA's assert() calls) in its built-in header.
_SOURCE = r"""
// One element of `parts` components, each `part_bytes` wide (little-endian). A
// floating component ignores its sign bit, so -0.0 counts as zero, as in C++.
extern "C" __global__ void assert_nonzero(const unsigned char *p, int parts,
                                          int part_bytes, int floating) {
    int nonzero = 0;
    for (int c = 0; c < parts; ++c) {
        for (int b = 0; b < part_bytes; ++b) {
            unsigned char v = p[c * part_bytes + b];
            if (floating && b == part_bytes - 1) v &= 0x7f;
            nonzero |= v != 0;
        }
    }
    if (!nonzero) {
        __assertfail("input[0] != 0", "refimpl/cuda/_device_assert.py", __LINE__,
                     "_assert_async", 1);
    }
}
"""


def assert_nonzero(ptr: int, itemsize: int, *, complex_: bool, floating: bool,
                   device: int, stream: int) -> None:
    """Launch a one-thread check that the element at ``ptr`` is not zero (async)."""
    parts = 2 if complex_ else 1
    fn = _nvrtc.get_function(_SOURCE, "assert_nonzero", device)
    _driver.launch(device, fn, (1, 1, 1), (1, 1, 1),
                   [ctypes.c_uint64(ptr), ctypes.c_int(parts),
                    ctypes.c_int(itemsize // parts), ctypes.c_int(int(floating))], stream)
