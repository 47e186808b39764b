"""Reading and analysing memory snapshots: a plain-data loader, summaries, fragmentation.

Spec: cuda_memory (snapshot analysis clauses). Snapshots are those of
``torch.cuda.memory._dump_snapshot`` and ``refimpl.cuda.memory._dump_snapshot``.

Loading never runs code from the file: the unpickler refuses every global, so a
pickle can only build dicts, lists, tuples, strings, bytes, numbers, booleans and
None, and the result is then checked to hold nothing else. A gzip-compressed pickle
(``.pickle.gz``) is read the same way, decompressed up to a bound first.

Fragmentation, as ``tensorctl memstats`` reports it:

* *internal*: bytes handed out beyond what was asked for (``size -
  requested_size`` of allocated blocks), also as a share of allocated bytes;
* *external*: free bytes inside reserved segments that sit in free blocks unable
  to serve the *target request*: too small for it, or in the other pool (requests
  up to 1 MiB use small segments, larger ones large segments). The target is the
  largest failed request (``oom`` history entries, or the caller's OOMs); when
  nothing failed, the largest live allocation. Also as a share of all free bytes.
"""

from __future__ import annotations

import io
import pickle
import zlib
from collections import Counter
from typing import Any

from refimpl.cuda._allocator_blocks import K_SMALL_SIZE

__all__ = [
    "SnapshotError",
    "fragmentation",
    "load_snapshot",
    "load_snapshot_bytes",
    "segment_bar",
    "summarize",
    "timeline",
]

_PLAIN_TYPES = (dict, list, tuple, str, int, float, bool, bytes, type(None))
_MAX_DEPTH = 64


class SnapshotError(ValueError):
    """The input is not a readable memory snapshot (the message is one line)."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"it references {module}.{name}; only plain data is accepted"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it uses persistent ids; only plain data is accepted")


def _check_plain(value: Any) -> None:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, _PLAIN_TYPES):
            raise SnapshotError(f"it holds a {type(item).__name__}; only plain data is accepted")
        if depth > _MAX_DEPTH:
            raise SnapshotError("it is nested too deeply")
        if isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)


def _need(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise SnapshotError(f"{what} has the wrong type ({type(value).__name__})")
    return value


def _normalize(data: Any) -> dict[str, Any]:
    if isinstance(data, list):
        data = {"segments": data}
    _need(data, dict, "the snapshot")
    segments = _need(data.get("segments"), list, "'segments'")
    for i, segment in enumerate(segments):
        _need(segment, dict, f"segment {i}")
        _need(segment.get("address"), int, f"segment {i} 'address'")
        blocks = _need(segment.get("blocks"), list, f"segment {i} 'blocks'")
        for j, block in enumerate(blocks):
            _need(block, dict, f"segment {i} block {j}")
            size = _need(block.get("size"), int, f"segment {i} block {j} 'size'")
            if size < 0:
                raise SnapshotError(f"segment {i} block {j} has a negative size")
            _need(block.get("state"), str, f"segment {i} block {j} 'state'")
            _need(block.get("requested_size", 0), int, f"segment {i} block {j} 'requested_size'")
        total = sum(b["size"] for b in blocks)
        _need(segment.setdefault("total_size", total), int, f"segment {i} 'total_size'")
        _need(segment.setdefault("stream", 0), int, f"segment {i} 'stream'")
        _need(segment.setdefault("device", 0), int, f"segment {i} 'device'")
        _need(segment.setdefault("segment_type", "large"), str, f"segment {i} 'segment_type'")
    traces = _need(data.setdefault("device_traces", []), list, "'device_traces'")
    for d, trace in enumerate(traces):
        for k, entry in enumerate(_need(trace, list, f"device trace {d}")):
            _need(entry, dict, f"device trace {d} entry {k}")
            _need(entry.get("action"), str, f"device trace {d} entry {k} 'action'")
            _need(entry.get("size", 0), int, f"device trace {d} entry {k} 'size'")
    return data


# A compressed snapshot may not expand beyond this (a small file cannot fill memory).
MAX_DECOMPRESSED = 4 << 30


def _gunzip(raw: bytes) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = decompressor.decompress(raw, MAX_DECOMPRESSED)
    except zlib.error as exc:
        raise SnapshotError(f"not a readable gzip file ({exc})") from None
    if decompressor.unconsumed_tail:
        raise SnapshotError(f"it expands beyond {MAX_DECOMPRESSED >> 30} GiB when decompressed")
    if not decompressor.eof:
        raise SnapshotError("not a readable gzip file (truncated)")
    return data


def load_snapshot_bytes(raw: bytes) -> dict[str, Any]:
    """Unpickle plain data from ``raw`` (gzip-compressed or not) and check it has a
    snapshot's shape."""
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw)
    try:
        data = _PlainDataUnpickler(io.BytesIO(raw)).load()
    except SnapshotError:
        raise
    except RecursionError:
        raise SnapshotError("it is nested too deeply") from None
    except (pickle.UnpicklingError, EOFError) as exc:
        raise SnapshotError(f"not a readable pickle ({exc or 'truncated'})") from None
    except Exception as exc:  # noqa: BLE001 - any decoding failure is "not a pickle"
        raise SnapshotError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None
    _check_plain(data)
    return _normalize(data)


