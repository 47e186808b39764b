"""Record a seeded allocation trace and the allocator figures after every step.

Run on a GPU machine with real torch::

    python bench/record_alloc_trace.py --out tests/fixtures/trace_replay/torch-<gpu>.json

It performs, through ``caching_allocator_alloc``/``caching_allocator_delete``, seeded
runs of mixed allocations and frees on two streams (sizes from 1 byte to 300 MiB:
small-pool, large-pool and, under ``max_split_size_mb``, oversize), with
``empty_cache`` calls, under several allocator settings, including a 1 GiB memory
fraction that makes allocations fail. After every step it records torch's
``memory_stats()`` figures (``refimpl.cuda._replay.FIGURE_KEYS``) and, for
allocations, the address returned; each run also keeps the addresses ``cudaMalloc``
gave its segments, so that the replay can hand out the same ones (best fit breaks
ties between equal blocks by address).
``tests/test_allocator.py`` and ``tensorctl memstats replay FILE`` replay the file
through refimpl's allocator and compare every figure.

``--target refimpl`` runs the same steps on refimpl's allocator over a simulated
device instead (no GPU needed); that file is a self-check of the pipeline.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
FORMAT = "tensorctl-alloc-trace/1"

# (name, settings string, cap reserved memory at this many bytes or None)
RUNS = [
    ("defaults", "", None),
    ("max_split_size_mb:64", "max_split_size_mb:64", None),
    ("roundup_power2_divisions:4", "roundup_power2_divisions:4", None),
    ("roundup_power2_divisions:[64:8,>:2]", "roundup_power2_divisions:[64:8,>:2]", None),
    ("fraction_1GiB", "", GiB),
    ("fraction_1GiB_max_split_size_mb:64", "max_split_size_mb:64", GiB),
    ("fraction_1GiB_gc_0.6", "garbage_collection_threshold:0.6", GiB),
]


class TorchTarget:
    """torch.cuda's caching allocator on device 0."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        torch.cuda.init()
        self.streams = [0, torch.cuda.Stream().cuda_stream]
        self.oom = torch.cuda.OutOfMemoryError

    def settings(self, text: str) -> None:
        setter = getattr(self.torch._C, "_accelerator_setAllocatorSettings", None)
        if setter is None:
            setter = self.torch.cuda.memory._set_allocator_settings
        setter(text)

    def set_fraction(self, fraction: float) -> None:
        self.torch.cuda.set_per_process_memory_fraction(fraction, 0)

    def total_memory(self) -> int:
        # The allocator's fraction is taken of cudaMemGetInfo's total.
        return self.torch.cuda.mem_get_info(0)[1]

    def alloc(self, size: int, stream: int) -> int:
        return self.torch.cuda.caching_allocator_alloc(size, 0, self.streams[stream])

    def free(self, ptr: int) -> None:
        self.torch.cuda.caching_allocator_delete(ptr)

    def empty_cache(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def stats(self) -> dict[str, Any]:
        return dict(self.torch.cuda.memory_stats(0))

    def start_history(self) -> None:
        self.torch.cuda.memory._record_memory_history(None)  # also clears the history
        self.torch.cuda.memory._record_memory_history("all", context=None, max_entries=10**7)

    def segment_allocs(self) -> list[list[int]]:
        trace = self.torch.cuda.memory._snapshot()["device_traces"][0]
        self.torch.cuda.memory._record_memory_history(None)
        return [[e["addr"], e["size"]] for e in trace if e["action"] == "segment_alloc"]

    def meta(self) -> dict[str, Any]:
        props = self.torch.cuda.get_device_properties(0)
        return {
            "target": "torch",
            "torch": self.torch.__version__,
            "cuda": self.torch.version.cuda,
            "device": props.name,
            "allocator_backend": self.torch.cuda.get_allocator_backend(),
        }


class RefimplTarget:
    """refimpl's allocator on a simulated device of the size of an H200."""

    def __init__(self, capacity: int = 150 * GiB) -> None:
        from refimpl.cuda import memory
        from refimpl.cuda._allocator_config import set_allocator_settings
        from refimpl.cuda._errors import OutOfMemoryError

        memory.simulate_devices(capacity)
        self.memory = memory
        self.capacity = capacity
        self.streams = [0, 0x7F00AA00]
        self.oom = OutOfMemoryError
        self._settings = set_allocator_settings

    def settings(self, text: str) -> None:
        self._settings(text)

    def set_fraction(self, fraction: float) -> None:
        self.memory.set_per_process_memory_fraction(fraction, 0)

    def total_memory(self) -> int:
        return self.capacity

    def alloc(self, size: int, stream: int) -> int:
        return self.memory.caching_allocator_alloc(size, 0, self.streams[stream])

    def free(self, ptr: int) -> None:
        self.memory.caching_allocator_delete(ptr)

    def empty_cache(self) -> None:
        self.memory.empty_cache()

    def stats(self) -> dict[str, Any]:
        return dict(self.memory.memory_stats(0))

    def start_history(self) -> None:
        self.memory._record_memory_history(None)
        self.memory._record_memory_history("all", context=None, max_entries=10**7)

    def segment_allocs(self) -> list[list[int]]:
        trace = self.memory._snapshot()["device_traces"][0]
        self.memory._record_memory_history(None)
        return [[e["addr"], e["size"]] for e in trace if e["action"] == "segment_alloc"]

    def meta(self) -> dict[str, Any]:
        return {"target": "refimpl (simulated device)", "device": "AddressSpaceSource"}


def _size(rng: random.Random, oversize: bool) -> int:
    roll = rng.random()
    if roll < 0.35:
        return rng.randrange(1, 8 * KiB)
    if roll < 0.6:
        return rng.randrange(8 * KiB, MiB + 1)
    if roll < 0.8:
        return rng.randrange(MiB + 1, 10 * MiB)
    if roll < 0.95 or not oversize:
        return rng.randrange(10 * MiB, 64 * MiB)
    return rng.randrange(64 * MiB, 300 * MiB)


def _figures(target: Any, keys: tuple[str, ...]) -> dict[str, int]:
    stats = target.stats()
    return {key: int(stats.get(key, 0)) for key in keys}


def record(target: Any, seed: int, steps: int) -> dict[str, Any]:
    """Run every configuration of RUNS on ``target``; return the trace document."""
    from refimpl.cuda._replay import COUNTER_KEYS, FIGURE_KEYS

    keys = FIGURE_KEYS + COUNTER_KEYS
    total = target.total_memory()
    runs = []
    fraction_set = False
    for index, (name, conf, cap) in enumerate(RUNS):
        rng = random.Random(seed * 1000 + index)
        target.empty_cache()
        target.settings(conf)
        fraction = None
        if cap is not None:
            fraction = cap / total
            target.set_fraction(fraction)
            fraction_set = True
        elif fraction_set:
            fraction = 1.0
            target.set_fraction(1.0)
        baseline = _figures(target, keys)
        target.start_history()
        live: dict[int, tuple[int, int]] = {}
        next_id = 0
        run_steps = []
        budget = 2 * GiB if cap is None else None
        # Under a cap, allocate more than free so that allocations start failing.
        alloc_share = 0.55 if cap is None else 0.72
        for _ in range(steps):
            roll = rng.random()
            if roll < 0.03:
                target.empty_cache()
                step: dict[str, Any] = {"op": "empty_cache"}
            elif roll < alloc_share or not live:
                size = _size(rng, oversize=True)
                if budget is not None and sum(s for s, _ in live.values()) + size > budget:
                    victim = rng.choice(sorted(live))
                    target.free(live.pop(victim)[1])
                    run_steps.append(
                        {"op": "free", "id": victim, "figures": _figures(target, keys)}
                    )
                stream = rng.randrange(2)
                step = {"op": "alloc", "id": next_id, "size": size, "stream": stream}
                try:
                    ptr = target.alloc(size, stream)
                    live[next_id] = (size, ptr)
                    step["result"] = "ok"
                    step["ptr"] = ptr
                except target.oom:
                    step["result"] = "oom"
                next_id += 1
            else:
                victim = rng.choice(sorted(live))
                target.free(live.pop(victim)[1])
                step = {"op": "free", "id": victim}
            step["figures"] = _figures(target, keys)
            run_steps.append(step)
        segment_allocs = target.segment_allocs()
        for _, ptr in live.values():
            target.free(ptr)
        target.empty_cache()
        runs.append(
            {
                "name": name,
                "alloc_conf": conf,
                "memory_fraction": fraction,
                "baseline": baseline,
                "segment_allocs": segment_allocs,
                "steps": run_steps,
            }
        )
    target.settings("")
    return {
        "format": FORMAT,
        "meta": {
            **target.meta(),
            "total_memory": total,
            "seed": seed,
            "steps_per_run": steps,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "node": platform.node(),
        },
        "runs": runs,
    }


def main() -> None:
    """Parse the arguments, record, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the JSON trace")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--steps", type=int, default=400, help="steps per run")
    parser.add_argument("--target", choices=("torch", "refimpl"), default="torch")
    args = parser.parse_args()
    target = TorchTarget() if args.target == "torch" else RefimplTarget()
    document = record(target, args.seed, args.steps)
    Path(args.out).write_text(json.dumps(document, separators=(",", ":")) + "\n")
    steps = sum(len(r["steps"]) for r in document["runs"])
    ooms = sum(s.get("result") == "oom" for r in document["runs"] for s in r["steps"])
    print(f"wrote {args.out}: {len(document['runs'])} runs, {steps} steps, {ooms} OOMs")


if __name__ == "__main__":
    main()
