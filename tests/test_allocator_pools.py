"""Private pools of the caching allocator (CUDA graph captures) on a simulated device.

The expectations are torch's native allocator rules for graph pools: allocations of
a capturing stream come from the capture's own segments, those segments outlive the
capture while a graph uses the pool, a shared pool reuses what an earlier capture
freed, and a pool nobody uses is returned by ``empty_cache()``.
"""

from __future__ import annotations

import pytest

from refimpl.cuda._allocator import AddressSpaceSource, CachingAllocator
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._allocator_pools import new_pool_id

MiB = 1 << 20
CAPTURE, OTHER = 7, 9


def make() -> tuple[CachingAllocator, AddressSpaceSource]:
    source = AddressSpaceSource(1 << 40)
    return CachingAllocator(source, 0, parse_allocator_settings("")), source


def pool_ids(allocator: CachingAllocator) -> list[tuple[int, int]]:
    return [s["segment_pool_id"] for s in allocator.segments()]


def reserved(allocator: CachingAllocator) -> int:
    return allocator.stats_as_nested_dict()["reserved_bytes"]["all"]["current"]


def test_pool_ids_are_torch_shaped():
    a, b = new_pool_id(False), new_pool_id(False)
    h = new_pool_id(True)
    assert a[1] == 0 and b[1] == 0 and b[0] > a[0] > 0
    assert h[0] == 0 and h[1] > 0


def test_capturing_stream_allocates_from_its_own_segments():
    alloc, _ = make()
    pid = new_pool_id(False)
    eager = alloc.malloc(1024, CAPTURE)
    alloc.free(eager)  # a cached default-pool block the capture must not take
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    small = alloc.malloc(1024, CAPTURE)
    large = alloc.malloc(4 * MiB, CAPTURE)
    other = alloc.malloc(1024, OTHER)
    alloc.end_allocate_to_pool(pid)
    assert small.address != eager.address
    assert small.pool.owner_pool_id == pid and large.pool.owner_pool_id == pid
    assert other.pool.owner_pool_id == (0, 0)
    assert sorted(pool_ids(alloc)) == sorted([(0, 0), (0, 0), pid, pid])
    after = alloc.malloc(1024, CAPTURE)  # routing ended: back to the default pool
    assert after.pool.owner_pool_id == (0, 0)
    alloc.check_invariants()


def test_pool_memory_outlives_the_capture_until_released():
    alloc, source = make()
    pid = new_pool_id(False)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    block = alloc.malloc(4 * MiB, CAPTURE)
    alloc.end_allocate_to_pool(pid)
    alloc.free(block)
    alloc.empty_cache()  # the graph still uses the pool: its segment stays
    assert reserved(alloc) == 20 * MiB and pid in pool_ids(alloc)
    alloc.release_pool(pid)
    alloc.empty_cache()
    assert reserved(alloc) == 0 and source.live == {}
    assert pid not in alloc.graph_pools.pools
    alloc.check_invariants()


def test_live_tensor_keeps_a_released_pool_until_it_is_freed():
    alloc, _ = make()
    pid = new_pool_id(False)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    out = alloc.malloc(1024, CAPTURE)  # a graph output the user keeps
    alloc.end_allocate_to_pool(pid)
    alloc.release_pool(pid)
    alloc.empty_cache()
    assert pid in pool_ids(alloc)  # the segment holds a live block
    alloc.free(out)
    alloc.empty_cache()
    assert pool_ids(alloc) == [] and pid not in alloc.graph_pools.pools


def test_shared_pool_reuses_memory_freed_by_an_earlier_capture():
    alloc, _ = make()
    pid = new_pool_id(True)  # graph_pool_handle()
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    first = alloc.malloc(1024, CAPTURE)
    address = first.address
    alloc.free(first)  # freed during the first capture
    alloc.end_allocate_to_pool(pid)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)  # a second graph shares it
    second = alloc.malloc(1024, CAPTURE)
    alloc.end_allocate_to_pool(pid)
    assert second.address == address
    assert alloc.graph_pools.pools[pid].use_count == 2
    alloc.release_pool(pid)
    alloc.free(second)
    alloc.empty_cache()
    assert pid in pool_ids(alloc)  # one graph still uses it
    alloc.release_pool(pid)
    alloc.empty_cache()
    assert pool_ids(alloc) == []


def test_recording_twice_into_one_pool_is_an_error():
    alloc, _ = make()
    pid = new_pool_id(False)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    with pytest.raises(RuntimeError, match="already recording to mempool_id"):
        alloc.begin_allocate_to_pool(pid, lambda s: s == OTHER)
    alloc.end_allocate_to_pool(pid)
    with pytest.raises(RuntimeError, match="not currently recording to mempool_id"):
        alloc.end_allocate_to_pool(pid)


def test_no_events_during_a_capture():
    alloc, source = make()
    block = alloc.malloc(1024, OTHER)
    address = block.address
    alloc.record_stream(block, CAPTURE)
    pid = new_pool_id(False)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    alloc.free(block)  # a cross-stream free during the capture records no event
    alloc.malloc(1024, CAPTURE)
    assert source.events_recorded == 0
    alloc.check_invariants()
    alloc.end_allocate_to_pool(pid)
    again = alloc.malloc(1024, OTHER)  # now the deferred free gets its event
    assert source.events_recorded == 1
    assert again.address == address  # the event completed, the block came back
    alloc.check_invariants()
