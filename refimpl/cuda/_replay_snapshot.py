"""Replaying a memory snapshot's history through refimpl's caching allocator.

Spec: cuda_memory (trace replay clauses). A snapshot from
``torch.cuda.memory._snapshot()`` holds the allocator's final segments and a trace
of its actions. :func:`replay_snapshot` re-runs that trace on a simulated device in
one of two modes:

* **recorded** (no settings given): the snapshot's own ``allocator_settings``, the
  segment addresses ``cudaMalloc`` returned, every ``segment_free`` torch recorded
  (``empty_cache``, releases inside ``malloc`` before an OOM, garbage collection)
  applied to the very segment it names, and frees that waited for other streams
  (``record_stream``) kept pending until their ``free_completed``. The replay must
  then END with exactly the snapshot's segments; :func:`compare_segments` names the
  first difference, and every event is checked on the way (the first divergence is
  reported);
* **what-if** (settings or a capacity given): the program's actions only (allocs,
  frees, and ``empty_cache`` calls, recognised by their stack or, without stacks,
  by where they sit in the trace); the allocator decides its own cache releases.
  The first trace event where it departs from the recorded run is reported.
  Requests that failed in the recorded run (``oom`` entries) are not retried: what
  the program did instead is not in the trace.

When the history does not begin with the run (a ring buffer that wrapped), the
state at its start is rebuilt from the snapshot (see ``_replay_initial``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from refimpl.cuda._allocator import AddressSpaceSource, CachingAllocator
from refimpl.cuda._allocator_config import (
    ROUNDUP_INTERVALS,
    SIZE_MAX,
    AllocatorConfig,
)
from refimpl.cuda._allocator_stats import format_size
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._replay_initial import (
    PENDING_STREAM_BASE,
    Unbuildable,
    build_initial_state,
)

__all__ = [
    "Divergence",
    "ReplaySource",
    "SnapshotReplay",
    "compare_segments",
    "recorded_config",
    "release_causes",
    "replay_snapshot",
]

UNLIMITED = 1 << 60


@dataclass
class Divergence:
    """The first trace event after which the replay no longer matches the recorded run."""

    index: int
    action: str
    addr: int
    size: int
    what: str

    def __str__(self) -> str:
        return (
            f"event {self.index} ({self.action} of {format_size(self.size)} at "
            f"{self.addr:#x}): {self.what}"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"index": self.index, "action": self.action, "addr": self.addr,
                "size": self.size, "what": self.what, "text": str(self)}


@dataclass
class SnapshotReplay:
    """What happened when a snapshot's history was replayed (and what torch recorded)."""

    mode: str = "recorded"
    allocs: int = 0
    frees: int = 0
    unmatched_frees: int = 0
    preexisting: int = 0
    pending_frees: int = 0
    releases_replayed: int = 0
    empty_cache_calls: int = 0
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
    # the first event where the replay departs from the recorded run (None: never)
    divergence: Divergence | None = None
    # recorded mode: None when the final segments are the snapshot's, else the first difference
    final_mismatch: str | None = None
    # False when the history began mid-run (a wrapped ring buffer); then the state
    # at its start was rebuilt from the snapshot, or could not be (initial_error)
    history_complete: bool = True
    initial_error: str | None = None
    # release_causes() of the trace (by the recorded replay's state where stacks are missing)
    causes: list[str] = field(default_factory=list)

    @property
    def reproduces(self) -> bool:
        """Whether the replay ended with exactly the snapshot's segments."""
        return self.final_mismatch is None


