"""Caching-allocator benchmarks: refimpl against torch in the same process, JSON kept.

GPU (``python bench/bench_allocator.py --out bench/results/allocator-<gpu>.json``):

* ``alloc_delete_1mib``: ``caching_allocator_alloc(1 MiB)`` + ``caching_allocator_delete``
  at a cache hit, refimpl vs torch vs raw ``cuMemAlloc`` + ``cuMemFree``;
* ``empty_release_262144``: ``empty(262144, device="cuda")`` and its release,
  refimpl vs torch.

Issue 5 asks for refimpl within 2x of torch (alloc+delete) and at least 10x faster
than the raw driver calls; the fidelity and reliability issue asks for ``empty``
within 2x of torch. ``--profile-empty`` adds a layer-by-layer timing of ``empty``
(allocator, device allocation, storage, tensor, kernel, dispatch, public factory)
and a cProfile of it; ``bench/profile_empty_cpu.py`` times the same layers on a
simulated device (no GPU), each sampled in alternation with the others.

CPU (``--cpu-only``, no GPU needed): the pure algorithm on a simulated device
(``malloc``+``free`` at a cache hit, small and large, and a mixed random workload),
and the host side of the two GPU benchmarks on a simulated device:
``caching_allocator_alloc``/``caching_allocator_delete`` and ``empty(262144,
device="cuda")`` with everything but the device memory (hooks, current stream,
storage, allocator). ``bench/results/allocator-cpu.json`` holds such a run.

Every figure is the median over ``--repeats`` timed loops of the per-operation time,
in microseconds. ``empty`` is also timed with refimpl and torch sampled in
alternation (``interleaved``, many short samples): on a shared host that is the
fair comparison, and ``refimpl_over_torch`` is taken from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import cpu_model, measure  # after the path is set

MiB = 1 << 20


def timed(fn: Callable[[], None], loops: int, repeats: int) -> dict[str, float]:
    """Median and min microseconds per call of ``fn`` over ``repeats`` loops of ``loops``."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter_ns() - start) / loops / 1000)
    return {
        "median_us": statistics.median(samples),
        "min_us": min(samples),
        "loops": loops,
        "repeats": repeats,
    }


def cpu_benchmarks(loops: int, repeats: int) -> dict[str, Any]:
    """The allocator algorithm alone, on an AddressSpaceSource."""
    from refimpl.cuda._allocator import AddressSpaceSource, CachingAllocator
    from refimpl.cuda._allocator_config import AllocatorConfig

    allocator = CachingAllocator(AddressSpaceSource(1 << 40), 0, AllocatorConfig())

    def pair(size: int) -> Callable[[], None]:
        def run() -> None:
            allocator.free(allocator.malloc(size, 0))

        return run

    rng = random.Random(0)
    live: list[Any] = []

    def mixed() -> None:
        if live and rng.random() < 0.5:
            allocator.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(allocator.malloc(rng.choice((512, 4096, 300_000, 3 * MiB, 30 * MiB)), 0))

    return {
        "malloc_free_1mib_hit": timed(pair(MiB), loops, repeats),
        "malloc_free_512b_hit": timed(pair(512), loops, repeats),
        "malloc_free_30mib_hit": timed(pair(30 * MiB), loops, repeats),
        "mixed_random_op": timed(mixed, loops, repeats),
    }


