"""Running many cases: in this process, or in a pool of long-lived worker processes.

With ``jobs >= 1`` the cases run in that many worker processes. Each worker
imports the target once, then receives cases in small batches and sends back one
result per case, so the parent always knows which case a worker is running. A
worker that dies (a segfault in the target, say) costs only the case it was
running (reported as an error); a case that overruns its timeout is stopped by
SIGALRM inside the worker, and if that does not work the parent kills the worker
after a grace period. Either way a fresh worker takes over the rest.

``jobs == 0`` runs everything in the calling process (no crash isolation), which
is what the pytest plugin and debuggers want.

Cases marked ``exclusive`` (they use or measure memory of the whole device: a 4 GiB
tensor, ``mem_get_info``, NVML's used memory) run after all the others, one at a time
in a single worker, so that no other case shares the device with them.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from conformance.execute import run_case
from conformance.golden import GOLDEN_DIR, GoldenStore
from conformance.model import ERROR, FAILED, SKIPPED, Case, Result
from conformance.preload import PRELOAD_ENV
from conformance.report import is_bad
from conformance.targets import (
    ADAPTERS,
    Adapter,
    TargetImportError,
    TargetInfo,
    load_target,
    target_missing,
)

#: Seconds a worker may overrun a case's timeout before the parent kills it.
KILL_GRACE = 10.0
#: Seconds a worker may take to start and import the target.
START_TIMEOUT = 300.0
_CAPTURE_LIMIT = 4000


class TargetUnavailable(Exception):
    """The target cannot be used at all (its import failed or crashed)."""


@dataclass
class RunOptions:
    """How to run: the target, parallelism, timeouts and goldens."""

    target: str = "refimpl"
    jobs: int = 1
    timeout: float = 60.0
    fail_fast: bool = False
    record: bool = False
    golden_dir: Path | None = GOLDEN_DIR
    batch_size: int = 8
    kill_grace: float = KILL_GRACE


@dataclass
class RunResult:
    """Every case that ran, with its result, and facts about the run."""

    info: TargetInfo
    pairs: list[tuple[Case, Result]] = field(default_factory=list)
    not_run: int = 0
    duration: float = 0.0
    notice: str | None = None
    worker_start: float = 0.0


OnResult = Callable[[Case, Result], None]


def run(cases: Sequence[Case], options: RunOptions, on_result: OnResult | None = None) -> RunResult:
    """Run ``cases`` on ``options.target``; raises TargetUnavailable if it cannot import."""
    start = time.perf_counter()
    if options.target == "torch" and target_missing("torch"):
        info = TargetInfo(name="torch")
        notice = f"torch is not installed: skipping all {len(cases)} cases of target torch"
        pairs = [(c, Result(c.id, SKIPPED, 0.0, "torch is not installed")) for c in cases]
        for case, result in pairs:
            if on_result:
                on_result(case, result)
        return RunResult(info, pairs, notice=notice, duration=time.perf_counter() - start)
    if target_missing(options.target):
        raise TargetUnavailable(
            f"cannot import target {options.target!r}: no module named {options.target!r}"
        )
    if options.jobs <= 0:
        result = _run_here(cases, options, on_result)
    else:
        result = _run_pooled(cases, options, on_result)
    result.duration = time.perf_counter() - start
    return result


def _run_pooled(cases: Sequence[Case], options: RunOptions,
                on_result: OnResult | None) -> RunResult:
    """The shared cases in ``options.jobs`` workers, then the exclusive ones in one."""
    alone = [c for c in cases if c.exclusive]
    shared = [c for c in cases if not c.exclusive]
    if not alone or not shared:
        return _Pool(cases, replace(options, jobs=1) if alone else options, on_result).run()
    first = _Pool(shared, options, on_result).run()
    if options.fail_fast and (first.not_run or any(is_bad(r) for _, r in first.pairs)):
        first.not_run += len(alone)
        return first
    second = _Pool(alone, replace(options, jobs=1), on_result).run()
    order = {id(c): i for i, c in enumerate(cases)}
    first.pairs = sorted(first.pairs + second.pairs, key=lambda pair: order[id(pair[0])])
    first.not_run += second.not_run
    return first


def _run_here(cases: Sequence[Case], options: RunOptions, on_result: OnResult | None) -> RunResult:
    try:
        adapter = load_target(options.target)
    except TargetImportError as exc:
        raise TargetUnavailable(str(exc)) from None
    info = adapter.info()
    goldens = GoldenStore(options.golden_dir)
    out = RunResult(info)
    for i, case in enumerate(cases):
        result = run_case(
            case, adapter, info, goldens=goldens, record=options.record,
            timeout=case.timeout or options.timeout,
        )  # fmt: skip
        out.pairs.append((case, result))
        if on_result:
            on_result(case, result)
        if options.fail_fast and is_bad(result):
            out.not_run = len(cases) - i - 1
            break
    return out


# -- the worker side ----------------------------------------------------------------


def _worker_main(
    conn: Any, target: str, golden_dir: str | None, record: bool, path: list[str]
) -> None:
    """Entry point of a worker process: import the target once, then run batches."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    sys.path[:] = path  # the target is found where the parent would find it
    try:
        adapter = load_target(target)
        info = adapter.info()
    except TargetImportError as exc:
        conn.send(("import-error", str(exc)))
        return
    conn.send(("ready", info))
    goldens = GoldenStore(golden_dir)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        for index, case, timeout in message:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                result = run_case(
                    case, adapter, info, goldens=goldens, record=record, timeout=timeout
                )
            output = buffer.getvalue()
            if output and is_bad(result):
                result.message += "\ncaptured output:\n" + output[-_CAPTURE_LIMIT:]
            conn.send(("result", index, result))


