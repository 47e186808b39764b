"""The allocator state at the start of a snapshot's history, for a replay.

A history recorded from the first allocation starts from an empty allocator. A ring
buffer that wrapped does not: segments and blocks predate its first entry. Their
layout follows from the snapshot by walking the history backwards from the final
state: a ``segment_alloc`` means the segment did not exist before it, a
``segment_free`` that it did; an ``alloc`` means the block did not exist before, a
``free_requested`` that it was allocated, a ``free_completed`` that it was waiting
for another stream. Block sizes come from the snapshot where the block is still
there, otherwise from the recorded request rounded as the allocator rounds it (a
block also takes a remainder too small to split off, as the allocator does).

:meth:`InitialState.apply` then builds that state in a fresh allocator: each segment
is reserved by one request, given back, and carved front to back into its blocks and
fillers for the free gaps; once every segment is built the fillers are freed (they
merge into the free blocks) and the blocks that were waiting for another stream are
freed onto a busy stream so that they stay pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from refimpl.cuda._allocator import Block, CachingAllocator
from refimpl.cuda._allocator_blocks import K_MIN_BLOCK_SIZE, K_SMALL_BUFFER, K_SMALL_SIZE

__all__ = ["InitialState", "build_initial_state"]

PENDING_STREAM_BASE = -(1 << 62)
_LARGE_BUFFER = 20 << 20


class Unbuildable(ValueError):
    """The snapshot's initial state cannot be laid out consistently."""


@dataclass
class _Segment:
    address: int
    size: int
    stream: int
    small: bool
    blocks: dict[int, list] = field(default_factory=dict)  # addr -> [state, requested, size]


@dataclass
class InitialState:
    """Segments and blocks that existed before the history's first entry."""

    segments: dict[int, int] = field(default_factory=dict)  # address -> size
    layout: list[_Segment] = field(default_factory=list)
    orphans: list[tuple[int, int, int]] = field(default_factory=list)
    error: str | None = None

    @property
    def script(self) -> list[tuple[int, int]]:
        """(address, size) of the segments :meth:`apply` reserves, in order."""
        return [(s.address, s.size) for s in self.layout]

    def apply(
        self, allocator: CachingAllocator, source: Any
    ) -> tuple[dict[int, Block], dict[int, int]]:
        """Build the state; returns (live blocks by address, pending address -> stream)."""
        live: dict[int, Block] = {}
        pending: dict[int, int] = {}
        if not self.layout:
            return live, pending
        config = allocator.config
        # pieces are exact sizes: no power-of-two rounding while building
        allocator.config = replace(
            config, roundup_power2_divisions=[0] * len(config.roundup_power2_divisions),
            roundup_enabled=False,
        )
        fillers: list[Block] = []
        waiting: list[tuple[int, Block]] = []
        try:
            for segment in self.layout:
                self._build(allocator, segment, live, fillers, waiting)
        finally:
            allocator.config = config
        for block in fillers:
            allocator.free(block)
        for number, (address, block) in enumerate(waiting):
            stream = PENDING_STREAM_BASE + number
            source.set_stream_busy(stream)
            allocator.record_stream(block, stream)
            allocator.free(block)
            del live[address]
            pending[address] = stream
        return live, pending

    def _build(self, allocator: CachingAllocator, segment: _Segment, live: dict,
               fillers: list, waiting: list) -> None:
        stream = segment.stream
        first = allocator.malloc(_reserving_request(segment), stream)
        if first.address != segment.address or first.size + _tail(first) != segment.size:
            raise Unbuildable(f"segment {segment.address:#x} could not be reserved as recorded")
        allocator.free(first)
        cursor = segment.address
        end = segment.address + segment.size
        pieces: list[tuple[int, int, list | None]] = []
        for address in sorted(segment.blocks):
            info = segment.blocks[address]
            if address > cursor:
                pieces.append((cursor, address - cursor, None))
            pieces.append((address, info[2], info))
            cursor = address + info[2]
        if cursor < end:
            pieces.append((cursor, end - cursor, None))
        for address, size, info in pieces:
            for chunk_address, chunk in _chunks(address, size, segment.small):
                block = allocator.malloc(chunk, stream)
                if block.address != chunk_address or block.size != chunk:
                    raise Unbuildable(
                        f"block {chunk_address:#x} ({chunk} bytes) of segment "
                        f"{segment.address:#x} could not be laid out as recorded"
                    )
                if info is None:
                    fillers.append(block)
                    continue
                _set_requested(allocator, block, info[1] or chunk)
                live[address] = block
                if info[0] == "pending":
                    waiting.append((address, block))


def _tail(block: Block) -> int:
    nxt, total = block.next, 0
    while nxt is not None:
        total += nxt.size
        nxt = nxt.next
    return total


