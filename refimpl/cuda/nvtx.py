"""NVTX ranges and marks (``torch.cuda.nvtx``) for profilers such as Nsight Systems.

The annotations go through NVIDIA's ``nvtx`` Python package when it is installed.
Without it they are no-ops that still keep torch's return values (the nesting depth
of ``range_push`` / ``range_pop`` and an id from ``range_start``), so annotated code
runs unchanged where no profiler library is present.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator

try:
    import nvtx as _nvtx  # NVIDIA's package; optional
except ImportError:
    _nvtx = None

__all__ = ["mark", "range", "range_end", "range_pop", "range_push", "range_start"]

_local = threading.local()  # push/pop nest per thread, as NVTX's do
_ids = itertools.count(1)
_open: dict[int, object] = {}


def _stack() -> list[str]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def range_push(msg: str) -> int:
    """Open a nested range on this thread; returns its zero-based depth."""
    if _nvtx is not None:
        _nvtx.push_range(message=msg)
    stack = _stack()
    stack.append(msg)
    return len(stack) - 1


def range_pop() -> int:
    """Close this thread's innermost range; returns its depth (-1 when none was open)."""
    stack = _stack()
    if not stack:
        return -1
    stack.pop()
    if _nvtx is not None:
        _nvtx.pop_range()
    return len(stack)


def range_start(msg: str) -> int:
    """Open a range that may end on another thread; returns its id."""
    rid = next(_ids)
    _open[rid] = _nvtx.start_range(message=msg) if _nvtx is not None else None
    return rid


def range_end(range_id: int) -> None:
    """Close a range opened by :func:`range_start`."""
    handle = _open.pop(range_id, None)
    if _nvtx is not None and handle is not None:
        _nvtx.end_range(handle)


def mark(msg: str) -> None:
    """An instantaneous event."""
    if _nvtx is not None:
        _nvtx.mark(message=msg)


@contextlib.contextmanager
def range(msg: str, *args, **kwargs) -> Iterator[None]:
    """A ``with`` block annotated as one range; ``msg`` is formatted with the arguments."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
