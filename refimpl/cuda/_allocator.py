"""The CUDA caching allocator as a pure algorithm (torch's native allocator).

Spec: cuda_memory (ALLOC clauses). This module never talks to a driver. It
manages *segments* (device allocations obtained from a :class:`SegmentSource`)
and the *blocks* they are cut into:

* Requests are rounded up to 512 bytes (or to a power-of-two division, see
  ``roundup_power2_divisions``). Rounded requests up to 1 MiB use the *small*
  pool, whose segments are 2 MiB; larger ones use the *large* pool, whose
  segments are 20 MiB for requests under 10 MiB and the request rounded up to
  2 MiB otherwise.
* Free blocks are kept per (pool, stream) and searched best fit: the smallest
  free block on the request's stream that is large enough, lowest address first
  among equals. A block freed on one stream is never handed to another.
* A block larger than the request is split: in the small pool when 512 bytes or
  more remain, in the large pool when more than 1 MiB remains and the request is
  under ``max_split_size``. A freed block merges with free neighbours.
* Blocks of ``max_split_size`` or more are *oversize*: never split, given only to
  requests of at least ``max_split_size`` and at most ``max_non_split_rounding``
  (20 MiB) smaller than themselves.
* When a new segment cannot be had, the allocator frees cached oversize blocks,
  then every unsplit cached segment (after waiting on pending events), retries,
  and finally raises :class:`OutOfMemoryError` after calling the OOM observers.
* ``record_stream``: a block used on other streams is not reusable when freed;
  events are recorded on those streams and the block returns to its free list
  when they have completed (checked at each ``malloc``, forced by ``empty_cache``
  and by the OOM retry).

One re-entrant lock guards each device allocator; a free that arrives from a
finalizer (garbage collection) while the same thread is inside an allocator
operation waits until that operation ends.

Where things live: this module holds the :class:`SegmentSource` protocol, the
simulated :class:`AddressSpaceSource` and the per-device registry
(:func:`set_segment_source_factory`, :func:`get_device_allocator`); the algorithm
is in ``_allocator_core`` (with blocks and free lists in ``_allocator_blocks``),
snapshot layout and history in ``_snapshot``, counters in ``_allocator_stats``,
settings in ``_allocator_config``, private pools in ``_allocator_pools``, their
checkpoints in ``_allocator_checkpoint`` and a structural self-check in ``_allocator_check``.
Tensor storage should use :meth:`CachingAllocator.allocate` (torch's 1 EB guard,
None for 0 bytes); ``caching_allocator_alloc`` uses :meth:`CachingAllocator.malloc`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from refimpl.cuda import _snapshot
from refimpl.cuda._allocator_blocks import (
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_MIN_LARGE_ALLOC,
    K_ROUND_LARGE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    Block,
    allocation_size,
)
from refimpl.cuda._allocator_core import CachingAllocator, OOMObserver
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._snapshot import RecordContext

__all__ = [
    "K_LARGE_BUFFER",
    "K_MIN_BLOCK_SIZE",
    "K_MIN_LARGE_ALLOC",
    "K_ROUND_LARGE",
    "K_SMALL_BUFFER",
    "K_SMALL_SIZE",
    "AddressSpaceSource",
    "Block",
    "CachingAllocator",
    "OutOfMemoryError",
    "SegmentSource",
    "allocation_size",
    "attach_oom_observer",
    "configure_history",
    "device_allocators",
    "get_device_allocator",
    "has_segment_source_factory",
    "reset_device_allocators",
    "set_segment_source_factory",
]

_snapshot.register_internal_file(__file__)


@runtime_checkable
class SegmentSource(Protocol):
    """Where segments and stream events come from (a device, or a simulation).

    The GPU implementation wraps ``cuMemAlloc``/``cuMemFree``, ``cuMemGetInfo``
    and ``cuEventRecord``/``cuEventQuery``/``cuEventSynchronize``/``cuEventDestroy``.
    Streams are plain ints: the ``CUstream`` handle value, 0 for the legacy default
    stream. The allocator calls these with its lock held (``allocate`` excepted
    when ``release_lock_on_cudamalloc:True``).
    """

    def allocate(self, nbytes: int) -> int | None:
        """A new device allocation of exactly ``nbytes``; None when out of memory.

        Any other failure must raise (it propagates to the caller unchanged).
        """

    def free(self, address: int, nbytes: int) -> None:
        """Return an allocation made by :meth:`allocate` (``nbytes`` is its size)."""

    def mem_get_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the device, as ``cudaMemGetInfo`` reports."""

    def record_event(self, stream: int) -> object:
        """An event recorded on ``stream`` now: it completes when the work queued
        on ``stream`` so far has completed."""

    def event_done(self, event: object) -> bool:
        """Whether ``event`` has completed (never blocks)."""

    def synchronize_event(self, event: object) -> None:
        """Block the host until ``event`` has completed."""

    def release_event(self, event: object) -> None:
        """Give ``event`` back; the allocator no longer uses it."""


class _HostEvent:
    __slots__ = ("done", "released", "stream")

    def __init__(self, stream: int, done: bool) -> None:
        self.stream = stream
        self.done = done
        self.released = False


