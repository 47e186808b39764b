"""The caching allocator algorithm on a simulated device (spec: cuda_memory, ALLOC clauses).

Every expectation here is torch's native allocator behaviour (c10
CUDACachingAllocator); the numbers follow from its rules, not from refimpl's code.
"""

from __future__ import annotations

import json
import random
import re
import threading
from pathlib import Path

import pytest

from refimpl.cuda._allocator import AddressSpaceSource, CachingAllocator, OutOfMemoryError
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._replay import replay_step_trace
from refimpl.cuda._snapshot import RecordContext

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def make(capacity: int = 1 << 40, conf: str = "") -> tuple[CachingAllocator, AddressSpaceSource]:
    source = AddressSpaceSource(capacity)
    return CachingAllocator(source, 0, parse_allocator_settings(conf)), source


def current(allocator: CachingAllocator, family: str, pool: str = "all") -> int:
    return allocator.stats_as_nested_dict()[family][pool]["current"]


def segments(allocator: CachingAllocator) -> list[dict]:
    return allocator.segments()


# -- rounding, pools and segment sizes ---------------------------------------------------


@pytest.mark.parametrize(
    ("request_size", "block_size"), [(1, 512), (511, 512), (512, 512), (513, 1024), (0, 512)]
)
def test_requests_round_up_to_512_bytes(request_size: int, block_size: int) -> None:
    allocator, _ = make()
    block = allocator.malloc(request_size)
    assert block.size == block_size
    assert block.requested_size == request_size
    assert current(allocator, "allocated_bytes") == block_size
    assert current(allocator, "requested_bytes") == request_size


def test_small_requests_tile_one_2mib_segment() -> None:
    allocator, _ = make()
    blocks = [allocator.malloc(512) for _ in range(11)]
    assert [b.address - blocks[0].address for b in blocks] == [512 * i for i in range(11)]
    (segment,) = segments(allocator)
    assert segment["segment_type"] == "small"
    assert segment["total_size"] == 2 * MiB
    assert segment["allocated_size"] == 11 * 512


@pytest.mark.parametrize(
    ("request_size", "pool", "segment_size"),
    [
        (MiB, "small", 2 * MiB),
        (MiB + 1, "large", 20 * MiB),
        (5 * MiB, "large", 20 * MiB),
        (10 * MiB - 512, "large", 20 * MiB),
        (10 * MiB, "large", 10 * MiB),
        (11 * MiB + 1, "large", 12 * MiB),
        (100 * MiB + 1, "large", 102 * MiB),
    ],
)
def test_segment_size_follows_the_request(request_size: int, pool: str, segment_size: int) -> None:
    allocator, source = make()
    allocator.malloc(request_size)
    (segment,) = segments(allocator)
    assert segment["segment_type"] == pool
    assert segment["total_size"] == segment_size
    assert source.used == segment_size == current(allocator, "reserved_bytes")
    assert current(allocator, "segment", f"{pool}_pool") == 1


