"""The caching allocator's algorithm: pools, blocks, splitting, merging, statistics.

Spec: cuda_memory (ALLOC clauses); the overview is in ``refimpl.cuda._allocator``,
the public face of this code. Nothing here talks to a driver: segments and events
come from a ``SegmentSource``.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from refimpl.cuda import _snapshot
from refimpl.cuda._allocator_blocks import (
    K_MIN_BLOCK_SIZE,
    K_SMALL_SIZE,
    Block,
    BlockPool,
    allocation_size,
    roundup_power2_next_division,
)
from refimpl.cuda._allocator_config import SIZE_MAX, AllocatorConfig, get_config
from refimpl.cuda._allocator_pools import GraphPools
from refimpl.cuda._allocator_stats import (
    DeviceStats,
    format_size,
    single_decrease,
    single_increase,
)
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._snapshot import Frames, History, RecordContext

if TYPE_CHECKING:
    from refimpl.cuda._allocator import SegmentSource

__all__ = ["CachingAllocator", "OOMObserver"]

_snapshot.register_internal_file(__file__)

_ONE_EXABYTE = 1152921504606846976
_new = object.__new__


OOMObserver = Callable[[int, int, int, int], Any]


class _NoMemory(Exception):
    """Raised inside an operation when a request cannot be served: (segment size, message)."""


class CachingAllocator:
    """The caching allocator of one device, over a :class:`SegmentSource`.

    ``config`` defaults to the process-wide settings (``_set_allocator_settings``);
    a private :class:`AllocatorConfig` gives an allocator of its own settings
    (``memstats replay`` uses that).
    """

    def __init__(
        self, source: SegmentSource, device: int = 0, config: AllocatorConfig | None = None
    ) -> None:
        self.source = source
        self.device = device
        self.config = config if config is not None else get_config()
        if self.config.expandable_segments:
            raise NotImplementedError(
                "expandable_segments:True is not implemented by refimpl's caching allocator"
            )
        self.lock = threading.RLock()
        self.small_pool = BlockPool(True)
        self.large_pool = BlockPool(False)
        self.stats = DeviceStats(_as_int64(self.config.max_split_size))
        self.history = History()
        self.oom_observers: list[OOMObserver] = []
        self.total_reserved = 0
        self.fraction = 1.0
        self.allowed_memory_maximum = 0
        self.set_fraction = False
        self._pending: set[Block] = set()  # freed, waiting for events on other streams
        self._by_address: dict[int, Block] = {}
        self._events: dict[int, deque[tuple[object, Block]]] = {}
        # Garbage collection can run finalizers that free memory in the middle of an
        # operation of this same thread (the lock is re-entrant). Such frees wait in
        # _deferred until the operation under way (_busy) ends.
        self._busy = False
        self._deferred: list[Block] = []
        # Private pools of CUDA graph captures; ``_captures`` is their routing list,
        # non-empty while a capture is under way (then no event is recorded or queried,
        # and cross-stream frees wait in ``_after_capture``).
        self.graph_pools = GraphPools()
        self._captures = self.graph_pools.captures
        self._after_capture: list[Block] = []
        # Blocks a pool-checkpoint restore freed while their storages live, with the
        # address each had: such a storage's free frees the block there now.
        self._restored: dict[Block, int] = {}

    # -- public operations -------------------------------------------------

    def malloc(self, size: int, stream: int = 0) -> Block:
        """A block of at least ``size`` bytes, safe to use on ``stream``.

        Raises :class:`OutOfMemoryError` when neither the cache nor the source can
        provide one after freeing the cache. A cache hit (the common case) runs from
        top to bottom of this one method: it is the allocator's hot path.
        """
        context = self.history.gather(RecordContext.STATE) if self.history.level else None
        # acquire()/release() rather than ``with``: the with statement costs twice as much.
        lock = self.lock
        lock.acquire()
        if self._busy:
            lock.release()
            raise RuntimeError("caching allocator re-entered: malloc during an operation")
        self._busy = True
        try:
            captures = self._captures
            if (self._events or self._after_capture) and not captures:
                self._process_events(context)
            config = self.config
            if config.roundup_enabled:
                rounded = self.round_size(size)
            else:  # a multiple of K_MIN_BLOCK_SIZE (512), at least one
                rounded = ((size + 511) & -512) or 512
            pool = self.small_pool if rounded <= K_SMALL_SIZE else self.large_pool
            if captures:
                pool = self.graph_pools.pool_for(rounded, stream) or pool
            if self.set_fraction and config.garbage_collection_threshold > 0.0:
                pool.gc_calls += 1
            max_split = config.max_split_size
            # Best fit: the smallest free block of this stream that is large enough.
            block = None
            lists = pool.lists.get(stream)
            if lists is not None:
                keys, blocks = lists
                index = bisect_left(keys, rounded << 64)
                if index < len(keys):
                    found = keys[index] >> 64
                    # An oversize block serves only oversize requests, and at most
                    # max_non_split_rounding bytes larger than them.
                    if (
                        found < max_split
                        if rounded < max_split
                        else found < rounded + config.max_non_split_rounding_size
                    ):
                        block = blocks[index]
            if block is None:
                alloc_size = allocation_size(rounded)
                block = self._reserve(pool, stream, rounded, alloc_size, context)
                if block is None:
                    raise _NoMemory(
                        alloc_size, self._out_of_memory(rounded, alloc_size, stream, context)
                    )
                lists = None  # the block is new: it is in no free list

            # Hand out the block, splitting off the rest as a free remainder if it is
            # large enough (512 bytes in the small pool; more than 1 MiB in the large
            # pool, where oversize blocks are never split).
            remaining_size = block.size - rounded
            if pool.is_small:
                split = remaining_size >= K_MIN_BLOCK_SIZE
            else:
                split = rounded < max_split and remaining_size > K_SMALL_SIZE
            if split:
                # The found block stays free as the remainder; a new block takes its front.
                remaining = block
                if remaining.prev is not None or remaining.next is not None:
                    split_blocks, split_bytes = 0, -rounded  # a free split block shrank
                else:
                    split_blocks, split_bytes = 1, remaining_size  # a new free remainder
                # Block(stream, rounded, pool, remaining.address), written out (no call);
                # allocated, requested_size and context are set below.
                block = _new(Block)
                block.stream = stream
                block.size = rounded
                block.pool = pool
                block.address = remaining.address
                block.event_count = block.gc_count_base = 0
                block.stream_uses = block.segment_context = block.context = None
                prev = block.prev = remaining.prev
                if prev is not None:
                    prev.next = block
                block.next = remaining
                remaining.prev = block
                address = remaining.address = remaining.address + rounded
                remaining.size = remaining_size
                if lists is None:
                    pool.insert(remaining)  # the rest of a new segment
                else:
                    # The remainder is the found block, moved up: its key, smaller than
                    # the found key still at keys[index], takes that slot when no other key
                    # lies between them (no search for a place, no shifting).
                    key = remaining_size << 64 | address
                    if index == 0 or keys[index - 1] < key:
                        remaining.gc_count_base = pool.gc_calls
                        keys[index] = key
                    else:
                        del keys[index]
                        del blocks[index]
                        pool.insert(remaining)
            else:
                if lists is not None:
                    del keys[index]
                    del blocks[index]
                if block.prev is not None or block.next is not None:
                    split_blocks, split_bytes = -1, -block.size  # a free split block taken whole
                else:
                    split_blocks = split_bytes = 0
            block.allocated = True
            block.requested_size = size
            self._by_address[block.address] = block
            if context is not None:
                block.context = context  # (a free block's context is None)
            if self.history.enabled:
                self.history.record("alloc", block.address, size, stream, context)
            size = block.size
            self.stats.record_alloc(pool.stat_index, size, block.requested_size, split_blocks,
                                    split_bytes)
            if size >= max_split:
                single_increase(self.stats.oversize_allocations, 1)
            return block
        except _NoMemory as failure:
            alloc_size, message = failure.args
            observers = list(self.oom_observers)
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()
            lock.release()
        # Observers run without the lock, as in torch (they may call back in).
        free_bytes, total = self.source.mem_get_info()
        limit = self.allowed_memory_maximum if self.set_fraction else total
        for observer in observers:
            observer(self.device, alloc_size, limit, free_bytes)
        raise OutOfMemoryError(message)

    def allocate(self, nbytes: int, stream: int = 0) -> Block | None:
        """Tensor-storage allocation: None for 0 bytes, torch's 1 EB guard, then :meth:`malloc`."""
        if nbytes >= _ONE_EXABYTE:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate more than 1EB memory.")
        if nbytes == 0:
            return None
        return self.malloc(nbytes, stream)

    def free(self, block: Block) -> None:
        """Give a block back; it becomes reusable once its other-stream uses complete."""
        context = self.history.gather(RecordContext.ALL) if self.history.level else None
        lock = self.lock
        lock.acquire()
        try:
            if not block.allocated:
                block = self._restored_block(block)
            if self._busy:
                self._deferred.append(block)
                return
            self._busy = True
            try:
                self._free_block(block, context, True)
            finally:
                self._busy = False
                if self._deferred:
                    self._free_deferred()
        finally:
            lock.release()

    def _restored_block(self, block: Block) -> Block:
        """The block to free for ``block``, which is not allocated: the one allocated now
        at its address if a checkpoint restore freed it (see _allocator_checkpoint)."""
        address = self._restored.pop(block, None)
        current = self._by_address.get(address) if address is not None else None
        if current is None:
            raise RuntimeError(f"double free of block at {block.address:#x}")
        return current

    def _free_deferred(self) -> None:
        """Complete the frees that arrived during an operation (lock held, not busy)."""
        self._busy = True
        try:
            while self._deferred:
                block = self._deferred.pop(0)
                if block.allocated:
                    self._free_block(block, None, True)
        finally:
            self._busy = False

    def raw_alloc(self, nbytes: int, stream: int = 0) -> int:
        """``caching_allocator_alloc``: the address of a new block (0 for 0 bytes)."""
        if nbytes == 0:
            return 0
        return self.malloc(nbytes, stream).address

    def raw_delete(self, address: int) -> None:
        """``caching_allocator_delete``: free the block that starts at ``address``."""
        if not address:
            return
        block = self._by_address.get(address)
        if block is None:
            raise RuntimeError(f"invalid device pointer: {address:#x}")
        self.free(block)

    def block_at(self, address: int) -> Block | None:
        """The allocated block starting at ``address``, if any."""
        return self._by_address.get(address)

    def record_stream(self, block: Block, stream: int) -> None:
        """Note that ``block`` is used on ``stream`` (``Tensor.record_stream``)."""
        with self.lock:
            if stream != block.stream:
                if block.stream_uses is None:
                    block.stream_uses = {stream: None}
                else:
                    block.stream_uses[stream] = None

    # -- private pools (CUDA graphs) ----------------------------------------

    def begin_allocate_to_pool(self, pool_id: tuple[int, int], stream_filter) -> None:
        """Route allocations of the streams ``stream_filter`` accepts into a private pool."""
        with self.lock:
            self.graph_pools.begin(pool_id, stream_filter)

    def end_allocate_to_pool(self, pool_id: tuple[int, int]) -> None:
        """Stop routing allocations into ``pool_id`` (its memory stays with it)."""
        with self.lock:
            self.graph_pools.end(pool_id)

    def release_pool(self, pool_id: tuple[int, int]) -> None:
        """One graph using ``pool_id`` is gone; the last one makes the pool freeable."""
        with self.lock:
            self.graph_pools.release(pool_id)

    def pool_live_allocations(self, pool_id: tuple[int, int]) -> set[int]:
        """Addresses of the blocks allocated from private pool ``pool_id`` and not freed."""
        with self.lock:
            pool = self.graph_pools.pools.get(pool_id)
            return {a for a, b in self._by_address.items()
                    if pool is not None and b.pool.owner is pool}

    def block_pools(self) -> list[BlockPool]:
        """The default small and large pools, then every private pool's."""
        return [self.small_pool, self.large_pool, *self.graph_pools.block_pools()]

    def empty_cache(self) -> None:
        """Wait for pending frees, then return every unsplit cached segment to the source."""
        context = self.history.gather(RecordContext.ALL) if self.history.level else None
        with self.lock:
            self._exclusive(self._release_cached_blocks, context)

    def set_memory_fraction(self, fraction: float) -> None:
        """Cap reserved memory at ``fraction`` of the device's total memory."""
        with self.lock:
            total = self.source.mem_get_info()[1]
            self.allowed_memory_maximum = int(fraction * total)
            self.fraction = fraction
            self.set_fraction = True

    def attach_oom_observer(self, observer: OOMObserver) -> None:
        """Call ``observer(device, alloc_size, device_total_or_allowed, device_free)``
        before each OutOfMemoryError is raised."""
        with self.lock:
            self.oom_observers.append(observer)

    def reset_peak_stats(self) -> None:
        """Set every peak statistic to its current value."""
        with self.lock:
            self.stats.reset_peak()

    def reset_accumulated_stats(self) -> None:
        """Zero the allocated/freed sums and event counters."""
        with self.lock:
            self.stats.reset_accumulated()

    def stats_as_nested_dict(self) -> dict[str, object]:
        """The counters as ``memory_stats_as_nested_dict`` returns them."""
        with self.lock:
            return self.stats.as_nested_dict()

    def largest_free_block(self) -> int:
        """Size of the largest cached free block (torch's ``cacheInfo``), 0 if none."""
        with self.lock:
            sizes = [b.size for p in (self.small_pool, self.large_pool) for b in p.blocks.values()]
            return max(sizes, default=0)

    def round_size(self, size: int) -> int:
        """The block size a request of ``size`` bytes is rounded to."""
        if size < K_MIN_BLOCK_SIZE:
            return K_MIN_BLOCK_SIZE
        divisions = self.config.roundup_divisions_for(size)
        if divisions > 1 and size > K_MIN_BLOCK_SIZE * divisions:
            return roundup_power2_next_division(size, divisions)
        return -(-size // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE

    # -- snapshot ----------------------------------------------------------

    def trace(self) -> list[dict[str, Any]]:
        """The recorded history, oldest first, as snapshot trace entries."""
        with self.lock:
            return [entry.as_dict() for entry in self.history.entries()]

    def segments(self) -> list[dict[str, Any]]:
        """Every segment with its blocks, in address order (``memory_snapshot`` layout).

        Taking this records a ``snapshot`` action in the history, as torch does.
        """
        with self.lock:
            return self._exclusive(self._segments)

    def _exclusive(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` as one operation: frees from finalizers wait until it ends."""
        if self._busy:
            raise RuntimeError("caching allocator re-entered during an operation")
        self._busy = True
        try:
            return fn(*args)
        finally:
            self._busy = False
            if self._deferred:
                self._free_deferred()

    def _segments(self) -> list[dict[str, Any]]:
        heads = {b for p in self.block_pools() for b in p.blocks.values()}
        heads.update(self._by_address.values())
        heads.update(self._pending)
        result = []
        total_active = 0
        for head in sorted((b for b in heads if b.prev is None), key=lambda b: b.address):
            segment = _snapshot.segment_dict(head, self.device)
            total_active += segment["active_size"]
            result.append(segment)
        self.history.record("snapshot", 0, total_active, 0, None)
        return result

    # -- the algorithm -------------------------------------------------------

    def _reserve(
        self, pool: BlockPool, stream: int, size: int, alloc_size: int, context: Frames | None
    ) -> Block | None:
        """A new segment for the request, freeing cached memory and retrying if needed."""
        if self.set_fraction and self.config.garbage_collection_threshold > 0.0:
            self._garbage_collect(context)
        block = self._alloc_block(pool, stream, alloc_size, False, context)
        if block is None and self._release_available_cached_blocks(pool, stream, size, context):
            block = self._alloc_block(pool, stream, alloc_size, False, context)
        # During a capture cached segments cannot be freed (that needs event
        # synchronisation), so the last resort is skipped.
        if block is None and not self._captures and self._release_cached_blocks(context):
            block = self._alloc_block(pool, stream, alloc_size, True, context)
        return block

    def _alloc_block(
        self, pool: BlockPool, stream: int, size: int, is_retry: bool, context: Frames | None
    ) -> Block | None:
        stats = self.stats
        if is_retry:
            stats.num_alloc_retries += 1
        if self.set_fraction and self.total_reserved + size > self.allowed_memory_maximum:
            return None
        if self.config.release_lock_on_cudamalloc:
            # Other threads may use the allocator meanwhile (allocator state has not
            # been changed by this request yet); this thread's operation pauses.
            self._busy = False
            self.lock.release()
            try:
                address = self.source.allocate(size)
            finally:
                self.lock.acquire()
                self._busy = True
        else:
            address = self.source.allocate(size)
        if address is None:
            return None
        self.total_reserved += size
        if pool.owner is not None:
            pool.owner.segments += 1
        block = Block(stream, size, pool, address)
        stats.record_segment_alloc(pool.stat_index, size)
        if size >= self.config.max_split_size:
            single_increase(stats.oversize_segments, 1)
        stats.num_device_alloc += 1
        self.history.record("segment_alloc", address, size, stream, context)
        block.segment_context = context
        return block

    def _free_block(
        self, block: Block, context: Frames | None, requested_now: bool = False
    ) -> None:
        """Return a block whose uses have all completed to its pool, merging neighbours.

        ``requested_now``: its user gives it back in this call (a free): the address
        map, the history and the oversize count are updated first, and a block still
        used on other streams becomes pending instead, until their events complete.
        """
        if requested_now:
            del self._by_address[block.address]
            block.allocated = False
            if self.history.enabled:
                self.history.record(
                    "free_requested", block.address, block.requested_size, block.stream,
                    context or block.context,
                )
            if block.size >= self.config.max_split_size:
                single_decrease(self.stats.oversize_allocations, 1)
            if block.stream_uses:
                self.stats.record_free_requested(block.pool.stat_index, block.size)
                if self._captures:
                    # events may not be recorded during a capture: wait until none is
                    # under way
                    self._pending.add(block)
                    self._after_capture.append(block)
                else:
                    self._insert_events(block)
                return
        if self.history.enabled:
            self.history.record(
                "free_completed", block.address, block.requested_size, block.stream,
                context or block.context,
            )
        block.context = None
        original_size = size = block.size
        pool = block.pool
        # A neighbour merges when it is free: not allocated and not waiting for events.
        net_blocks = net_bytes = 0
        absorbed = None  # the last neighbour merged in: the block takes its free-list slot
        prev = block.prev
        if (
            prev is not None
            and not prev.allocated
            and not prev.event_count
            and not prev.stream_uses
        ):
            absorbed = prev
            block.address = prev.address
            # The segment's allocation context lives on its first block.
            block.segment_context = prev.segment_context
            size += prev.size
            net_blocks -= 1
            net_bytes -= prev.size
            prev = block.prev = prev.prev
            if prev is not None:
                prev.next = block
        nxt = block.next
        if (
            nxt is not None
            and not nxt.allocated
            and not nxt.event_count
            and not nxt.stream_uses
        ):
            if absorbed is not None:
                pool.remove(absorbed)
            absorbed = nxt
            size += nxt.size
            net_blocks -= 1
            net_bytes -= nxt.size
            nxt = block.next = nxt.next
            if nxt is not None:
                nxt.prev = block
        block.size = size
        if absorbed is None:
            pool.insert(block)
        else:
            # pool.replace(absorbed, block), written out for its common case: the
            # block's key, larger than the absorbed one's, takes that slot when no
            # other key lies between them.
            block.gc_count_base = pool.gc_calls
            keys, blocks = pool.lists[block.stream]
            index = bisect_left(keys, absorbed.size << 64 | absorbed.address)
            key = size << 64 | block.address
            if index + 1 == len(keys) or key < keys[index + 1]:
                keys[index] = key
                blocks[index] = block
            else:
                del keys[index]
                del blocks[index]
                pool.insert(block)
        if prev is not None or nxt is not None:
            net_blocks += 1
            net_bytes += size
        if requested_now:
            self.stats.record_free(
                pool.stat_index, original_size, block.requested_size, net_blocks, net_bytes
            )
        else:
            self.stats.record_free_completed(
                pool.stat_index, original_size, block.requested_size, net_blocks, net_bytes
            )

    def _release_block(self, block: Block, context: Frames | None) -> None:
        stats = self.stats
        stats.num_device_free += 1
        self.history.record(
            "segment_free", block.address, block.size, block.stream,
            context or block.segment_context,
        )
        block.pool.remove(block)
        self.source.free(block.address, block.size)
        self.total_reserved -= block.size
        stats.record_segment_free(block.pool.stat_index, block.size)
        if block.size >= self.config.max_split_size:
            single_decrease(stats.oversize_segments, 1)
        owner = block.pool.owner
        if owner is not None:
            owner.segments -= 1
            self.graph_pools.forget_if_empty(owner)

    def _release_blocks(self, pool: BlockPool, context: Frames | None) -> None:
        for block in pool.ordered():
            if block.prev is None and block.next is None:
                self._release_block(block, context)

    def _release_cached_blocks(self, context: Frames | None) -> bool:
        self._synchronize_and_free_events(context)
        self._release_blocks(self.large_pool, context)
        self._release_blocks(self.small_pool, context)
        # pools no graph uses any more give back their free segments, and go once empty
        for pool in list(self.graph_pools.freeable.values()):
            self._release_blocks(pool.small, context)
            self._release_blocks(pool.large, context)
            self.graph_pools.forget_if_empty(pool)
        return True

    def _release_available_cached_blocks(
        self, pool: BlockPool, stream: int, size: int, context: Frames | None
    ) -> bool:
        """Free oversize cached blocks of this stream, just enough for ``size`` bytes."""
        max_split = self.config.max_split_size
        if max_split == SIZE_MAX:
            return False
        target = max(size, max_split)
        keys, blocks = pool.lists.get(stream, ([], []))
        index = bisect_left(keys, target << 64)
        if index < len(keys):
            block = blocks[index]
            # A split block cannot go back to the source (torch would fail here).
            if block.is_split():
                return False
            self._release_block(block, context)
            return True
        released = 0
        for block in reversed(blocks[:index]):
            if released >= target:
                break
            if block.size < max_split:
                break
            if not block.is_split():
                released += block.size
                self._release_block(block, context)
        return released >= target

    def _garbage_collect(self, context: Frames | None) -> None:
        """Free cached large segments that have gone unused the longest (torch's GC)."""
        threshold = int(self.config.garbage_collection_threshold * self.allowed_memory_maximum)
        if self.total_reserved <= threshold:
            return
        target = self.total_reserved - threshold
        pool = self.large_pool
        candidates = [b for b in pool.ordered() if not b.is_split()]
        if not candidates:
            return
        total_age = sum(pool.gc_calls - b.gc_count_base for b in candidates)
        count = len(candidates)
        reclaimed = 0
        freed_any = True
        while reclaimed < target and freed_any and count > 0:
            threshold_age = total_age / count
            freed_any = False
            for block in pool.ordered():
                if block.is_split():
                    continue
                age = pool.gc_calls - block.gc_count_base
                if age >= threshold_age:
                    freed_any = True
                    reclaimed += block.size
                    total_age -= age
                    count -= 1
                    self._release_block(block, context)

    def _insert_events(self, block: Block) -> None:
        streams = list(block.stream_uses)
        block.stream_uses = None
        self._pending.add(block)
        for stream in streams:
            event = self.source.record_event(stream)
            block.event_count += 1
            self._events.setdefault(stream, deque()).append((event, block))

    def _insert_events_after_capture(self) -> None:
        """Record the events of cross-stream frees requested during a capture."""
        blocks, self._after_capture = self._after_capture, []
        for block in blocks:
            self._pending.discard(block)
            self._insert_events(block)

    def _process_events(self, context: Frames | None) -> None:
        if self._after_capture:
            self._insert_events_after_capture()
        source = self.source
        for stream in list(self._events):
            queue = self._events[stream]
            while queue:
                event, block = queue[0]
                if not source.event_done(event):
                    break
                queue.popleft()
                source.release_event(event)
                block.event_count -= 1
                if block.event_count == 0:
                    self._pending.discard(block)
                    self._free_block(block, context)
            if not queue:
                del self._events[stream]

    def _synchronize_and_free_events(self, context: Frames | None) -> None:
        if self._after_capture and not self._captures:
            self._insert_events_after_capture()
        self.stats.num_sync_all_streams += 1
        source = self.source
        events = self._events
        self._events = {}
        for queue in events.values():
            for event, block in queue:
                source.synchronize_event(event)
                source.release_event(event)
                block.event_count -= 1
                if block.event_count == 0:
                    self._pending.discard(block)
                    self._free_block(block, context)

    def _out_of_memory(
        self, size: int, alloc_size: int, stream: int, context: Frames | None
    ) -> str:
        free_bytes, total = self.source.mem_get_info()
        allowed = f"{format_size(self.allowed_memory_maximum)} allowed; " if self.set_fraction else ""
        self.history.record("oom", free_bytes, size, stream, context)
        self.stats.num_ooms += 1
        allocated = self.stats.current("allocated_bytes")
        reserved = self.stats.current("reserved_bytes")
        message = (
            f"CUDA out of memory. Tried to allocate {format_size(alloc_size)}. "
            f"GPU {self.device} has a total capacity of {format_size(total)} of which "
            f"{format_size(free_bytes)} is free. {_process_memory_sentence(self.device)}"
            f"{allowed}"
            f"Of the allocated memory {format_size(allocated)} is allocated by PyTorch, "
            f"and {format_size(reserved - allocated)} is reserved by PyTorch but unallocated. "
            "If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
            "See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        return message

    # -- self-check ----------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise AssertionError if the block structure and the counters disagree.

        Checks: segments tile their memory with no gaps, links are symmetric, free
        blocks sit in the right free list and no two mergeable free blocks touch,
        allocated blocks are exactly the address map, and every current statistic
        equals what the blocks add up to. Cost: linear in the number of blocks.
        """
        from refimpl.cuda._allocator_check import check_invariants

        check_invariants(self)



def _as_int64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def _process_memory_sentence(device: int) -> str:
    """torch's "this process has X memory in use" sentence, when NVML can tell (else "")."""
    from refimpl.cuda._nvml import process_memory_in_use

    used = process_memory_in_use(device)
    if used is None:
        return ""
    return f"Including non-PyTorch memory, this process has {format_size(used)} memory in use. "
