"""CUDA graphs: capture the work of a stream once, replay it with one launch.

Spec: graphs (GRAPH clauses). Built on the driver's stream capture:

1. ``capture_begin`` starts ``cuStreamBeginCapture`` on the current stream (never the
   legacy default stream) and tells the caching allocator to route every allocation
   of a stream taking part in this capture into the graph's *private pool*
   (``refimpl.cuda._allocator_pools``). Kernels launched meanwhile are recorded, not
   run; work forked to other streams joins the capture through events.
2. ``capture_end`` ends the capture (``cuStreamEndCapture``), stops the routing and
   instantiates the graph (``cuGraphInstantiate``); an empty graph warns.
3. ``replay`` launches the instantiated graph (``cuGraphLaunch``) on the current
   stream: the captured kernels run again on the same addresses, so new values
   written into a captured input are seen, and outputs are rewritten in place.
4. ``reset`` (or deleting the graph) destroys it and releases its pool: once no graph
   uses a pool, ``empty_cache()`` returns the pool's free segments to the device.
   Tensors allocated during the capture stay valid as long as they live.

``capture_error_mode`` is the driver's capture mode: ``"global"`` (the default)
makes capture-unsafe calls fail in every thread, ``"thread_local"`` only in this one,
``"relaxed"`` not at all. Inside a capture, synchronising (``synchronize()``,
``.item()``, a copy to the host) fails with the driver's "operation not permitted
when stream is capturing" and invalidates the capture.

Random numbers (``refimpl.cuda.random``): a graph draws from the generator states
registered with it (``register_generator_state``; the capturing device's default
generator always). ``capture_begin`` points their draws at device memory and counts
the offsets the graph consumes; ``replay`` writes each state's current seed and offset
there first and advances the offset, so each replay draws what the same calls made
eagerly would draw, and consecutive replays draw different numbers.

``make_graphed_callables`` (in ``_graphed_callables``) captures a callable's forward
and backward.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from typing import Any

from refimpl.cuda import _allocator, _driver, random, streams
from refimpl.cuda._allocator_pools import new_pool_id
from refimpl.cuda._graphed_callables import make_graphed_callables
from refimpl.cuda._lazy import _lazy_init, is_initialized

__all__ = [
    "CUDAGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]

_NON_DEFAULT_STREAM = (
    "CUDA graphs must be captured on a non-default stream. "
    "(However, after capture, it's ok to replay them on the default stream.)"
)
_EMPTY_GRAPH = (
    "The CUDA Graph is empty. This usually means that the graph was attempted to be "
    "captured on wrong device or stream."
)


def is_current_stream_capturing() -> bool:
    """Whether the current CUDA stream of the current device is capturing a graph."""
    if not is_initialized():
        return False
    stream = streams.current_stream()
    status, _ = _driver.stream_capture_info(stream.device_index, stream.cuda_stream)
    return status == _driver.CAPTURE_STATUS_ACTIVE


def graph_pool_handle() -> tuple[int, int]:
    """An id for a memory pool that several graphs can share (``capture_begin(pool=...)``)."""
    return new_pool_id(True)


class CUDAGraph:
    """One captured CUDA graph (torch.cuda.CUDAGraph).

    ``keep_graph=True`` keeps the captured (not instantiated) graph after
    ``capture_end`` (torch keeps it only for debugging and ``debug_dump``).
    """

    def __init__(self, keep_graph: bool = False) -> None:
        self._keep_graph = keep_graph
        self._graph = 0
        self._exec = 0
        self._pool_id: tuple[int, int] | None = None
        self._device = -1
        self._capture_stream: streams.Stream | None = None
        self._capture_id = 0
        self._capturing = False
        self._debug = False
        # generator state -> the offsets one replay consumes (counted at capture)
        self._generator_states: dict[random.CUDAGeneratorState, int] = {}

    # -- capture ---------------------------------------------------------------------

    def capture_begin(self, pool: tuple[int, int] | None = None,
                      capture_error_mode: str = "global") -> None:
        """Begin capturing the current stream's work into this graph.

        ``pool``: share the private memory pool of another graph (``g.pool()``) or a
        ``graph_pool_handle()``; by default the capture gets a pool of its own.
        """
        if capture_error_mode not in _driver.CAPTURE_MODES:
            raise RuntimeError(
                f"Unknown capture error mode. Expected `global`, `thread_local`, or "
                f"`relaxed`, got {capture_error_mode}")
        _lazy_init()
        if self._exec or self._graph or self._capturing:
            raise RuntimeError(
                "This CUDAGraph instance already owns a captured graph. To capture a new "
                "graph, create a new instance.")
        stream = streams.current_stream()
        if stream.cuda_stream == 0:
            raise RuntimeError(_NON_DEFAULT_STREAM)
        device = stream.device_index
        # before the capture starts (and outside its pool): the default generator
        # takes part in every graph; each state's device seed and offset are written
        self._register_state(random.default_generator(device)._state)
        for state in self._generator_states:
            state.capture_prologue()
        pool_id = tuple(pool) if pool is not None and any(pool) else new_pool_id(False)
        allocator = _allocator.get_device_allocator(device)

        def in_this_capture(s: int) -> bool:
            # a stream belongs to the capture when the driver says it captures into it
            return _driver.stream_capture_info(device, s) == (_driver.CAPTURE_STATUS_ACTIVE,
                                                              self._capture_id)

        allocator.begin_allocate_to_pool(pool_id, in_this_capture)
        try:
            _driver.stream_begin_capture(device, stream.cuda_stream, capture_error_mode)
        except BaseException:
            allocator.end_allocate_to_pool(pool_id)
            allocator.release_pool(pool_id)
            self._end_generator_capture()
            raise
        self._capture_id = _driver.stream_capture_info(device, stream.cuda_stream)[1]
        self._pool_id, self._device, self._capture_stream = pool_id, device, stream
        self._capturing = True

    def capture_end(self) -> None:
        """End the capture begun on this stream and instantiate the graph."""
        stream = streams.current_stream()
        if not self._capturing:
            raise RuntimeError("Called CUDAGraph::capture_end without a preceding capture_begin.")
        if stream != self._capture_stream:
            raise RuntimeError("Capture must end on the same stream it began on.")
        allocator = _allocator.get_device_allocator(self._device)
        self._capturing = False
        try:
            graph = _driver.stream_end_capture(self._device, stream.cuda_stream)
        except BaseException:
            # an invalidated capture leaves no graph: stop routing and drop the pool
            allocator.end_allocate_to_pool(self._pool_id)
            allocator.release_pool(self._pool_id)
            self._end_generator_capture()
            raise
        allocator.end_allocate_to_pool(self._pool_id)
        self._end_generator_capture()
        if not graph:
            allocator.release_pool(self._pool_id)
            raise RuntimeError("Invalid capture.")
        self._graph = graph
        if _driver.graph_node_count(graph) == 0:
            warnings.warn(_EMPTY_GRAPH, UserWarning, stacklevel=2)
        self._exec = _driver.graph_instantiate(self._device, graph)
        if not (self._keep_graph or self._debug):
            _driver.graph_destroy(graph)
            self._graph = 0

    # -- use ---------------------------------------------------------------------------

    def replay(self) -> None:
        """Launch the captured work on the current stream."""
        if not self._exec:
            raise RuntimeError("Called CUDAGraph::replay without a preceding successful capture.")
        for state, increment in self._generator_states.items():
            state.replay_prologue(increment)
        stream = streams.current_stream(self._device)
        _driver.graph_launch(self._device, self._exec, stream.cuda_stream)

    def pool(self) -> tuple[int, int]:
        """The id of this graph's memory pool, to share it with a later capture."""
        if not self._exec:
            raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
        return self._pool_id

    def reset(self) -> None:
        """Destroy the graph and release its memory pool; the object can capture again."""
        if self._graph or self._exec:
            _allocator.get_device_allocator(self._device).release_pool(self._pool_id)
        if self._graph:
            _driver.graph_destroy(self._graph)
            self._graph = 0
        if self._exec:
            _driver.graph_exec_destroy(self._exec)
            self._exec = 0

    def enable_debug_mode(self) -> None:
        """Keep the captured graph after ``capture_end`` so that ``debug_dump`` can write it."""
        self._debug = True

    def debug_dump(self, debug_path: str) -> None:
        """Write the captured graph as a Graphviz DOT file."""
        if not self._debug:
            raise RuntimeError(
                "CUDA Graphs debug not enabled, set with [graph].enable_debug_mode()")
        if not self._graph:
            raise RuntimeError("Called CUDAGraph::debug_dump without a preceding capture.")
        _driver.graph_debug_dot_print(self._graph, str(debug_path))

    def register_generator_state(self, generator: Any) -> None:
        """Make this graph draw from ``generator``'s state (a CUDA generator, e.g. from
        ``graphsafe_get_state()`` or ``clone_state()``): replays advance that state."""
        state = getattr(generator, "_state", None)
        if not isinstance(state, random.CUDAGeneratorState):
            raise RuntimeError("Expected a CUDA Generator")  # noqa: TRY004 (torch's type)
        self._register_state(state)

    def _register_state(self, state: random.CUDAGeneratorState) -> None:
        self._generator_states[state] = 0
        state.register_graph(self)

    def _end_generator_capture(self) -> None:
        # Also after a failed capture: torch 2.11 leaves its states capturing then (its
        # epilogue follows a successful instantiation only), so that every later draw
        # of the process fails until a capture succeeds; refimpl does not copy that.
        for state in self._generator_states:
            if state.capturing:
                self._generator_states[state] = state.capture_epilogue()

    def __del__(self) -> None:
        # the driver may already be gone at interpreter exit: nothing to release then
        with contextlib.suppress(Exception):
            for state in self._generator_states:
                state.unregister_graph(self)
            self._generator_states.clear()
        if not (self._graph or self._exec):
            return
        # the garbage collector may run while another graph is being captured: the
        # driver calls of the destruction run in the relaxed capture mode, so that
        # they cannot invalidate that capture
        old = None
        with contextlib.suppress(Exception):
            old = _driver.exchange_capture_mode("relaxed")
        with contextlib.suppress(Exception):
            self.reset()
        if old is not None:
            with contextlib.suppress(Exception):
                _driver.exchange_capture_mode(old)


class graph:
    """Context manager that captures the work of its body into ``cuda_graph``.

    ``with graph(g):`` synchronises, collects garbage and empties the cache (so the
    capture starts from as much free memory as possible), makes ``stream`` (by default
    one side stream shared by all ``graph`` contexts) current and captures; leaving
    the body ends the capture, also when the body raised.
    """

    default_capture_stream: streams.Stream | None = None

    def __init__(self, cuda_graph: CUDAGraph, pool: tuple[int, int] | None = None,
                 stream: streams.Stream | None = None,
                 capture_error_mode: str = "global") -> None:
        if graph.default_capture_stream is None:
            graph.default_capture_stream = streams.Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else graph.default_capture_stream
        self.stream_ctx = streams.stream(self.capture_stream)
        self.cuda_graph = cuda_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        from refimpl.cuda import _device, memory

        _device.synchronize()
        gc.collect()
        memory.empty_cache()
        self.stream_ctx.__enter__()
        self.cuda_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)

    def __exit__(self, *exc: object) -> None:
        self.cuda_graph.capture_end()
        self.stream_ctx.__exit__(*exc)
