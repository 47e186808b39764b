"""Replaying allocation histories through refimpl's caching allocator, no GPU needed.

Spec: cuda_memory (trace replay clauses). Two inputs:

* a *step trace* written by ``bench/record_alloc_trace.py`` on a GPU with real
  torch: seeded runs of ``alloc``/``free``/``empty_cache`` steps, each followed by
  the allocator figures torch reported. :func:`replay_step_trace` runs the same
  steps through :class:`CachingAllocator` on an :class:`AddressSpaceSource` of the
  recorded device's capacity and lists every figure that differs;
* a torch memory *snapshot* with its ``device_traces`` history
  (``torch.cuda.memory._dump_snapshot``). :func:`replay_snapshot` re-issues its
  ``alloc`` and ``free_requested`` actions under settings of the caller's choosing
  and reports how reserved memory, fragmentation and OOMs would have gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refimpl.cuda._allocator import AddressSpaceSource, Block, CachingAllocator
from refimpl.cuda._allocator_config import AllocatorConfig, parse_allocator_settings
from refimpl.cuda._errors import OutOfMemoryError

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


class ScriptedAddressSource(AddressSpaceSource):
    """A simulated device that hands out recorded segment addresses, in order.

    Best fit breaks ties between equal free blocks by address, so a faithful replay
    needs the addresses the real ``cudaMalloc`` returned. Once a request differs
    from the script (another size), the source falls back to fresh addresses and
    :attr:`diverged` is set.
    """

    def __init__(self, capacity: int, script: list[tuple[int, int]]) -> None:
        top = max((a + n for a, n in script), default=0)
        super().__init__(capacity, base=max(top, 1 << 40) + (1 << 30))
        self.script = list(script)
        self.position = 0
        self.diverged = False

    def allocate(self, nbytes: int) -> int | None:
        """The next recorded address when it was recorded for this size."""
        if not self.diverged and self.position < len(self.script):
            address, size = self.script[self.position]
            if size == nbytes and self.used + nbytes <= self.capacity:
                self.position += 1
                self.live[address] = nbytes
                self.used += nbytes
                self.num_allocations += 1
                return address
            self.diverged = True
        return super().allocate(nbytes)


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


@dataclass
class SnapshotReplay:
    """What happened when a snapshot's history was replayed (and what torch recorded)."""

    allocs: int = 0
    frees: int = 0
    unmatched_frees: int = 0
    preexisting: int = 0
    ooms: int = 0
    failed_requests: list[int] = field(default_factory=list)
    peak_reserved: int = 0
    peak_allocated: int = 0
    final_reserved: int = 0
    final_allocated: int = 0
    final_requested: int = 0
    alloc_retries: int = 0
    segments_peak: int = 0
    timeline: list[tuple[int, int, int]] = field(default_factory=list)
    recorded: dict[str, int] = field(default_factory=dict)
    segments: list[dict[str, Any]] = field(default_factory=list)


def _recorded_figures(trace: list[dict[str, Any]]) -> dict[str, int]:
    """Peaks torch itself went through, as far as the trace tells."""
    reserved = allocated = peak_reserved = peak_allocated = ooms = 0
    sizes: dict[int, int] = {}
    for entry in trace:
        action = entry.get("action")
        size = int(entry.get("size", 0))
        if action == "segment_alloc":
            reserved += size
        elif action == "segment_free":
            reserved -= size
        elif action == "alloc":
            sizes[entry.get("addr", 0)] = size
            allocated += size
        elif action == "free_completed":
            allocated -= sizes.pop(entry.get("addr", 0), 0)
        elif action == "oom":
            ooms += 1
        peak_reserved = max(peak_reserved, reserved)
        peak_allocated = max(peak_allocated, allocated)
    return {
        "reserved_delta_peak": peak_reserved,
        "requested_peak": peak_allocated,
        "ooms": ooms,
        "events": len(trace),
    }


def _preexisting_blocks(
    snapshot: dict[str, Any], trace: list[dict[str, Any]], device: int
) -> list[tuple[int, int, int]]:
    """(address, requested size, stream) of blocks live before the recorded history began."""
    allocated_in_trace = set()
    found: dict[int, tuple[int, int]] = {}
    for entry in trace:
        addr = entry.get("addr")
        if entry.get("action") == "alloc":
            allocated_in_trace.add(addr)
        elif entry.get("action") == "free_requested" and addr not in allocated_in_trace:
            found.setdefault(addr, (int(entry.get("size", 0)), int(entry.get("stream", 0))))
    for segment in snapshot.get("segments", []):
        if segment.get("device", device) != device:
            continue
        for block in segment.get("blocks", []):
            addr = block.get("address")
            if block.get("state") == "active_allocated" and addr not in allocated_in_trace:
                size = int(block.get("requested_size") or block.get("size", 0))
                found.setdefault(addr, (size, int(segment.get("stream", 0))))
    return sorted((addr, size, stream) for addr, (size, stream) in found.items() if size > 0)


def replay_snapshot(
    snapshot: dict[str, Any],
    config: AllocatorConfig | None = None,
    capacity: int | None = None,
    device: int = 0,
    set_fraction: bool = False,
) -> SnapshotReplay:
    """Re-issue the allocations and frees of ``snapshot``'s history for ``device``.

    Blocks live before the history began (frees of unknown addresses, allocated
    blocks the history never allocated) are allocated first. ``capacity`` bounds
    the simulated device (no bound by default); ``set_fraction`` caps the allocator
    at the whole capacity, which garbage collection needs to be active.
    """
    traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    allocator = CachingAllocator(
        AddressSpaceSource(capacity if capacity is not None else _UNLIMITED), device, config
    )
    if set_fraction:
        allocator.set_memory_fraction(1.0)
    report = SnapshotReplay(recorded=_recorded_figures(trace))
    live: dict[int, Block] = {}

    def allocate(addr: int, size: int, stream: int) -> None:
        try:
            live[addr] = allocator.malloc(size, stream)
        except OutOfMemoryError:
            report.ooms += 1
            report.failed_requests.append(size)

    for addr, size, stream in _preexisting_blocks(snapshot, trace, device):
        report.preexisting += 1
        allocate(addr, size, stream)
    stats = allocator.stats
    for index, entry in enumerate(trace):
        action = entry.get("action")
        if action == "alloc":
            report.allocs += 1
            allocate(entry.get("addr", 0), int(entry.get("size", 0)), int(entry.get("stream", 0)))
        elif action == "free_requested":
            block = live.pop(entry.get("addr", 0), None)
            if block is None:
                report.unmatched_frees += 1
            else:
                report.frees += 1
                allocator.free(block)
        else:
            continue
        report.timeline.append(
            (index, stats.current("allocated_bytes"), stats.current("reserved_bytes"))
        )
    report.peak_reserved = stats.get("reserved_bytes")[1]
    report.peak_allocated = stats.get("allocated_bytes")[1]
    report.final_reserved = stats.current("reserved_bytes")
    report.final_allocated = stats.current("allocated_bytes")
    report.final_requested = stats.current("requested_bytes")
    report.segments_peak = stats.get("segment")[1]
    report.alloc_retries = stats.num_alloc_retries
    report.segments = allocator.segments()
    return report
