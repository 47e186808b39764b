"""Profiler results: one ``FunctionEvent`` per recorded range, their averages, lists.

These are the objects ``torch.autograd.profiler_util`` hands out (PROF-200..PROF-230):

- :class:`FunctionEvent`: one op, ``record_function`` range, autograd node, memory
  event or GPU kernel, with its interval in microseconds since the profile started,
  its CPU parent and children, the kernels it launched and its memory.
- :class:`FunctionEventAvg`: the sum of the events that share a key.
- :class:`EventList`: a list of either, with ``key_averages``, ``table`` and
  ``export_chrome_trace``.

Self times are the event's time less its direct children's; an event's device time is
the time of the kernels it launched plus that of its children (PROF-210).
"""

from __future__ import annotations

import enum
import itertools
from collections import defaultdict
from typing import Any, NamedTuple, Self

__all__ = [
    "MEMORY_EVENT_NAME",
    "DeviceType",
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "Interval",
    "Kernel",
]

MEMORY_EVENT_NAME = "[memory]"


class DeviceType(enum.Enum):
    """Where an event ran (``torch.autograd.DeviceType``)."""

    CPU = 0
    CUDA = 1


_DEVICE_EVENT_TYPES = (DeviceType.CUDA,)


def format_time(time_us: float) -> str:
    """A duration in the unit torch prints it in (us below 1 ms, ms below 1 s, else s)."""
    if time_us >= 1_000_000.0:
        return f"{time_us / 1_000_000.0:.3f}s"
    if time_us >= 1000.0:
        return f"{time_us / 1000.0:.3f}ms"
    return f"{time_us:.3f}us"


def format_memory(nbytes: int) -> str:
    """A byte count with torch's binary units (``400 B``, ``1.50 KB``, ``2.00 MB``)."""
    size = abs(nbytes)
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"


