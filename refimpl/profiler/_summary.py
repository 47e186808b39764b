"""Summaries of a profile for ``tensorctl profile``: op rows, kernel time, memory totals.

Two sources give the same summary (PROF-400):

- a finished profile (``summarize_profile``), from its ``key_averages()`` and memory
  records;
- a Chrome trace JSON written by torch (Kineto) or by refimpl (``summarize_trace``):
  complete events of ops and annotations are nested per thread to get self times,
  kernel events (``cat: kernel``) give device time and are charged to the op with the
  same ``External id``, and ``[memory]`` instant events give the allocation totals.

Malformed input raises :class:`TraceError` with one line that names the problem.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TraceError", "load_trace", "summarize_profile", "summarize_trace"]

_DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
# complete events that are not host work: device work, device-side annotations, spans
_NOT_HOST = _DEVICE_CATEGORIES | {"gpu_user_annotation", "Trace"}


class TraceError(ValueError):
    """A trace file that cannot be summarised (the message says why)."""


def load_trace(path: str) -> dict[str, Any]:
    """Read a Chrome trace JSON file (an object with ``traceEvents``, or a bare list)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise TraceError(f"cannot read it ({exc.strerror or exc})") from None
    if path.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        import gzip

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise TraceError(f"not a readable gzip file ({exc})") from None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError("not a Chrome trace (no traceEvents list)")
    for number, event in enumerate(data["traceEvents"]):
        if not isinstance(event, dict) or not isinstance(event.get("ph"), str):
            raise TraceError(f"trace event {number} is not an object with a 'ph' field")
        if event["ph"] == "X":
            for key in ("ts", "dur"):
                if not isinstance(event.get(key), (int, float)):
                    raise TraceError(f"trace event {number} ({event.get('name')!r}) has no "
                                     f"numeric {key!r}")
    return data


def _new_row(name: str) -> dict[str, Any]:
    return {"name": name, "calls": 0, "self_cpu_us": 0.0, "cpu_total_us": 0.0,
            "self_device_us": 0.0, "device_total_us": 0.0, "cpu_memory": 0,
            "device_memory": 0}


def summarize_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """Rows by name (host ops and kernels), device time, and memory totals of a trace."""
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    host = [e for e in complete if e.get("cat") not in _NOT_HOST]
    device = [e for e in complete if e.get("cat") in _DEVICE_CATEGORIES]
    rows: dict[str, dict[str, Any]] = {}
    by_external: dict[Any, dict[str, Any]] = {}
    threads: dict[tuple, list[dict]] = {}
    for e in host:
        threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for group in threads.values():
        group.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_events: list[dict] = []
        child_time: dict[int, float] = {}
        for e in group:
            while open_events and e["ts"] >= open_events[-1]["ts"] + open_events[-1]["dur"]:
                open_events.pop()
            if open_events:
                parent = open_events[-1]
                child_time[id(parent)] = child_time.get(id(parent), 0.0) + e["dur"]
            open_events.append(e)
        for e in group:
            row = rows.setdefault(e["name"], _new_row(e["name"]))
            row["calls"] += 1
            row["cpu_total_us"] += e["dur"]
            row["self_cpu_us"] += e["dur"] - child_time.get(id(e), 0.0)
            external = (e.get("args") or {}).get("External id")
            if external is not None and e.get("cat") in ("cpu_op", "user_annotation", None):
                by_external.setdefault(external, row)
    device_total = 0.0
    for e in device:
        row = rows.setdefault(e["name"], _new_row(e["name"]))
        row["calls"] += 1
        row["self_device_us"] += e["dur"]
        row["device_total_us"] += e["dur"]
        device_total += e["dur"]
        owner = by_external.get((e.get("args") or {}).get("External id"))
        if owner is not None and owner is not row:
            owner["device_total_us"] += e["dur"]
    memory = _memory_from_trace(events)
    self_cpu = sum(r["self_cpu_us"] for r in rows.values())
    return {"rows": sorted(rows.values(), key=lambda r: -r["self_cpu_us"]),
            "self_cpu_total_us": self_cpu, "self_device_total_us": device_total,
            "memory": memory, "events": len(events)}


def _memory_from_trace(events: list[dict]) -> dict[str, Any]:
    totals = _empty_memory()
    for e in events:
        if e["ph"] != "i" or e.get("name") != "[memory]":
            continue
        args = e.get("args") or {}
        nbytes = args.get("Bytes")
        if not isinstance(nbytes, (int, float)):
            continue
        kind = "device" if args.get("Device Type", 0) not in (0, None) else "cpu"
        _add_record(totals[kind], int(nbytes), args.get("Total Allocated"))
    return totals


def _empty_memory() -> dict[str, dict[str, int]]:
    return {kind: {"allocations": 0, "frees": 0, "allocated_bytes": 0, "freed_bytes": 0,
                   "peak_bytes": 0, "net_bytes": 0} for kind in ("cpu", "device")}


def _add_record(slot: dict[str, int], nbytes: int, total: Any) -> None:
    if nbytes >= 0:
        slot["allocations"] += 1
        slot["allocated_bytes"] += nbytes
    else:
        slot["frees"] += 1
        slot["freed_bytes"] -= nbytes
    slot["net_bytes"] += nbytes
    level = total if isinstance(total, (int, float)) else slot["net_bytes"]
    slot["peak_bytes"] = max(slot["peak_bytes"], int(level))


def summarize_profile(prof: Any) -> dict[str, Any]:
    """The same summary from a finished ``refimpl.profiler.profile``."""
    from refimpl.profiler._events import DeviceType
    from refimpl.profiler._session import memory_records

    rows = []
    for avg in prof.key_averages():
        row = _new_row(avg.key)
        row.update(calls=avg.count, self_cpu_us=avg.self_cpu_time_total,
                   cpu_total_us=avg.cpu_time_total, self_device_us=avg.self_device_time_total,
                   device_total_us=avg.device_time_total, cpu_memory=avg.cpu_memory_usage,
                   device_memory=avg.device_memory_usage)
        rows.append(row)
    events = prof.events()
    memory = _empty_memory()
    for record in memory_records(prof.profiler._collector):
        kind = "device" if record["device"] >= 0 else "cpu"
        _add_record(memory[kind], record["bytes"], None)
    device_total = sum(e.self_device_time_total for e in events
                       if e.device_type != DeviceType.CPU)
    return {"rows": sorted(rows, key=lambda r: -r["self_cpu_us"]),
            "self_cpu_total_us": sum(r["self_cpu_us"] for r in rows),
            "self_device_total_us": device_total, "memory": memory, "events": len(events)}
