"""Checkpoints of a private pool: save its block layout, and set the pool back to it.

Spec: cuda_memory CUDAMEM-501, graphs GRAPH-108 (torch's ``_cuda_getCheckpointState``
and ``_cuda_setCheckpointPoolState``). A graph's replay does not go through the
allocator, so after replays the pool no longer says which of its blocks hold live
tensors. To capture a new graph into the pool from such a point (a tree of graphed
callables), the pool is first set back to a checkpoint taken after an earlier capture.

* :func:`checkpoint_state` records every segment of the pool, block by block
  (address, size, stream, allocated or not).
* :func:`set_checkpoint_state` restores it the way torch does, by ordinary allocator
  operations (so the statistics and the history move as for real frees and
  allocations): every block of the pool allocated now is freed; then each recorded
  segment is cut again into its recorded blocks, all allocated (an allocation of
  exactly the recorded size, split off the front of the free rest), and the blocks
  recorded as free are freed again. It returns the addresses it freed and the blocks
  it left allocated; the caller (``refimpl._C``) decides which storages own them.

A storage still alive whose block the restore freed keeps its old block object.
The restore detaches such objects from the allocator (a fresh object takes each
one's place) and remembers the address each one had, so that when the storage dies
the allocator frees whatever block is allocated at that address then, as torch's
free by pointer does (:meth:`CachingAllocator.free`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from refimpl.cuda import _snapshot
from refimpl.cuda._allocator_blocks import Block
from refimpl.cuda._allocator_stats import single_increase
from refimpl.cuda._snapshot import RecordContext

if TYPE_CHECKING:
    from refimpl.cuda._allocator_core import CachingAllocator
    from refimpl.cuda._allocator_pools import PrivatePool

__all__ = ["BlockState", "PoolState", "SegmentState", "checkpoint_state", "set_checkpoint_state"]

_snapshot.register_internal_file(__file__)


@dataclass(frozen=True)
class BlockState:
    """One block of a checkpointed segment."""

    address: int
    size: int
    stream: int
    allocated: bool


@dataclass(frozen=True)
class SegmentState:
    """One segment of a checkpointed pool: its blocks in address order."""

    blocks: tuple[BlockState, ...]


@dataclass(frozen=True)
class PoolState:
    """A checkpoint of one private pool (torch's ``PrivatePoolState``)."""

    device: int
    pool_id: tuple[int, int]
    segments: tuple[SegmentState, ...]


def checkpoint_state(allocator: CachingAllocator, pool_id: tuple[int, int]) -> PoolState:
    """The layout of every segment of private pool ``pool_id`` now."""
    with allocator.lock:
        return allocator._exclusive(_checkpoint, allocator, pool_id)


def _checkpoint(allocator: CachingAllocator, pool_id: tuple[int, int]) -> PoolState:
    if allocator._after_capture and not allocator._captures:
        allocator._insert_events_after_capture()
    pool = _find_pool(allocator, pool_id)
    segments = []
    for head in _head_blocks(allocator, pool):
        blocks = []
        block = head
        while block is not None:
            blocks.append(BlockState(block.address, block.size, block.stream, block.allocated))
            block = block.next
        segments.append(SegmentState(tuple(blocks)))
    return PoolState(allocator.device, pool_id, tuple(segments))


def set_checkpoint_state(
    allocator: CachingAllocator, state: PoolState
) -> tuple[list[int], list[Block]]:
    """Set the pool of ``state`` back to it: (addresses freed, blocks left allocated)."""
    context = allocator.history.gather(RecordContext.ALL) if allocator.history.level else None
    with allocator.lock:
        return allocator._exclusive(_restore, allocator, state, context)


def _restore(allocator: CachingAllocator, state: PoolState, context) -> tuple[list[int], list[Block]]:
    pool = allocator.graph_pools.pools.get(state.pool_id)
    if pool is None:
        raise RuntimeError("Could not find pool of id")
    # 1. Free every block of the pool allocated now.
    freed: list[int] = []
    old_blocks: list[Block] = []
    for head in _head_blocks(allocator, pool):
        block = head
        while block is not None:
            if block.allocated:
                if block.event_count or block.stream_uses:
                    raise RuntimeError(
                        "Events should have synchronized when setting checkpointed block")
                freed.append(block.address)
                old_blocks.append(block)
                allocator._free_block(block, context, True)
            block = block.next
    for block, address in zip(old_blocks, freed, strict=True):
        _detach(allocator, block, address)
    # 2. Cut each recorded segment into its recorded blocks, then free the free ones.
    heads = {head.address: head for head in _head_blocks(allocator, pool)}
    created: list[Block] = []
    for segment in state.segments:
        first = segment.blocks[0].address
        head = heads.get(first)
        if head is None:
            raise RuntimeError(f"could not find {first:#x}")
        created.extend(_restore_segment(allocator, head, segment, context))
    return freed, created


def _restore_segment(
    allocator: CachingAllocator, head: Block, segment: SegmentState, context
) -> list[Block]:
    count = len(segment.blocks)
    block: Block | None = head
    first = None
    for i, recorded in enumerate(segment.blocks):
        if block is None or block.allocated or block.event_count or block.stream_uses:
            raise RuntimeError("checkpointed segment does not match the pool's segment")
        block = _allocate_front(allocator, block, recorded, context)
        if block.address != recorded.address or block.size != recorded.size:
            raise RuntimeError("checkpointed block does not match the restored block")
        if first is None:
            first = block
        block = block.next
        if (block is not None) != (i + 1 < count):
            raise RuntimeError("checkpointed segment does not match the pool's segment")
    created = []
    block = first
    for recorded in segment.blocks:
        following = block.next
        if recorded.allocated:
            created.append(block)
        else:
            allocator._free_block(block, context, True)
        block = following
    return created


def _allocate_front(allocator: CachingAllocator, block: Block, recorded: BlockState,
                    context) -> Block:
    """Allocate ``recorded.size`` bytes from the front of the free ``block``.

    :meth:`CachingAllocator.malloc` for a block found already, with the split forced
    whenever the block is larger (the checkpoint, not the split rule of today's
    settings, says where blocks end); the request is the block's own size.
    """
    pool = block.pool
    pool.remove(block)
    size = recorded.size
    if block.size > size:
        remaining = block
        if remaining.is_split():
            split_blocks, split_bytes = 0, -size
        else:
            split_blocks, split_bytes = 1, remaining.size - size
        block = Block(recorded.stream, size, pool, remaining.address)
        block.prev = remaining.prev
        if block.prev is not None:
            block.prev.next = block
        block.next = remaining
        remaining.prev = block
        remaining.address += size
        remaining.size -= size
        pool.insert(remaining)
    elif block.is_split():
        split_blocks, split_bytes = -1, -block.size
    else:
        split_blocks = split_bytes = 0
    block.allocated = True
    block.requested_size = size
    block.context = context
    allocator._by_address[block.address] = block
    allocator.history.record("alloc", block.address, size, block.stream, context)
    allocator.stats.record_alloc(pool.stat_index, size, size, split_blocks, split_bytes)
    if size >= allocator.config.max_split_size:
        single_increase(allocator.stats.oversize_allocations, 1)
    return block


def _detach(allocator: CachingAllocator, old: Block, address: int) -> None:
    """Put a fresh object in the place of ``old`` (freed by the restore) wherever it still
    is, and remember its address for a later free by its storage."""
    allocator._restored[old] = address
    blocks = old.pool.lists.get(old.stream, ((), []))[1]
    if any(b is old for b in blocks):  # (else merged into a neighbour: gone from the pool)
        fresh = Block(old.stream, old.size, old.pool, old.address)
        fresh.prev, fresh.next = old.prev, old.next
        fresh.gc_count_base = old.gc_count_base
        fresh.segment_context = old.segment_context
        if fresh.prev is not None:
            fresh.prev.next = fresh
        if fresh.next is not None:
            fresh.next.prev = fresh
        blocks[next(i for i, b in enumerate(blocks) if b is old)] = fresh
    old.prev = old.next = None


def _find_pool(allocator: CachingAllocator, pool_id: tuple[int, int]) -> PrivatePool:
    pools = allocator.graph_pools
    pool = pools.pools.get(pool_id)
    if pool is not None and pool_id not in pools.freeable:
        return pool
    if pool_id in pools.freeable:
        raise RuntimeError("Not expected to checkpoint freeable graph")
    raise RuntimeError("Could not find pool of id")


def _head_blocks(allocator: CachingAllocator, pool: PrivatePool) -> list[Block]:
    """The first block of every segment of ``pool``, in address order."""
    heads = {b for bp in (pool.small, pool.large) for b in bp.ordered() if b.prev is None}
    heads.update(b for b in allocator._by_address.values()
                 if b.prev is None and b.pool.owner is pool)
    heads.update(b for b in allocator._pending if b.prev is None and b.pool.owner is pool)
    return sorted(heads, key=lambda b: b.address)
