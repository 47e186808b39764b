"""Streams and events (spec: streams, STREAM-001..203).

As in torch 2.11:

* Each thread has a current stream per device, initially the device's *default
  stream*, the legacy NULL stream (handle 0, printed ``cuda_stream=0x0``).
* ``Stream()`` does not create a driver stream per object: it hands out streams from a
  per-device pool (32 streams per priority level, created on first use, round robin,
  never destroyed), all non-blocking with respect to the legacy stream. Priorities are
  clamped into :meth:`Stream.priority_range`; lower numbers mean higher priority.
* ``stream_id`` is the raw stream handle in refimpl (torch packs pool indices into it;
  only its round trip through ``Stream(stream_id=..., device_index=...,
  device_type=...)`` is specified).
* ``Event`` creates its driver event lazily, on the first ``record`` (on the recording
  stream's device) or ``ipc_handle``. Unrecorded, ``query()`` is True and the repr is
  ``<torch.cuda.Event uninitialized>``.
* Reprs print ``torch.cuda.Stream``/``torch.cuda.Event``, exactly as torch does, so
  that conformance cases matching torch's text hold for refimpl too.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any, Self

from refimpl._device import device as _torch_device
from refimpl.cuda import _device, _driver, _sync_debug
from refimpl.cuda._lazy import _lazy_init

_STREAMS_PER_POOL = 32
_MAX_PRIORITY_LEVELS = 4  # torch's max_compile_time_stream_priorities
_CUDA_DEVICE_TYPE = 1  # torch's DeviceType.CUDA


class _StreamPool:
    """Per device: lazily created streams, ``_STREAMS_PER_POOL`` per priority level."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._levels: dict[int, int] = {}
        self._streams: dict[tuple[int, int], list[int]] = {}
        self._counters: dict[tuple[int, int], int] = {}

    def levels(self, idx: int) -> int:
        n = self._levels.get(idx)
        if n is None:
            least, greatest = _driver.stream_priority_range(idx)
            n = self._levels.setdefault(idx, min(least - greatest + 1, _MAX_PRIORITY_LEVELS))
        return n

    def get(self, idx: int, priority: int) -> int:
        level = min(max(-priority, 0), self.levels(idx) - 1)
        key = (idx, level)
        with self._lock:
            streams = self._streams.setdefault(key, [0] * _STREAMS_PER_POOL)
            slot = self._counters.get(key, 0)
            self._counters[key] = (slot + 1) % _STREAMS_PER_POOL
            if streams[slot] == 0:
                streams[slot] = _driver.stream_create(idx, -level)
            return streams[slot]


_pool = _StreamPool()
class _ThreadStreams(threading.local):
    """This thread's current streams (device index -> Stream); None until one is set."""

    streams = None


_tls = _ThreadStreams()


# One ``cuda:N`` device object per ordinal, shared by every Stream.device (see there).
_STREAM_DEVICES: dict[int, _torch_device] = {}


def _current_streams() -> dict[int, Stream]:
    table = _tls.streams
    if table is None:
        table = _tls.streams = {}
    return table


