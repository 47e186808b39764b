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
    class G:
        def __init__(self, kind, index=None):
            self.device = type("D", (), {"type": kind, "index": index})()

    assert _device_threads.input_device([]) is None
    assert _device_threads.input_device([None, G("cpu"), G("cuda", 1), G("cuda", 0)]) == 1
    assert _device_threads.input_device([G("meta"), G("cuda", 0)]) is None
    assert _device_threads.input_device([G("cpu"), None]) is None
