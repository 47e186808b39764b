"""The engine's device threads (spec: STREAM-304): one worker thread per CUDA device.

As in torch, a node whose incoming gradients live on CUDA device ``d`` (the first
non-CPU gradient of its input buffer decides) runs on the worker thread of device ``d``,
whose current device is ``d``; nodes whose gradients are on the CPU (the graph root
included) run on the thread that owns the graph task. The workers start on first use,
one per device, and live as long as the process (daemon threads).

refimpl keeps the scheduling of a graph task (dependency counts, input buffers, the
order of ready nodes) on the owning thread and hands each device node to its worker,
waiting for the result. A thread that waits and is itself a worker keeps running the
nodes queued to it meanwhile, so a reentrant backward started inside a device node
(on its worker) can reach any device, that one included, without a deadlock: its
nodes of the worker's own device run inline. The thread-local state that torch carries
into its workers goes along with each node: grad mode (``create_graph``), inference
mode, forward-grad mode, the saved-tensor hooks, the running graph tasks and the
reentrant depth.

A thread switch costs two wake-ups and runs the device's nodes on a core whose caches
hold none of the forward's objects: a small model's CUDA training step was 10-15%
slower for it on an H200. So refimpl hands a device's turn to its worker only where the
threads can be told apart (:func:`may_run_here`): a node that runs user code (a custom
Function's backward, any hook) always runs on the worker, as in torch; a node that runs
only refimpl's own code (recorded ops, views, AccumulateGrad without hooks) runs on the
task's thread when that thread is on the node's device and nothing that could see the
difference is on: the profiler (its events carry thread ids), a dispatch mode,
saved-tensor hooks (from the first tensor they pack on, for the rest of the process: a
node's saved tensors are not searched for them), the allocator's stack recording, and
its routing of one thread's allocations into a private pool
(``_cuda_beginAllocateCurrentThreadToPool``). A graph
capture routes by stream, so the nodes run where they ran in the warm-up before it: the
same thread makes the same first calls (a cuBLAS handle, say, cannot be created while a
stream captures).

With multithreading disabled (``set_multithreading_enabled(False)``) the engine never
calls here and every node runs on the calling thread.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from refimpl._storage import UntypedStorage

_WAKE = object()  # queued to a waiting worker when the node it waits for is done


class _Worker:
    """The thread of one device and the queue of nodes handed to it."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._main, name=f"refimpl-autograd-cuda:{device}",
                                       daemon=True)
        self.thread.start()

    def _main(self) -> None:
        from refimpl.cuda import _device

        _device.set_device(self.device)
        _TLS.worker = self
        while True:
            item = self.queue.get()
            if item is not _WAKE:
                item.run()
            item = None  # an idle worker holds no node, gradient or result


class _ThreadWorker(threading.local):
    """The worker this thread is (None on every other thread)."""

    worker: _Worker | None = None


_TLS = _ThreadWorker()
_workers: dict[int, _Worker] = {}
_workers_lock = threading.Lock()


def _worker(device: int) -> _Worker:
    worker = _workers.get(device)
    if worker is None:
        with _workers_lock:
            worker = _workers.get(device)
            if worker is None:
                worker = _workers[device] = _Worker(device)
    return worker


def input_device(inputs: list) -> int | None:
    """The CUDA device a node's gradients arrive on (torch's ``InputBuffer::device``):
    the device of its first gradient not on the CPU; None when all are on the CPU (or
    on the meta device, which torch also keeps on the owning thread). Fake CUDA tensors
    stay on the owning thread too: they need no device, and none may exist."""
    for g in inputs:
        if g is not None:
            dev = g.device
            if dev.type == "cuda":
                return dev.index if g._storage.__class__ is UntypedStorage else None
            if dev.type != "cpu":
                return None
    return None


_MODULES = None  # the modules may_run_here reads, bound on its first call (they import us)