def recorded_config(snapshot: dict[str, Any]) -> AllocatorConfig:
    """The allocator settings a snapshot was recorded under (its ``allocator_settings``).

    Raises NotImplementedError for settings refimpl's allocator does not implement
    (expandable segments) and TypeError for values of the wrong type.
    """
    settings = snapshot.get("allocator_settings") or {}
    if not isinstance(settings, dict):
        raise TypeError("'allocator_settings' is not a dict")
    config = AllocatorConfig()
    max_split = settings.get("max_split_size", -1)
    if not isinstance(max_split, int):
        raise TypeError(f"max_split_size {max_split!r} is not an integer")
    config.max_split_size = SIZE_MAX if max_split < 0 else max_split
    threshold = settings.get("garbage_collection_threshold", 0.0)
    if not isinstance(threshold, (int, float)):
        raise TypeError(f"garbage_collection_threshold {threshold!r} is not a number")
    config.garbage_collection_threshold = float(threshold)
    divisions = settings.get("roundup_power2_divisions") or {}
    if isinstance(divisions, dict):
        # keyed by the interval's power of two in MiB: "1" is [1 MiB, 2 MiB), "2" the next...
        values = [0] * ROUNDUP_INTERVALS
        for key, value in divisions.items():
            index = int(key).bit_length() - 1
            if 0 <= index < ROUNDUP_INTERVALS and isinstance(value, int):
                values[index] = value
        config.roundup_power2_divisions = values
    elif isinstance(divisions, list):
        config.roundup_power2_divisions = [int(v) for v in divisions][:ROUNDUP_INTERVALS]
    config.roundup_enabled = any(d > 1 for d in config.roundup_power2_divisions)
    if settings.get("expandable_segments"):
        raise NotImplementedError(
            "the snapshot was recorded with expandable_segments:True, which refimpl's "
            "caching allocator does not implement"
        )
    config.last_allocator_settings = str(settings.get("PYTORCH_CUDA_ALLOC_CONF") or "")
    return config


