"""Micro-profile of ``empty(262144, device="cuda")`` + release on the CPU, layer by layer.

No GPU needed: CUDA is marked initialised and device 0's caching allocator gets a
host-address segment source, so the whole Python path of a cache hit runs (the
allocator is a pure algorithm) and no device memory is touched. The process is
unfit for real CUDA work afterwards.

Each layer is timed with everything below it, sampled in alternation with the
others (many short samples), and the *minimum* per-call time is reported: on a
shared host the minimum is the stable figure. Consecutive differences are the
cost of one layer::

    python bench/profile_empty_cpu.py [--samples 60] [--number 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import measure  # after the path is set

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


def main() -> None:
    """Time the layers and print (and optionally write) the minima in microseconds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    fns = layers()
    results = measure(fns, number=args.number, repeat=args.samples, warmup=2000)
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "min_us": {k: round(v["min_ns"] / 1000, 3) for k, v in results.items()},
        "median_us": {k: round(v["median_ns"] / 1000, 3) for k, v in results.items()},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