class AddressSpaceSource:
    """A simulated device of ``capacity`` bytes: fake addresses, no memory behind them.

    Addresses are handed out from ``base`` upward, each allocation aligned to
    ``alignment`` bytes and never reused, so a stale address is always detectable.
    Streams are idle unless a test marks them busy with :meth:`set_stream_busy`;
    an event recorded on a busy stream stays pending until the stream is released
    with :meth:`complete_stream` (or the host synchronizes on the event).
    """

    def __init__(
        self, capacity: int, *, base: int = 0x7F0000000000, alignment: int = 2097152
    ) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self.alignment = alignment
        self.live: dict[int, int] = {}
        self.num_allocations = 0
        self.num_frees = 0
        self.events_recorded = 0
        self.events_released = 0
        self._next = base
        self._busy: set[int] = set()
        self._pending: dict[int, list[_HostEvent]] = {}

    def allocate(self, nbytes: int) -> int | None:
        """Reserve ``nbytes``; None when that would exceed the capacity."""
        if nbytes <= 0:
            raise ValueError(f"allocation size must be positive, got {nbytes}")
        if self.used + nbytes > self.capacity:
            return None
        address = self._next
        self._next += -(-nbytes // self.alignment) * self.alignment
        self.live[address] = nbytes
        self.used += nbytes
        self.num_allocations += 1
        return address

    def free(self, address: int, nbytes: int) -> None:
        """Release an allocation; a wrong address or size raises ValueError."""
        size = self.live.get(address)
        if size != nbytes:
            raise ValueError(
                f"free({address:#x}, {nbytes}): no live allocation of that size at that address"
            )
        del self.live[address]
        self.used -= nbytes
        self.num_frees += 1

    def mem_get_info(self) -> tuple[int, int]:
        """``(capacity - used, capacity)``."""
        return self.capacity - self.used, self.capacity

    def set_stream_busy(self, stream: int, busy: bool = True) -> None:
        """Mark ``stream`` as running work (events recorded on it stay pending)."""
        if busy:
            self._busy.add(stream)
        else:
            self.complete_stream(stream)

    def complete_stream(self, stream: int) -> None:
        """Finish all work on ``stream``: its pending events complete."""
        self._busy.discard(stream)
        for event in self._pending.pop(stream, []):
            event.done = True

    def record_event(self, stream: int) -> _HostEvent:
        """An event that is complete now unless ``stream`` is busy."""
        event = _HostEvent(stream, stream not in self._busy)
        if not event.done:
            self._pending.setdefault(stream, []).append(event)
        self.events_recorded += 1
        return event

    def event_done(self, event: object) -> bool:
        """Whether the event has completed."""
        return event.done  # type: ignore[attr-defined]

    def synchronize_event(self, event: object) -> None:
        """Wait for the event: the work before it on its stream completes."""
        stream = event.stream  # type: ignore[attr-defined]
        pending = self._pending.get(stream, [])
        if event in pending:
            index = pending.index(event)
            for done in pending[: index + 1]:
                done.done = True
            del pending[: index + 1]
        event.done = True  # type: ignore[attr-defined]

    def release_event(self, event: object) -> None:
        """Count the event as given back."""
        event.released = True  # type: ignore[attr-defined]
        self.events_released += 1


# -- the per-device registry ------------------------------------------------

SegmentSourceFactory = Callable[[int], SegmentSource]
_registry_lock = threading.Lock()
_factory: SegmentSourceFactory | None = None
_allocators: dict[int, CachingAllocator] = {}
_history_settings: tuple[bool, RecordContext, int, frozenset[str]] | None = None
_global_oom_observers: list[OOMObserver] = []


def set_segment_source_factory(factory: SegmentSourceFactory | None) -> None:
    """Register ``factory(device_index) -> SegmentSource`` (the CUDA driver layer does).

    Allocators already created keep their source; :func:`reset_device_allocators`
    drops them. ``None`` unregisters the factory.
    """
    global _factory
    with _registry_lock:
        _factory = factory


def has_segment_source_factory() -> bool:
    """Whether a segment source factory is registered."""
    return _factory is not None


def get_device_allocator(index: int) -> CachingAllocator:
    """The caching allocator of device ``index``, created on first use from the factory."""
    allocator = _allocators.get(index)
    if allocator is not None:
        return allocator
    with _registry_lock:
        allocator = _allocators.get(index)
        if allocator is None:
            if _factory is None:
                raise RuntimeError(
                    "the CUDA caching allocator has no segment source: CUDA is not "
                    "initialized (no segment source factory is registered)"
                )
            allocator = CachingAllocator(_factory(index), index)
            if _history_settings is not None:
                enabled, level, max_entries, skip = _history_settings
                allocator.history.configure(enabled, level, max_entries, False, skip)
            allocator.oom_observers.extend(_global_oom_observers)
            _allocators[index] = allocator
        return allocator


def device_allocators() -> dict[int, CachingAllocator]:
    """The allocators created so far, by device index."""
    with _registry_lock:
        return dict(sorted(_allocators.items()))


def configure_history(
    enabled: bool,
    level: RecordContext,
    max_entries: int,
    clear: bool = False,
    skip_actions: frozenset[str] = frozenset(),
) -> None:
    """Apply history settings to every device allocator, present and future."""
    global _history_settings
    with _registry_lock:
        _history_settings = (enabled, level, max_entries, skip_actions)
        allocators = list(_allocators.values())
    for allocator in allocators:
        with allocator.lock:
            allocator.history.configure(enabled, level, max_entries, clear, skip_actions)


def attach_oom_observer(observer: OOMObserver) -> None:
    """Attach ``observer`` to every device allocator, present and future."""
    with _registry_lock:
        _global_oom_observers.append(observer)
        allocators = list(_allocators.values())
    for allocator in allocators:
        allocator.attach_oom_observer(observer)


def reset_device_allocators() -> None:
    """Forget every allocator, observer and history setting (tests; a fresh process)."""
    global _history_settings
    with _registry_lock:
        _allocators.clear()
        _global_oom_observers.clear()
        _history_settings = None