def _release_groups(trace: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of the ``segment_free`` entries of each run of releases (the
    ``free_completed`` entries an ``empty_cache`` interleaves do not break a run)."""
    groups: list[list[int]] = []
    i = 0
    while i < len(trace):
        if trace[i].get("action") != "segment_free":
            i += 1
            continue
        j = i
        while j < len(trace) and trace[j].get("action") in ("segment_free", "free_completed"):
            j += 1
        groups.append([k for k in range(i, j) if trace[k].get("action") == "segment_free"])
        i = j
    return groups


def release_causes(
    trace: list[dict[str, Any]], free_sets: dict[int, set[int]] | None = None
) -> list[str]:
    """For each entry, ``"empty_cache"`` or ``"allocator"`` where it is a ``segment_free``.

    A release is the program's ``empty_cache()`` when its stack says so. For a run
    of releases without stacks: it is the allocator's own (freeing cache for a request) when an
    ``oom`` follows it, or when it released only part of the free unsplit segments
    (``free_sets``: those of the recorded replay when each run began, by its first
    index); otherwise ``empty_cache``, which releases them all (so does the
    allocator's last resort before an allocation succeeds: that case reads as
    ``empty_cache`` without stacks).
    """
    causes = [""] * len(trace)
    for group in _release_groups(trace):
        if any(trace[k].get("frames") for k in group):
            for k in group:  # each release by its own stack
                names = {f.get("name") for f in trace[k].get("frames") or []
                         if isinstance(f, dict)}
                causes[k] = "empty_cache" if "empty_cache" in names else "allocator"
            continue
        after = group[-1] + 1
        while after < len(trace) and trace[after].get("action") == "free_completed":
            after += 1
        following = trace[after].get("action") if after < len(trace) else None
        released = {trace[k].get("addr") for k in group}
        partial = free_sets is not None and group[0] in free_sets and (
            released != free_sets[group[0]])
        cause = "allocator" if following == "oom" or partial else "empty_cache"
        for k in group:
            causes[k] = cause
    return causes


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


class ReplaySource(AddressSpaceSource):
    """A simulated device handing out the segment addresses torch's run received.

    ``script`` lists (address, size) of the segments in the order they were
    reserved. A request of another size than the next scripted one marks the
    source :attr:`diverged` and gets a fresh address above every scripted one.
    """

    def __init__(self, capacity: int, script: list[tuple[int, int]]) -> None:
        top = max((a + n for a, n in script), default=0)
        super().__init__(capacity, base=max(top, 1 << 40) + (1 << 30))
        self.script = script
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


def _segments_of(snapshot: dict[str, Any], device: int) -> list[dict[str, Any]]:
    return sorted(
        (s for s in snapshot.get("segments", []) if s.get("device", device) == device),
        key=lambda s: s.get("address", 0),
    )


def _segment_key(segment: dict[str, Any]) -> tuple:
    blocks = tuple(
        (b.get("address"), b.get("size"), b.get("state"),
         b.get("requested_size") if b.get("state") == "active_allocated" else None)
        for b in segment.get("blocks", [])
    )
    allocated = sum(b[1] for b in blocks if b[2] == "active_allocated")
    return (segment.get("address"), segment.get("total_size"), segment.get("segment_type"),
            segment.get("stream"), allocated, blocks)


def compare_segments(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str | None:
    """None when both lists hold the same segments (address, size, pool, stream,
    allocated bytes and every block's address, size, state and requested size);
    otherwise a sentence naming the first difference."""
    want = {s["address"]: s for s in expected}
    got = {s["address"]: s for s in actual}
    for address in sorted(set(want) | set(got)):
        w, g = want.get(address), got.get(address)
        if g is None:
            return (f"the snapshot holds segment {address:#x} "
                    f"({format_size(w['total_size'])}) that the replay does not")
        if w is None:
            return (f"the replay holds segment {address:#x} "
                    f"({format_size(g['total_size'])}) that the snapshot does not")
        kw, kg = _segment_key(w), _segment_key(g)
        if kw == kg:
            continue
        names = ("address", "size", "pool", "stream", "allocated bytes")
        for name, a, b in zip(names, kw[:5], kg[:5]):
            if a != b:
                return f"segment {address:#x}: {name} {a} in the snapshot, {b} in the replay"
        for bw, bg in zip(kw[5], kg[5]):
            if bw != bg:
                return (f"segment {address:#x}: block {bw[0]:#x} is {bw[1]} bytes "
                        f"{bw[2]} in the snapshot, block {bg[0]:#x} {bg[1]} bytes {bg[2]} "
                        "in the replay")
        return (f"segment {address:#x}: {len(kw[5])} blocks in the snapshot, "
                f"{len(kg[5])} in the replay")
    return None


def _immediate_completion(trace: list[dict[str, Any]]) -> list[bool]:
    """For each ``free_requested``: whether its ``free_completed`` follows at once."""
    result = [False] * len(trace)
    for i, entry in enumerate(trace):
        if entry.get("action") == "free_requested" and i + 1 < len(trace):
            nxt = trace[i + 1]
            result[i] = nxt.get("action") == "free_completed" and nxt.get("addr") == entry.get(
                "addr")
    return result


def _locked(allocator: CachingAllocator, fn, *args) -> Any:
    with allocator.lock:
        return allocator._exclusive(fn, *args)


def _release_segment(allocator: CachingAllocator, address: int, size: int) -> bool:
    """Give the free, unsplit segment at ``address`` back to the source (as torch did)."""

    def release() -> bool:
        for pool in allocator.block_pools():
            block = pool.blocks.get(address)
            if block is not None and block.size == size and not block.is_split():
                allocator._release_block(block, None)  # takes it out of the pool too
                return True
        return False

    return _locked(allocator, release)


def _free_segments(allocator: CachingAllocator) -> set[int]:
    """Addresses of the free, unsplit segments (what an ``empty_cache`` would release)."""
    return {b.address for pool in allocator.block_pools() for b in pool.blocks.values()
            if not b.is_split()}


def _process_events(allocator: CachingAllocator) -> None:
    _locked(allocator, allocator._process_events, None)


def replay_snapshot(
    snapshot: dict[str, Any],
    config: AllocatorConfig | None = None,
    capacity: int | None = None,
    device: int = 0,
    set_fraction: bool = False,
    causes: list[str] | None = None,
) -> SnapshotReplay:
    """Re-run the history of ``snapshot`` for ``device`` (see the module docstring).

    ``config`` None and ``capacity`` None: the recorded mode, under the snapshot's own
    settings. Otherwise a what-if under ``config`` (the recorded settings when None)
    on a device of ``capacity`` bytes (unbounded when None); ``set_fraction`` caps
    the allocator at that capacity, which garbage collection needs. ``causes``: the
    :func:`release_causes` of a recorded replay (one is run when not given).
    """
    recorded = config is None and capacity is None
    traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    final_segments = _segments_of(snapshot, device)
    report = SnapshotReplay(mode="recorded" if recorded else "what-if",
                            recorded=_recorded_figures(trace))
    config = recorded_config(snapshot) if config is None else config
    initial = build_initial_state(final_segments, trace, config)
    report.history_complete = not (initial.segments or initial.orphans)
    report.initial_error = initial.error
    script = [(int(e.get("addr", 0)), int(e.get("size", 0)))
              for e in trace if e.get("action") == "segment_alloc"]

    def fresh_allocator() -> tuple[ReplaySource, CachingAllocator]:
        source = ReplaySource(capacity if capacity is not None else UNLIMITED,
                              initial.script + script)
        allocator = CachingAllocator(source, device, config)
        if set_fraction and not recorded:
            allocator.set_memory_fraction(1.0)
        return source, allocator

    source, allocator = fresh_allocator()
    try:
        live, pending = initial.apply(allocator, source)
    except Unbuildable as exc:
        report.initial_error = str(exc)
        source, allocator = fresh_allocator()
        live, pending = {}, {}
    report.preexisting = len(live) + len(pending)
    torch_segments = dict(initial.segments)
    if recorded:
        causes: list[str] = []
        group_starts = {g[0] for g in _release_groups(trace)}
        free_sets: dict[int, set[int]] = {}
    elif causes is None:
        causes = replay_snapshot(snapshot, device=device).causes
    immediate = _immediate_completion(trace)
    next_pending = PENDING_STREAM_BASE + (1 << 40)  # beyond those of the initial state
    stats = allocator.stats

    def diverge(index: int, entry: dict[str, Any], what: str) -> None:
        if report.divergence is None:
            report.divergence = Divergence(
                index, str(entry.get("action")), int(entry.get("addr", 0) or 0),
                int(entry.get("size", 0)), what)

    def check_segments(index: int, entry: dict[str, Any]) -> None:
        if report.divergence is not None or source.live == torch_segments:
            return
        for address in sorted(set(source.live) | set(torch_segments)):
            want, got = torch_segments.get(address), source.live.get(address)
            if want == got:
                continue
            if got is None:
                what = f"torch holds segment {address:#x} ({format_size(want)}), the replay not"
            elif want is None:
                what = (f"the replay holds segment {address:#x} ({format_size(got)}), "
                        "torch not")
            else:
                what = f"segment {address:#x} is {want} bytes in torch, {got} in the replay"
            diverge(index, entry, what)
            return

    empty_cache_done = False
    for index, entry in enumerate(trace):
        action = entry.get("action")
        addr = entry.get("addr", 0)
        size = int(entry.get("size", 0))
        if action != "segment_free":
            empty_cache_done = False
        if action == "segment_alloc":
            torch_segments[addr] = size
            continue
        if action == "segment_free":
            torch_segments.pop(addr, None)
            if recorded:
                if index in group_starts:
                    free_sets[index] = _free_segments(allocator)
                if _release_segment(allocator, addr, size):
                    report.releases_replayed += 1
                else:
                    diverge(index, entry, "torch released this segment; in the replay it "
                            "is in use, split or absent")
            elif causes[index] == "empty_cache" and not empty_cache_done:
                empty_cache_done = True
                report.empty_cache_calls += 1
                allocator.empty_cache()
            continue
        if action == "alloc":
            report.allocs += 1
            try:
                block = allocator.malloc(size, int(entry.get("stream", 0)))
            except OutOfMemoryError:
                report.ooms += 1
                report.failed_requests.append(size)
                diverge(index, entry, "the replay ran out of memory here; torch did not")
            else:
                live[addr] = block
                if block.address != addr:
                    diverge(index, entry, f"the replay placed it at {block.address:#x}")
            check_segments(index, entry)
        elif action == "free_requested":
            block = live.pop(addr, None)
            if block is None:
                report.unmatched_frees += 1
                continue
            report.frees += 1
            if not immediate[index]:
                # used on another stream: the free completes at its free_completed
                allocator.source.set_stream_busy(next_pending)
                allocator.record_stream(block, next_pending)
                pending[addr] = next_pending
                next_pending += 1
                report.pending_frees += 1
            allocator.free(block)
        elif action == "free_completed":
            stream = pending.pop(addr, None)
            if stream is not None:
                allocator.source.complete_stream(stream)
                _process_events(allocator)
            check_segments(index, entry)
        elif action == "oom":
            check_segments(index, entry)
            continue
        else:
            continue
        report.timeline.append(
            (index, stats.current("allocated_bytes"), stats.current("reserved_bytes"))
        )
    check_segments(len(trace), {"action": "end", "addr": 0, "size": 0})
    report.peak_reserved = stats.get("reserved_bytes")[1]
    report.peak_allocated = stats.get("allocated_bytes")[1]
    report.final_reserved = stats.current("reserved_bytes")
    report.final_allocated = stats.current("allocated_bytes")
    report.final_requested = stats.current("requested_bytes")
    report.segments_peak = stats.get("segment")[1]
    report.alloc_retries = stats.num_alloc_retries
    report.segments = allocator.segments()
    if recorded:
        report.final_mismatch = compare_segments(final_segments, report.segments)
        causes = release_causes(trace, free_sets)
    report.causes = causes
    return report