# -- the parent side ----------------------------------------------------------------


def _mp_context(target: str) -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # The fork server imports the engine (numpy, yaml) once, and the target too when
    # its adapter says that forking after its import is safe; workers fork from it.
    # The server starts once per process, so the first run's target is the one kept.
    context.set_forkserver_preload(["conformance.runner", "conformance.preload"])
    previous = os.environ.get(PRELOAD_ENV)
    if ADAPTERS.get(target, Adapter).preload:
        os.environ[PRELOAD_ENV] = target
    try:
        multiprocessing.forkserver.ensure_running()  # reads the environment once
    finally:
        if previous is None:
            os.environ.pop(PRELOAD_ENV, None)
        else:
            os.environ[PRELOAD_ENV] = previous
    return context


@dataclass
class _Worker:
    process: Any
    conn: Any
    pending: deque = field(default_factory=deque)
    ready: bool = False
    since: float = 0.0  # when the case at pending[0] started (at the latest)


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _Pool:
    """The parent's bookkeeping: queue of case indices, workers, results."""

    def __init__(self, cases: Sequence[Case], options: RunOptions, on_result: OnResult | None):
        self.cases = cases
        self.options = options
        self.on_result = on_result
        self.queue: deque[int] = deque(range(len(cases)))
        self.results: list[Result | None] = [None] * len(cases)
        self.workers: list[_Worker] = []
        self.context = _mp_context(options.target)
        self.info: TargetInfo | None = None
        self.stopped = False
        self.started_at = time.perf_counter()
        self.ready_at = 0.0

    def _spawn(self) -> None:
        parent_conn, child_conn = self.context.Pipe(duplex=True)
        golden = None if self.options.golden_dir is None else str(self.options.golden_dir)
        process = self.context.Process(
            target=_worker_main,
            args=(child_conn, self.options.target, golden, self.options.record, list(sys.path)),
            daemon=True,
        )
        try:
            process.start()
        except (OSError, EOFError) as exc:
            raise TargetUnavailable(f"cannot start a worker process: {exc}") from None
        finally:
            child_conn.close()
        self.workers.append(_Worker(process, parent_conn, since=time.monotonic()))

    def _timeout_of(self, index: int) -> float:
        return self.cases[index].timeout or self.options.timeout

    def _feed(self, worker: _Worker) -> None:
        if self.stopped or not worker.ready or len(worker.pending) > 1 or not self.queue:
            return
        share = -(-len(self.queue) // (2 * max(1, len(self.workers))))
        size = max(1, min(self.options.batch_size, share))
        batch = []
        while self.queue and len(batch) < size:
            index = self.queue.popleft()
            batch.append((index, self.cases[index], self._timeout_of(index)))
            worker.pending.append(index)
        if len(worker.pending) == len(batch):
            worker.since = time.monotonic()
        worker.conn.send(batch)

    def _finish(self, index: int, result: Result) -> None:
        self.results[index] = result
        if self.on_result:
            self.on_result(self.cases[index], result)
        if self.options.fail_fast and is_bad(result):
            self.stopped = True

    def _handle(self, worker: _Worker, message: tuple) -> None:
        kind = message[0]
        if kind == "ready":
            worker.ready = True
            worker.since = time.monotonic()
            if self.info is None:
                self.info = message[1]
                self.ready_at = time.perf_counter()
            self._feed(worker)
        elif kind == "import-error":
            raise TargetUnavailable(message[1])
        elif kind == "result":
            _, index, result = message
            if worker.pending and worker.pending[0] == index:
                worker.pending.popleft()
            worker.since = time.monotonic()
            self._finish(index, result)
            self._feed(worker)

    def _drain(self, worker: _Worker) -> bool:
        """Read every message available; False once the worker's pipe is closed."""
        try:
            while worker.conn.poll():
                self._handle(worker, worker.conn.recv())
        except (EOFError, OSError):
            return False
        return True

    def _replace(self, worker: _Worker, reason: str, outcome: str) -> None:
        """Drop a dead or stuck worker: its running case gets ``reason``, the rest requeue."""
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(5)
        worker.conn.close()
        self.workers.remove(worker)
        if not worker.ready:
            raise TargetUnavailable(
                f"target {self.options.target!r} crashed while importing "
                f"({_describe_exit(worker.process.exitcode)})"
            )
        if worker.pending:
            index = worker.pending.popleft()
            elapsed = time.monotonic() - worker.since
            self._finish(index, Result(self.cases[index].id, outcome, elapsed, reason))
            self.queue.extendleft(reversed(worker.pending))
        if self.queue and not self.stopped:
            self._spawn()

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            if not worker.ready:
                if now - worker.since > START_TIMEOUT:
                    raise TargetUnavailable(
                        f"target {self.options.target!r} took over {START_TIMEOUT:g} s to import"
                    )
                continue
            if worker.pending:
                limit = self._timeout_of(worker.pending[0])
                if now - worker.since > limit + self.options.kill_grace:
                    self._replace(worker, f"timed out after {limit:g} s (worker killed)", FAILED)

    def _loop(self) -> None:
        while not self.stopped and (self.queue or any(w.pending for w in self.workers)):
            by_handle: dict[Any, _Worker] = {}
            for worker in self.workers:
                by_handle[worker.conn] = worker
                by_handle[worker.process.sentinel] = worker
            dead: list[_Worker] = []
            for handle in multiprocessing.connection.wait(list(by_handle), timeout=0.5):
                worker = by_handle[handle]
                if worker in dead or worker not in self.workers:
                    continue
                if not self._drain(worker) or handle == worker.process.sentinel:
                    dead.append(worker)
            for worker in dead:
                if worker in self.workers:
                    worker.process.join(1)
                    code = worker.process.exitcode
                    reason = f"worker process died ({_describe_exit(code)}) while running this case"
                    self._replace(worker, reason, ERROR)
            self._check_deadlines()

    def _shutdown(self) -> None:
        for worker in self.workers:
            if self.stopped:
                worker.process.kill()  # fail-fast: do not wait for batches in flight
            else:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
        deadline = time.monotonic() + 2
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(1)
            worker.conn.close()
        self.workers.clear()

    def run(self) -> RunResult:
        """Run every case; the workers are gone when this returns."""
        if not self.cases:
            return RunResult(TargetInfo(self.options.target))
        try:
            for _ in range(min(self.options.jobs, len(self.cases))):
                self._spawn()
            self._loop()
        finally:
            self._shutdown()
        out = RunResult(self.info or TargetInfo(self.options.target))
        out.pairs = [(c, r) for c, r in zip(self.cases, self.results, strict=True) if r is not None]
        out.not_run = len(self.cases) - len(out.pairs)
        out.worker_start = self.ready_at - self.started_at if self.ready_at else 0.0
        return out


def default_jobs() -> int:
    """Worker processes used when ``-j`` is not given: one per CPU, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))
