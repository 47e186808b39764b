"""History recording and snapshot layout for the caching allocator.

Spec: cuda_memory (snapshot and history clauses). ``_record_memory_history``
turns on two independent things, as in torch:

* a *trace*: a ring buffer of the allocator's actions (``alloc``,
  ``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``,
  ``oom``, ``snapshot``), kept only when ``enabled="all"`` (``"state"`` keeps one
  entry);
* *contexts*: Python stacks captured at allocation (and free) time. The
  ``context`` level decides where they are kept: ``"state"`` only on live blocks,
  ``"alloc"`` also on trace entries, ``"all"`` also for frees and cache releases.

Stacks hold Python frames only, innermost first, each ``{"filename", "line",
"name"}``; the allocator's own frames are left out. ``stacks="all"`` asks torch for
C++ frames too; refimpl has none to add, so it records the same Python frames.
"""

from __future__ import annotations

import sys
import time
from enum import IntEnum
from typing import Any

__all__ = [
    "TRACE_ACTIONS",
    "History",
    "RecordContext",
    "frames_to_dicts",
    "register_internal_file",
    "segment_dict",
]

TRACE_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
)

Frames = tuple[tuple[str, int, str], ...]

# Files whose frames are the allocator's own machinery, not the user's program.
_INTERNAL_FILES: set[str] = {__file__}


def register_internal_file(path: str) -> None:
    """Leave frames of ``path`` out of captured stacks (allocator internals)."""
    _INTERNAL_FILES.add(path)


class RecordContext(IntEnum):
    """Where captured stacks are kept (torch's ``RecordContext``)."""

    NEVER = 0
    STATE = 1
    ALLOC = 2
    ALL = 3


def capture_python_stack() -> Frames:
    """The caller's Python stack, innermost frame first, allocator frames skipped."""
    frame = sys._getframe(1)
    internal = _INTERNAL_FILES
    frames = []
    while frame is not None:
        code = frame.f_code
        if code.co_filename not in internal:
            frames.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(frames)


def frames_to_dicts(frames: Frames | None) -> list[dict[str, Any]]:
    """Frames as the list of ``{"filename", "line", "name"}`` dicts snapshots hold."""
    if not frames:
        return []
    return [{"filename": f, "line": line, "name": name} for f, line, name in frames]


class TraceEntry:
    """One recorded allocator action. For ``oom``, ``addr`` holds the device's free bytes."""

    __slots__ = ("action", "addr", "frames", "size", "stream", "time_us")

    def __init__(
        self, action: str, addr: int, size: int, stream: int, frames: Frames | None
    ) -> None:
        self.action = action
        self.addr = addr
        self.size = size
        self.stream = stream
        self.time_us = time.time_ns() // 1000
        self.frames = frames

    def as_dict(self) -> dict[str, Any]:
        """The entry as ``torch.cuda.memory._snapshot()["device_traces"]`` holds it."""
        return {
            "action": self.action,
            ("device_free" if self.action == "oom" else "addr"): self.addr,
            "size": self.size,
            "stream": self.stream,
            "time_us": self.time_us,
            "frames": frames_to_dicts(self.frames),
            "compile_context": "N/A",
            "user_metadata": "",
        }


class History:
    """The recording switches and the trace ring buffer of one device allocator."""

    __slots__ = ("_next", "_ring", "enabled", "level", "max_entries", "skip")

    def __init__(self) -> None:
        self.enabled = False
        self.level = RecordContext.NEVER
        self.max_entries = 1
        self.skip: frozenset[str] = frozenset()
        self._ring: list[TraceEntry] = []
        self._next = 0

    def configure(
        self,
        enabled: bool,
        level: RecordContext,
        max_entries: int,
        clear: bool = False,
        skip_actions: frozenset[str] = frozenset(),
    ) -> None:
        """Apply ``_record_memory_history`` settings (torch's ``recordHistory``)."""
        self.enabled = enabled
        self.level = level if enabled else RecordContext.NEVER
        self.max_entries = max(1, max_entries)
        self.skip = skip_actions
        if not enabled or clear:
            self._ring = []
            self._next = 0
        elif len(self._ring) > self.max_entries:
            entries = self.entries()[-self.max_entries :]
            self._ring = entries
            self._next = 0

    def gather(self, level: RecordContext) -> Frames | None:
        """The current stack if contexts are kept at ``level`` or finer, else None."""
        if self.level < level:
            return None
        return capture_python_stack()

    def record(self, action: str, addr: int, size: int, stream: int, frames: Frames | None) -> None:
        """Append one action to the ring buffer (no-op when recording is off)."""
        if not self.enabled or action in self.skip:
            return
        entry = TraceEntry(
            action, addr, size, stream, frames if self.level >= RecordContext.ALLOC else None
        )
        ring = self._ring
        if len(ring) < self.max_entries:
            ring.append(entry)
        else:
            ring[self._next] = entry
            self._next = (self._next + 1) % self.max_entries

    def entries(self) -> list[TraceEntry]:
        """The recorded actions, oldest first."""
        return self._ring[self._next :] + self._ring[: self._next]


def segment_dict(head: Any, device: int) -> dict[str, Any]:
    """One segment of a snapshot, from its first block (torch's ``SegmentInfo`` layout).

    A block is ``active_allocated`` while allocated, ``active_pending_free`` while
    freed but still used on other streams, ``inactive`` when free. The segment's
    ``frames`` are the stack that reserved it, kept on its first block as long as
    that block exists (as in torch, splitting the first block loses them).
    """
    blocks = []
    total = allocated = active = requested = 0
    block = head
    while block is not None:
        is_active = block.allocated or block.event_count > 0 or bool(block.stream_uses)
        if block.allocated:
            state = "active_allocated"
        else:
            state = "active_pending_free" if is_active else "inactive"
        blocks.append(
            {
                "address": block.address,
                "size": block.size,
                "requested_size": block.requested_size,
                "state": state,
                "frames": frames_to_dicts(block.context),
            }
        )
        total += block.size
        if block.allocated:
            allocated += block.size
        if is_active:
            active += block.size
            requested += block.requested_size
        block = block.next
    return {
        "device": device,
        "address": head.address,
        "total_size": total,
        "allocated_size": allocated,
        "active_size": active,
        "requested_size": requested,
        "stream": head.stream,
        "segment_type": "small" if head.pool.is_small else "large",
        "segment_pool_id": head.pool.owner_pool_id,
        "is_expandable": False,
        "frames": frames_to_dicts(head.segment_context),
        "blocks": blocks,
    }