class Interval:
    """A time range in microseconds."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        """The length of the range."""
        return self.end - self.start


class Kernel(NamedTuple):
    """A GPU kernel launched by an op: its name, device index and duration (us)."""

    name: str
    device: int
    duration: float


class _TimesMixin:
    """Averages and formatted strings shared by events and their averages."""

    count: int
    cpu_time_total: float
    device_time_total: float

    @property
    def cpu_time(self) -> float:
        """CPU time per call."""
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self) -> float:
        """Device time per call."""
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    @property
    def cpu_time_str(self) -> str:
        return format_time(self.cpu_time)

    @property
    def device_time_str(self) -> str:
        return format_time(self.device_time)

    @property
    def cpu_time_total_str(self) -> str:
        return format_time(self.cpu_time_total)

    @property
    def device_time_total_str(self) -> str:
        return format_time(self.device_time_total)

    @property
    def self_cpu_time_total_str(self) -> str:
        return format_time(self.self_cpu_time_total)  # type: ignore[attr-defined]

    @property
    def self_device_time_total_str(self) -> str:
        return format_time(self.self_device_time_total)  # type: ignore[attr-defined]

    # torch's older spellings of the device columns
    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total  # type: ignore[attr-defined]


class FunctionEvent(_TimesMixin):
    """One recorded range (PROF-200).

    ``time_range`` is in microseconds since the profile started; ``thread`` is the
    profiler's small id of the thread (1, 2, ...) or, for a kernel, its stream;
    ``sequence_nr`` is the autograd sequence number of the node the op recorded (and
    of the backward events of that node), -1 for others; ``fwd_thread`` is the thread
    of the forward op for backward events, 0 otherwise.
    """

    def __init__(self, id: int, name: str, thread: int, start_us: float, end_us: float,
                 overload_name: str | None = None, fwd_thread: int | None = None,
                 input_shapes: list | None = None, stack: list | None = None,
                 scope: int = 0, use_device: str | None = None,
                 cpu_memory_usage: int = 0, device_memory_usage: int = 0,
                 is_async: bool = False, is_remote: bool = False, sequence_nr: int = -1,
                 node_id: int = -1, device_type: DeviceType = DeviceType.CPU,
                 device_index: int = 0, is_legacy: bool = False, flops: int | None = None,
                 trace_name: str | None = None, is_user_annotation: bool = False) -> None:
        self.id = id
        self.node_id = node_id
        self.name = name
        self.overload_name = overload_name
        self.trace_name = trace_name if trace_name is not None else name
        self.time_range = Interval(start_us, end_us)
        self.thread = thread
        self.fwd_thread = fwd_thread
        self.kernels: list[Kernel] = []
        self.count = 1
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.input_shapes = input_shapes
        self.stack = stack
        self.scope = scope
        self.use_device = use_device
        self.cpu_memory_usage = cpu_memory_usage
        self.device_memory_usage = device_memory_usage
        self.is_async = is_async
        self.is_remote = is_remote
        self.sequence_nr = sequence_nr
        self.device_type = device_type
        self.device_index = device_index
        self.is_legacy = is_legacy
        self.flops = flops
        self.is_user_annotation = is_user_annotation

    def append_kernel(self, name: str, device: int, duration: float) -> None:
        """Attach a kernel this (CPU) event launched."""
        self.kernels.append(Kernel(name, device, duration))

    def append_cpu_child(self, child: FunctionEvent) -> None:
        """Add a direct child (a range nested in this one on the same thread)."""
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent: FunctionEvent) -> None:
        """Set the innermost range that contains this one."""
        self.cpu_parent = parent

    @property
    def key(self) -> str:
        """What averages group by: the name."""
        return self.name

    @property
    def cpu_time_total(self) -> float:
        """The event's duration (0 for device events)."""
        return self.time_range.elapsed_us() if self.device_type == DeviceType.CPU else 0

    @property
    def self_cpu_time_total(self) -> float:
        """The duration less that of the direct children."""
        if self.is_async or self.device_type != DeviceType.CPU:
            return 0
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def device_time_total(self) -> float:
        """Kernel time of this event and its children; a kernel event's own duration."""
        if self.is_async or not self.use_device:
            return 0
        if self.device_type == DeviceType.CPU:
            own = sum(k.duration for k in self.kernels)
            if self.is_legacy:
                return own
            return own + sum(c.device_time_total for c in self.cpu_children)
        return self.time_range.elapsed_us()

    @property
    def self_device_time_total(self) -> float:
        """Device time less that of the direct children."""
        if self.is_async or not self.use_device:
            return 0
        if self.device_type == DeviceType.CPU:
            return self.device_time_total - sum(c.device_time_total for c in self.cpu_children)
        return self.device_time_total

    @property
    def self_cpu_memory_usage(self) -> int:
        """Bytes allocated less freed by this op itself (not its children)."""
        if self.is_async or self.device_type != DeviceType.CPU:
            return 0
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_device_memory_usage(self) -> int:
        """Device bytes allocated less freed by this op itself (not its children)."""
        if self.is_async or self.device_type != DeviceType.CPU:
            return 0
        return self.device_memory_usage - sum(c.device_memory_usage for c in self.cpu_children)

    @property
    def cuda_memory_usage(self) -> int:
        return self.device_memory_usage

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent id={self.id} name={self.name} device_type={self.device_type} "
            f"cpu_time={self.cpu_time_str} start_us={self.time_range.start} "
            f"end_us={self.time_range.end} "
            f"cpu_children={[c.id for c in self.cpu_children]} "
            f"{self.use_device}_time={self.device_time_str} thread={self.thread} "
            f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage} "
            f"{self.use_device}_memory_usage={self.device_memory_usage} "
            f"seq_nr={self.sequence_nr}>"
        )


