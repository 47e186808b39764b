"""The Chrome trace-event JSON of a profile (PROF-300), in the shape torch's Kineto writes.

A JSON object with ``traceEvents`` (and ``schemaVersion``, ``displayTimeUnit``,
``deviceProperties``): complete events (``"ph": "X"``) for ops (``cat: cpu_op``),
``record_function`` ranges (``user_annotation``), kernel launches (``cuda_runtime``)
and kernels (``kernel``, on the process of their device and the thread of their
stream), flow events (``"s"``/``"f"``, ``cat: ac2g``) from each launch to its kernel,
instant events (``"ph": "i"``) named ``[memory]`` for allocations and frees, and
process/thread name metadata (``"ph": "M"``). Timestamps and durations are in
microseconds. The file loads in chrome://tracing and Perfetto.
"""

from __future__ import annotations

import json
import os
from typing import Any

from refimpl.profiler._events import DeviceType, FunctionEvent

_PID = os.getpid()


def _category(event: FunctionEvent) -> str:
    if event.device_type != DeviceType.CPU:
        return "kernel"
    if event.is_user_annotation:
        return "user_annotation"
    if event.name == "cuLaunchKernel":
        return "cuda_runtime"
    return "cpu_op"


def trace_events(events: list[FunctionEvent], memory: list[dict] | None = None) -> list[dict]:
    """The trace events of ``events`` (and of the memory records, if given)."""
    out: list[dict[str, Any]] = []
    threads: set[int] = set()
    devices: dict[int, set[int]] = {}
    for event in events:
        if event.name == "[memory]" or event.trace_name is None:
            continue
        start = event.time_range.start
        item: dict[str, Any] = {
            "ph": "X", "cat": _category(event), "name": event.trace_name,
            "ts": round(start, 3), "dur": round(event.time_range.elapsed_us(), 3),
            "args": {"External id": event.id},
        }
        if event.device_type == DeviceType.CPU:
            item["pid"], item["tid"] = _PID, event.thread
            threads.add(event.thread)
            if event.sequence_nr >= 0:
                item["args"]["Sequence number"] = event.sequence_nr
                item["args"]["Fwd thread id"] = event.fwd_thread or 0
            if event.input_shapes:
                item["args"]["Input Dims"] = event.input_shapes
        else:
            item["pid"], item["tid"] = event.device_index, event.thread
            item["args"].update({"External id": getattr(event, "external_id", event.id),
                                 "device": event.device_index, "stream": event.thread,
                                 "correlation": event.id})
            devices.setdefault(event.device_index, set()).add(event.thread)
        out.append(item)
    for event in events:
        if event.device_type != DeviceType.CPU:
            launch = getattr(event, "launch_event", None)
            if launch is not None:
                out.append({"ph": "s", "id": event.id, "pid": _PID, "tid": launch.thread,
                            "ts": round(launch.time_range.start, 3), "cat": "ac2g",
                            "name": "ac2g"})
                out.append({"ph": "f", "id": event.id, "pid": event.device_index,
                            "tid": event.thread, "ts": round(event.time_range.start, 3),
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})
    for record in memory or []:
        out.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                    "pid": _PID, "tid": record["thread"], "ts": round(record["ts"], 3),
                    "args": {"Bytes": record["bytes"], "Total Allocated": record["total"],
                             "Device Type": 1 if record["device"] >= 0 else 0,
                             "Device Id": record["device"]}})
    out.append({"ph": "M", "name": "process_name", "pid": _PID, "tid": 0,
                "args": {"name": "python"}})
    for tid in sorted(threads):
        out.append({"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid,
                    "args": {"name": f"thread {tid} (python)"}})
    for device, streams in sorted(devices.items()):
        out.append({"ph": "M", "name": "process_name", "pid": device, "tid": 0,
                    "args": {"name": f"GPU {device}"}})
        for stream in sorted(streams):
            out.append({"ph": "M", "name": "thread_name", "pid": device, "tid": stream,
                        "args": {"name": f"stream {stream}"}})
    return out


def write_trace(events: list[FunctionEvent], path: str, memory: list[dict] | None = None,
                metadata: dict[str, Any] | None = None) -> None:
    """Write the trace JSON object of ``events`` to ``path``."""
    trace: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [],
                             "displayTimeUnit": "ms"}
    if metadata:
        trace.update(metadata)
    trace["traceEvents"] = trace_events(events, memory)
    trace["traceName"] = str(path)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(trace, f)
