"""The reverse-mode engine (spec: AUTOGRAD-ENGINE-*).

``backward()`` and ``grad()`` become one *graph task*, run by ``GraphTask.run``:

1. Count, for every node reachable from the roots, how many edges point at it.
2. When ``inputs`` are given, mark the nodes that lie on a path to one of them; only
   those run (``grad()`` *captures* the gradient arriving at each input instead of
   accumulating it).
3. Run ready nodes (all their dependencies done) newest first, like micrograd's
   topological loop: each node's gradients are added into the input buffers of the
   nodes its edges point at; a node whose count drops to zero becomes ready.

Around each node, in torch's order: tensor pre-hooks (``register_hook``) and
``retain_grad`` hooks, node pre-hooks, the node, output validation (shape/dtype of
each gradient), node post-hooks. Without ``retain_graph`` each node frees its saved
tensors as soon as it ran.

A node whose gradients arrive on a CUDA device runs on that device's worker thread
(``_device_threads``), as in torch: the thread that runs the task hands the loop to a
device thread for as long as the ready nodes are that device's. Where no user code runs
and nothing could tell the threads apart, the task's thread runs the device's turn
itself, in the same order, and hands the rest of the turn to the device thread at the
first node that runs user code (``_device_threads.may_run_here``,
``GraphNode._runs_user_code``).

Backward called from inside backward (*reentrant*) runs a nested task on the same
thread; every ``_HANDOFF_DEPTH`` levels the nested task moves to a fresh thread, so
deep reentrancy never exhausts the Python stack. Backward may run from several
threads at once: accumulation into ``.grad`` is locked per leaf, and exceptions raised
anywhere in a task reach the thread that called backward.
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
import warnings

from refimpl._state import STATE
from refimpl.autograd import _device_threads, _flags, _streams
from refimpl.autograd.graph import (
    AccumulateGrad,
    GradientEdge,
    GraphNode,
    gradient_edge,
)

_TASK_IDS = itertools.count()
_HANDOFF_DEPTH = 20


class _Local(threading.local):
    def __init__(self) -> None:
        self.tasks: list = []
        self.depth = 0


_LOCAL = _Local()


class _GraphRootNode(GraphNode):
    """Hands the root gradients to the root edges."""

    __slots__ = ("_grads",)
    _name = "GraphRoot"

    def __init__(self, edges: tuple, grads: list) -> None:
        self._init_node(edges, ())
        self._grads = grads

    def _apply(self, grads: list) -> list:
        return list(self._grads)


class _Identity(GraphNode):
    """Stands for an input that is not part of the graph (never reached)."""

    __slots__ = ()
    _name = "Identity"

    def __init__(self) -> None:
        self._init_node((), ((), None, None))


class _RunState:
    """What the threads running one graph task hand each other: the ready nodes, the
    input buffers, the node taken but not yet run, the streams of leaf gradients."""

    __slots__ = ("buffers", "heap", "leaf_streams", "pending", "root", "tick")

    def __init__(self, root: GraphNode) -> None:
        self.root = root
        self.heap: list = [(0, 0, root)]
        self.buffers: dict = {}
        self.tick = itertools.count(1)
        self.leaf_streams: set = set()  # streams that produced leaf or captured gradients
        self.pending: tuple | None = None


class GraphTask:
    """One backward()/grad() call over the graph."""

    def __init__(self, keep_graph: bool, create_graph: bool) -> None:
        self.id = next(_TASK_IDS)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.needed: dict | None = None  # None: every reachable node runs
        self.captures: dict = {}
        self.captured: list = []
        self.deps: dict = {}
        self.callbacks: list = []
        self.nodes: set = set()
        self.root = None
        self.multithreading = _flags.multithreading_enabled
        self.errored = False

    # -- preparation ---------------------------------------------------------------------

    def prepare(self, root: GraphNode, outputs, accumulate: bool) -> None:
        """Dependency counts, and which nodes run when ``outputs`` (edges) are given."""
        self.root = root
        deps = self.deps
        seen = {root}
        stack = [root]
        while stack:
            fn = stack.pop()
            for e in fn._next:
                if e is None:
                    continue
                nxt = e[0]
                deps[nxt] = deps.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        self.nodes = seen
        if outputs is None:
            return
        targets = set()
        for idx, (node, nr) in enumerate(outputs):
            if accumulate:
                targets.add(node)
            else:
                self.captures.setdefault(node, []).append((nr, idx))
        self.captured = [None] * len(outputs)
        self.needed = self._needed_nodes(root, targets, set(self.captures))

    @staticmethod
    def _needed_nodes(root, targets: set, captured: set) -> dict:
        """needed[n]: n is a target, or some child leads to a target or a capture."""
        needed: dict = {}
        stack = [(root, iter(root._next))]
        visited = {root}
        while stack:
            node, it = stack[-1]
            for e in it:
                if e is not None and e[0] not in visited:
                    visited.add(e[0])
                    stack.append((e[0], iter(e[0]._next)))
                    break
            else:
                stack.pop()
                val = node in targets
                if not val:
                    for e in node._next:
                        if e is not None and (e[0] in captured or needed.get(e[0])):
                            val = True
                            break
                needed[node] = val
        needed[root] = True
        return needed

    def should_execute(self, node) -> bool:
        """Whether ``node`` runs (or at least has its gradient captured)."""
        if self.needed is None:
            return node in self.nodes
        return bool(self.needed.get(node)) or node in self.captures

    # -- execution -----------------------------------------------------------------------

    def run(self, root: GraphNode) -> None:
        """Execute the graph from ``root`` (see the module docstring).

        The ready nodes are run by :meth:`_drain`, on this thread until the next one
        belongs to a device thread (STREAM-304), which then drains the nodes of its
        device while this thread waits, and so on until no node is left.
        """
        state = _RunState(root)
        device = self._drain(state, None)
        while device is not None:
            # the device's turn, here while its nodes run no user code (the drain then
            # returns the device itself when one does), else on the device's thread
            if (not _device_threads.may_run_here(device)
                    or self._drain(state, device, True) == device):
                _device_threads.run_on(device, self._drain, state, device)
            device = self._drain(state, None)
        if state.leaf_streams:
            _streams.sync_leaves(state.leaf_streams)
        while self.callbacks:
            self.callbacks.pop(0)()

    def _drain(self, state: _RunState, device: int | None,
               here: bool = False) -> int | None:
        """Run ready nodes, newest first, while they belong to this thread.

        ``device`` None: the task's own thread, which runs the nodes whose gradients are
        on the CPU (and those of its device when it is a device thread); else the device
        thread of ``device``, which runs the nodes whose gradients are on that device.
        A node that belongs elsewhere is kept in ``state.pending`` and its device
        returned (None when no node is left, or a CPU node ends a device thread's turn).
        ``here``: the task's thread runs ``device``'s turn; a node that runs user code
        is kept in ``state.pending`` and ``device`` returned, for its thread.
        """
        root = state.root
        heap = state.heap
        buffers = state.buffers
        deps = self.deps
        needed = self.needed
        captures = self.captures
        keep_graph = self.keep_graph
        multithreading = self.multithreading
        push = heapq.heappush
        pop = heapq.heappop
        # every node runs when no grad() inputs select some: no _evaluate step then, and
        # outside anomaly mode (read per node, as a hook may turn it on) no _call either,
        # unless the profiler wraps _call (refimpl.profiler._engine)
        evaluate = self._evaluate if needed is not None else self._call
        direct = needed is None and GraphTask._call is _OWN_CALL
        # ``here``: no user code runs in this turn (a node that would is handed on), so a
        # stream found current stays current: the check runs once per stream, not per node
        known_current = None
        while True:
            if state.pending is not None:
                node, inputs, where = state.pending
                state.pending = None
            elif heap:
                node = pop(heap)[2]
                inputs = buffers.pop(node, None) if node is not root else []
                where = None
                if node._stream is not None and multithreading:
                    where = _device_threads.input_device(inputs)
            else:
                return None
            if where != device and (device is not None
                                    or not _device_threads.runs_here(where)):
                local = self._ready_cpu_node(state) if device is None else None
                if local is None:
                    state.pending = (node, inputs, where)
                    return where
                # torch's CPU thread never waits behind another device's queue: a ready
                # CPU node runs first, and this one goes back to wait its turn
                if node is not root:
                    buffers[node] = inputs
                push(heap, (-node._seq, next(state.tick), node))
                node, inputs = local, buffers.pop(local, None)
            elif here and (node._runs_user_code() or not _plain(inputs)):
                state.pending = (node, inputs, where)
                return device
            run = call_function if direct and not _flags.anomaly_enabled else evaluate
            stream = node._stream  # None unless the node's forward ran on a CUDA device
            if stream is None:
                current = True
                outputs = run(node, inputs)
            else:
                # hooks, captures and the node itself run on the forward's stream
                current = stream is known_current or _streams.is_current(stream)
                if current:
                    if here:
                        known_current = stream
                    outputs = run(node, inputs)
                else:
                    with _streams.on_stream(stream):
                        outputs = run(node, inputs)
                if not node._next or captures.get(node):
                    state.leaf_streams.add(stream)
            if outputs is None:  # only captured (grad() inputs), not run
                continue
            if not keep_graph:
                node._release()
            for edge, grad in zip(node._next, outputs):
                if edge is None:
                    continue
                nxt, nr = edge
                count = deps[nxt] - 1
                deps[nxt] = count
                buf = buffers.get(nxt)
                if buf is None:
                    if needed is not None and not (needed.get(nxt) or nxt in captures):
                        continue
                    buf = [None] * len(nxt._in_meta)
                    buffers[nxt] = buf
                if grad is not None:
                    consumer = nxt._stream
                    if consumer is stream and current:
                        # no stream to order after, and the sum runs on the current one
                        # (the consumer's); a CPU node's CUDA gradient still goes through
                        # _accumulate_on_stream, which orders it after the default stream
                        old = buf[nr]
                        buf[nr] = grad if old is None else old + grad
                    else:
                        _accumulate_on_stream(buf, nr, grad, stream, consumer)
                if count == 0:
                    push(heap, (-nxt._seq, next(state.tick), nxt))
            # drop our references so AccumulateGrad can tell a gradient nobody else holds
            outputs = grad = inputs = None

    @staticmethod
    def _ready_cpu_node(state: _RunState):
        """Take the newest ready node whose forward ran on the CPU off the heap (None if
        there is none): it runs on the task's own thread, whatever the device threads do."""
        heap = state.heap
        for _, _, node in sorted(heap):
            if node._stream is None and node is not state.root:
                entry = next(e for e in heap if e[2] is node)
                heap.remove(entry)
                heapq.heapify(heap)
                return node
        return None

    def _evaluate(self, node: GraphNode, inputs: list) -> list | None:
        """Run one node: when only some nodes are needed (``grad()``), call the tensor
        hooks of the others and capture the gradients asked for; None if it must not run."""
        needed = self.needed
        if needed is not None:
            is_needed = needed.get(node, False)
            if not is_needed and node._has_tensor_hooks():
                inputs = node._call_tensor_pre_hooks(inputs)
            caps = self.captures.get(node)
            if caps:
                for nr, idx in caps:
                    self.captured[idx] = inputs[nr]
            if not is_needed:
                return None
        return self._call(node, inputs)

    def _call(self, node: GraphNode, inputs: list) -> list:
        if _flags.anomaly_enabled:
            return self._call_with_anomaly(node, inputs)
        return call_function(node, inputs)

    def _call_with_anomaly(self, node: GraphNode, inputs: list) -> list:
        """call_function, NaN check; on the task's first error the node's forward trace."""
        from refimpl.autograd import anomaly_mode

        try:
            outputs = call_function(node, inputs)
            anomaly_mode.check_nan(node, outputs)
            return outputs
        except BaseException:
            if not self.errored:
                self.errored = True
                anomaly_mode.print_stack(node)
            raise


_OWN_CALL = GraphTask._call  # the node call the drain may skip (see _drain)


def _accumulate_on_stream(buf: list, nr: int, grad, producer, consumer) -> None:
    """Put ``grad`` into a node's input buffer, ordered after the stream that made it.

    The consumer's stream waits for the producer's, and a sum of two gradients runs on
    the consumer's stream (STREAM-300).
    """
    _streams.sync_producer(grad, producer, consumer)
    old = buf[nr]
    if old is None:
        buf[nr] = grad
        return
    with _streams.on_stream(consumer):
        buf[nr] = old + grad


def call_node(node: GraphNode, inputs: list) -> list:
    """Apply a node (anomaly mode: keep its forward trace at hand and check for NaN)."""
    if not _flags.anomaly_enabled:
        return node._apply(inputs)
    from refimpl.autograd import anomaly_mode

    return anomaly_mode.apply_with_anomaly(node, inputs)


def call_function(node: GraphNode, inputs: list) -> list:
    """Hooks, the node, output validation and post-hooks, in torch's order."""
    if node._has_tensor_hooks():
        inputs = node._call_tensor_pre_hooks(inputs)
    pre = node._pre_hooks
    if pre:
        for hook in list(pre.values()):
            res = hook(tuple(inputs))
            if res is not None:
                res = list(res) if isinstance(res, (tuple, list)) else [res]
                if len(res) != len(inputs):
                    raise RuntimeError(
                        f"hook '{getattr(hook, '__name__', type(hook).__name__)}' has returned "
                        f"an incorrect number of values (got {len(res)}, but expected "
                        f"{len(inputs)})"
                    )
                inputs = res
    post = node._post_hooks
    if _flags.anomaly_enabled:
        outputs = call_node(node, list(inputs) if post else inputs)
    else:
        outputs = node._apply(list(inputs) if post else inputs)
    outputs = validate_outputs(node, outputs)
    if post:
        for hook in list(post.values()):
            res = hook(tuple(outputs), tuple(inputs))
            if res is not None:
                outputs = list(res) if isinstance(res, (tuple, list)) else [res]
    return outputs


def _expandable(shape: tuple, to: tuple) -> bool:
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a != b and a != 1:
            return False
    return True


def validate_outputs(node: GraphNode, outputs) -> list:
    """Check each gradient against the metadata of the input it flows into."""
    edges = node._next
    if type(outputs) is not list:
        outputs = list(outputs)
    if len(outputs) != len(edges):
        if len(outputs) > len(edges) and all(g is None for g in outputs[len(edges):]):
            outputs = outputs[:len(edges)]
        else:
            raise RuntimeError(
                f"invalid number of gradients - expected {len(edges)}, but got {len(outputs)}"
            )
    for i, g in enumerate(outputs):
        if g is None:
            continue
        e = edges[i]
        if e is None:
            outputs[i] = None
            continue
        shape, dtype, device = e[0]._in_meta[e[1]]
        if dtype is None or (g._shape == shape and g.dtype is dtype
                             and (g._storage.device is device
                                  or g._storage.device == device)):
            continue
        if g._shape != shape:
            if not _expandable(shape, g._shape):
                raise RuntimeError(
                    f"Function {node.name()} returned an invalid gradient at index {i} - got "
                    f"{list(g._shape)} but expected shape compatible with {list(shape)}"
                )
            from refimpl.ops._helpers import sum_to

            g = sum_to(g, shape)
        if g.dtype is not dtype:
            g = g.to(dtype)
        if g.device != device:
            g = g.to(device)
        outputs[i] = g
    return outputs


# -- accumulation into .grad -------------------------------------------------------------


def _dense_strides(t):
    """``t``'s strides when it is non-overlapping and dense, else None."""
    dims = sorted((s, n) for s, n in zip(t._stride, t._shape) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return None
        expected *= n
    return t._stride


def _obeys_layout(grad, variable) -> bool:
    if grad._stride == variable._stride and variable.is_contiguous():
        return True  # the usual case: both contiguous, without sorting the strides
    strides = _dense_strides(variable)
    if strides is not None:
        return all(n == 1 or a == b for a, b, n in zip(grad._stride, strides, grad._shape))
    return grad.is_contiguous()


def _clone_obey_contract(grad, variable):
    """A copy of ``grad`` laid out like ``variable`` (when it is dense), recorded. Made by a
    factory, so that under a fake mode the copy is fake too."""
    from refimpl._tensor import contiguous_strides
    from refimpl.ops.factories import empty_strided

    strides = _dense_strides(variable)
    if strides is None or 0 in variable._shape:
        strides = contiguous_strides(variable._shape)
    out = empty_strided(grad._shape, strides, dtype=grad.dtype, device=grad.device)
    out.copy_(grad)
    return out


def stealable(grad, expected_refs: int) -> bool:
    """Whether nobody but the engine holds ``grad`` (so ``.grad`` may take it over).
    ``expected_refs``: the references the caller knows of (this call's own two, its
    parameter and getrefcount's argument, come on top)."""
    # torch looks at the tensor's own reference count only: a gradient that shares its
    # storage with another tensor (a detached alias, or the base of a view such as a
    # slice of cat's gradient) is taken over all the same
    return sys.getrefcount(grad) <= expected_refs + 2


def _plain_unwatched(grad) -> bool:
    """Whether ``grad.detach()`` would be ``grad`` in all but identity: a plain tensor
    without history that is not a view (detach's result is never a view), with no mode or
    profiler to see the detach. Nobody else holds a stolen gradient, so its identity
    cannot be told apart."""
    if _DISPATCH is None:
        _bind()
    return (type(grad) in _PLAIN and grad._view_meta is None and grad._gfn is None
            and not grad._rg and not _DISPATCH.MODE_STACK
            and _DISPATCH.PROFILE_LAYER is None)


_DISPATCH = None  # refimpl._dispatch, bound on first use (it imports the autograd layer)
_PLAIN: frozenset = frozenset()


def _bind() -> None:
    global _DISPATCH, _PLAIN
    from refimpl import _dispatch as _DISPATCH
    from refimpl._tensor import PLAIN as _PLAIN


def accumulate_into(variable, grad, steal: bool = False) -> None:
    """AccumulateGrad: set or add ``grad`` into ``variable.grad`` (torch's rules);
    ``steal``: the engine holds the only reference to ``grad``."""
    old = variable._grad
    if old is None:
        if not STATE.grad_enabled and steal and _obeys_layout(grad, variable):
            variable._grad = grad if _plain_unwatched(grad) else grad.detach()
        else:
            variable._grad = _clone_obey_contract(grad, variable)
    elif not STATE.grad_enabled:
        old.add_(grad)
    else:
        variable._grad = old + grad


# -- entry points ------------------------------------------------------------------------


def _root_edge(t, i: int):
    if isinstance(t, GradientEdge):
        return (t.node, t.output_nr)
    edge = gradient_edge(t)
    if edge is None:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not have a grad_fn"
        )
    return edge


def _input_edge(t, accumulate: bool):
    if isinstance(t, GradientEdge):
        return (t.node, t.output_nr)
    if not t.requires_grad:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    fn = t.grad_fn
    if fn is not None:
        if accumulate:
            t.retain_grad()
        return (fn, t._output_nr)
    ref = t._grad_acc
    acc = ref() if ref is not None else None
    if acc is None:
        return (_Identity(), 0)
    return (acc, 0)


def run_backward(tensors, grads, keep_graph: bool, create_graph: bool, inputs,
                 allow_unused: bool, accumulate: bool):
    """The engine call behind backward() and grad(): returns the captured gradients."""
    edges = []
    root_grads = []
    for i, (t, g) in enumerate(zip(tensors, grads)):
        edges.append(_root_edge(t, i))
        root_grads.append(g)
    outputs = None
    if inputs:
        outputs = [_input_edge(t, accumulate) for t in inputs]
    task = GraphTask(keep_graph, create_graph)
    root = _GraphRootNode(tuple(edges), root_grads)
    # root gradients count as made on the caller's current stream (STREAM-302)
    root._stream = _streams.root_stream(root_grads)
    task.prepare(root, outputs, accumulate)
    _execute(task, root)
    if accumulate:
        return None
    result = tuple(task.captured)
    if not allow_unused:
        for r in result:
            if r is None:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
    return result


def _plain(grads: list) -> bool:
    """Whether every gradient is a plain tensor (a subclass may run user code)."""
    if _DISPATCH is None:
        _bind()
    for g in grads:
        if g is not None and type(g) not in _PLAIN:
            return False
    return True


def _execute(task: GraphTask, root: GraphNode) -> None:
    if _LOCAL.depth and _LOCAL.depth % _HANDOFF_DEPTH == 0:
        _execute_in_new_thread(task, root)
        return
    _LOCAL.depth += 1
    _LOCAL.tasks.append(task)
    prev = STATE.grad_enabled
    STATE.grad_enabled = task.create_graph
    try:
        task.run(root)
    finally:
        STATE.grad_enabled = prev
        _LOCAL.tasks.pop()
        _LOCAL.depth -= 1


def _execute_in_new_thread(task: GraphTask, root: GraphNode) -> None:
    """Run a deeply nested (reentrant) task on a fresh thread and stack."""
    from refimpl import _autocast
    from refimpl.autograd.graph_hooks import HOOKS

    state = (STATE.grad_enabled, STATE.inference_mode, list(HOOKS.stack),
             HOOKS.disabled_message, list(_LOCAL.tasks))
    autocast_state = _autocast.snapshot()  # backward runs under the caller's autocast state
    error: list = []
    done = threading.Event()
    waiter = _device_threads.current_worker()

    def work() -> None:
        _autocast.restore(autocast_state)
        STATE.grad_enabled, STATE.inference_mode = state[0], state[1]
        HOOKS.stack[:] = state[2]
        HOOKS.disabled_message = state[3]
        _LOCAL.tasks[:] = state[4]
        _LOCAL.depth = 1
        try:
            _execute(task, root)
        except BaseException as e:  # noqa: BLE001 (re-raised in the calling thread)
            error.append(e)
        finally:
            done.set()
            _device_threads.notify(waiter)

    worker = threading.Thread(target=work, name="refimpl-autograd-reentrant")
    worker.start()
    # a device thread keeps running the nodes handed to it meanwhile: the new thread
    # may hand it some
    _device_threads.wait(done)
    worker.join()
    if error:
        raise error[0]


# -- the public functions ----------------------------------------------------------------


def _as_tuple(x) -> tuple:
    from refimpl._tensor import Tensor

    if isinstance(x, (Tensor, GradientEdge)):
        return (x,)
    return tuple(x)


def _grads_tuple(grads, n: int) -> tuple:
    from refimpl._tensor import Tensor

    if grads is None:
        return (None,) * n
    if isinstance(grads, Tensor):
        return (grads,)
    return tuple(grads)


def _shape_str(shape) -> str:
    from refimpl._tensor import Size

    return repr(Size(shape))


def make_grads(outputs, grads, is_grads_batched: bool) -> tuple:
    """Validate given root gradients; create ``ones`` for scalar outputs."""
    from refimpl._tensor import Tensor
    from refimpl.ops.factories import ones

    new = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if isinstance(out, GradientEdge):
            shape, dtype, device = out.node._in_meta[out.output_nr]
            requires = True
        else:
            shape, dtype, device = out._shape, out.dtype, out.device
            requires = out.requires_grad
        if isinstance(g, Tensor):
            first = g._shape[1:] if is_grads_batched else g._shape
            if tuple(first) != tuple(shape):
                if is_grads_batched:
                    raise RuntimeError(
                        "If `is_grads_batched=True`, we interpret the first dimension of each "
                        "grad_output as the batch dimension. The sizes of the remaining "
                        "dimensions are expected to match the shape of corresponding output, "
                        f"but a mismatch was detected: grad_output[{i}] has a shape of "
                        f"{_shape_str(first)} and output[{i}] has a shape of "
                        f"{_shape_str(shape)}. If you only want some tensors in `grad_output` "
                        "to be considered batched, consider using vmap."
                    )
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_shape_str(first)} "
                    f"and output[{i}] has a shape of {_shape_str(shape)}."
                )
            if dtype.is_complex != g.dtype.is_complex:
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the "
                    f"same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of {g.dtype} "
                    f"and output[{i}] has a dtype of {dtype}."
                )
            new.append(g)
        elif g is None:
            if requires:
                numel = 1
                for d in shape:
                    numel *= d
                if numel != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not dtype.is_floating_point:
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs but got "
                        f"{dtype}"
                    )
                new.append(ones(shape, dtype=dtype, device=device))
            else:
                new.append(None)
        else:
            raise TypeError(
                f"gradients can be either Tensors or None, but got {type(g).__name__}"
            )
    return tuple(new)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the graph's leaves
    (or of ``inputs`` only)."""
    if grad_variables is not None:
        warnings.warn("'grad_variables' is deprecated. Use 'grad_tensors' instead.",
                      FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError(
                "'grad_tensors' and 'grad_variables' (deprecated) arguments both passed to "
                "`backward()`. Please only use `grad_tensors`."
            )
        grad_tensors = grad_variables
    if inputs is None:
        inputs_tuple = ()
    elif isinstance(inputs, dict):
        inputs_tuple = tuple(inputs.values())
    else:
        inputs_tuple = _as_tuple(inputs)
    if inputs is not None and not inputs_tuple:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors = _as_tuple(tensors)
    grads = make_grads(tensors, _grads_tuple(grad_tensors, len(tensors)), False)
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(tensors, grads, retain_graph, create_graph, inputs_tuple, True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated)."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    as_dict = isinstance(inputs, dict)
    inputs_tuple = tuple(inputs.values()) if as_dict else _as_tuple(inputs)
    if not inputs_tuple:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "torch.autograd.backward.", FutureWarning, stacklevel=2)
    grads = make_grads(outputs, _grads_tuple(grad_outputs, len(outputs)), is_grads_batched)
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        result = _batched_grad(outputs, grads, retain_graph, create_graph, inputs_tuple,
                               allow_unused)
    else:
        result = run_backward(outputs, grads, retain_graph, create_graph, inputs_tuple,
                              allow_unused, False)
    if materialize_grads:
        from refimpl._tensor import Tensor
        from refimpl.ops.factories import zeros

        if any(r is None and not isinstance(i, Tensor) for r, i in zip(result, inputs_tuple)):
            raise RuntimeError(
                "materialize_grads cannot be used when the given input is a GradientEdge"
            )
        result = tuple(
            r if r is not None else zeros(i._shape, dtype=i.dtype, device=i.device,
                                          requires_grad=create_graph)
            for r, i in zip(result, inputs_tuple))
    if as_dict:
        return dict(zip(inputs.keys(), result))
    return result


def _batched_grad(outputs, grads, retain_graph, create_graph, inputs, allow_unused):
    """``is_grads_batched``: one vector-Jacobian product per leading index, stacked."""
    import refimpl
    from refimpl._tensor import Tensor

    batch = next(g._shape[0] for g in grads if isinstance(g, Tensor))
    per_input: list = [[] for _ in inputs]
    for b in range(batch):
        gs = tuple(g[b] if isinstance(g, Tensor) else None for g in grads)
        res = run_backward(outputs, gs, True if b < batch - 1 else retain_graph, create_graph,
                           inputs, allow_unused, False)
        for k, r in enumerate(res):
            per_input[k].append(r)
    out = []
    for rs in per_input:
        if any(r is None for r in rs):
            out.append(None)
        else:
            out.append(refimpl.stack(rs))
    return tuple(out)


_warned_create_graph = False


def warn_backward_create_graph() -> None:
    """Tensor.backward(create_graph=True): torch's once-per-process reference-cycle warning."""
    global _warned_create_graph
    import refimpl

    always = getattr(refimpl, "is_warn_always_enabled", lambda: False)()
    if _warned_create_graph and not always:
        return
    _warned_create_graph = True
    warnings.warn(
        "Using backward() with create_graph=True will create a reference cycle between the "
        "parameter and its gradient which can cause a memory leak. We recommend using "
        "autograd.grad when creating the graph to avoid this. If you have to use this "
        "function, make sure to reset the .grad fields of your parameters to None after use "
        "to break the cycle and avoid the leak.", UserWarning, stacklevel=3)