def simulated_cuda_benchmarks(loops: int, repeats: int) -> dict[str, Any]:
    """The host side of the GPU benchmarks, on a simulated device 0 (``--cpu-only``).

    CUDA is marked initialised without touching a driver and device 0's allocator
    gets an ``AddressSpaceSource``, so the whole Python path runs and no memory is
    ever read or written. This leaves the process unfit for real CUDA work: it is
    only done in ``--cpu-only`` runs.
    """
    import refimpl
    from refimpl.cuda import _allocator, _device, _lazy, memory
    from refimpl.cuda._allocator import AddressSpaceSource

    _lazy._initialized = True
    _device._cached_device_count = 1
    _allocator.reset_device_allocators()
    _allocator.set_segment_source_factory(lambda index: AddressSpaceSource(1 << 40))

    def alloc_delete() -> None:
        memory.caching_allocator_delete(memory.caching_allocator_alloc(MiB))

    def alloc_delete_stream0() -> None:
        memory.caching_allocator_delete(memory.caching_allocator_alloc(MiB, 0, 0))

    def empty() -> None:
        x = refimpl.empty(262144, device="cuda")
        del x

    return {
        "caching_allocator_alloc_delete_1mib": timed(alloc_delete, loops, repeats),
        "caching_allocator_alloc_delete_1mib_device_stream_given": timed(
            alloc_delete_stream0, loops, repeats
        ),
        "empty_release_262144": timed(empty, loops, repeats),
    }


