"""The recording side of the profiler: what runs while a profile is active.

One :class:`Collector` exists per active profile (at most one at a time, PROF-001).
It is reached from four hook points, each installed only while it records, so that a
program that is not profiled pays one ``is not None`` test per op (PROF-002):

- the dispatcher (``refimpl._dispatch.PROFILE_LAYER``): one range per op, named as
  torch names the aten op (``aten::add``; the names are data in ``_names``), with its
  input shapes, the autograd sequence number of the node it recorded, and the bytes of
  the storages it created;
- ``record_function`` ranges (``refimpl.profiler._ranges``);
- the autograd engine (``refimpl.profiler._engine``): the ``evaluate_function`` and
  node ranges of backward;
- the CUDA driver's kernel launches (``refimpl.cuda._driver.LAUNCH_OBSERVER``): timing
  events recorded on the launch stream (``refimpl.profiler._cuda``).

Ranges are kept per thread on a stack; a closed range adds its memory to its parent
(memory is inclusive, as torch reports it) and is appended to ``ranges``.
"""

from __future__ import annotations

import threading
import time
import traceback
import weakref
from typing import Any

from refimpl import _dispatch
from refimpl._tensor import Tensor
from refimpl.autograd.graph import _MAX_SEQUENCE
from refimpl.profiler._names import profiler_name, schema_arity

__all__ = ["Collector", "Range", "active"]

_lock = threading.Lock()
ACTIVE: Collector | None = None
_NAMES: dict = {}  # op -> its event name (names are computed once per op)
_now = time.perf_counter_ns


def active() -> Collector | None:
    """The collector of the active profile, or None."""
    return ACTIVE


class Range:
    """One recorded range (an op, a ``record_function``, a node, a memory event)."""

    __slots__ = (
        "cpu_mem",
        "dev_mem",
        "end_ns",
        "fwd_thread",
        "kernels",
        "name",
        "runtime",
        "scope",
        "seq",
        "shapes",
        "stack",
        "start_ns",
        "thread",
        "user",
    )

    def __init__(self, name: str, start_ns: int, thread: int, *, seq: int = -1,
                 fwd_thread: int = 0, scope: int = 0, user: bool = False) -> None:
        self.name = name
        self.start_ns = start_ns
        self.end_ns = start_ns
        self.thread = thread
        self.shapes: list | None = None
        self.seq = seq
        self.fwd_thread = fwd_thread
        self.scope = scope
        self.cpu_mem = 0
        self.dev_mem = 0
        self.stack: list | None = None
        self.user = user
        self.kernels: list = []  # KernelLaunch records of launches made in this range
        self.runtime = False  # a CUDA runtime/driver call (cuLaunchKernel)


def _shape_of(arg: Any) -> list:
    if isinstance(arg, Tensor):
        return list(arg._shape)
    return []


