"""NVTX ranges and marks (``torch.cuda.nvtx``) for profilers such as Nsight Systems.

The annotations go through NVIDIA's ``nvtx`` Python package when it is installed.
Without it they are no-ops that still keep torch's return values, so annotated code
runs unchanged where no profiler library is present.

``range_push`` / ``range_pop`` return what NVTX returns: the zero-based nesting depth
while a profiling tool is attached (NVTX finds one through ``NVTX_INJECTION64_PATH``),
and ``-2`` (NVTX's "no push/pop tracking") when none is, as torch's do.
"""

from __future__ import annotations

import contextlib
import itertools
import os
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
_NO_PUSH_POP_TRACKING = -2  # NVTX's answer when no tool tracks ranges


def _tracked(depth: int) -> int:
    """``depth`` when a profiling tool is attached, else NVTX's untracked value."""
    return depth if os.environ.get("NVTX_INJECTION64_PATH") else _NO_PUSH_POP_TRACKING


def _stack() -> list[str]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def range_push(msg: str) -> int:
    """Open a nested range on this thread; returns its zero-based depth (see above)."""
    if _nvtx is not None:
        _nvtx.push_range(message=msg)
    stack = _stack()
    stack.append(msg)
    return _tracked(len(stack) - 1)


def range_pop() -> int:
    """Close this thread's innermost range; returns its depth (see above; -1 when none
    was open and a tool is attached)."""
    stack = _stack()
    if not stack:
        return _tracked(-1)
    stack.pop()
    if _nvtx is not None:
        _nvtx.pop_range()
    return _tracked(len(stack))


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
