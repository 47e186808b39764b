"""What the benchmarks share: the machine they ran on, timing and profiling."""

from __future__ import annotations

import cProfile
import ctypes
import glob
import io
import os
import platform
import pstats
import statistics
import time
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_blas_threads() -> int:
    """The size of numpy's OpenBLAS thread pool (the cores, when it cannot be asked)."""
    libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "*openblas*")):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "openblas_get_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                return int(fn())
    return os.cpu_count() or 1


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def fix_malloc_thresholds(size: int = 64 << 20) -> dict | None:
    """Fix glibc's mmap and trim thresholds for the rest of the process (both libraries).

    By default glibc moves its mmap threshold as large blocks are freed and trims the heap
    top, so whether a multi-megabyte array is served from pages already mapped or from
    fresh ones (one page fault per 4 KiB) depends on the process's history: timings of
    models with large activations then differ by up to 1.5x from one process to the
    next. Returns the settings made, or None where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    if not (mallopt(_M_MMAP_THRESHOLD, size) and mallopt(_M_TRIM_THRESHOLD, 4 * size)):
        return None
    return {"mmap_threshold": size, "trim_threshold": 4 * size}


def measure(fns: dict, number: int, repeat: int, warmup: int, keep: bool = False) -> dict:
    """Nanoseconds per call of each function: ``repeat`` samples of ``number`` calls,
    the functions sampled in alternation so that machine noise hits them alike
    (``keep``: each function's samples too, in order, under ``"values_ns"``)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter_ns()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter_ns() - start) / number)
    return {k: {"median_ns": statistics.median(v), "min_ns": min(v),
                "stdev_ns": statistics.pstdev(v), "samples": len(v),
                **({"values_ns": v} if keep else {})}
            for k, v in samples.items()}


def profile(fn, calls: int, unit: str, scale: float, top: int = 15) -> list:
    """The ``top`` functions by own time over ``calls`` calls of ``fn``, per call, in
    ``unit`` (``scale`` converts seconds: 1e6 for "us_per_op", 1e3 for "ms_per_run")."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    per = unit.split("_per_")[1]
    rows = [{"function": f"{Path(file).name}:{line}({func})",
             f"calls_per_{per}": ncalls / calls, f"own_{unit}": tottime / calls * scale,
             f"cum_{unit}": cumtime / calls * scale}
            for (file, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items()]
    rows.sort(key=lambda r: -r[f"own_{unit}"])
    return rows[:top]


def gpu_times_ms(lib, fn, repeat: int, warmup: int = 3, spin_cycles: int = 0) -> list[float]:
    """GPU milliseconds of ``repeat`` single calls of ``fn`` on ``lib`` (refimpl or torch),
    each between two CUDA events on the current stream, after ``warmup`` calls.

    ``spin_cycles``: a sleep kernel queued before each call keeps the GPU busy while the
    host queues the call, so that host overhead does not show in the GPU time.
    """
    for _ in range(warmup):
        fn()
    lib.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = lib.cuda.Event(enable_timing=True)
        end = lib.cuda.Event(enable_timing=True)
        if spin_cycles:
            lib.cuda._sleep(spin_cycles)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times
