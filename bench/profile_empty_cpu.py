"""Micro-profile of ``empty(262144, device="cuda")`` + release on the CPU, layer by layer.

No GPU needed: CUDA is marked initialised and device 0's caching allocator gets a
host-address segment source, so the whole Python path of a cache hit runs (the
allocator is a pure algorithm) and no device memory is touched. The process is
unfit for real CUDA work afterwards.

Each layer is timed with everything below it, sampled in alternation with the
others (many short samples) in this thread's CPU time (``time.thread_time_ns``: the
time other processes take the CPU away is not counted), and the *minimum* per-call
time is reported: on a shared host that is the stable figure. Consecutive
differences are the cost of one layer::

    python bench/profile_empty_cpu.py [--samples 60] [--number 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import cpu_model  # after the path is set

MiB = 1 << 20


def layers() -> dict:
    """The functions timed, bottom layer first (simulated device 0 set up here)."""
    import refimpl
    from refimpl import _dtype
    from refimpl._device import cuda_device
    from refimpl._storage import UntypedStorage
    from refimpl._tensor import Tensor
    from refimpl.cuda import _allocator, _device, _lazy
    from refimpl.cuda._allocator import AddressSpaceSource

    _lazy._initialized = True
    _device._cached_device_count = 1
    _allocator.reset_device_allocators()
    _allocator.set_segment_source_factory(lambda index: AddressSpaceSource(1 << 40))
    allocator = _allocator.get_device_allocator(0)
    dev = cuda_device(0)
    f32 = _dtype.float32

    def allocator_malloc_free() -> None:
        allocator.free(allocator.malloc(MiB, 0))

    def storage() -> None:
        UntypedStorage._on_cuda(MiB, dev)

    def tensor_empty() -> None:
        Tensor._empty((262144,), f32, dev)

    def empty_public() -> None:
        refimpl.empty(262144, device="cuda")

    return {fn.__name__: fn for fn in (allocator_malloc_free, storage, tensor_empty,
                                       empty_public)}


def cpu_time_samples(fns: dict, number: int, samples: int) -> dict[str, list[float]]:
    """Nanoseconds of thread CPU time per call: ``samples`` runs of ``number`` calls of
    each function, the functions taken in turn."""
    for fn in fns.values():
        for _ in range(2000):
            fn()
    result: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(samples):
        for name, fn in fns.items():
            start = time.thread_time_ns()
            for _ in range(number):
                fn()
            result[name].append((time.thread_time_ns() - start) / number)
    return result


def git_commit() -> str:
    """The commit of the tree this script runs from ("" outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False, cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    except OSError:
        return ""


def main() -> None:
    """Time the layers and print (and optionally write) the minima in microseconds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    fns = layers()
    samples = cpu_time_samples(fns, args.number, args.samples)
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "git_commit": git_commit(),
        "min_us": {k: round(min(v) / 1000, 3) for k, v in samples.items()},
        "median_us": {k: round(statistics.median(v) / 1000, 3) for k, v in samples.items()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
