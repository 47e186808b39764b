"""GPU kernel times: timing events recorded on the stream of each launch (PROF-120).

While a profile with the CUDA activity records, the driver layer calls the observer
around every ``cuLaunchKernel`` (``refimpl.cuda._driver.LAUNCH_OBSERVER``). Before the
launch a timing event is recorded on the launch's stream, after it a second one; the
launch itself is a CPU range named ``cuLaunchKernel`` inside the op that made it.

When the profile stops, each device is synchronised and every kernel's start and end
are read as the elapsed time from a reference event, recorded on the idle device just
before the profile's first launch there, so kernel times sit on the same clock as the
CPU ranges. Kernels launched by libraries (cuBLAS) do not go through the driver layer
and are not seen, nor are launches into a CUDA graph capture (they run at replay). A
kernel belongs to the innermost range open at its launch (the op), whose device time it
counts in, as torch links a kernel to its op by correlation id.
"""

from __future__ import annotations

import time
from typing import Any

from refimpl.cuda import _driver

__all__ = ["KernelLaunch", "attach", "detach", "resolve"]

_EVENT_DEFAULT = 0  # cuEventCreate flags: timing enabled


class KernelLaunch:
    """One kernel launch: its function, device, stream and the events around it."""

    __slots__ = (
        "correlation",
        "device",
        "end_event",
        "end_us",
        "function",
        "owner",
        "runtime",
        "start_event",
        "start_us",
        "stream",
    )

    def __init__(self, function: int, device: int, stream: int, start_event: int,
                 owner: Any, correlation: int) -> None:
        self.function = function
        self.device = device
        self.stream = stream
        self.start_event = start_event
        self.end_event = 0
        self.owner = owner
        self.correlation = correlation
        self.start_us = 0.0
        self.end_us = 0.0
        self.runtime: Any = None  # the cuLaunchKernel range of the launch


class _Observer:
    """The launch observer of one collector."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.references: dict[int, tuple[int, float]] = {}  # device -> (event, cpu us)
        self.pending: dict[int, tuple[KernelLaunch, Any]] = {}  # thread ident -> launch

    def reference(self, device: int) -> None:
        """Record the reference event of ``device`` (once per profile)."""
        if device in self.references:
            return
        _driver.synchronize(device)
        event = _driver.event_create(device, _EVENT_DEFAULT)
        _driver.event_record(device, event, 0)
        _driver.event_synchronize(device, event)
        now_us = (time.perf_counter_ns() - self.collector.origin_ns) / 1000.0
        self.references[device] = (event, now_us)

    def __call__(self, device: int, function: int, stream: int, before: bool) -> None:
        collector = self.collector
        if not collector.recording:
            return
        function, stream = int(function), int(stream)  # handles may come as driver objects
        if before:
            if _driver.stream_capture_info(device, stream)[0] != 0:
                return  # a launch into a CUDA graph capture runs later, at replay: not timed
            self.reference(device)
            event = _driver.event_create(device, _EVENT_DEFAULT)
            _driver.event_record(device, event, stream)
            owner = collector.current()
            launch = KernelLaunch(function, device, stream, event, owner,
                                  len(collector.launches))
            runtime = collector.open("cuLaunchKernel")
            runtime.runtime = True
            launch.runtime = runtime
            self.pending[collector.thread_id()] = (launch, runtime)
            return
        entry = self.pending.pop(collector.thread_id(), None)
        if entry is None:
            return
        launch, runtime = entry
        launch.end_event = _driver.event_create(device, _EVENT_DEFAULT)
        _driver.event_record(device, launch.end_event, stream)
        collector.close(runtime)
        collector.launches.append(launch)


_observer: _Observer | None = None


def attach(collector: Any) -> None:
    """Observe kernel launches for ``collector``."""
    global _observer
    _observer = _Observer(collector)
    _driver.LAUNCH_OBSERVER = _observer


def detach(collector: Any) -> None:
    """Stop observing launches and read every kernel's times."""
    global _observer
    _driver.LAUNCH_OBSERVER = None
    observer, _observer = _observer, None
    if observer is not None:
        resolve(observer)


def resolve(observer: _Observer) -> None:
    """Wait for the recorded kernels and set their start and end (us since the start)."""
    for device in observer.references:
        _driver.synchronize(device)
    for launch in observer.collector.launches:
        ref_event, ref_us = observer.references[launch.device]
        try:
            start = _driver.event_elapsed_ms(launch.device, ref_event, launch.start_event)
            end = _driver.event_elapsed_ms(launch.device, ref_event, launch.end_event)
        except _driver.CudaDriverError:
            # events recorded inside a graph capture never complete on their own
            launch.start_us = launch.end_us = -1.0
        else:
            launch.start_us = ref_us + start * 1000.0
            launch.end_us = ref_us + end * 1000.0
        finally:
            _driver.event_destroy(launch.device, launch.start_event)
            _driver.event_destroy(launch.device, launch.end_event)
    for device, (event, _) in observer.references.items():
        _driver.event_destroy(device, event)


_names: dict[int, str] = {}


def kernel_name(function: int) -> str:
    """The kernel's name (``cuFuncGetName``), cached per function handle."""
    name = _names.get(function)
    if name is None:
        d = _driver._load("driver")
        try:
            raw = _driver._call("cuFuncGetName", d.CUfunction(function))
        except (_driver.CudaDriverError, AttributeError):
            raw = f"kernel_{function:#x}"
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        _names[function] = name
    return name
