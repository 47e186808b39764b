"""Device-generic streams and events (``refimpl.Stream``/``refimpl.Event``, spec STREAM-010).

They name a device and wrap that device's stream or event: on CUDA a
``refimpl.cuda.Stream``/``Event``; on the CPU there is a single synchronous stream
with id 0, and events are immediately complete.
"""

from __future__ import annotations

from refimpl._device import as_device, device

_DEVICE_TYPES = {"cpu": 0, "cuda": 1}


def _resolve(dev) -> device:
    if dev is None:
        from refimpl import cuda

        return device("cuda", cuda.current_device()) if cuda.is_available() else device("cpu")
    d = as_device(dev)
    if d.type == "cuda" and d.index is None:
        from refimpl import cuda

        d = device("cuda", cuda.current_device())
    return d


def _cuda_stream(stream):
    from refimpl import cuda

    if stream is None or isinstance(stream, cuda.Stream):
        return stream
    return stream._inner


class Stream:
    """A stream of ``device`` (the current accelerator by default)."""

    def __init__(self, device=None, *, priority: int = 0) -> None:
        self._device = _resolve(device)
        self._inner = None
        if self._device.type == "cuda":
            from refimpl import cuda

            self._inner = cuda.Stream(device=self._device, priority=priority)

    @property
    def device(self) -> device:
        """The stream's device."""
        return self._device

    @property
    def device_index(self) -> int:
        """The device index (-1 for the CPU)."""
        return self._device.index if self._device.index is not None else -1

    @property
    def device_type(self) -> int:
        """torch's device-type enum value (0 cpu, 1 cuda)."""
        return _DEVICE_TYPES[self._device.type]

    @property
    def stream_id(self) -> int:
        """The id that identifies the stream on its device."""
        return self._inner.stream_id if self._inner is not None else 0

    def query(self) -> bool:
        """True when all queued work has completed."""
        return self._inner.query() if self._inner is not None else True

    def synchronize(self) -> None:
        """Wait for all queued work."""
        if self._inner is not None:
            self._inner.synchronize()

    def wait_event(self, event: Event) -> None:
        """Make future work wait for ``event``."""
        if self._inner is not None and event._inner is not None:
            self._inner.wait_event(event._inner)

    def wait_stream(self, stream: Stream) -> None:
        """Make future work wait for the work queued on ``stream`` now."""
        if self._inner is not None:
            self._inner.wait_stream(_cuda_stream(stream))

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one when None) on this stream."""
        event = event if event is not None else Event(self._device)
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return (isinstance(other, Stream) and other._device == self._device
                and other.stream_id == self.stream_id)

    def __hash__(self) -> int:
        return hash((self._device, self.stream_id))

    def __repr__(self) -> str:
        return (f"torch.Stream device_type={self._device.type}, "
                f"device_index={self.device_index}, stream_id={self.stream_id}")


class Event:
    """An event of ``device``: record on a stream, query, wait, time."""

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self._device = _resolve(device)
        self._inner = None
        if self._device.type == "cuda":
            from refimpl import cuda

            self._inner = cuda.Event(enable_timing=enable_timing, blocking=blocking,
                                     interprocess=interprocess)

    @property
    def device(self) -> device:
        """The event's device."""
        return self._device

    @property
    def event_id(self) -> int:
        """0 until first recorded, then the event's handle."""
        return self._inner.cuda_event if self._inner is not None else 0

    def record(self, stream=None) -> None:
        """Record on ``stream`` (the device's current stream by default)."""
        if self._inner is not None:
            self._inner.record(_cuda_stream(stream))

    def query(self) -> bool:
        """True when the recorded work has completed."""
        return self._inner.query() if self._inner is not None else True

    def synchronize(self) -> None:
        """Wait for the recorded work."""
        if self._inner is not None:
            self._inner.synchronize()

    def wait(self, stream=None) -> None:
        """Make ``stream`` (the current one by default) wait for this event."""
        if self._inner is not None:
            self._inner.wait(_cuda_stream(stream))

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event and ``end_event``."""
        if self._inner is None:
            raise NotImplementedError("refimpl: CPU events do not record time")
        return self._inner.elapsed_time(end_event._inner)

    def __repr__(self) -> str:
        return f"torch.Event device_type={self._device.type}, device_index=" \
               f"{self._device.index if self._device.index is not None else -1}, " \
               f"event_flag=0, event_id={self.event_id}"