def _reserving_request(segment: _Segment) -> int:
    """A request whose new segment is exactly ``segment.size`` bytes in its pool."""
    if segment.small:
        return K_MIN_BLOCK_SIZE
    if segment.size == _LARGE_BUFFER:
        return 2 << 20
    return segment.size


def _chunks(address: int, size: int, small: bool) -> list[tuple[int, int]]:
    """Requests that carve ``size`` bytes at ``address`` in one pool (small-pool
    requests are at most 1 MiB; large-pool ones above 1 MiB)."""
    if not small:
        if size <= K_SMALL_SIZE:
            raise Unbuildable(f"a large-pool piece of {size} bytes at {address:#x}")
        return [(address, size)]
    result = []
    while size > 0:
        chunk = min(size, K_SMALL_SIZE)
        result.append((address, chunk))
        address += chunk
        size -= chunk
    return result


def _set_requested(allocator: CachingAllocator, block: Block, requested: int) -> None:
    delta = requested - block.requested_size
    if delta:
        block.requested_size = requested
        allocator.stats.pools[block.pool.stat_index].requested_bytes += delta


def _round(size: int, config: Any) -> int:
    if size < K_MIN_BLOCK_SIZE:
        return K_MIN_BLOCK_SIZE
    divisions = config.roundup_divisions_for(size)
    if divisions > 1 and size > K_MIN_BLOCK_SIZE * divisions:
        from refimpl.cuda._allocator_blocks import roundup_power2_next_division

        return roundup_power2_next_division(size, divisions)
    return -(-size // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE


def build_initial_state(
    final_segments: list[dict[str, Any]], trace: list[dict[str, Any]], config: Any = None
) -> InitialState:
    """The segments and blocks before ``trace`` began, from the snapshot's final ones."""
    segments: dict[int, _Segment] = {}
    for s in final_segments:
        segment = _Segment(int(s["address"]), int(s["total_size"]), int(s.get("stream", 0)),
                           s.get("segment_type") == "small")
        for b in s.get("blocks", []):
            state = b.get("state")
            if state in ("active_allocated", "active_pending_free"):
                segment.blocks[int(b["address"])] = [
                    "allocated" if state == "active_allocated" else "pending",
                    int(b.get("requested_size") or b.get("size", 0)), int(b["size"])]
        segments[segment.address] = segment
    blocks: dict[int, list] = {a: i for s in segments.values() for a, i in s.blocks.items()}
    for entry in reversed(trace):
        action = entry.get("action")
        addr = entry.get("addr", 0)
        size = int(entry.get("size", 0))
        if action == "segment_alloc":
            segments.pop(addr, None)
        elif action == "segment_free":
            segments[addr] = _Segment(addr, size, int(entry.get("stream", 0)),
                                      size == K_SMALL_BUFFER)
        elif action == "alloc":
            blocks.pop(addr, None)
        elif action == "free_requested":
            old = blocks.get(addr)
            blocks[addr] = ["allocated", size, old[2] if old and old[1] == size else None]
        elif action == "free_completed":
            blocks[addr] = ["pending", size, None]
    state = InitialState(segments={a: s.size for a, s in segments.items()})
    if not segments and not blocks:
        return state
    for segment in segments.values():
        segment.blocks = {}
    for address, info in sorted(blocks.items()):
        owner = next((s for s in segments.values()
                      if s.address <= address < s.address + s.size), None)
        if owner is None:
            state.orphans.append((address, info[1], 0))
            continue
        owner.blocks[address] = list(info)
    try:
        for segment in sorted(segments.values(), key=lambda s: s.address):
            _fill_sizes(segment, config)
            state.layout.append(segment)
    except Unbuildable as exc:
        state.error = str(exc)
        state.layout = []
    if state.orphans and state.error is None:
        state.error = f"{len(state.orphans)} blocks lie in no known segment"
        state.layout = []
    return state


def _fill_sizes(segment: _Segment, config: Any) -> None:
    """Give blocks of unknown size their rounded request size, plus any remainder too
    small to split off before the next block or the segment's end."""
    end = segment.address + segment.size
    addresses = sorted(segment.blocks)
    for i, address in enumerate(addresses):
        info = segment.blocks[address]
        boundary = addresses[i + 1] if i + 1 < len(addresses) else end
        if info[2] is None:
            size = _round(info[1], config) if config is not None else -(
                -max(info[1], 1) // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE
            gap = boundary - address - size
            oversize = config is not None and not segment.small and size >= config.max_split_size
            if gap < 0 or oversize or (gap < K_MIN_BLOCK_SIZE if segment.small
                                       else gap <= K_SMALL_SIZE):
                size = boundary - address
            info[2] = size
        if address + info[2] > boundary:
            raise Unbuildable(f"blocks overlap at {address:#x} in segment {segment.address:#x}")
