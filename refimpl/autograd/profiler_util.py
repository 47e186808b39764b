"""``torch.autograd.profiler_util``: the profiler's event classes and formatting helpers."""

from __future__ import annotations

from refimpl.profiler._events import (
    MEMORY_EVENT_NAME,
    DeviceType,
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    Interval,
    Kernel,
    format_memory,
    format_time,
)

_format_time = format_time
_format_memory = format_memory

__all__ = [
    "MEMORY_EVENT_NAME",
    "DeviceType",
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "Interval",
    "Kernel",
]
