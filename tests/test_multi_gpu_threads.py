"""The engine's device threads (``refimpl.autograd._device_threads``) without a GPU.

The workers only need their device selected when they start; these tests replace that
selection with a recorder and use device numbers no machine has, so that the real
workers of real devices are never touched. Engine integration runs on a GPU
(``tests/gpu/test_multi_gpu_gpu.py`` and ``conformance/cases/autograd/device_threads.yaml``).
"""

from __future__ import annotations

import threading

import pytest

from refimpl._state import STATE
from refimpl.autograd import _device_threads, engine
from refimpl.autograd.graph_hooks import HOOKS
from refimpl.cuda import _device

A, B = 90, 91  # simulated devices


@pytest.fixture(autouse=True)
def _fake_device_selection(monkeypatch):
    selected = []
    monkeypatch.setattr(_device, "set_device", selected.append)
    return selected


def test_runs_on_one_thread_per_device():
    here = threading.get_ident()
    a1 = _device_threads.run_on(A, threading.get_ident)
    a2 = _device_threads.run_on(A, threading.get_ident)
    b = _device_threads.run_on(B, threading.get_ident)
    assert a1 == a2 != here
    assert b not in (a1, here)
    assert _device_threads.run_on(A, lambda: threading.current_thread().name) == \
        f"refimpl-autograd-cuda:{A}"
    assert A in _device_threads._workers and B in _device_threads._workers


def test_thread_local_state_goes_along_and_comes_back():
    def read():
        return (STATE.grad_enabled, STATE.inference_mode, list(HOOKS.stack),
                engine.current_graph_task(), engine._LOCAL.depth)

    marker = object()
    pair = (len, len)
    prev = STATE.grad_enabled
    STATE.grad_enabled = False
    HOOKS.stack.append(pair)
    engine._LOCAL.tasks.append(marker)
    engine._LOCAL.depth += 3
    try:
        got = _device_threads.run_on(A, read)
        after = _device_threads.run_on(A, lambda: (list(HOOKS.stack), engine.current_graph_task()))
    finally:
        STATE.grad_enabled = prev
        HOOKS.stack.pop()
        engine._LOCAL.tasks.pop()
        engine._LOCAL.depth -= 3
    assert got[:4] == (False, False, [pair], marker)
    assert got[4] == engine._LOCAL.depth + 3
    # the caller's state is visible while the call runs, not left behind on the worker
    assert after == ([pair], marker)
    assert _device_threads.run_on(A, lambda: (list(HOOKS.stack), engine.current_graph_task())) \
        == ([], None)


def test_errors_reach_the_caller():
    def fail():
        raise ValueError("from the device thread")

    with pytest.raises(ValueError, match="from the device thread"):
        _device_threads.run_on(B, fail)
    assert _device_threads.run_on(B, lambda: 7) == 7  # the worker survives


def test_workers_waiting_on_each_other_do_not_deadlock():
    # A waits for B, which waits for A: A keeps running what is queued to it meanwhile
    trail = []

    def on_a_again():
        trail.append(("a", threading.current_thread().name))
        return 1

    def on_b():
        trail.append(("b", threading.current_thread().name))
        return _device_threads.run_on(A, on_a_again) + 10

    def on_a():
        trail.append(("a", threading.current_thread().name))
        return _device_threads.run_on(B, on_b) + 100

    assert _device_threads.run_on(A, on_a) == 111
    names = [name for _, name in trail]
    assert names == [f"refimpl-autograd-cuda:{A}", f"refimpl-autograd-cuda:{B}",
                     f"refimpl-autograd-cuda:{A}"]


def test_runs_here_only_on_its_own_worker():
    assert _device_threads.runs_here(A) is False
    assert _device_threads.run_on(A, _device_threads.runs_here, A) is True
    assert _device_threads.run_on(A, _device_threads.runs_here, B) is False


def test_wait_serves_the_queue_of_a_worker():
    # a reentrant handoff to a fresh thread from a worker: the fresh thread may hand
    # nodes back to the waiting worker
    def on_a():
        done = threading.Event()
        waiter = _device_threads.current_worker()
        out = []

        def fresh():
            out.append(_device_threads.run_on(A, lambda: threading.current_thread().name))
            done.set()
            _device_threads.notify(waiter)

        threading.Thread(target=fresh).start()
        _device_threads.wait(done)
        return out

    assert _device_threads.run_on(A, on_a) == [f"refimpl-autograd-cuda:{A}"]


def test_input_device_is_the_first_gradient_off_the_cpu():
    from refimpl._storage import UntypedStorage

    class G:
        _storage = UntypedStorage(0)  # a real (not fake) storage

        def __init__(self, kind, index=None):
            self.device = type("D", (), {"type": kind, "index": index})()

    assert _device_threads.input_device([]) is None
    assert _device_threads.input_device([None, G("cpu"), G("cuda", 1), G("cuda", 0)]) == 1
    assert _device_threads.input_device([G("meta"), G("cuda", 0)]) is None
    assert _device_threads.input_device([G("cpu"), None]) is None
    fake = G("cuda", 0)
    fake._storage = type("FakeStorage", (UntypedStorage,), {})(0)
    assert _device_threads.input_device([fake]) is None  # fake CUDA stays on the caller