class Collector:
    """What one active profile records, and the hook functions that record it."""

    def __init__(self, *, cuda: bool, record_shapes: bool, profile_memory: bool,
                 with_stack: bool) -> None:
        self.cuda = cuda
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.origin_ns = time.perf_counter_ns()
        self.ranges: list[Range] = []
        self.launches: list = []
        self.recording = True
        self.nvtx = False  # emit_nvtx: push an NVTX range per range
        self.keep = True  # False under emit_nvtx alone: ranges are not kept
        self._local = threading.local()
        self._threads: dict[int, int] = {}
        self._fwd_threads: dict[int, int] = {}
        # storages counted so far, by id: a weak reference whose callback records the free
        self._watched: dict[int, weakref.ref] = {}
        # every allocation and free seen: (ns, bytes, device index or -1, thread id)
        self.memory: list[tuple[int, int, int, int]] = []

    # -- threads and the range stack --------------------------------------------------

    def thread_id(self) -> int:
        """The profiler's small id of the calling thread (1 for the first seen)."""
        ident = threading.get_ident()
        tid = self._threads.get(ident)
        if tid is None:
            with _lock:
                tid = self._threads.setdefault(ident, len(self._threads) + 1)
        return tid

    def _stack(self) -> list[Range]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def current(self) -> Range | None:
        """The innermost open range of the calling thread."""
        stack = self._stack()
        return stack[-1] if stack else None

    def open(self, name: str, shapes: list | None = None, **fields: Any) -> Range:
        """Start a range on the calling thread."""
        if fields:
            r = Range(name, _now(), self.thread_id(), **fields)
        else:
            r = Range(name, _now(), self.thread_id())
        r.shapes = shapes
        if self.with_stack:
            r.stack = _python_stack()
        if self.nvtx:
            from refimpl.cuda import nvtx

            message = name if r.seq < 0 else f"{name}, seq = {r.seq}"
            if shapes is not None:
                message += f", sizes = {shapes}"
            nvtx.range_push(message)
        self._stack().append(r)
        return r

    def close(self, r: Range) -> None:
        """End ``r`` and any range still open inside it (no-op if ``r`` has ended)."""
        stack = self._stack()
        if r not in stack:
            return
        now = _now()
        while stack:
            top = stack.pop()
            top.end_ns = now
            self._finish(top, stack)
            if top is r:
                break

    def _finish(self, r: Range, stack: list[Range]) -> None:
        if self.nvtx:
            from refimpl.cuda import nvtx

            nvtx.range_pop()
        if stack:
            parent = stack[-1]
            parent.cpu_mem += r.cpu_mem
            parent.dev_mem += r.dev_mem
        if self.recording and self.keep:
            self.ranges.append(r)

    # -- the dispatcher layer ---------------------------------------------------------

    def wraps(self, op: Any) -> bool:
        """Whether this dispatch of ``op`` is to be recorded (False for the re-entry)."""
        local = self._local
        if getattr(local, "entering", None) is op:
            local.entering = None
            return False
        return True

    def composite(self, name: str, fn, args: tuple, kwargs: dict) -> Any:
        """Record one composite op (a function written in refimpl ops, such as
        ``linear``) as ``aten::<name>`` around the ops it runs."""
        shapes = None
        if self.record_shapes:
            shapes = [_shape_of(a) for a in args] + [_shape_of(v) for v in kwargs.values()]
            shapes += [[]] * (schema_arity(name) - len(shapes))
        r = self.open(profiler_name(name), shapes)
        try:
            return fn(*args, **kwargs)
        finally:
            self.close(r)

    def __call__(self, op: Any, args: tuple, kwargs: dict) -> Any:
        """Record one op: open its range, run the dispatcher underneath, close it."""
        name = _NAMES.get(op)
        if name is None:
            name = _NAMES[op] = profiler_name(op.name)
        shapes = None
        if self.record_shapes:
            shapes = [_shape_of(a) for a in args] + [_shape_of(v) for v in kwargs.values()]
            shapes += [[]] * (schema_arity(op.name) - len(shapes))
        r = self.open(name, shapes)
        inputs = [a for a in args if isinstance(a, Tensor)]
        before = [a._gfn for a in inputs]
        local = self._local
        local.entering = op
        try:
            out = _dispatch.dispatch(op, args, kwargs)
        finally:
            local.entering = None
            self.close(r)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if isinstance(o, Tensor):
                node = o._gfn
                if node is not None and not any(node is b for b in before):
                    r.seq = _sequence_nr(node)
                    self._fwd_threads[node._seq] = r.thread
                    break
        if self.profile_memory:
            self._count_new_storages(r, outs, inputs)
        return out

    # -- memory -----------------------------------------------------------------------

    def _count_new_storages(self, r: Range, outs: tuple, inputs: list) -> None:
        """Charge ``r`` (and its open parents) with the storages its outputs brought."""
        seen = {id(t._storage) for t in inputs}
        for o in outs:
            if not isinstance(o, Tensor):
                continue
            storage = o._storage
            key = id(storage)
            if key in seen or key in self._watched:
                continue
            seen.add(key)
            dev = storage.device
            nbytes = storage._nbytes
            if dev.type == "cuda":
                nbytes = _block_size(nbytes, dev.index or 0)
                r.dev_mem += nbytes
            elif dev.type == "cpu":
                r.cpu_mem += nbytes
            else:
                continue
            stack = self._stack()
            if stack:  # r is closed already: its parent takes the bytes, and passes them up
                if dev.type == "cuda":
                    stack[-1].dev_mem += nbytes
                else:
                    stack[-1].cpu_mem += nbytes
            index = (dev.index or 0) if dev.type == "cuda" else -1
            self.memory.append((r.end_ns, nbytes, index, r.thread))
            self._watched[key] = weakref.ref(
                storage, lambda _, key=key, index=index, nbytes=nbytes: self._freed(
                    key, index, nbytes))

    def _freed(self, key: int, index: int, nbytes: int) -> None:
        """A storage counted by this profile was freed: charge the open range or record
        a top-level ``[memory]`` event."""
        self._watched.pop(key, None)
        if not self.recording:
            return
        now = time.perf_counter_ns()
        tid = self.thread_id()
        self.memory.append((now, -nbytes, index, tid))
        stack = self._stack()
        if stack:
            target = stack[-1]
        else:
            target = Range("[memory]", now, tid, fwd_thread=tid)
            self.ranges.append(target)
        if index >= 0:
            target.dev_mem -= nbytes
        else:
            target.cpu_mem -= nbytes

    # -- autograd ---------------------------------------------------------------------

    def forward_thread(self, seq: int) -> int:
        """The thread whose op recorded the node with sequence number ``seq``."""
        return self._fwd_threads.get(seq, self.thread_id())


def _sequence_nr(node: Any) -> int:
    seq = node._seq
    return -1 if seq >= _MAX_SEQUENCE else seq


def _block_size(nbytes: int, index: int) -> int:
    """The size the CUDA caching allocator hands out for ``nbytes`` (what torch reports)."""
    from refimpl.cuda import _allocator

    return _allocator.get_device_allocator(index).round_size(nbytes)


def _python_stack() -> list[str]:
    """The user's frames, innermost first, as torch's with_stack prints them."""
    frames = []
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "/refimpl/" in frame.filename:
            continue
        frames.append(f"{frame.filename}({frame.lineno}): {frame.name}")
    return frames


def install(collector: Collector) -> None:
    """Make ``collector`` the active one and attach it to every hook point."""
    global ACTIVE
    from refimpl.profiler import _engine

    with _lock:
        if ACTIVE is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        ACTIVE = collector
    _dispatch.PROFILE_LAYER = collector
    _engine.attach(collector)
    if collector.cuda:
        from refimpl.profiler import _cuda

        _cuda.attach(collector)


def uninstall(collector: Collector) -> None:
    """Detach ``collector`` from the hook points; it records nothing more."""
    global ACTIVE
    from refimpl.profiler import _engine

    with _lock:
        if ACTIVE is not collector:
            return
        ACTIVE = None
    _dispatch.PROFILE_LAYER = None
    _engine.detach()
    if collector.cuda:
        from refimpl.profiler import _cuda

        _cuda.detach(collector)
    collector.recording = False