def gpu_benchmarks(loops: int, repeats: int) -> dict[str, Any]:
    """refimpl vs torch vs the raw driver on device 0."""
    import torch
    from cuda.bindings import driver as cu

    import refimpl
    import refimpl.cuda as rcuda

    results: dict[str, Any] = {}
    torch.cuda.init()
    rcuda.init()

    def refimpl_pair() -> None:
        rcuda.memory.caching_allocator_delete(rcuda.memory.caching_allocator_alloc(MiB))

    def torch_pair() -> None:
        torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(MiB))

    def check(result: tuple) -> Any:
        if result[0] != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver call failed: {result[0]}")
        return result[1] if len(result) > 1 else None

    check(cu.cuInit(0))
    ctx = check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0))))
    check(cu.cuCtxSetCurrent(ctx))

    def raw_pair() -> None:
        check(cu.cuMemFree(check(cu.cuMemAlloc(MiB))))

    def refimpl_pair_stream0() -> None:
        rcuda.memory.caching_allocator_delete(rcuda.memory.caching_allocator_alloc(MiB, 0, 0))

    def torch_pair_stream0() -> None:
        torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(MiB, 0, 0))

    allocator = rcuda._allocator.get_device_allocator(0)

    def refimpl_core_pair() -> None:
        allocator.free(allocator.malloc(MiB, 0))

    pairs = {
        "refimpl": timed(refimpl_pair, loops, repeats),
        "torch": timed(torch_pair, loops, repeats),
        "raw_cuMemAlloc_cuMemFree": timed(raw_pair, max(50, loops // 50), repeats),
        # Diagnostics: the same with device and stream given (no current-stream lookup),
        # and refimpl's allocator object called directly.
        "refimpl_device_stream_given": timed(refimpl_pair_stream0, loops, repeats),
        "torch_device_stream_given": timed(torch_pair_stream0, loops, repeats),
        "refimpl_allocator_malloc_free": timed(refimpl_core_pair, loops, repeats),
    }
    pairs["refimpl_over_torch"] = pairs["refimpl"]["median_us"] / pairs["torch"]["median_us"]
    pairs["raw_over_refimpl"] = (
        pairs["raw_cuMemAlloc_cuMemFree"]["median_us"] / pairs["refimpl"]["median_us"]
    )
    pairs["meets_issue_5"] = pairs["refimpl_over_torch"] <= 2.0 and pairs["raw_over_refimpl"] >= 10
    results["alloc_delete_1mib"] = pairs

    def refimpl_empty() -> None:
        x = refimpl.empty(262144, device="cuda")
        del x

    def torch_empty() -> None:
        x = torch.empty(262144, device="cuda")
        del x

    empties: dict[str, Any] = {
        "refimpl": timed(refimpl_empty, loops, repeats),
        "torch": timed(torch_empty, loops, repeats),
    }
    empties["refimpl_over_torch_sequential"] = (
        empties["refimpl"]["median_us"] / empties["torch"]["median_us"]
    )
    # The two timed one after the other can land in different phases of a shared
    # host's load; sampled in alternation (many short samples) they see the same.
    both = measure({"refimpl": refimpl_empty, "torch": torch_empty},
                   number=max(100, loops // 20), repeat=max(50, repeats * 15), warmup=2000)
    empties["interleaved"] = {
        name: {"median_us": v["median_ns"] / 1000, "min_us": v["min_ns"] / 1000,
               "samples": v["samples"]}
        for name, v in both.items()
    }
    inter = empties["interleaved"]
    empties["refimpl_over_torch"] = inter["refimpl"]["median_us"] / inter["torch"]["median_us"]
    empties["refimpl_over_torch_min"] = inter["refimpl"]["min_us"] / inter["torch"]["min_us"]
    empties["meets_issue_5"] = empties["refimpl_over_torch"] <= 3.0
    empties["within_2x"] = empties["refimpl_over_torch"] <= 2.0
    results["empty_release_262144"] = empties
    torch.cuda.synchronize()
    results["device"] = torch.cuda.get_device_name(0)
    results["torch"] = torch.__version__
    results["torch_cuda"] = torch.version.cuda
    results["driver_version"] = cu.cuDriverGetVersion()[1]
    return results


def empty_layers(loops: int, repeats: int) -> dict[str, Any]:
    """Where the time of ``empty(262144, device="cuda")`` + release goes, layer by layer.

    Each entry times one layer with everything below it (device 0, current stream,
    1 MiB), so that consecutive differences are the cost of one layer; ``profile``
    lists the functions with the most own time (cProfile, per call). Runs on a real
    device or on the simulated one of ``--cpu-only``.
    """
    import refimpl
    from bench._common import profile
    from refimpl import _dtype
    from refimpl._device import cuda_device
    from refimpl._storage import UntypedStorage
    from refimpl._tensor import Tensor
    from refimpl.cuda import _allocator
    from refimpl.cuda._tensor_memory import DeviceAllocation
    from refimpl.ops.factories import _empty_cuda, empty_op

    allocator = _allocator.get_device_allocator(0)
    dev = cuda_device(0)
    f32 = _dtype.float32

    def allocator_malloc_free() -> None:
        allocator.free(allocator.malloc(MiB, 0))

    def device_allocation() -> None:
        DeviceAllocation(MiB, 0)

    def storage() -> None:
        UntypedStorage._on_cuda(MiB, dev)

    def tensor_empty() -> None:
        Tensor._empty((262144,), f32, dev)

    def empty_cuda_kernel() -> None:
        _empty_cuda((262144,), dtype=f32, device=dev)

    def empty_op_dispatch() -> None:
        empty_op((262144,), dtype=f32, device=dev)

    def empty_public() -> None:
        refimpl.empty(262144, device="cuda")

    layers = {
        fn.__name__: timed(fn, loops, repeats)["median_us"]
        for fn in (allocator_malloc_free, device_allocation, storage, tensor_empty,
                   empty_cuda_kernel, empty_op_dispatch, empty_public)
    }
    return {"layers_us": layers, "profile": profile(empty_public, loops, "us_per_op", 1e6)}


def machine() -> dict[str, Any]:
    """Where the numbers come from."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parents[1],
        ).stdout.strip()
    except OSError:
        commit = ""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("numpy", "cuda-python", "cuda-bindings", "torch"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "node": platform.node(),
        "git_commit": commit,
        "packages": versions,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main() -> None:
    """Run the selected benchmarks and write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON results")
    parser.add_argument("--cpu-only", action="store_true", help="skip the GPU benchmarks")
    parser.add_argument("--loops", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile-empty", action="store_true",
                        help="also time empty() layer by layer and profile it")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": machine(), "cpu": cpu_benchmarks(args.loops, args.repeats)}
    if args.cpu_only:
        report["cpu_simulated_cuda"] = simulated_cuda_benchmarks(args.loops, args.repeats)
    else:
        report["gpu"] = gpu_benchmarks(args.loops, args.repeats)
    if args.profile_empty:
        report["empty_profile"] = empty_layers(args.loops, args.repeats)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