# -- the engine with simulated devices ------------------------------------------------------
# Nodes are made to look like CUDA nodes (a stream that does nothing), and the device of
# their gradients is read from the dtype: float64 gradients are on device A, float16 ones
# on device B, float32 ones on the CPU.

@pytest.fixture
def simulated(monkeypatch):
    import contextlib

    import refimpl
    from refimpl.autograd import _streams, function, graph

    stream = object()
    monkeypatch.setattr(graph, "node_stream", lambda in_meta: stream)
    monkeypatch.setattr(function, "node_stream", lambda in_meta: stream)
    monkeypatch.setattr(_streams, "on_stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(_streams, "is_current", lambda s: True)
    monkeypatch.setattr(_streams, "sync_producer", lambda *args: None)
    monkeypatch.setattr(_streams, "sync_leaves", lambda streams: None)
    devices = {refimpl.float64: A, refimpl.float16: B}

    def input_device(inputs):
        for g in inputs:
            if g is not None:
                return devices.get(g.dtype)
        return None

    monkeypatch.setattr(_device_threads, "input_device", input_device)
    # every device's turn goes to its thread (the real rule needs a real device)
    monkeypatch.setattr(_device_threads, "may_run_here", lambda device: False)
    return refimpl


def _probe(refimpl, seen):
    class Probe(refimpl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append((str(g.dtype), threading.current_thread().name, refimpl.is_grad_enabled()))
            return g

    return Probe


def test_engine_runs_device_nodes_on_their_threads(simulated):
    refimpl = simulated
    seen = []
    probe = _probe(refimpl, seen)
    x = refimpl.ones(3, dtype=refimpl.float64, requires_grad=True)
    y = probe.apply(probe.apply(x).float())
    z = probe.apply(y.half()).float().sum()
    z.backward()
    main = threading.current_thread().name
    assert seen == [("torch.float16", f"refimpl-autograd-cuda:{B}", False),
                    ("torch.float32", main, False),
                    ("torch.float64", f"refimpl-autograd-cuda:{A}", False)]
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_engine_runs_a_devices_builtin_nodes_here_where_allowed(simulated, monkeypatch):
    # device A's turns may run on the task's thread, device B's may not: on A, nodes of
    # recorded ops run here, and the device thread takes the rest of the turn over from
    # a node with a hook or a custom backward; the order is the device threads' one
    refimpl = simulated
    monkeypatch.setattr(_device_threads, "may_run_here", lambda device: device == A)
    ran = []
    call = engine.call_function

    def record(node, inputs):
        ran.append((node.name(), threading.current_thread().name))
        return call(node, inputs)

    monkeypatch.setattr(engine, "call_function", record)
    seen = []
    probe = _probe(refimpl, seen)
    x = refimpl.ones(3, dtype=refimpl.float64, requires_grad=True)
    a = probe.apply(x * 2) * 3
    b = a * 4
    b.register_hook(lambda g: None)
    b.half().sum().backward()
    main = threading.current_thread().name
    on_a, on_b = f"refimpl-autograd-cuda:{A}", f"refimpl-autograd-cuda:{B}"
    assert ran == [("GraphRoot", main), ("SumBackward0", on_b), ("ToCopyBackward0", on_b),
                   ("MulBackward0", on_a), ("MulBackward0", on_a), ("ProbeBackward", on_a),
                   ("MulBackward0", on_a), ("torch::autograd::AccumulateGrad", on_a)]
    assert seen == [("torch.float64", on_a, False)]
    assert x.grad.tolist() == [24.0, 24.0, 24.0]

    ran.clear()
    (probe.apply(x * 2) * 3).sum().backward()
    assert ran == [("GraphRoot", main), ("SumBackward0", main), ("MulBackward0", main),
                   ("ProbeBackward", on_a), ("MulBackward0", on_a),
                   ("torch::autograd::AccumulateGrad", on_a)]
    assert x.grad.tolist() == [30.0, 30.0, 30.0]

    # a CPU node ends the device thread's turn; the next turn starts here again
    ran.clear()
    (probe.apply(x * 2).float() * 3).double().sum().backward()
    assert ran == [("GraphRoot", main), ("SumBackward0", main), ("ToCopyBackward0", main),
                   ("MulBackward0", main), ("ToCopyBackward0", main), ("ProbeBackward", on_a),
                   ("MulBackward0", on_a), ("torch::autograd::AccumulateGrad", on_a)]
    assert x.grad.tolist() == [36.0, 36.0, 36.0]

    # a leaf with a post-accumulate hook: only its AccumulateGrad goes to the device thread
    ran.clear()
    w = refimpl.ones(3, dtype=refimpl.float64, requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: None)
    (w * 5).sum().backward()
    assert ran == [("GraphRoot", main), ("SumBackward0", main), ("MulBackward0", main),
                   ("torch::autograd::AccumulateGrad", on_a)]
    assert w.grad.tolist() == [5.0, 5.0, 5.0]

    # the nodes run in the order they run in when the device threads run every turn
    def order(here: bool) -> list:
        monkeypatch.setattr(_device_threads, "may_run_here", lambda device: here and device == A)
        ran.clear()
        v = refimpl.ones(3, dtype=refimpl.float64, requires_grad=True)
        u = (probe.apply(v * 2).float() * 3 + (v * 4).float().exp()).double()
        (u.sum() + (v * 6).sum() + u.half().float().double().sum()).backward()
        return [name for name, _ in ran]

    assert order(True) == order(False)
    assert len(order(True)) == 20


def test_engine_with_multithreading_disabled_stays_on_the_caller(simulated):
    refimpl = simulated
    seen = []
    probe = _probe(refimpl, seen)
    x = refimpl.ones(3, dtype=refimpl.float64, requires_grad=True)
    with refimpl.autograd.set_multithreading_enabled(False):
        probe.apply(x).sum().backward()
    assert seen == [("torch.float64", threading.current_thread().name, False)]


def test_engine_create_graph_and_errors_cross_the_device_thread(simulated):
    refimpl = simulated
    x = refimpl.tensor([1.0, 2.0], dtype=refimpl.float64, requires_grad=True)
    (g,) = refimpl.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0] and g.requires_grad
    (gg,) = refimpl.autograd.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 12.0]

    class Fail(refimpl.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("blah from a device thread")

    with pytest.raises(RuntimeError, match="blah from a device thread"):
        Fail.apply(x).sum().backward()


def test_engine_reentrant_backward_from_a_device_thread(simulated):
    refimpl = simulated
    inner = []

    class Reentrant(refimpl.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.clone()

        @staticmethod
        def backward(ctx, g):
            with refimpl.enable_grad():
                for dtype in (refimpl.float64, refimpl.float16, refimpl.float32):
                    p = refimpl.ones(2, dtype=dtype, requires_grad=True)
                    (p * 3).sum().backward()
                    inner.append((str(dtype), p.grad.tolist(), threading.current_thread().name))
            return g

    x = refimpl.ones(2, dtype=refimpl.float64, requires_grad=True)
    Reentrant.apply(x).sum().backward()
    worker_a = f"refimpl-autograd-cuda:{A}"
    assert inner == [("torch.float64", [3.0, 3.0], worker_a),
                     ("torch.float16", [3.0, 3.0], worker_a),
                     ("torch.float32", [3.0, 3.0], worker_a)]
    assert x.grad.tolist() == [1.0, 1.0]


def test_engine_callbacks_queued_on_a_device_thread_run_at_the_end(simulated):
    refimpl = simulated
    order = []
    x = refimpl.ones(2, dtype=refimpl.float64, requires_grad=True)

    def hook(g):
        order.append(("hook", threading.current_thread().name))
        refimpl.autograd.Variable._execution_engine.queue_callback(
            lambda: order.append(("callback", threading.current_thread().name)))

    x.register_hook(hook)
    (x * 2).sum().backward()
    assert order == [("hook", f"refimpl-autograd-cuda:{A}"),
                     ("callback", threading.current_thread().name)]


def test_may_run_here_only_where_nothing_tells_the_threads_apart(monkeypatch):
    from refimpl import _dispatch
    from refimpl.autograd import saved
    from refimpl.cuda import _allocator
    from refimpl.cuda._allocator_pools import GraphPools, ThreadFilter

    class History:
        level = 0

    class Allocator:
        def __init__(self) -> None:
            self.graph_pools = GraphPools()
            self.history = History()

    allocator = Allocator()
    monkeypatch.setattr(_device, "current_device", lambda: A)
    monkeypatch.setattr(_allocator, "get_device_allocator", lambda index: allocator)
    assert _device_threads.may_run_here(A)
    assert not _device_threads.may_run_here(B)  # not this thread's current device

    def refused(obj, name, value) -> bool:
        with monkeypatch.context() as m:
            m.setattr(obj, name, value)
            return not _device_threads.may_run_here(A)

    assert refused(_dispatch, "PROFILE_LAYER", object())  # the profiler records thread ids
    assert refused(_dispatch, "MODE_STACK", [object()])  # a dispatch mode sees every op
    assert refused(saved, "HOOKED", True)  # a saved tensor unpacks through user hooks
    assert refused(HOOKS, "stack", [(len, len)])  # saved-tensor hooks are on
    assert refused(allocator.history, "level", 1)  # allocations record their stacks
    # one thread's allocations route into a private pool; a graph capture's streams do not
    # depend on the thread (warm-up and capture then run the nodes on the same thread)
    pools = allocator.graph_pools
    pools.begin((1, 1), lambda stream: stream == 7)
    assert _device_threads.may_run_here(A)
    pools.begin((1, 2), ThreadFilter())
    assert not _device_threads.may_run_here(A)
    pools.end((1, 2))
    pools.end((1, 1))
    assert _device_threads.may_run_here(A)