class Stream:
    """A CUDA stream of one device: a queue of work executed in order.

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool;
    ``Stream(stream_id=..., device_index=..., device_type=...)`` re-wraps a known one.
    Usable as a context manager that makes it the current stream.
    """

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        if "stream_id" in kwargs and "device_index" in kwargs:
            self.cuda_stream = int(kwargs["stream_id"])
            self.device_index = int(kwargs["device_index"])
        elif "stream_ptr" in kwargs:
            _lazy_init()
            self.cuda_stream = int(kwargs["stream_ptr"])
            self.device_index = _device._tls_device()
        else:
            _lazy_init()
            with _device.device(device):
                idx = _device._tls_device()
                self.cuda_stream = _pool.get(idx, int(priority))
                self.device_index = idx
        self._context: list[StreamContext] = []

    @property
    def stream_id(self) -> int:
        """The id that re-creates this wrapper (refimpl: the stream handle)."""
        return self.cuda_stream

    @property
    def device_type(self) -> int:
        """torch's device-type enum value for CUDA (1)."""
        return _CUDA_DEVICE_TYPE

    @property
    def device(self) -> _torch_device:
        """The stream's device, ``cuda:N``.

        The engine and the allocator ask for this on every op; parsing ``"cuda"`` anew
        each time cost a regex match per call. Device objects are never mutated (like
        torch's), so one shared ``cuda:N`` per ordinal is equivalent.
        """
        dev = _STREAM_DEVICES.get(self.device_index)
        if dev is None:
            dev = _STREAM_DEVICES[self.device_index] = _torch_device("cuda", self.device_index)
        return dev

    @property
    def priority(self) -> int:
        """The stream's priority (lower is higher priority; 0 for the default stream)."""
        return _driver.stream_priority(self.device_index, self.cuda_stream)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(lowest, highest) priority that ``Stream(priority=...)`` can give, e.g. (0, -3)."""
        _lazy_init()
        levels = _pool.levels(_device._tls_device())
        return 0, -(levels - 1)

    def wait_event(self, event: Event) -> None:
        """Make future work on this stream wait for ``event`` (returns at once)."""
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Make future work on this stream wait for the work now queued on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one when None) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        """True when all work submitted to this stream has completed."""
        return _driver.stream_query(self.device_index, self.cuda_stream)

    def synchronize(self) -> None:
        """Block until all work submitted to this stream has completed."""
        _sync_debug.check()
        _driver.stream_synchronize(self.device_index, self.cuda_stream)

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.cuda_stream)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol: (version, handle)."""
        return (0, self.cuda_stream)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and other.cuda_stream == self.cuda_stream
                and other.device_index == self.device_index)

    def __hash__(self) -> int:
        # the fields __eq__ compares (the engine keeps the streams of leaf gradients in
        # a set, so this runs per leaf node)
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"

    def __enter__(self) -> Self:
        ctx = StreamContext(self)
        self._context.append(ctx)
        ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._context.pop().__exit__(*exc)


class ExternalStream(Stream):
    """Wrap a ``CUstream`` created elsewhere; refimpl never destroys it."""

    def __init__(self, stream_ptr: int, device: Any = None, **kwargs: Any) -> None:
        with _device.device(device):
            super().__init__(stream_ptr=stream_ptr, **kwargs)


def current_stream_handle(index: int) -> int:
    """The raw ``CUstream`` of this thread's current stream on device ``index``.

    The allocation fast path: no Stream object, no argument parsing (CUDA must be
    initialised already).
    """
    table = _tls.streams
    if table:
        s = table.get(index)
        if s is not None:
            return s.cuda_stream
    return 0


def current_stream(device: Any = None) -> Stream:
    """This thread's current stream on a device (the current device by default)."""
    _lazy_init()
    idx = _device._get_device_index(device, optional=True)
    s = _current_streams().get(idx)
    return s if s is not None else default_stream(idx)


def default_stream(device: Any = None) -> Stream:
    """The legacy default (NULL) stream of a device: ``cuda_stream == 0``."""
    _lazy_init()
    idx = _device._get_device_index(device, optional=True)
    return Stream(stream_id=0, device_index=idx, device_type=_CUDA_DEVICE_TYPE)