# -- introspection of the running task ---------------------------------------------------


def current_graph_task():
    """The graph task this thread is running, or None."""
    tasks = _LOCAL.tasks
    return tasks[-1] if tasks else None


def current_graph_task_id() -> int:
    """Id of the running graph task, -1 outside backward."""
    task = current_graph_task()
    return -1 if task is None else task.id


def will_engine_execute_node(node) -> bool:
    """Whether the running backward will execute ``node``."""
    from refimpl._tensor import Tensor

    if isinstance(node, Tensor):
        raise RuntimeError(  # noqa: TRY004 (torch raises RuntimeError)
            "_will_engine_execute_node expects an grad_fn, but got Tensor")
    task = current_graph_task()
    if task is None:
        raise RuntimeError(
            "_get_should_execute_nodes should only be called during the backward pass"
        )
    if isinstance(node, AccumulateGrad) and task.needed is not None and task.captures:
        raise RuntimeError(
            "The gradients are never going to be accumulated in AccumulateGrad nodes, are you "
            "sure you are running autograd.grad()? Try using get_gradient_edge() on the tensor "
            "instead when you are currently running autograd.grad()."
        )
    return task.should_execute(node)


def current_graph_task_execution_order() -> list:
    """The nodes the running backward executes, in order (root excluded)."""
    task = current_graph_task()
    if task is None:
        raise RuntimeError(
            "_current_graph_task_execution_order should only be called during the backward "
            "pass"
        )
    if task.multithreading:
        raise RuntimeError(
            "get_current_graph_task_execution_order expects the current backward to be "
            "executed with multithreading disabled, e.g. by running:\n\n>>> with "
            "torch.autograd.set_multithreading_enabled(False):\n...     "
            "torch.autograd.grad(...)"
        )
    deps: dict = {}
    stack, seen = [task.root], {task.root}
    while stack:
        for e in stack.pop()._next:
            if e is not None:
                deps[e[0]] = deps.get(e[0], 0) + 1
                if e[0] not in seen:
                    seen.add(e[0])
                    stack.append(e[0])
    order = []
    heap = [(0, 0, task.root)]
    tick = itertools.count(1)
    while heap:
        node = heapq.heappop(heap)[2]
        if node is not task.root:
            order.append(node)
        for e in node._next:
            if e is None:
                continue
            deps[e[0]] -= 1
            if deps[e[0]] == 0 and task.should_execute(e[0]):
                heapq.heappush(heap, (-e[0]._seq, next(tick), e[0]))
    return order


def queue_callback(callback) -> None:
    """Run ``callback`` when the running backward finishes."""
    task = current_graph_task()
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    task.callbacks.append(callback)


class _ExecutionEngine:
    """``Variable._execution_engine``: the engine's Python-visible handle."""

    def queue_callback(self, callback) -> None:
        """Run ``callback`` at the end of the running backward."""
        queue_callback(callback)

    def is_checkpoint_valid(self) -> bool:
        """False while a grad() (not backward()) is running."""
        task = current_graph_task()
        return task is None or task.needed is None or not task.captures

