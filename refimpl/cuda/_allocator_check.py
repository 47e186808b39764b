"""A self-check of the caching allocator: structure and statistics must agree.

Used by the fuzz tests after every operation and available to anyone debugging
an allocator (``CachingAllocator.check_invariants()``). Linear in the number of
blocks; it reads the allocator's internals on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.cuda._allocator_blocks import K_MIN_BLOCK_SIZE, K_SMALL_BUFFER, Block
from refimpl.cuda._allocator_stats import AGGREGATE, LARGE_POOL, SMALL_POOL

if TYPE_CHECKING:
    from refimpl.cuda._allocator_core import CachingAllocator

__all__ = ["check_invariants"]


def _fail(message: str) -> None:
    raise AssertionError(f"allocator invariant violated: {message}")


def _check_pool_lists(allocator: CachingAllocator) -> set[Block]:
    free: set[Block] = set()
    for pool in (allocator.small_pool, allocator.large_pool):
        count = 0
        for stream, keys in pool.keys.items():
            if keys != sorted(keys):
                _fail(f"free list of stream {stream} is not sorted")
            for size, address in keys:
                block = pool.blocks.get(address)
                if block is None or block.size != size or block.stream != stream:
                    _fail(f"free-list key ({size}, {address:#x}) has no matching block")
                if block.pool is not pool:
                    _fail(f"{block} sits in the wrong pool")
                if block.allocated or block.event_count or block.stream_uses:
                    _fail(f"{block} is in a free list but not free")
            count += len(keys)
        if count != len(pool.blocks):
            _fail("free-list keys and free blocks differ in number")
        free.update(pool.blocks.values())
    return free


def _expected_counters(allocator: CachingAllocator, heads: list[Block]) -> dict[str, list[int]]:
    max_split = allocator.config.max_split_size
    names = (
        "allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
        "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes",
    )
    counts = {name: [0, 0, 0] for name in names}
    counts["oversize"] = [0, 0]

    def add(name: str, pool_index: int, amount: int) -> None:
        counts[name][AGGREGATE] += amount
        counts[name][pool_index] += amount

    for head in heads:
        pool_index = SMALL_POOL if head.pool.is_small else LARGE_POOL
        segment_size = 0
        block: Block | None = head
        while block is not None:
            segment_size += block.size
            active = block.allocated or block.event_count > 0 or bool(block.stream_uses)
            if block.allocated:
                add("allocation", pool_index, 1)
                add("allocated_bytes", pool_index, block.size)
                if block.size >= max_split:
                    counts["oversize"][0] += 1
            if active:
                add("active", pool_index, 1)
                add("active_bytes", pool_index, block.size)
                add("requested_bytes", pool_index, block.requested_size)
            elif block.is_split():
                add("inactive_split", pool_index, 1)
                add("inactive_split_bytes", pool_index, block.size)
            block = block.next
        add("segment", pool_index, 1)
        add("reserved_bytes", pool_index, segment_size)
        if segment_size >= max_split:
            counts["oversize"][1] += 1
    return counts


def _check_segment(head: Block, free: set[Block]) -> None:
    block: Block | None = head
    previous_free = False
    while block is not None:
        if block.pool is not head.pool or block.stream != head.stream:
            _fail(f"{block} and its segment head disagree on pool or stream")
        if block.size <= 0 or block.size % K_MIN_BLOCK_SIZE:
            _fail(f"{block} has a size that is not a positive multiple of 512")
        nxt = block.next
        if nxt is not None:
            if nxt.prev is not block:
                _fail(f"{block} and {nxt} are not linked both ways")
            if block.address + block.size != nxt.address:
                _fail(f"{block} and {nxt} are not contiguous")
        is_free = block in free
        if not is_free and not block.allocated and not block.event_count:
            _fail(f"{block} is neither allocated, pending nor in a free list")
        if is_free and previous_free:
            _fail(f"{block} and the block before it are both free but not merged")
        previous_free = is_free
        block = nxt
    if head.pool.is_small and head.size > K_SMALL_BUFFER and head.next is None:
        _fail(f"small-pool segment at {head.address:#x} is larger than 2 MiB")


def check_invariants(allocator: CachingAllocator) -> None:
    """Raise AssertionError naming the first disagreement found."""
    with allocator.lock:
        free = _check_pool_lists(allocator)
        active = allocator._active
        if free & active:
            _fail("a block is both free and active")
        for block in active:
            if not block.allocated and block.event_count <= 0 and not block.stream_uses:
                _fail(f"{block} is active but neither allocated nor pending")
        allocated = {b for b in active if b.allocated}
        if allocated != set(allocator._by_address.values()):
            _fail("allocated blocks and the address map differ")
        for address, block in allocator._by_address.items():
            if block.address != address:
                _fail(f"address map entry {address:#x} points at {block}")
        pending: dict[Block, int] = {}
        for queue in allocator._events.values():
            for _, block in queue:
                pending[block] = pending.get(block, 0) + 1
        for block in active | free:
            if block.event_count != pending.get(block, 0):
                _fail(f"{block} counts {block.event_count} events, {pending.get(block, 0)} queued")

        heads = sorted((b for b in free | active if b.prev is None), key=lambda b: b.address)
        seen = 0
        for head in heads:
            _check_segment(head, free)
            block: Block | None = head
            while block is not None:
                seen += 1
                block = block.next
        if seen != len(free) + len(active):
            _fail("some blocks are not reachable from a segment head")

        stats = allocator.stats
        expected = _expected_counters(allocator, heads)
        for name, values in expected.items():
            if name == "oversize":
                continue
            for index, value in enumerate(values):
                stat = getattr(stats, name)[index]
                if stat[0] != value:
                    _fail(f"{name}[{index}].current is {stat[0]}, the blocks say {value}")
                if stat[0] < 0 or stat[1] < stat[0]:
                    _fail(f"{name}[{index}] = {stat} is not a consistent stat")
        if stats.oversize_allocations[0] != expected["oversize"][0]:
            _fail("oversize_allocations.current disagrees with the blocks")
        if stats.oversize_segments[0] != expected["oversize"][1]:
            _fail("oversize_segments.current disagrees with the segments")
        if allocator.total_reserved != stats.reserved_bytes[AGGREGATE][0]:
            _fail("total reserved bytes and reserved_bytes.all.current differ")
        live = getattr(allocator.source, "live", None)
        if isinstance(live, dict):
            segments = {h.address: sum(_sizes(h)) for h in heads}
            if segments != live:
                _fail("the segments and the source's live allocations differ")


def _sizes(head: Block) -> list[int]:
    sizes = []
    block: Block | None = head
    while block is not None:
        sizes.append(block.size)
        block = block.next
    return sizes