def get_stream_from_external(data_ptr: int, device: Any = None) -> Stream:
    """A :class:`Stream` for a stream handle allocated by another library."""
    _lazy_init()
    idx = _device._get_device_index(device, optional=True)
    return Stream(stream_id=data_ptr, device_index=idx, device_type=_CUDA_DEVICE_TYPE)


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` current on its device and select that device; None is a no-op."""
    if stream is None:
        return
    _lazy_init()
    if _device._tls_device() != stream.device_index:
        _device._select(stream.device_index)
    _current_streams()[stream.device_index] = stream


class StreamContext:
    """Context manager that makes a stream current (and its device, for the duration).

    ``None`` or no CUDA makes it a no-op. Entering a stream of another device switches
    to that device; exit restores the previous stream of both devices.
    """

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        idx = _device._get_device_index(None, True)
        self.idx = -1 if idx is None else idx
        self.src_prev_stream: Stream | None = None
        self.dst_prev_stream: Stream | None = None

    def __enter__(self) -> None:
        cur = self.stream
        if cur is None or self.idx == -1:
            return
        self.src_prev_stream = current_stream(None)
        if self.src_prev_stream.device != cur.device:
            with _device.device(cur.device):
                self.dst_prev_stream = current_stream(cur.device)
        set_stream(cur)

    def __exit__(self, *exc: object) -> None:
        cur = self.stream
        if cur is None or self.idx == -1:
            return
        assert self.src_prev_stream is not None
        if self.src_prev_stream.device != cur.device:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)


def stream(stream: Stream | None) -> StreamContext:
    """``with stream(s):`` makes ``s`` the current stream; ``stream(None)`` is a no-op."""
    return StreamContext(stream)


class Event:
    """A CUDA event: a marker in a stream to wait on, query, or time.

    ``enable_timing`` allows :meth:`elapsed_time`; ``blocking`` makes
    :meth:`synchronize` yield the CPU instead of spinning; ``interprocess`` allows
    :meth:`ipc_handle` (and implies no timing in the driver).
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False, external: bool = False) -> None:
        flags = 0 if enable_timing else _driver.EVENT_DISABLE_TIMING
        if blocking:
            flags |= _driver.EVENT_BLOCKING_SYNC
        if interprocess:
            flags |= _driver.EVENT_INTERPROCESS | _driver.EVENT_DISABLE_TIMING
        self._flags = flags
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = bool(interprocess)
        self.external = bool(external)
        self.cuda_event = 0
        self.device_index = -1
        self._recorded = False

    def _create(self, idx: int) -> None:
        self.cuda_event = _driver.event_create(idx, self._flags)
        self.device_index = idx

    @property
    def device(self) -> _torch_device | None:
        """The event's device once created, else None."""
        return None if self.cuda_event == 0 else _torch_device("cuda", self.device_index)

    @property
    def event_id(self) -> int:
        """The generic API's id: 0 before the first record, the handle after."""
        return self.cuda_event

    @classmethod
    def from_ipc_handle(cls, device: Any, handle: bytes) -> Event:
        """Open an event exported by another process with :meth:`ipc_handle`."""
        _lazy_init()
        idx = _device._get_device_index(device)
        ev = cls(interprocess=True)
        ev.cuda_event = _driver.event_from_ipc_handle(idx, bytes(handle))
        ev.device_index = idx
        ev._recorded = True
        return ev

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (the current stream by default)."""
        if stream is None:
            stream = current_stream()
        if self.cuda_event == 0:
            self._create(stream.device_index)
        elif self.device_index != stream.device_index:
            # torch writes each device index (an int8) as a character, and the message
            # ends at the first NUL byte (index 0) when it reaches Python
            message = (f"Event device {chr(self.device_index)} does not match recording "
                       f"stream's device {chr(stream.device_index)}.")
            raise RuntimeError(message.split("\x00", 1)[0])
        _driver.event_record(self.device_index, self.cuda_event, stream.cuda_stream)
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Make future work on ``stream`` (default: current) wait for this event."""
        if stream is None:
            stream = current_stream()
        if self.cuda_event != 0:
            _driver.stream_wait_event(stream.device_index, stream.cuda_stream,
                                      self.cuda_event)

    def query(self) -> bool:
        """True when the recorded work has completed (and for an unrecorded event)."""
        if self.cuda_event == 0:
            return True
        return _driver.event_query(self.device_index, self.cuda_event)

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, timed)."""
        if (self._flags | end_event._flags) & _driver.EVENT_DISABLE_TIMING:
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.cuda_event == 0 or end_event.cuda_event == 0:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return _driver.event_elapsed_ms(self.device_index, self.cuda_event,
                                        end_event.cuda_event)

    def synchronize(self) -> None:
        """Block until the recorded work has completed (a no-op when unrecorded)."""
        if self.cuda_event != 0:
            _driver.event_synchronize(self.device_index, self.cuda_event)

    def ipc_handle(self) -> bytes:
        """The 64-byte handle another process opens with :meth:`from_ipc_handle`."""
        if self.cuda_event == 0:
            self._create(current_stream().device_index)
        return _driver.event_ipc_handle(self.device_index, self.cuda_event)

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.cuda_event)

    def __repr__(self) -> str:
        if self.cuda_event:
            return f"<torch.cuda.Event {self.cuda_event:#x}>"
        return "<torch.cuda.Event uninitialized>"

    def __del__(self) -> None:
        handle, self.cuda_event = getattr(self, "cuda_event", 0), 0
        if handle:
            # At interpreter shutdown or in a forked child the driver may be gone.
            with contextlib.suppress(Exception):
                _driver.event_destroy(self.device_index, handle)