def _bind_modules() -> tuple:
    global _MODULES
    from refimpl import _dispatch
    from refimpl.autograd import saved
    from refimpl.autograd.graph_hooks import HOOKS
    from refimpl.cuda import _allocator, _device

    _MODULES = (_dispatch, saved, HOOKS, _allocator, _device)
    return _MODULES


def may_run_here(device: int) -> bool:
    """Whether the calling thread may run ``device``'s nodes that run only refimpl's
    code itself, instead of handing them to the device's worker (see the module
    docstring: nothing that could tell the threads apart is on)."""
    _dispatch, saved, HOOKS, _allocator, _device = _MODULES or _bind_modules()
    if (_dispatch.PROFILE_LAYER is not None or _dispatch.MODE_STACK or saved.HOOKED
            or HOOKS.stack or _device.current_device() != device):
        return False
    allocator = _allocator.get_device_allocator(device)
    return not allocator.history.level and not allocator.graph_pools.route_by_thread()


def runs_here(device: int) -> bool:
    """Whether the calling thread is the worker of ``device``."""
    worker = _TLS.worker
    return worker is not None and worker.device == device


class _Job:
    """One node to evaluate on a worker, with the caller's thread-local state."""

    def __init__(self, fn, args: tuple, waiter: _Worker | None) -> None:
        from refimpl._state import STATE
        from refimpl.autograd import engine
        from refimpl.autograd.graph_hooks import HOOKS

        self.fn = fn
        self.args = args
        self.state = (STATE.grad_enabled, STATE.inference_mode, STATE.fw_grad_enabled,
                      list(HOOKS.stack), HOOKS.disabled_message, list(engine._LOCAL.tasks),
                      engine._LOCAL.depth, STATE.stash)
        from refimpl import _autocast

        self.autocast = _autocast.snapshot()  # backward runs under the caller's autocast
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.waiter = waiter

    def run(self) -> None:
        from refimpl._state import STATE
        from refimpl.autograd import engine
        from refimpl.autograd.graph_hooks import HOOKS

        local = engine._LOCAL
        saved = (STATE.grad_enabled, STATE.inference_mode, STATE.fw_grad_enabled,
                 list(HOOKS.stack), HOOKS.disabled_message, local.tasks, local.depth,
                 STATE.stash)
        (STATE.grad_enabled, STATE.inference_mode, STATE.fw_grad_enabled, stack,
         HOOKS.disabled_message, local.tasks, local.depth, STATE.stash) = self.state
        HOOKS.stack[:] = stack
        from refimpl import _autocast

        saved_autocast = _autocast.snapshot()
        _autocast.restore(self.autocast)
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # noqa: BLE001 (re-raised on the waiting thread)
            self.error = e
        finally:
            self.fn = self.args = None  # the node and its gradients go with the caller
            (STATE.grad_enabled, STATE.inference_mode, STATE.fw_grad_enabled, stack,
             HOOKS.disabled_message, local.tasks, local.depth, STATE.stash) = saved
            HOOKS.stack[:] = stack
            _autocast.restore(saved_autocast)
            self.done.set()
            notify(self.waiter)


def current_worker() -> _Worker | None:
    """The worker the calling thread is, or None."""
    return _TLS.worker


def notify(waiter: _Worker | None) -> None:
    """Wake ``waiter`` (a worker blocked in :func:`wait`) once what it waits for is done."""
    if waiter is not None:
        waiter.queue.put(_WAKE)


def wait(done: threading.Event) -> None:
    """Block until ``done`` is set; a worker keeps running the nodes queued to it (the
    setter calls :func:`notify` with it)."""
    me = _TLS.worker
    if me is None:
        done.wait()
        return
    while not done.is_set():
        item = me.queue.get()
        if item is not _WAKE:
            item.run()
        item = None


def run_on(device: int, fn, *args):
    """Run ``fn(*args)`` on the worker of ``device`` and return its result (or raise its
    exception) on the calling thread."""
    job = _Job(fn, args, _TLS.worker)
    _worker(device).queue.put(job)
    wait(job.done)
    error, result = job.error, job.result
    job.error = job.result = None
    if error is not None:
        raise error
    return result
