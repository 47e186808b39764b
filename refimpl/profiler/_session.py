"""The profiler session, ``record_function`` and ``emit_nvtx`` (``torch.autograd.profiler``).

:class:`profile` is the profiler session itself (``refimpl.profiler.profile`` runs one
per recorded cycle). While it is entered every op, ``record_function`` range and
backward node is recorded (see ``refimpl.profiler._collect``); when it exits, the
records become :class:`~refimpl.profiler._events.FunctionEvent` objects, with GPU
kernels read from their timing events (PROF-001..PROF-030).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, Self

from refimpl.profiler import _collect
from refimpl.profiler._events import (
    DeviceType,
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    format_time,
)

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "emit_nvtx",
    "format_time",
    "profile",
    "record_function",
]

_STEP_PREFIX = "ProfilerStep#"


def _profiler_enabled() -> bool:
    """Whether a profile is recording (``torch.autograd._profiler_enabled``)."""
    return _collect.ACTIVE is not None


def _cuda_available() -> bool:
    from refimpl import cuda

    return cuda.is_available()


class profile:
    """Record the ops, ranges and kernels of a block (``torch.autograd.profiler.profile``).

    ``use_device="cuda"`` (or the deprecated ``use_cuda=True``) adds GPU kernel times;
    without a usable GPU it warns and profiles the CPU only, as torch does.
    ``record_shapes`` keeps the input shapes of each op, ``profile_memory`` the bytes
    of the storages ops create and free, ``with_stack`` the Python frames.
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Callable | None = None) -> None:
        self.enabled = enabled
        if not enabled:
            return
        if use_cuda:
            warnings.warn(
                "The attribute `use_cuda` will be deprecated soon, please use "
                "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        if use_device is not None and use_device != "cuda":
            warnings.warn(f"The {use_device} is not a valid device option.", stacklevel=2)
            use_device = None
        if use_device == "cuda" and not _cuda_available():
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
            use_device = None
        self.use_device = use_device
        self.use_cuda = use_device == "cuda"
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.use_cpu = use_cpu
        self.acc_events = acc_events
        self.entered = False
        self._collector: _collect.Collector | None = None
        self._function_events: EventList | None = None
        self._old_events: EventList | None = None

    def __enter__(self) -> profile | None:
        if not self.enabled:
            return None
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self._start()
        return self

    def _start(self) -> None:
        self.entered = True
        if self._function_events is not None and self.acc_events:
            self._old_events = self._function_events
        self._function_events = None
        self._collector = _collect.Collector(
            cuda=self.use_device == "cuda", record_shapes=self.record_shapes,
            profile_memory=self.profile_memory, with_stack=self.with_stack)
        _collect.install(self._collector)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        if not self.enabled:
            return False
        self._stop()
        return False

    def _stop(self) -> None:
        if self.use_device == "cuda":
            from refimpl import cuda

            cuda.synchronize()
        if self._collector is not None:
            _collect.uninstall(self._collector)

    # -- results ------------------------------------------------------------------------

    @property
    def function_events(self) -> EventList:
        """Every recorded event, in start order."""
        if self._function_events is None:
            if self._collector is None:
                raise RuntimeError("Profiler didn't finish running")
            events = build_events(self._collector, self.use_device, self.profile_memory)
            if self._old_events is not None:
                events.extend(self._old_events)
                self._old_events = None
            self._function_events = events
        return self._function_events

    def __str__(self) -> str:
        if self._collector is None:
            return "<unfinished torch.autograd.profile>"
        return str(self.function_events)

    def __repr__(self) -> str:
        if self._collector is None:
            return "<unfinished torch.autograd.profile>"
        return repr(self.function_events)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """The events as torch prints them (``EventList.table``)."""
        return self.function_events.table(
            sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged by name (and input shapes, stack, overload)."""
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n,
                                                 group_by_overload_name)

    def total_average(self) -> FunctionEventAvg:
        """All events summed into one."""
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the events' self CPU times (us)."""
        return self.function_events.self_cpu_time_total

    def export_chrome_trace(self, path: str) -> None:
        """Write the events, kernels and memory records as Chrome trace JSON."""
        from refimpl.profiler._chrome import write_trace

        write_trace(list(self.function_events), path, memory_records(self._collector),
                    {"profile_memory": int(self.profile_memory),
                     "record_shapes": int(self.record_shapes)})


def build_events(collector: _collect.Collector, use_device: str | None,
                 profile_memory: bool) -> EventList:
    """The FunctionEvents of a finished collector, in start order, with their tree."""
    origin = collector.origin_ns
    ranges = sorted(collector.ranges, key=lambda r: (r.start_ns, -r.end_ns))
    events = EventList(use_device=use_device, profile_memory=profile_memory)
    by_range: dict[int, FunctionEvent] = {}
    for number, r in enumerate(ranges, start=1):
        name = r.name
        trace_name = name
        if name.startswith(_STEP_PREFIX):
            name = "ProfilerStep*"
        event = FunctionEvent(
            id=number, name=name, trace_name=trace_name, thread=r.thread,
            start_us=(r.start_ns - origin) / 1000.0, end_us=(r.end_ns - origin) / 1000.0,
            fwd_thread=r.fwd_thread, input_shapes=r.shapes if r.shapes is not None else [],
            stack=r.stack or [], scope=r.scope, use_device=use_device,
            cpu_memory_usage=r.cpu_mem, device_memory_usage=r.dev_mem,
            sequence_nr=r.seq, is_user_annotation=r.user)
        by_range[id(r)] = event
        events.append(event)
    if collector.launches:
        from refimpl.profiler._cuda import kernel_name

        next_id = len(events) + 1
        for launch in collector.launches:
            if launch.start_us < 0:
                continue
            name = kernel_name(launch.function)
            kernel = FunctionEvent(
                id=next_id, name=name, thread=launch.stream, start_us=launch.start_us,
                end_us=launch.end_us, use_device=use_device, device_type=DeviceType.CUDA,
                device_index=launch.device)
            next_id += 1
            owner = by_range.get(id(launch.owner)) if launch.owner is not None else None
            if owner is not None:
                owner.append_kernel(name, launch.device, kernel.time_range.elapsed_us())
            # for the trace: the op it belongs to and the launch call (a flow arrow)
            kernel.external_id = owner.id if owner is not None else kernel.id
            kernel.launch_event = by_range.get(id(launch.runtime))
            events.append(kernel)
    events._build_tree()
    return events


def memory_records(collector: _collect.Collector | None) -> list[dict]:
    """The allocations and frees of a collector, with the running total per device."""
    if collector is None:
        return []
    totals: dict[int, int] = {}
    out = []
    for ns, nbytes, device, thread in sorted(collector.memory):
        totals[device] = totals.get(device, 0) + nbytes
        out.append({"ts": (ns - collector.origin_ns) / 1000.0, "bytes": nbytes,
                    "device": device, "thread": thread, "total": totals[device]})
    return out


class record_function:
    """A named range in the profile, as a ``with`` block or a function decorator.

    Outside a profile it records nothing. Ranges may end out of order (an outer range
    closed while an inner one is open ends both, PROF-020).
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._ranges: list[tuple[Any, Any]] = []

    def __enter__(self) -> Self:
        if not isinstance(self.name, str):
            raise RuntimeError(  # noqa: TRY004 - torch raises RuntimeError here
                "profiler::_record_function_enter_new() Expected a value of type 'str' for "
                f"argument 'name' but instead found type '{type(self.name).__name__}'.")
        collector = _collect.ACTIVE
        if collector is not None:
            self._ranges.append((collector, collector.open(self.name, user=True)))
        else:
            self._ranges.append((None, None))
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        if self._ranges:
            collector, r = self._ranges.pop()
            if collector is not None:
                collector.close(r)
        return False

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper


class emit_nvtx:
    """Push an NVTX range around every op (``name, seq = N``) for Nsight Systems.

    The ranges go through ``refimpl.cuda.nvtx`` (NVIDIA's ``nvtx`` package when it is
    installed, else counted no-ops); nothing is kept in Python (PROF-040).
    """

    def __init__(self, enabled: bool = True, record_shapes: bool = False) -> None:
        self.enabled = bool(enabled)
        self.record_shapes = bool(record_shapes)
        self.entered = False
        self._collector: _collect.Collector | None = None

    def __enter__(self) -> emit_nvtx | None:
        if not self.enabled:
            return None
        if self.entered:
            raise RuntimeError("NVTX annotation context manager is not reentrant")
        self.entered = True
        from refimpl import cuda

        cuda.synchronize()
        collector = _collect.Collector(cuda=False, record_shapes=self.record_shapes,
                                       profile_memory=False, with_stack=False)
        collector.nvtx = True
        collector.keep = False
        _collect.install(collector)
        self._collector = collector
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        if not self.enabled:
            return False
        from refimpl import cuda

        cuda.synchronize()
        if self._collector is not None:
            _collect.uninstall(self._collector)
            self._collector = None
        return False
