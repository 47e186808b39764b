"""A self-check of the caching allocator: structure and statistics must agree.

Used by the fuzz tests after every operation and available to anyone debugging
an allocator (``CachingAllocator.check_invariants()``). Linear in the number of
blocks; it reads the allocator's internals on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.cuda._allocator_blocks import K_MIN_BLOCK_SIZE, K_SMALL_BUFFER, Block

if TYPE_CHECKING:
    from refimpl.cuda._allocator_core import CachingAllocator

__all__ = ["check_invariants"]


def _fail(message: str) -> None:
    raise AssertionError(f"allocator invariant violated: {message}")


def _check_pool_lists(allocator: CachingAllocator) -> set[Block]:
    free: set[Block] = set()
    for pool in allocator.block_pools():
        for stream, (keys, blocks) in pool.lists.items():
            if keys != sorted(keys):
                _fail(f"free list of stream {stream} is not sorted")
            if len(keys) != len(blocks):
                _fail(f"free list of stream {stream}: keys and blocks differ in number")
            for key, block in zip(keys, blocks, strict=True):
                size, address = key >> 64, key & ((1 << 64) - 1)
                if block.address != address or block.size != size or block.stream != stream:
                    _fail(f"free-list key ({size}, {address:#x}) has no matching block")
                if block.pool is not pool:
                    _fail(f"{block} sits in the wrong pool")
                if block.allocated or block.event_count or block.stream_uses:
                    _fail(f"{block} is in a free list but not free")
                if block in free:
                    _fail(f"{block} is in a free list twice")
                free.add(block)
    return free


_COUNTED = (
    "allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
    "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes",
)


def _walk_segments(
    heads: list[Block], free: set[Block], max_split: int
) -> tuple[dict[str, list[int]], int, int, dict[int, int], int]:
    """Check each segment's structure; return what its blocks add up to.

    Returns the expected current value of each counted family as ``[all, small,
    large]``, the oversize allocation and segment counts, segment sizes by address
    and the number of blocks seen.
    """
    sums = {1: [0] * 9, 2: [0] * 9}
    oversize_allocations = oversize_segments = seen = 0
    sizes: dict[int, int] = {}
    for head in heads:
        acc = sums[1 if head.pool.is_small else 2]
        total = 0
        previous_free = False
        block: Block | None = head
        while block is not None:
            seen += 1
            size = block.size
            total += size
            if block.pool is not head.pool or block.stream != head.stream:
                _fail(f"{block} and its segment head disagree on pool or stream")
            if size <= 0 or size % K_MIN_BLOCK_SIZE:
                _fail(f"{block} has a size that is not a positive multiple of 512")
            nxt = block.next
            if nxt is not None and (nxt.prev is not block or block.address + size != nxt.address):
                _fail(f"{block} and {nxt} are not linked both ways or not contiguous")
            is_free = block in free
            if is_free and previous_free:
                _fail(f"{block} and the block before it are both free but not merged")
            previous_free = is_free
            if block.allocated or block.event_count or block.stream_uses:
                if block.allocated:
                    acc[0] += 1
                    acc[1] += size
                    if size >= max_split:
                        oversize_allocations += 1
                acc[2] += 1
                acc[3] += size
                acc[4] += block.requested_size
            elif not is_free:
                _fail(f"{block} is neither allocated, pending nor in a free list")
            elif block.prev is not None or nxt is not None:
                acc[7] += 1
                acc[8] += size
            block = nxt
        acc[5] += 1
        acc[6] += total
        if total >= max_split:
            oversize_segments += 1
        if head.pool.is_small and total > K_SMALL_BUFFER:
            _fail(f"small-pool segment at {head.address:#x} is larger than 2 MiB")
        sizes[head.address] = total
    expected = {
        name: [sums[1][i] + sums[2][i], sums[1][i], sums[2][i]] for i, name in enumerate(_COUNTED)
    }
    return expected, oversize_allocations, oversize_segments, sizes, seen


def check_invariants(allocator: CachingAllocator) -> None:
    """Raise AssertionError naming the first disagreement found."""
    with allocator.lock:
        free = _check_pool_lists(allocator)
        active = set(allocator._by_address.values()) | allocator._pending
        if allocator._pending & set(allocator._by_address.values()):
            _fail("a block is both allocated and pending")
        if free & active:
            _fail("a block is both free and active")
        for block in active:
            if not block.allocated and block.event_count <= 0 and not block.stream_uses:
                _fail(f"{block} is active but neither allocated nor pending")
        if any(not b.allocated for b in allocator._by_address.values()):
            _fail("the address map holds a block that is not allocated")
        if any(b.allocated or not (b.event_count or b.stream_uses) for b in allocator._pending):
            _fail("a pending block is allocated or has no event left")
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
        expected, oversize_allocations, oversize_segments, sizes, seen = _walk_segments(
            heads, free, allocator.config.max_split_size
        )
        if seen != len(free) + len(active):
            _fail("some blocks are not reachable from a segment head")
        stats = allocator.stats
        for name, values in expected.items():
            for index, value in enumerate(values):
                stat = stats.get(name, index)
                if stat[0] != value:
                    _fail(f"{name}[{index}].current is {stat[0]}, the blocks say {value}")
                if stat[0] < 0 or stat[1] < stat[0]:
                    _fail(f"{name}[{index}] = {stat} is not a consistent stat")
        if stats.oversize_allocations[0] != oversize_allocations:
            _fail("oversize_allocations.current disagrees with the blocks")
        if stats.oversize_segments[0] != oversize_segments:
            _fail("oversize_segments.current disagrees with the segments")
        if allocator.total_reserved != stats.current("reserved_bytes"):
            _fail("total reserved bytes and reserved_bytes.all.current differ")
        live = getattr(allocator.source, "live", None)
        if isinstance(live, dict) and sizes != live:
            _fail("the segments and the source's live allocations differ")
