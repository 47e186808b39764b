"""A simulated CUDA driver for profiling refimpl's CUDA *host* path on a machine without
a GPU.

refimpl talks to the GPU only through ``refimpl.cuda._driver``, which loads
``cuda.bindings.driver`` once into ``_driver._modules``. :func:`install` puts a stand-in
module there: device memory is host memory (``cuMemAlloc`` returns the address of a
host buffer; copies and memsets are done with ``ctypes``), kernels are compiled by the
real NVRTC but never run (``cuLaunchKernel`` only checks its arguments' count and
returns), and streams, events and contexts are counters. Every Python line of a CUDA
op (dispatch, autograd recording, the caching allocator, plan lookups, argument
packing) runs as it does on a GPU machine, so the Python calls of a training step and
their host time can be profiled here; what the kernels would have computed is not
(tensor values read back are whatever the host buffers hold).

This is a measuring tool only. It lives in ``bench/``, is never imported by refimpl,
and a process that installed it cannot use a real GPU: it is for profiling scripts::

    python bench/host_sim.py --kind cnn --size test --steps 300      # cProfile, top 40
    python bench/host_sim.py --kind cnn --calls                      # Python calls/step

Calls the step does not use raise ``NotImplementedError`` naming the driver call.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import itertools
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OK = 0

# Attributes of the simulated device (an H100 SXM's values).
ATTRIBUTES = {
    "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": 132, "WARP_SIZE": 32, "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048, "L2_CACHE_SIZE": 50 * 2**20,
    "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 228 * 1024,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
    "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "CLOCK_RATE": 1980000,
    "MEMORY_CLOCK_RATE": 2619000, "GLOBAL_MEMORY_BUS_WIDTH": 5120,
}
TOTAL_MEMORY = 80 * 2**30


class SimulatedDriver:
    """Stands in for ``cuda.bindings.driver``: its types and enums are the real module's,
    its functions the simulations below."""

    def __init__(self, real) -> None:
        self._real = real
        self._buffers: dict[int, ctypes.Array] = {}
        self._handles = itertools.count(0x1000)
        self.launches = 0

    def __getattr__(self, name: str):
        if name.startswith("cu") and name[2:3].isupper():
            def missing(*_args):
                raise NotImplementedError(f"the simulated driver has no {name}")
            return missing
        return getattr(self._real, name)

    # -- devices and contexts
    def cuInit(self, flags):
        return (OK,)

    def cuDriverGetVersion(self):
        return (OK, 13000)

    def cuDeviceGetCount(self):
        return (OK, 1)

    def cuDeviceGet(self, ordinal):
        return (OK, ordinal)

    def cuDeviceGetName(self, size, dev):
        return (OK, b"Simulated GPU (host_sim)\x00")

    def cuDeviceTotalMem(self, dev):
        return (OK, TOTAL_MEMORY)

    def cuDeviceGetAttribute(self, attr, dev):
        name = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")
        return (OK, ATTRIBUTES.get(name, 0))

    def cuDevicePrimaryCtxRetain(self, dev):
        return (OK, next(self._handles))

    def cuDevicePrimaryCtxGetState(self, dev):
        return (OK, 0, 1)

    def cuCtxSetCurrent(self, ctx):
        return (OK,)

    def cuCtxSynchronize(self):
        return (OK,)

    def cuCtxGetStreamPriorityRange(self):
        return (OK, 0, -5)

    def cuThreadExchangeStreamCaptureMode(self, mode):
        return (OK, mode)

    # -- streams and events
    def cuStreamCreateWithPriority(self, flags, priority):
        return (OK, next(self._handles))

    def cuStreamGetCaptureInfo(self, stream):
        return (OK, 0, 0)

    def cuStreamQuery(self, stream):
        return (OK,)

    def cuStreamSynchronize(self, stream):
        return (OK,)

    def cuStreamWaitEvent(self, stream, event, flags):
        return (OK,)

    def cuEventCreate(self, flags):
        return (OK, next(self._handles))

    def cuEventRecord(self, event, stream):
        return (OK,)

    def cuEventQuery(self, event):
        return (OK,)

    def cuEventSynchronize(self, event):
        return (OK,)

    def cuEventDestroy(self, event):
        return (OK,)

    # -- memory: host buffers stand for device memory
    def _alloc(self, nbytes):
        buf = ctypes.create_string_buffer(max(int(nbytes), 1))
        address = ctypes.addressof(buf)
        self._buffers[address] = buf
        return (OK, address)

    def cuMemAlloc(self, nbytes):
        return self._alloc(nbytes)

    def cuMemHostAlloc(self, nbytes, flags):
        return self._alloc(nbytes)

    def cuMemFree(self, address):
        self._buffers.pop(int(address), None)
        return (OK,)

    def cuMemFreeHost(self, address):
        return self.cuMemFree(address)

    def cuMemHostRegister(self, address, nbytes, flags):
        return (OK,)

    def cuMemHostUnregister(self, address):
        return (OK,)

    def cuMemGetInfo(self):
        used = sum(len(b) for b in self._buffers.values())
        return (OK, TOTAL_MEMORY - used, TOTAL_MEMORY)

    def _copy(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), int(nbytes))
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        return self._copy(dst, src, nbytes)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        return self._copy(dst, src, nbytes)

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        return self._copy(dst, src, nbytes)

    def _memset(self, dst, value, count, width):
        pattern = int(value).to_bytes(width, "little")
        if pattern == bytes(width):
            ctypes.memset(int(dst), 0, int(count) * width)
        else:
            data = pattern * int(count)
            ctypes.memmove(int(dst), data, len(data))
        return (OK,)

    def cuMemsetD8Async(self, dst, value, count, stream):
        return self._memset(dst, value, count, 1)

    def cuMemsetD16Async(self, dst, value, count, stream):
        return self._memset(dst, value, count, 2)

    def cuMemsetD32Async(self, dst, value, count, stream):
        return self._memset(dst, value, count, 4)

    # -- modules and launches: compiled for real by NVRTC, never run
    def cuModuleLoadData(self, image):
        return (OK, next(self._handles))

    def cuModuleGetFunction(self, module, name):
        return (OK, next(self._handles))

    def cuFuncGetParamInfo(self, function, index):
        return (1, 0, 0)  # CUDA_ERROR_INVALID_VALUE: no parameter list to check against

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params,
                       extra):
        self.launches += 1
        return (OK,)


def install():
    """Replace the driver refimpl loads with :class:`SimulatedDriver`; returns it."""
    from cuda.bindings import driver as real

    from refimpl.cuda import _device, _driver

    sim = SimulatedDriver(real)
    _driver._modules["driver"] = sim
    _driver._LAUNCH = sim.cuLaunchKernel
    _device._cached_device_count = 1
    return sim


def main(argv=None) -> int:
    """Profile (or count the Python calls of) refimpl's CUDA training step simulated."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["cnn", "transformer"], default="cnn")
    p.add_argument("--size", choices=["test", "bench"], default="test")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--calls", action="store_true",
                   help="print only Python calls, launches and host ms per step")
    p.add_argument("--callers", nargs="*", default=[],
                   help="print the callers of functions matching these patterns")
    opts = p.parse_args(argv)

    sim = install()
    import torch

    import refimpl
    from bench import train_models as M
    from bench.bench_train import _stepper

    _, model = M.paired_models(opts.kind, torch, refimpl, device="cuda", size=opts.size)
    step = _stepper(refimpl, opts.kind, model, "cuda", opts.size)
    for _ in range(5):
        step()
    launches = sim.launches
    started = time.perf_counter()
    for _ in range(opts.steps):
        step()
    ms = (time.perf_counter() - started) / opts.steps * 1e3
    per_step = (sim.launches - launches) / opts.steps
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(opts.steps):
        step()
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    calls = stats.total_calls / opts.steps
    print(f"{opts.kind}/{opts.size} simulated cuda: {ms:.3f} ms per step unprofiled, "
          f"{calls:.0f} Python calls and {per_step:.0f} launches per step")
    if opts.calls:
        return 0
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("tottime")
    st.print_stats(opts.top)
    for pat in opts.callers:
        st.print_callers(pat)
    print(buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
