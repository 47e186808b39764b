"""Blocks and free lists of the caching allocator, and its size rules.

Spec: cuda_memory (ALLOC clauses). A *segment* is one allocation from the segment
source; it is cut into *blocks* linked in address order. Free blocks live in a
:class:`BlockPool` (one for small requests, one for large ones), kept per stream
and sorted by (size, address) so that the best fit is one binary search away.
"""

from __future__ import annotations

from bisect import bisect_left

from refimpl.cuda._allocator_stats import LARGE_POOL, SMALL_POOL
from refimpl.cuda._snapshot import Frames

__all__ = [
    "K_LARGE_BUFFER",
    "K_MIN_BLOCK_SIZE",
    "K_MIN_LARGE_ALLOC",
    "K_ROUND_LARGE",
    "K_SMALL_BUFFER",
    "K_SMALL_SIZE",
    "Block",
    "BlockPool",
    "allocation_size",
    "roundup_power2_next_division",
]

K_MIN_BLOCK_SIZE = 512  # every request is rounded up to a multiple of this
K_SMALL_SIZE = 1048576  # the largest rounded request served by the small pool
K_SMALL_BUFFER = 2097152  # size of a small-pool segment
K_LARGE_BUFFER = 20971520  # size of the segment for requests under K_MIN_LARGE_ALLOC
K_MIN_LARGE_ALLOC = 10485760
K_ROUND_LARGE = 2097152  # larger requests get their own segment, rounded to this


class BlockPool:
    """Free blocks of one pool (small or large), kept per stream, sorted by (size, address).

    Each stream has two parallel lists: ``size << 64 | address`` keys, sorted (one
    int per block, so the best fit for ``size`` is ``bisect_left(keys, size << 64)``),
    and the blocks in the same order (the block of ``keys[i]`` is ``blocks[i]``).
    """

    __slots__ = ("gc_calls", "is_small", "lists", "owner", "owner_pool_id", "stat_index")

    def __init__(self, is_small: bool, owner_pool_id: tuple[int, int] = (0, 0)) -> None:
        self.is_small = is_small
        self.stat_index = SMALL_POOL if is_small else LARGE_POOL
        self.owner_pool_id = owner_pool_id
        # the PrivatePool (graph pool) this belongs to; None for the default pools
        self.owner = None
        self.lists: dict[int, tuple[list[int], list[Block]]] = {}
        self.gc_calls = 0

    def insert(self, block: Block) -> None:
        """Put a free block into its stream's lists (and stamp its GC age base)."""
        block.gc_count_base = self.gc_calls
        key = block.size << 64 | block.address
        lists = self.lists.get(block.stream)
        if lists is None:
            self.lists[block.stream] = ([key], [block])
        else:
            keys, blocks = lists
            index = bisect_left(keys, key)
            keys.insert(index, key)
            blocks.insert(index, block)

    def remove(self, block: Block) -> None:
        """Take a free block out of its stream's lists."""
        keys, blocks = self.lists[block.stream]
        index = bisect_left(keys, block.size << 64 | block.address)
        del keys[index]
        del blocks[index]

    def replace(self, old: Block, new: Block) -> None:
        """Put ``new`` in the place of the free block ``old``, which it absorbed (a merge).

        ``new`` is the larger, so its key is too; when no other key lies between the
        two, the new key takes the old one's slot in the sorted list (no search for
        a place, no shifting).
        """
        new.gc_count_base = self.gc_calls
        keys, blocks = self.lists[new.stream]
        index = bisect_left(keys, old.size << 64 | old.address)
        key = new.size << 64 | new.address
        if index + 1 == len(keys) or key < keys[index + 1]:
            keys[index] = key
            blocks[index] = new
        else:
            del keys[index]
            del blocks[index]
            self.insert(new)

    def ordered(self) -> list[Block]:
        """All free blocks in torch's set order: stream, then size, then address."""
        return [b for s in sorted(self.lists) for b in self.lists[s][1]]

    @property
    def blocks(self) -> dict[int, Block]:
        """The free blocks by address (a new dict: for inspection, not the hot path)."""
        return {b.address: b for _, blocks in self.lists.values() for b in blocks}


class Block:
    """A piece of a segment: allocated, pending (freed but in use on other streams) or free.

    ``prev``/``next`` link the blocks of one segment in address order; a segment
    that is not split is a single block with neither.
    """

    __slots__ = (
        "address",
        "allocated",
        "context",
        "event_count",
        "gc_count_base",
        "next",
        "pool",
        "prev",
        "requested_size",
        "segment_context",
        "size",
        "stream",
        "stream_uses",
    )

    def __init__(self, stream: int, size: int, pool: BlockPool, address: int) -> None:
        self.stream = stream
        self.size = size
        self.requested_size = 0
        self.pool = pool
        self.address = address
        self.allocated = False
        self.prev: Block | None = None
        self.next: Block | None = None
        self.event_count = 0
        # Other streams the block is used on (record_stream); None, not an empty dict,
        # until there is one: a dict per block would cost a fifth of a block's creation.
        self.stream_uses: dict[int, None] | None = None
        self.gc_count_base = 0
        self.context: Frames | None = None
        self.segment_context: Frames | None = None

    def is_split(self) -> bool:
        """Whether the block shares its segment with other blocks."""
        return self.prev is not None or self.next is not None

    def __repr__(self) -> str:
        state = "allocated" if self.allocated else "pending" if self.event_count else "free"
        return f"Block({self.address:#x}, size={self.size}, stream={self.stream}, {state})"


def allocation_size(size: int) -> int:
    """Size of the segment reserved for a rounded request of ``size`` bytes."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def roundup_power2_next_division(size: int, divisions: int) -> int:
    """Round ``size`` up to the next of ``divisions`` equal steps between two powers of two.

    For 1200 bytes and 4 divisions the steps between 1024 and 2048 are 1024, 1280,
    1536 and 1792, so the result is 1280. Powers of two are returned unchanged.
    """
    if size & (size - 1) == 0:
        return size
    floor = 1 << (size.bit_length() - 1)
    step = floor >> (divisions.bit_length() - 1)
    if step == 0:
        return floor << 1
    rounded = size & ~(step - 1)
    return size if rounded == size else rounded + step
