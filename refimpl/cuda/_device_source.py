"""The GPU segment source of the caching allocator: segments from ``cuMemAlloc``.

``refimpl.cuda._allocator`` is a pure algorithm over a ``SegmentSource``; this module
is the real one, on one device:

* ``allocate(nbytes)`` is ``cuMemAlloc`` under the device's primary context; running
  out of memory (``CUDA_ERROR_OUT_OF_MEMORY``) returns None so that the allocator can
  free its cache and retry; any other failure raises the driver error.
* ``free`` is ``cuMemFree`` (which waits for the device to finish using the memory).
* ``record_event``/``event_done``/``synchronize_event``/``release_event`` are driver
  events without timing, kept in a free list and reused as torch's allocator does.

:func:`install` registers the factory with the allocator; ``refimpl.cuda`` runs it
during CUDA initialisation.
"""

from __future__ import annotations

import threading

from refimpl.cuda import _driver


class DeviceSegmentSource:
    """Segments and stream events of one CUDA device."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._free_events: dict[int, list[int]] = {}  # device -> events of that device
        self._lock = threading.Lock()

    def allocate(self, nbytes: int) -> int | None:
        """A new ``cuMemAlloc`` allocation, or None when the device is out of memory.

        The call runs in the relaxed capture mode: a graph capture may need a new
        segment for its private pool, and the allocation is not part of the graph
        (its address is, and the pool keeps it until the graph is gone).
        """
        old = _driver.exchange_capture_mode("relaxed")
        try:
            return _driver.mem_alloc(self.device, nbytes)
        except _driver.CudaDriverError as exc:
            if exc.code == _driver.CUDA_ERROR_OUT_OF_MEMORY:
                return None
            raise
        finally:
            _driver.exchange_capture_mode(old)

    def free(self, address: int, nbytes: int) -> None:
        """``cuMemFree`` an allocation made by :meth:`allocate`."""
        _driver.mem_free(self.device, address)

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) bytes of the device."""
        return _driver.mem_get_info(self.device)

    def record_event(self, stream: int | tuple[int, int]) -> int | tuple[int, int]:
        """An event recorded now on ``stream``; the handle is the event object.

        ``stream`` is a handle of this device's streams, or a ``(device, handle)`` pair
        for a stream of another device (``record_stream`` across devices): that event
        is created on the stream's device and returned as a ``(device, event)`` pair.
        """
        device = self.device
        if isinstance(stream, tuple):
            device, stream = stream
        with self._lock:
            free = self._free_events.get(device)
            event = free.pop() if free else 0
        if event == 0:
            event = _driver.event_create(device, _driver.EVENT_DISABLE_TIMING)
        _driver.event_record(device, event, stream)
        return event if device == self.device else (device, event)

    def _split(self, event: object) -> tuple[int, int]:
        if isinstance(event, tuple):
            return event
        return self.device, int(event)  # type: ignore[call-overload]

    def event_done(self, event: object) -> bool:
        """Whether the event has completed (never blocks)."""
        return _driver.event_query(*self._split(event))

    def synchronize_event(self, event: object) -> None:
        """Block until the event has completed."""
        _driver.event_synchronize(*self._split(event))

    def release_event(self, event: object) -> None:
        """Return the event to the free list for the next :meth:`record_event`."""
        device, handle = self._split(event)
        with self._lock:
            self._free_events.setdefault(device, []).append(handle)


def install() -> None:
    """Register :class:`DeviceSegmentSource` as the allocator's segment source factory."""
    from refimpl.cuda import _allocator

    _allocator.set_segment_source_factory(DeviceSegmentSource)