class FunctionEventAvg(_TimesMixin):
    """Totals over the events that share a key (PROF-220); ``cpu_time`` is per call."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_remote = False
        self.use_device: str | None = None
        self.cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.self_device_time_total = 0.0
        self.input_shapes: Any = None
        self.overload_name: str | None = None
        self.stack: list | None = None
        self.scope: int | None = None
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self.cpu_children: list | None = None
        self.cpu_parent: FunctionEvent | None = None
        self.device_type = DeviceType.CPU
        self.is_legacy = False
        self.is_user_annotation = False
        self.flops = 0

    def add(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        """Add an event (or another average) with the same key; returns self."""
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise TypeError("FunctionEventAvg.add takes a FunctionEvent or FunctionEventAvg")
        if self.key is None:
            self.key = other.key
            for name in ("node_id", "is_async", "is_remote", "cpu_parent", "cpu_children",
                         "overload_name", "input_shapes", "stack", "scope", "device_type",
                         "is_legacy", "use_device", "is_user_annotation"):
                setattr(self, name, getattr(other, name))
        if other.key != self.key:
            raise ValueError(f"cannot average events {other.key!r} and {self.key!r}")
        self.cpu_time_total += other.cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.device_memory_usage += other.device_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.self_device_memory_usage += other.self_device_memory_usage
        self.count += other.count
        if other.flops is not None:
            self.flops = (self.flops or 0) + other.flops
        return self

    def __iadd__(self, other: FunctionEvent | FunctionEventAvg) -> Self:
        return self.add(other)

    def __repr__(self) -> str:
        dev = self.use_device or "cuda"
        return (
            f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
            f"cpu_time={self.cpu_time_str}  self_{dev}_time={self.self_device_time_total_str} "
            f"{dev}_time={self.device_time_str} input_shapes={self.input_shapes} "
            f"cpu_memory_usage={self.cpu_memory_usage} {dev}_memory_usage="
            f"{self.device_memory_usage}>"
        )


class EventList(list):
    """A list of events with the profiler's summaries (PROF-220..PROF-240)."""

    def __init__(self, *args: Any, use_device: str | None = None, profile_memory: bool = False,
                 with_flops: bool = False) -> None:
        super().__init__(*args)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops
        self._tree_built = False

    def __str__(self) -> str:
        return self.table()

    def _build_tree(self) -> None:
        self._populate_cpu_children()
        self._tree_built = True

    def _populate_cpu_children(self) -> None:
        """Link each CPU event to the innermost event of its thread that contains it.

        Events are visited per thread in start order (longer first on ties); a stack
        holds the ranges still open, so each event is linked in O(log n) amortised.
        Ranges that overlap only in part are not linked.
        """
        cpu = [e for e in self if not e.is_async and e.device_type == DeviceType.CPU]
        cpu.sort(key=lambda e: (e.thread, e.node_id))
        for _, group in itertools.groupby(cpu, key=lambda e: (e.thread, e.node_id)):
            ordered = sorted(group, key=lambda e: (e.time_range.start, -e.time_range.end))
            open_ranges: list[FunctionEvent] = []
            for event in ordered:
                while open_ranges:
                    top = open_ranges[-1]
                    if (event.time_range.start >= top.time_range.end
                            or event.time_range.end > top.time_range.end):
                        open_ranges.pop()
                        continue
                    top.append_cpu_child(event)
                    event.set_cpu_parent(top)
                    break
                open_ranges.append(event)

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the events' self CPU times."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """One :class:`FunctionEventAvg` per key, in order of first appearance.

        The key is the name (with the node, device type and annotation flags), plus the
        input shapes when ``group_by_input_shapes`` and the first ``group_by_stack_n``
        stack frames.
        """
        if not self._tree_built:
            self._build_tree()
        stats: dict[tuple, FunctionEventAvg] = defaultdict(FunctionEventAvg)
        for event in self:
            key: tuple = (event.key, event.node_id, event.device_type, event.is_legacy,
                          event.is_user_annotation)
            if group_by_overload_name:
                key += (event.overload_name,)
            if group_by_input_shapes:
                key += (str(event.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple((event.stack or [])[:group_by_stack_n])
            stats[key].add(event)
        averages = EventList(stats.values(), use_device=self._use_device,
                             profile_memory=self._profile_memory, with_flops=self._with_flops)
        for avg in averages:
            avg.stack = (avg.stack or [])[:group_by_stack_n]
            if not group_by_input_shapes:
                avg.input_shapes = ""
            if not group_by_overload_name:
                avg.overload_name = ""
        return averages

    def total_average(self) -> FunctionEventAvg:
        """All events summed into one average keyed ``Total``."""
        total = FunctionEventAvg()
        for event in self:
            if total.key is not None:
                total.key = event.key  # the sum spans keys
            total.add(event)
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """The events as torch prints them (see ``refimpl.profiler._table``)."""
        from refimpl.profiler._table import build_table

        return build_table(self, sort_by=sort_by, row_limit=row_limit,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width,
                           max_src_column_width=max_src_column_width, header=header,
                           profile_memory=self._profile_memory,
                           top_level_events_only=top_level_events_only, time_unit=time_unit)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace-event JSON file (PROF-300)."""
        from refimpl.profiler._chrome import write_trace

        write_trace(list(self), path)
