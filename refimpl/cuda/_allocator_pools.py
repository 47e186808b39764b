"""Private memory pools of the caching allocator: where CUDA graph captures allocate.

Spec: cuda_memory ALLOC clauses on graph pools, graphs GRAPH clauses. A graph replays
the kernels it captured on the very addresses they used, so the memory a capture
allocates must never be handed to anyone else while the graph can still replay. The
allocator therefore routes every allocation made *for* a capture into a pool of its
own, a :class:`PrivatePool` (a small and a large :class:`BlockPool`, cut from
segments that belong to that pool alone):

* ``begin(pool_id, filter)`` starts routing: while it lasts, an allocation whose
  stream makes ``filter(stream)`` true (for a graph: a stream taking part in that
  capture, forked side streams included) comes from the pool ``pool_id``. A new id
  makes a new pool; a known one is *shared* (``pool=g.pool()``,
  ``graph_pool_handle()``), and memory freed in one capture is then reused by the next.
* ``end(pool_id)`` stops routing; the pool and its segments stay.
* ``release(pool_id)`` says one graph using the pool is gone (``reset()``/deletion).
  When none is left the pool becomes *freeable*: ``empty_cache()`` returns its free
  segments to the device, and the pool itself disappears once it owns no segment.
  Tensors allocated from the pool stay valid as long as they live.

While any capture is under way the allocator never queries or records events
(forbidden during capture): cross-stream frees wait until no capture is under way,
and the "free everything and retry" step of an allocation is skipped.

Pool ids are pairs, as torch's ``MempoolId_t``: a capture's own pool is ``(n, 0)``,
a ``graph_pool_handle()`` is ``(0, n)``, the default pool is ``(0, 0)``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from refimpl.cuda._allocator_blocks import K_SMALL_SIZE, BlockPool

__all__ = ["GraphPools", "PrivatePool", "new_pool_id"]

StreamFilter = Callable[[int], bool]


class ThreadFilter:
    """The filter of ``_cuda_beginAllocateCurrentThreadToPool``: it accepts every stream's
    allocations made by one thread (the one that created it), so which thread runs an
    op decides where its memory comes from."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def __call__(self, stream: int) -> bool:
        return threading.get_ident() == self.thread

_ids_lock = threading.Lock()
_capture_ids = itertools.count(1)
_user_ids = itertools.count(1)


def new_pool_id(user_created: bool) -> tuple[int, int]:
    """A fresh pool id: ``(0, n)`` for ``graph_pool_handle()``, ``(n, 0)`` for a capture."""
    with _ids_lock:
        return (0, next(_user_ids)) if user_created else (next(_capture_ids), 0)


class PrivatePool:
    """The blocks of one private pool and the counts that decide when it can go."""

    __slots__ = ("id", "large", "segments", "small", "use_count")

    def __init__(self, pool_id: tuple[int, int]) -> None:
        self.id = pool_id
        self.small = BlockPool(True, pool_id)
        self.large = BlockPool(False, pool_id)
        self.small.owner = self.large.owner = self
        self.use_count = 1  # graphs (or captures) using the pool
        self.segments = 0  # segments reserved for the pool and not yet freed


class GraphPools:
    """The private pools of one device allocator and the captures routing into them."""

    def __init__(self) -> None:
        self.pools: dict[tuple[int, int], PrivatePool] = {}
        self.freeable: dict[tuple[int, int], PrivatePool] = {}
        self.captures: list[tuple[tuple[int, int], StreamFilter]] = []

    def begin(self, pool_id: tuple[int, int], stream_filter: StreamFilter) -> None:
        """Route allocations of streams that ``stream_filter`` accepts into ``pool_id``."""
        pool = self.pools.get(pool_id)
        if pool is None:
            self.pools[pool_id] = PrivatePool(pool_id)
        else:
            pool.use_count += 1
        if any(pid == pool_id for pid, _ in self.captures):
            raise RuntimeError("beginAllocateToPool: already recording to mempool_id")
        self.captures.append((pool_id, stream_filter))

    def end(self, pool_id: tuple[int, int]) -> None:
        """Stop routing into ``pool_id``."""
        for i, (pid, _) in enumerate(self.captures):
            if pid == pool_id:
                del self.captures[i]
                return
        raise RuntimeError("endAllocatePool: not currently recording to mempool_id")

    def release(self, pool_id: tuple[int, int]) -> None:
        """One user of the pool is gone; with none left the pool becomes freeable."""
        pool = self.pools.get(pool_id)
        if pool is None:
            raise RuntimeError(f"releasePool: unknown mempool_id {pool_id}")
        pool.use_count -= 1
        if pool.use_count == 0:
            self.freeable[pool_id] = pool

    def route_by_thread(self) -> bool:
        """Whether some routing depends on the allocating thread (a ``ThreadFilter``)."""
        return any(type(f) is ThreadFilter for _, f in self.captures)

    def pool_for(self, size: int, stream: int) -> BlockPool | None:
        """The private block pool a request on ``stream`` goes to, or None (default pools)."""
        for pool_id, stream_filter in self.captures:
            if stream_filter(stream):
                pool = self.pools[pool_id]
                return pool.small if size <= K_SMALL_SIZE else pool.large
        return None

    def block_pools(self) -> list[BlockPool]:
        """Every private block pool (small and large of each pool)."""
        return [bp for p in self.pools.values() for bp in (p.small, p.large)]

    def forget_if_empty(self, pool: PrivatePool) -> None:
        """Drop a freeable pool that owns no segment any more."""
        if pool.use_count == 0 and pool.segments == 0:
            self.pools.pop(pool.id, None)
            self.freeable.pop(pool.id, None)