def load_snapshot(path: str) -> dict[str, Any]:
    """Read a snapshot pickle from ``path`` (see :func:`load_snapshot_bytes`)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise SnapshotError(f"cannot read it ({exc.strerror or exc})") from None
    return load_snapshot_bytes(raw)


def _pool_of(size: int) -> str:
    return "small" if size <= K_SMALL_SIZE else "large"


def target_request(snapshot: dict[str, Any], failed: list[int] | None = None) -> tuple[int, str]:
    """(size, where it comes from) of the request external fragmentation is measured against."""
    sizes = list(failed or [])
    for trace in snapshot.get("device_traces", []):
        sizes += [int(e.get("size", 0)) for e in trace if e.get("action") == "oom"]
    if sizes:
        return max(sizes), "largest failed request"
    live = [
        b["size"]
        for s in snapshot["segments"]
        for b in s["blocks"]
        if b["state"] == "active_allocated"
    ]
    return max(live, default=0), "largest live allocation"


def fragmentation(
    snapshot: dict[str, Any], failed: list[int] | None = None
) -> dict[str, Any]:
    """Internal and external fragmentation of ``snapshot`` (definitions in the module doc)."""
    target, source = target_request(snapshot, failed)
    allocated = internal = free = unusable = largest_free = 0
    for segment in snapshot["segments"]:
        kind = segment.get("segment_type", "large")
        for block in segment["blocks"]:
            size = block["size"]
            if block["state"] == "active_allocated":
                allocated += size
                internal += max(0, size - int(block.get("requested_size", 0) or 0))
            elif block["state"] == "inactive":
                free += size
                largest_free = max(largest_free, size)
                if target and (size < target or kind != _pool_of(target)):
                    unusable += size
    return {
        "internal_bytes": internal,
        "internal_ratio": internal / allocated if allocated else 0.0,
        "external_bytes": unusable,
        "external_ratio": unusable / free if free else 0.0,
        "free_bytes": free,
        "largest_free_block": largest_free,
        "target_request_bytes": target,
        "target_request": source,
    }


def summarize(snapshot: dict[str, Any], failed: list[int] | None = None) -> dict[str, Any]:
    """The machine-readable summary ``tensorctl memstats FILE --json`` prints."""
    states: Counter[str] = Counter()
    reserved = allocated = requested = active = 0
    for segment in snapshot["segments"]:
        reserved += segment["total_size"]
        for block in segment["blocks"]:
            states[block["state"]] += 1
            if block["state"] != "inactive":
                active += block["size"]
                requested += int(block.get("requested_size", 0) or 0)
            if block["state"] == "active_allocated":
                allocated += block["size"]
    actions: Counter[str] = Counter()
    for trace in snapshot.get("device_traces", []):
        actions.update(str(e.get("action")) for e in trace)
    return {
        "segments": len(snapshot["segments"]),
        "devices": sorted({s["device"] for s in snapshot["segments"]}),
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "requested_bytes": requested,
        "active_bytes": active,
        "blocks": {
            "total": sum(states.values()),
            "active_allocated": states["active_allocated"],
            "active_pending_free": states["active_pending_free"],
            "inactive": states["inactive"],
        },
        "fragmentation": fragmentation(snapshot, failed),
        "trace_entries": sum(actions.values()),
        "trace_actions": dict(sorted(actions.items())),
    }


def segment_bar(segment: dict[str, Any], width: int = 48) -> str:
    """A text picture of a segment: ``#`` allocated, ``+`` pending free, ``.`` free.

    Each block gets at least one character when it has any size, so small blocks
    stay visible; the rest of the width is shared in proportion to size.
    """
    blocks = [b for b in segment["blocks"] if b["size"] > 0]
    total = sum(b["size"] for b in blocks) or 1
    marks = {"active_allocated": "#", "active_pending_free": "+"}
    cells = [max(1, round(b["size"] * width / total)) for b in blocks]
    while sum(cells) > width and max(cells, default=0) > 1:
        cells[cells.index(max(cells))] -= 1
    return "".join(marks.get(b["state"], ".") * n for b, n in zip(blocks, cells, strict=True))


def timeline(snapshot: dict[str, Any], device: int = 0) -> list[tuple[int, int, int]]:
    """(event index, allocated bytes, reserved bytes) after each history entry of ``device``.

    Amounts are relative to the start of the recorded history (it may have begun
    with memory already in use).
    """
    traces = snapshot.get("device_traces", [])
    trace = traces[device] if device < len(traces) else []
    allocated = reserved = 0
    sizes: dict[Any, int] = {}
    points = []
    for index, entry in enumerate(trace):
        action = entry.get("action")
        size = int(entry.get("size", 0))
        if action == "alloc":
            sizes[entry.get("addr")] = size
            allocated += size
        elif action == "free_completed":
            allocated -= sizes.pop(entry.get("addr"), 0)
        elif action == "segment_alloc":
            reserved += size
        elif action == "segment_free":
            reserved -= size
        else:
            continue
        points.append((index, allocated, reserved))
    return points
