"""Replaying allocation histories through refimpl's caching allocator, no GPU needed.

Spec: cuda_memory (trace replay clauses). Two inputs:

* a *step trace* written by ``bench/record_alloc_trace.py`` on a GPU with real
  torch: seeded runs of ``alloc``/``free``/``empty_cache`` steps, each followed by
  the allocator figures torch reported. :func:`replay_step_trace` runs the same
  steps through :class:`CachingAllocator` on an :class:`AddressSpaceSource` of the
  recorded device's capacity and lists every figure that differs;
* a torch memory *snapshot* with its ``device_traces`` history
  (``torch.cuda.memory._dump_snapshot``): :func:`replay_snapshot` (in
  ``_replay_snapshot``) first reproduces the recorded run exactly, then replays it
  under settings of the caller's choosing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refimpl.cuda._allocator import AddressSpaceSource, Block, CachingAllocator
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._replay_snapshot import ReplaySource, SnapshotReplay, replay_snapshot

# A simulated device handing out the recorded segment addresses in order (shared with
# the snapshot replay): best fit breaks ties between equal free blocks by address, so
# a faithful replay needs the addresses the real cudaMalloc returned.
ScriptedAddressSource = ReplaySource

__all__ = [
    "FIGURE_KEYS",
    "STEP_TRACE_FORMAT",
    "Mismatch",
    "ScriptedAddressSource",
    "SnapshotReplay",
    "figures",
    "replay_snapshot",
    "replay_step_trace",
    "scripted",
]

STEP_TRACE_FORMAT = "tensorctl-alloc-trace/1"

# The ``memory_stats()`` keys compared after every step ("current" values only:
# they depend on the allocator's state, not on what ran before the trace).
FIGURE_KEYS = (
    "allocated_bytes.all.current",
    "reserved_bytes.all.current",
    "segment.all.current",
    "segment.large_pool.current",
    "segment.small_pool.current",
    "active.all.current",
    "active_bytes.all.current",
    "inactive_split.all.current",
    "inactive_split_bytes.all.current",
    "allocation.all.current",
    "requested_bytes.all.current",
)
# Event counters, compared as increases over the run's baseline.
COUNTER_KEYS = ("num_alloc_retries", "num_ooms")

_UNLIMITED = 1 << 60


def figures(allocator: CachingAllocator) -> dict[str, int]:
    """The compared figures of ``allocator``, keyed as ``memory_stats()`` keys them."""
    nested = allocator.stats_as_nested_dict()
    result = {}
    for key in FIGURE_KEYS:
        family, pool, field_name = key.split(".")
        result[key] = nested[family][pool][field_name]  # type: ignore[index]
    for key in COUNTER_KEYS:
        result[key] = nested[key]  # type: ignore[assignment]
    return result


@dataclass
class Mismatch:
    """One figure that refimpl computed differently from the recording."""

    run: str
    step: int
    op: str
    key: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return (
            f"run {self.run!r} step {self.step} ({self.op}): {self.key} "
            f"expected {self.expected}, refimpl {self.actual}"
        )


def _run_allocator(run: dict[str, Any], meta: dict[str, Any]) -> CachingAllocator:
    config = parse_allocator_settings(run.get("alloc_conf") or "")
    capacity = int(meta.get("total_memory") or _UNLIMITED)
    script = [(int(a), int(n)) for a, n in run.get("segment_allocs") or []]
    source = ScriptedAddressSource(capacity, script) if script else AddressSpaceSource(capacity)
    allocator = CachingAllocator(source, 0, config)
    fraction = run.get("memory_fraction")
    if fraction is not None:
        allocator.set_memory_fraction(float(fraction))
    return allocator


def scripted(allocator: CachingAllocator) -> bool:
    """Whether the allocator's segments still come from the recorded addresses."""
    source = allocator.source
    return isinstance(source, ScriptedAddressSource) and not source.diverged


def replay_step_trace(trace: dict[str, Any]) -> list[Mismatch]:
    """Replay every run of a recorded step trace; return the figures that differ."""
    if trace.get("format") != STEP_TRACE_FORMAT:
        raise ValueError(f"not a {STEP_TRACE_FORMAT} trace (format={trace.get('format')!r})")
    meta = trace.get("meta", {})
    mismatches: list[Mismatch] = []
    for run in trace["runs"]:
        name = run.get("name", "?")
        allocator = _run_allocator(run, meta)
        baseline = run.get("baseline", {})
        live: dict[int, Block] = {}
        for index, step in enumerate(run["steps"]):
            op = step["op"]
            outcome = "ok"
            if op == "alloc":
                try:
                    block = allocator.malloc(step["size"], step.get("stream", 0))
                    live[step["id"]] = block
                except OutOfMemoryError:
                    outcome = "oom"
                if step.get("result", "ok") != outcome:
                    mismatches.append(
                        Mismatch(name, index, op, "result", step.get("result", "ok"), outcome)
                    )
                elif (
                    outcome == "ok"
                    and "ptr" in step
                    and scripted(allocator)
                    and block.address != step["ptr"]
                ):
                    mismatches.append(
                        Mismatch(name, index, op, "ptr", hex(step["ptr"]), hex(block.address))
                    )
            elif op == "free":
                block = live.pop(step["id"], None)
                if block is not None:
                    allocator.free(block)
            elif op == "empty_cache":
                allocator.empty_cache()
            else:
                raise ValueError(f"unknown step op {op!r} in run {name!r}")
            actual = figures(allocator)
            for key, expected in step.get("figures", {}).items():
                if key not in actual:
                    continue
                want = expected - baseline.get(key, 0)
                if actual[key] != want:
                    mismatches.append(Mismatch(name, index, op, key, want, actual[key]))
    return mismatches
