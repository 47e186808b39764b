"""The text table of ``EventList.table`` and ``key_averages().table`` (PROF-230).

The layout is torch's: a Name column as wide as the longest key plus 4 (at most
``max_name_column_width``), 12-character right-aligned columns for the times, memory and
call count, optional Input Shapes and Source Location columns, two spaces between
columns, dashed rules above and below the header and below the rows, and the totals
under the table. Columns for device time and memory appear only when some row has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refimpl.profiler._events import DeviceType, format_memory, format_time

_WIDTH = 12
_GAP = 2
_UNIT_SCALE = {"s": (1_000_000.0, "s"), "ms": (1000.0, "ms"), "us": (1.0, "us")}


def _share(part: float, total: float) -> str:
    if total == 0:
        return "NaN"
    return f"{part * 100.0 / total:.2f}%"


def _time(value_us: float, unit: str | None) -> str:
    if unit is None:
        return format_time(value_us)
    scale, suffix = _UNIT_SCALE[unit]
    return f"{value_us / scale:.3f}{suffix}"


class _Layout:
    """Column widths and alignments, and the lines they make."""

    def __init__(self) -> None:
        self.columns: list[tuple[int, str]] = []

    def add(self, width: int, align: str = ">") -> None:
        self.columns.append((width, align))

    def row(self, values: Sequence[Any]) -> str:
        cells = [f"{v!s:{align}{width}}" for v, (width, align) in zip(values, self.columns)]
        return "".join(c + " " * _GAP for c in cells)

    def rule(self) -> str:
        return "".join("-" * width + " " * _GAP for width, _ in self.columns)

    def length(self) -> int:
        return sum(width + _GAP for width, _ in self.columns) - _GAP


def _trim_source(path: str, width: int) -> str:
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def build_table(events: Sequence[Any], *, sort_by: str | None = None, row_limit: int = 100,
                max_name_column_width: int | None = 55,
                max_shapes_column_width: int | None = 80,
                max_src_column_width: int | None = 75, header: str | None = None,
                profile_memory: bool = False, top_level_events_only: bool = False,
                time_unit: str | None = None) -> str:
    """Format ``events`` (events or averages) as torch's profiler table."""
    if not events:
        return ""
    if time_unit is not None and time_unit not in _UNIT_SCALE:
        raise ValueError(f"time_unit must be one of 's', 'ms', 'us', got {time_unit!r}")
    use_device = events[0].use_device
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    has_device_mem = any(e.self_device_memory_usage > 0 for e in events)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    stacks = [e.stack for e in events if e.stack]
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)

    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    dev = use_device.upper() if use_device is not None else "None"

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if use_device and has_device_mem:
            headers += [f"{dev} Mem", f"Self {dev} Mem"]
    headers.append("# of Calls")
    with_node_id = any(e.node_id != -1 for e in events)
    if with_node_id:
        headers.append("Node ID")
    layout = _Layout()
    layout.add(name_width)
    for _ in headers[1:]:
        layout.add(_WIDTH)
    if has_shapes:
        headers.append("Input Shapes")
        layout.add(shapes_width)
    src_width = 0
    if stacks:
        src_width = max(len(entry) for stack in stacks for entry in stack) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)
        headers.append("Source Location")
        layout.add(src_width, "<")

    self_cpu_sum = sum(e.self_cpu_time_total for e in events)
    self_device_sum = 0.0
    for e in events:
        if e.device_type == DeviceType.CPU and e.is_legacy:
            self_device_sum += e.self_device_time_total  # legacy: kernels hang on CPU events
        elif e.device_type != DeviceType.CPU and not e.is_user_annotation:
            self_device_sum += e.self_device_time_total

    lines: list[str] = []
    if header is not None:
        lines += ["=" * layout.length(), header]
    if top_level_events_only:
        lines += ["=" * layout.length(), "This report only display top-level ops statistics"]
    lines += [layout.rule(), layout.row(headers), layout.rule()]

    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        total_share = 0 if e.is_async else _share(e.cpu_time_total, self_cpu_sum)
        values: list[Any] = [
            name, _share(e.self_cpu_time_total, self_cpu_sum),
            _time(e.self_cpu_time_total, time_unit), total_share,
            _time(e.cpu_time_total, time_unit), _time(e.cpu_time, time_unit),
        ]
        if has_device_time:
            values += [
                _time(e.self_device_time_total, time_unit),
                _share(e.self_device_time_total, self_device_sum),
                _time(e.device_time_total, time_unit), _time(e.device_time, time_unit),
            ]
        if profile_memory:
            values += [format_memory(e.cpu_memory_usage), format_memory(e.self_cpu_memory_usage)]
            if use_device and has_device_mem:
                values += [format_memory(e.device_memory_usage),
                           format_memory(e.self_device_memory_usage)]
        values.append(e.count)
        if with_node_id:
            values.append(e.node_id)
        if has_shapes:
            values.append(str(e.input_shapes)[:shapes_width])
        if stacks:
            stack = e.stack or []
            values.append(_trim_source(stack[0], src_width) if stack else "")
        lines.append(layout.row(values))
        if stacks:
            blank = [""] * (len(headers) - 1)
            for entry in (e.stack or [])[1:]:
                lines.append(layout.row(blank + [_trim_source(entry, src_width)]))
            lines.append(layout.row(blank + [""]))

    lines.append(layout.rule())
    lines.append(f"Self CPU time total: {_time(self_cpu_sum, time_unit)}")
    if has_device_time:
        lines.append(f"Self {dev} time total: {_time(self_device_sum, time_unit)}")
    return "".join(line + "\n" for line in lines)