def test_large_blocks_split_only_when_more_than_1mib_remains() -> None:
    allocator, _ = make()
    split = allocator.malloc(18 * MiB + MiB // 2)  # 20 MiB segment, 1.5 MiB left: split
    assert split.size == 18 * MiB + MiB // 2
    whole = allocator.malloc(19 * MiB)  # 20 MiB segment, 1 MiB left: not split
    assert whole.size == 20 * MiB
    assert current(allocator, "allocated_bytes") == 38 * MiB + MiB // 2
    assert current(allocator, "inactive_split") == 1
    assert current(allocator, "inactive_split_bytes") == MiB + MiB // 2


def test_best_fit_takes_the_smallest_free_block() -> None:
    allocator, _ = make()
    a = allocator.malloc(4 * MiB)
    a_address = a.address
    allocator.malloc(3 * MiB // 2)
    c = allocator.malloc(6 * MiB)
    allocator.malloc(3 * MiB // 2)
    allocator.free(a)
    allocator.free(c)  # free blocks: 4 MiB, 6 MiB and the 7 MiB tail
    got = allocator.malloc(3 * MiB)
    assert got.address == a_address
    assert got.size == 4 * MiB  # 1 MiB left over is not enough to split a large block


def test_free_blocks_merge_with_free_neighbours() -> None:
    allocator, _ = make()
    a, b, c = (allocator.malloc(1000) for _ in range(3))
    allocator.free(b)
    assert current(allocator, "inactive_split") == 2  # b and the tail after c
    allocator.free(a)  # a merges with b
    assert current(allocator, "inactive_split") == 2
    assert current(allocator, "inactive_split_bytes") == 2 * MiB - 1024
    allocator.free(c)  # everything merges back into one unsplit block
    (segment,) = segments(allocator)
    assert [blk["state"] for blk in segment["blocks"]] == ["inactive"]
    assert current(allocator, "inactive_split") == 0
    assert current(allocator, "inactive_split_bytes") == 0
    assert current(allocator, "active") == 0


def test_freed_blocks_stay_on_their_stream() -> None:
    allocator, _ = make()
    side = allocator.malloc(4096, stream=7)
    address = side.address
    allocator.free(side)
    other = allocator.malloc(4096, stream=0)
    assert other.address != address
    assert current(allocator, "segment") == 2
    again = allocator.malloc(4096, stream=7)
    assert again.address == address


# -- caching and empty_cache -------------------------------------------------------------


def test_empty_cache_returns_only_unused_segments() -> None:
    allocator, source = make()
    kept = allocator.malloc(5 * MiB)
    dropped = allocator.malloc(16 * MiB)  # too big for the 15 MiB left: own segment
    allocator.free(dropped)
    assert current(allocator, "reserved_bytes") == 36 * MiB
    allocator.empty_cache()
    assert current(allocator, "reserved_bytes") == 20 * MiB == source.used
    assert allocator.stats.num_device_free == 1
    assert kept.allocated


def test_a_freed_block_is_reused_without_a_new_segment() -> None:
    allocator, source = make()
    block = allocator.malloc(MiB)
    address = block.address
    allocator.free(block)
    assert allocator.malloc(MiB).address == address
    assert source.num_allocations == 1


# -- out of memory --------------------------------------------------------------------------

_OOM = re.compile(
    r"CUDA out of memory\. Tried to allocate (?P<alloc>[\d.]+ \w+)\. GPU 0 has a total capacity "
    r"of (?P<total>[\d.]+ \w+) of which (?P<free>[\d.]+ \w+|\d+ bytes) is free\. (?P<allowed>.*)"
    r"Of the allocated memory (?P<allocated>[\d.]+ \w+|\d+ bytes) is allocated by PyTorch, and "
    r"(?P<cached>[\d.]+ \w+|\d+ bytes) is reserved by PyTorch but unallocated\. If reserved but "
    r"unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    r"to avoid fragmentation\.  See documentation for Memory Management  "
    r"\(https://pytorch\.org/docs/stable/notes/cuda\.html#environment-variables\)$"
)


def test_oom_raises_torch_message_after_freeing_the_cache() -> None:
    allocator, _ = make(capacity=GiB)
    live = allocator.malloc(3 * MiB)
    cached = allocator.malloc(200 * MiB)
    allocator.free(cached)
    with pytest.raises(OutOfMemoryError) as info:
        allocator.malloc(2 * GiB)
    assert isinstance(info.value, RuntimeError)
    match = _OOM.match(str(info.value))
    assert match is not None, str(info.value)
    assert match["alloc"] == "2.00 GiB"
    assert match["total"] == "1024.00 MiB"
    assert match["free"] == "1004.00 MiB"  # the cached 200 MiB segment was given back
    assert match["allocated"] == "3.00 MiB"
    assert match["cached"] == "17.00 MiB"
    assert match["allowed"] == ""
    stats = allocator.stats
    assert (stats.num_ooms, stats.num_alloc_retries, stats.num_device_free) == (1, 1, 1)
    assert live.allocated


def test_oom_reports_the_huge_size_as_torch_does() -> None:
    allocator, _ = make(capacity=80 * GiB)
    with pytest.raises(OutOfMemoryError, match=r"Tried to allocate 800000000\.00 GiB"):
        allocator.malloc(1024 * 1024 * 1024 * 800000000)
    with pytest.raises(RuntimeError, match=r"^CUDA out of memory\. Tried to allocate more than 1EB memory\.$"):
        allocator.allocate(1024 * 1024 * 1024 * 8000000000)
    assert allocator.allocate(0) is None


def test_allocation_succeeds_again_once_memory_is_freed() -> None:
    allocator, _ = make(capacity=100 * MiB)
    first = allocator.malloc(60 * MiB)
    with pytest.raises(OutOfMemoryError):
        allocator.malloc(60 * MiB)
    allocator.free(first)
    allocator.malloc(60 * MiB)
    allocator.check_invariants()


def test_oom_retry_succeeds_after_releasing_the_cache() -> None:
    allocator, source = make(capacity=100 * MiB)
    allocator.free(allocator.malloc(60 * MiB))
    block = allocator.malloc(70 * MiB)
    assert block.size == 70 * MiB
    assert allocator.stats.num_alloc_retries == 1
    assert allocator.stats.num_ooms == 0
    assert source.used == 70 * MiB


def test_oom_observers_run_before_the_error() -> None:
    allocator, _ = make(capacity=GiB)
    calls = []

    def observer(device: int, alloc: int, total: int, free: int) -> None:
        calls.append((device, alloc, total, free, allocator.stats.num_ooms))

    allocator.attach_oom_observer(observer)
    with pytest.raises(OutOfMemoryError):
        allocator.malloc(1024**4)
    assert calls == [(0, 1024**4, GiB, GiB, 1)]
    with pytest.raises(OutOfMemoryError):
        allocator.allocate(1 << 61)  # the 1 EB guard does not reach the observers
    assert len(calls) == 1


def test_memory_fraction_caps_reserved_memory() -> None:
    allocator, _ = make(capacity=GiB)
    allocator.set_memory_fraction(0.5)
    allocator.malloc(400 * MiB)
    with pytest.raises(OutOfMemoryError, match=r"is free\. 512\.00 MiB allowed; Of the allocated"):
        allocator.malloc(200 * MiB)
    observed = []
    allocator.attach_oom_observer(lambda *args: observed.append(args))
    with pytest.raises(OutOfMemoryError):
        allocator.malloc(200 * MiB)
    assert observed[0][2] == 512 * MiB  # the observer sees the allowed maximum


# -- max_split_size and oversize blocks ----------------------------------------------------


def test_oversize_blocks_are_not_split_and_serve_only_large_requests() -> None:
    allocator, _ = make(conf="max_split_size_mb:40")
    assert allocator.stats_as_nested_dict()["max_split_size"] == 40 * MiB
    big = allocator.malloc(50 * MiB)
    stats = allocator.stats_as_nested_dict()
    assert stats["oversize_allocations"]["current"] == 1
    assert stats["oversize_segments"]["current"] == 1
    address = big.address
    allocator.free(big)
    small = allocator.malloc(30 * MiB)  # under max_split: may not take an oversize block
    assert small.address != address
    reuse = allocator.malloc(45 * MiB)  # 50 < 45 + 20: reused whole, not split
    assert (reuse.address, reuse.size) == (address, 50 * MiB)
    allocator.free(reuse)
    assert allocator.malloc(29 * MiB + 1).address != address  # still too small a request


def test_oversize_block_is_not_rounded_up_by_more_than_20mib() -> None:
    allocator, _ = make(conf="max_split_size_mb:40")
    huge = allocator.malloc(100 * MiB)
    allocator.free(huge)
    assert allocator.malloc(60 * MiB).address != huge.address  # 100 >= 60 + 20


def test_oom_first_releases_just_enough_oversize_blocks() -> None:
    allocator, _ = make(capacity=120 * MiB, conf="max_split_size_mb:40")
    a, b = allocator.malloc(50 * MiB), allocator.malloc(50 * MiB)
    allocator.free(a)
    allocator.free(b)
    allocator.malloc(60 * MiB)
    stats = allocator.stats
    assert stats.num_device_free == 2  # released largest-first until 60 MiB were freed
    assert stats.num_alloc_retries == 0  # no full cache flush was needed
    assert current(allocator, "reserved_bytes") == 60 * MiB


# -- roundup_power2_divisions and garbage collection -----------------------------------------


def test_roundup_power2_divisions_rounds_to_the_next_division() -> None:
    allocator, _ = make(conf="roundup_power2_divisions:4")
    size = 1153434  # 1.1 MiB: between 1 MiB and 2 MiB the 4 steps are 256 KiB apart
    assert allocator.round_size(size) == MiB + 256 * KiB
    assert allocator.malloc(size).size == MiB + 256 * KiB
    assert allocator.round_size(2048) == 2048  # powers of two are kept
    assert allocator.round_size(1000) == 1024  # 1000 <= 512 * 4: plain 512 rounding


def test_roundup_power2_divisions_per_interval() -> None:
    allocator, _ = make(conf="roundup_power2_divisions:[256:8,>:2]")
    assert allocator.round_size(1153434) == MiB + 128 * KiB  # below 256 MiB: 8 divisions
    assert allocator.round_size(600 * MiB) == 768 * MiB  # above 512 MiB: 2 divisions


def test_garbage_collection_frees_the_oldest_cached_segments() -> None:
    allocator, _ = make(capacity=200 * MiB, conf="garbage_collection_threshold:0.5")
    allocator.set_memory_fraction(1.0)
    blocks = [allocator.malloc(40 * MiB) for _ in range(3)]
    first, second, third = (b.address for b in blocks)
    for block in blocks:
        allocator.free(block)
    reused = allocator.malloc(40 * MiB)  # the first segment becomes the youngest
    assert reused.address == first
    allocator.free(reused)
    allocator.malloc(50 * MiB)  # 120 MiB reserved > 100 MiB threshold: collect
    addresses = {s["address"] for s in segments(allocator)}
    assert first in addresses
    assert not {second, third} & addresses
    assert current(allocator, "reserved_bytes") == 90 * MiB


# -- record_stream -------------------------------------------------------------------------


def test_record_stream_defers_reuse_until_the_stream_is_done() -> None:
    allocator, source = make()
    source.set_stream_busy(5)
    block = allocator.malloc(1024)
    address = block.address
    allocator.record_stream(block, 5)
    allocator.free(block)
    (segment,) = segments(allocator)
    assert segment["blocks"][0]["state"] == "active_pending_free"
    assert current(allocator, "active") == 1 and current(allocator, "allocation") == 0
    early = allocator.malloc(1024)
    assert early.address != address, "allocation re-used too soon"
    source.complete_stream(5)
    late = allocator.malloc(1024)
    assert late.address == address, "allocation not re-used"
    assert source.events_recorded == source.events_released == 1


def test_active_stats_count_pending_frees_in_every_field() -> None:
    """A pending free keeps its block active: active's current, peak, allocated and
    freed follow the block, across peak and accumulated-stat resets made meanwhile."""
    allocator, source = make()

    def stat(family: str) -> list[int]:
        entry = allocator.stats_as_nested_dict()[family]["all"]
        return [entry[field] for field in ("current", "peak", "allocated", "freed")]

    first, _second = allocator.malloc(1000), allocator.malloc(1000)
    allocator.record_stream(first, 7)
    source.set_stream_busy(7)
    allocator.free(first)  # pending on stream 7
    third = allocator.malloc(1000)
    assert stat("allocation") == [2, 2, 3, 1]
    assert stat("active") == [3, 3, 3, 0]
    assert stat("active_bytes") == [3 * 1024, 3 * 1024, 3 * 1024, 0]
    allocator.reset_accumulated_stats()
    allocator.reset_peak_stats()
    allocator.free(third)
    source.complete_stream(7)
    allocator.malloc(1000)  # completes the pending free first
    assert stat("allocation") == [2, 2, 1, 1]
    assert stat("active") == [2, 3, 1, 2]
    assert stat("active_bytes") == [2 * 1024, 3 * 1024, 1024, 2 * 1024]
    assert stat("requested_bytes") == [2000, 3000, 1000, 2000]
    allocator.check_invariants()


def test_record_stream_on_the_allocation_stream_is_ignored() -> None:
    allocator, source = make()
    source.set_stream_busy(0)
    block = allocator.malloc(1024, stream=0)
    address = block.address  # a Block is the allocator's: it changes once freed
    allocator.record_stream(block, 0)
    allocator.free(block)
    assert source.events_recorded == 0
    assert allocator.malloc(1024).address == address


def test_empty_cache_waits_for_pending_frees() -> None:
    allocator, source = make()
    source.set_stream_busy(3)
    block = allocator.malloc(5 * MiB)
    allocator.record_stream(block, 3)
    allocator.free(block)
    allocator.empty_cache()
    assert current(allocator, "reserved_bytes") == 0
    assert allocator.stats.num_sync_all_streams == 1


def test_oom_retry_frees_blocks_waiting_on_events() -> None:
    allocator, source = make(capacity=100 * MiB)
    source.set_stream_busy(9)
    pending = allocator.malloc(60 * MiB)
    allocator.record_stream(pending, 9)
    allocator.free(pending)
    allocator.malloc(60 * MiB)
    assert allocator.stats.num_alloc_retries == 1
    assert allocator.stats.num_sync_all_streams == 1
    allocator.check_invariants()


# -- statistics ---------------------------------------------------------------------------

_FAMILIES = (
    "active", "active_bytes", "allocated_bytes", "allocation", "inactive_split",
    "inactive_split_bytes", "requested_bytes", "reserved_bytes", "segment",
)
_FIELDS = ("current", "peak", "allocated", "freed")
TORCH_2_11_KEYS = {
    *(f"{f}.{p}.{m}" for f in _FAMILIES for p in ("all", "small_pool", "large_pool") for m in _FIELDS),
    *(f"{f}.{m}" for f in ("oversize_allocations", "oversize_segments") for m in _FIELDS),
    "max_split_size", "num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms",
    "num_sync_all_streams",
}


def _flat(nested: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in nested.items():
        name = f"{prefix}.{key}" if prefix else key
        out.update(_flat(value, name) if isinstance(value, dict) else {name: value})
    return out


def test_stats_have_exactly_torch_keys() -> None:
    allocator, _ = make()
    flat = _flat(allocator.stats_as_nested_dict())
    assert set(flat) == TORCH_2_11_KEYS
    assert flat["max_split_size"] == -1


def test_peak_and_accumulated_resets() -> None:
    allocator, _ = make()
    blocks = [allocator.malloc(MiB) for _ in range(3)]
    allocator.free(blocks.pop())
    stats = allocator.stats_as_nested_dict()["allocated_bytes"]["all"]
    assert stats == {"current": 2 * MiB, "peak": 3 * MiB, "allocated": 3 * MiB, "freed": MiB}
    allocator.reset_peak_stats()
    assert allocator.stats_as_nested_dict()["allocated_bytes"]["all"]["peak"] == 2 * MiB
    allocator.reset_accumulated_stats()
    after = allocator.stats_as_nested_dict()
    assert after["allocated_bytes"]["all"] == {
        "current": 2 * MiB, "peak": 2 * MiB, "allocated": 0, "freed": 0,
    }
    assert after["num_device_alloc"] == 0


def test_largest_free_block() -> None:
    allocator, _ = make()
    assert allocator.largest_free_block() == 0
    allocator.malloc(5 * MiB)
    assert allocator.largest_free_block() == 15 * MiB


# -- snapshots and history -------------------------------------------------------------------

SEGMENT_KEYS = {
    "active_size", "address", "allocated_size", "blocks", "device", "frames", "is_expandable",
    "requested_size", "segment_pool_id", "segment_type", "stream", "total_size",
}
BLOCK_KEYS = {"address", "frames", "requested_size", "size", "state"}
TRACE_KEYS = {
    "action", "addr", "compile_context", "frames", "size", "stream", "time_us", "user_metadata",
}


def test_snapshot_layout_matches_torch() -> None:
    allocator, _ = make()
    allocator.history.configure(True, RecordContext.ALL, 100)
    kept = allocator.malloc(311 * 411 * 4)
    allocator.free(allocator.malloc(10))
    (segment,) = segments(allocator)
    assert set(segment) == SEGMENT_KEYS
    assert all(set(b) == BLOCK_KEYS for b in segment["blocks"])
    assert segment["segment_pool_id"] == (0, 0)
    assert segment["is_expandable"] is False
    first = segment["blocks"][0]
    assert (first["requested_size"], first["size"]) == (511284, 511488)
    assert first["address"] == kept.address
    assert segment["allocated_size"] == segment["active_size"] == 511488
    trace = allocator.trace()
    assert all(set(e) == TRACE_KEYS for e in trace)
    assert [e["action"] for e in trace] == [
        "segment_alloc", "alloc", "alloc", "free_requested", "free_completed", "snapshot",
    ]
    assert trace[1]["size"] == 511284
    json.dumps(trace)


def _names(obj: object) -> str:
    return json.dumps(obj)


@pytest.mark.parametrize("context", ["alloc", "all", "state"])
def test_history_context_decides_which_stacks_are_kept(context: str) -> None:
    allocator, _ = make()
    level = {"alloc": RecordContext.ALLOC, "all": RecordContext.ALL, "state": RecordContext.STATE}
    allocator.history.configure(True, level[context], 1000)
    box = []

    def thealloc() -> None:
        box.append(allocator.malloc(48))

    def thefree() -> None:
        allocator.free(box.pop())

    thealloc()
    thefree()
    text = _names({"segments": segments(allocator), "trace": allocator.trace()})
    assert ("thefree" in text) == (context == "all")
    assert ("thealloc" in text) == (context != "state")


@pytest.mark.parametrize("context", ["alloc", "all", "state"])
def test_segment_free_stack_is_kept_only_with_context_all(context: str) -> None:
    allocator, _ = make()
    level = {"alloc": RecordContext.ALLOC, "all": RecordContext.ALL, "state": RecordContext.STATE}
    allocator.history.configure(True, level[context], 1000)

    def empty_cache() -> None:
        allocator.empty_cache()

    allocator.free(allocator.malloc(48))
    empty_cache()
    text = _names(allocator.trace())
    assert ("empty_cache" in text) == (context == "all")


def test_live_blocks_keep_their_allocation_stack() -> None:
    allocator, _ = make()

    def should_capture1() -> object:
        return allocator.malloc(64)

    def should_not_capture() -> object:
        return allocator.malloc(48)

    allocator.history.configure(True, RecordContext.ALL, 1000)
    a = should_capture1()
    allocator.history.configure(True, RecordContext.NEVER, 1000)
    b = should_not_capture()
    allocator.history.configure(True, RecordContext.ALL, 1000)
    text = _names(segments(allocator))
    assert "should_capture1" in text
    assert "should_not_capture" not in text
    blocks = segments(allocator)[0]["blocks"]
    frames = next(blk["frames"] for blk in blocks if blk["address"] == a.address)
    assert frames[0]["name"] == "should_capture1"
    assert set(frames[0]) == {"filename", "line", "name"}
    assert frames[0]["filename"] == __file__
    assert b.allocated


def test_history_ring_buffer_keeps_the_latest_entries() -> None:
    allocator, _ = make()
    allocator.history.configure(True, RecordContext.NEVER, 3)
    blocks = [allocator.malloc(100 * (i + 1)) for i in range(5)]
    trace = allocator.trace()
    assert [(e["action"], e["size"]) for e in trace] == [
        ("alloc", 300), ("alloc", 400), ("alloc", 500),
    ]
    allocator.history.configure(False, RecordContext.NEVER, 3)
    assert allocator.trace() == []
    assert all(b.allocated for b in blocks)


def test_oom_is_recorded_in_the_history() -> None:
    allocator, _ = make(capacity=GiB)
    allocator.history.configure(True, RecordContext.NEVER, 100)
    with pytest.raises(OutOfMemoryError):
        allocator.malloc(2 * GiB + 1)
    (entry,) = [e for e in allocator.trace() if e["action"] == "oom"]
    assert entry["device_free"] == GiB
    assert entry["size"] == 2 * GiB + 512
    assert "addr" not in entry


def test_torch_memory_viz_renders_refimpl_snapshots() -> None:
    viz = pytest.importorskip("torch.cuda._memory_viz")
    allocator, _ = make()
    allocator.history.configure(True, RecordContext.ALL, 1000)
    blocks = [allocator.malloc(size) for size in (100, 3 * MiB, 50 * MiB, 1000)]
    allocator.free(blocks[1])
    allocator.empty_cache()
    snapshot = {
        "segments": segments(allocator),
        "device_traces": [allocator.trace()],
        "allocator_settings": allocator.config.snapshot_settings(),
        "external_annotations": [],
    }
    assert "<html" in viz.segment_plot(snapshot)
    assert "<html" in viz.trace_plot(snapshot)
    assert "segments: 2" in viz.segsum(snapshot)  # empty_cache gave one back
    assert "cudaMalloc" in viz.trace(snapshot)


# -- concurrency and the simulated source -----------------------------------------------------


def test_threads_share_one_allocator_safely() -> None:
    allocator, _ = make(capacity=8 * GiB)
    errors = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        live = []
        try:
            for _ in range(1500):
                if live and rng.random() < 0.5:
                    allocator.free(live.pop(rng.randrange(len(live))))
                else:
                    size = rng.choice((rng.randrange(1, MiB), rng.randrange(MiB, 30 * MiB)))
                    live.append(allocator.malloc(size, stream=seed % 2))
            for block in live:
                allocator.free(block)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    allocator.check_invariants()
    assert current(allocator, "allocated_bytes") == 0


def test_address_space_source_enforces_capacity_and_frees() -> None:
    source = AddressSpaceSource(10 * MiB)
    first = source.allocate(4 * MiB)
    second = source.allocate(6 * MiB)
    assert first is not None and second is not None and second > first
    assert source.allocate(512) is None
    assert source.mem_get_info() == (0, 10 * MiB)
    with pytest.raises(ValueError):
        source.free(first, 3 * MiB)
    source.free(first, 4 * MiB)
    assert source.mem_get_info() == (4 * MiB, 10 * MiB)
    third = source.allocate(4 * MiB)
    assert third not in (first, second)  # addresses are never reused


def test_address_space_source_events() -> None:
    source = AddressSpaceSource(MiB)
    assert source.event_done(source.record_event(1))
    source.set_stream_busy(1)
    a, b = source.record_event(1), source.record_event(1)
    assert not source.event_done(a) and not source.event_done(b)
    source.synchronize_event(a)
    assert source.event_done(a) and not source.event_done(b)
    source.complete_stream(1)
    assert source.event_done(b)


def test_double_free_and_unknown_pointer_are_errors() -> None:
    allocator, _ = make()
    block = allocator.malloc(100)
    allocator.free(block)
    with pytest.raises(RuntimeError, match="double free"):
        allocator.free(block)
    with pytest.raises(RuntimeError, match=r"^invalid device pointer: 0x1234$"):
        allocator.raw_delete(0x1234)
    allocator.raw_delete(0)
    assert allocator.raw_alloc(0) == 0


# -- replay of recorded torch traces ---------------------------------------------------------

_TRACES = sorted((Path(__file__).parent / "fixtures" / "trace_replay").glob("*.json"))


@pytest.mark.parametrize("path", _TRACES, ids=[p.stem for p in _TRACES])
def test_recorded_traces_replay_figure_for_figure(path: Path) -> None:
    """Seeded runs recorded by ``bench/record_alloc_trace.py`` (torch on a GPU, and a
    refimpl self-check): every figure and every returned address after every step."""
    trace = json.loads(path.read_text())
    assert trace["runs"] and all(run["steps"] for run in trace["runs"])
    mismatches = replay_step_trace(trace)
    assert mismatches == [], "\n".join(str(m) for m in mismatches[:20])


def test_frees_from_finalizers_during_an_operation_wait_for_it() -> None:
    """Garbage collection may finalize a storage (and free its block) while this thread
    is inside malloc; the free must wait for malloc to finish, not interleave with it.
    The segment source stands in for the finalizer here: it frees during malloc."""
    victims: list = []
    seen_during: list[bool] = []

    class FinalizingSource(AddressSpaceSource):
        def allocate(self, nbytes: int) -> int | None:
            if victims:
                victim = victims.pop()
                allocator.free(victim)
                seen_during.append(victim.allocated)
            return super().allocate(nbytes)

    allocator = CachingAllocator(FinalizingSource(1 << 40), 0, parse_allocator_settings(""))
    first = allocator.malloc(1000)
    victims.append(first)
    second = allocator.malloc(5 * MiB)  # a new segment: the source "finalizes" `first`
    assert seen_during == [True]  # still allocated while malloc was under way
    assert not first.allocated and second.allocated
    allocator.check_invariants()
    assert current(allocator, "allocation") == 1


def test_release_lock_on_cudamalloc_lets_other_threads_in() -> None:
    entered, release = threading.Event(), threading.Event()

    class SlowSource(AddressSpaceSource):
        def allocate(self, nbytes: int) -> int | None:
            if nbytes == 40 * MiB:
                entered.set()
                assert release.wait(10)
            return super().allocate(nbytes)

    allocator = CachingAllocator(
        SlowSource(1 << 40), 0, parse_allocator_settings("release_lock_on_cudamalloc:True")
    )
    cached = allocator.malloc(1000)
    worker = threading.Thread(target=allocator.malloc, args=(40 * MiB,))
    worker.start()
    assert entered.wait(10)
    allocator.free(cached)  # the allocator is usable while the other thread waits
    allocator.free(allocator.malloc(2000))
    release.set()
    worker.join()
    allocator.check_invariants()
    assert current(allocator, "allocation") == 1
