"""Running one case in the current process: requirements, namespace, program, checks.

:func:`run_case` never raises for anything a case or a target does (only
KeyboardInterrupt gets through): every problem becomes a
:class:`~conformance.model.Result` with a message. Isolation between cases is a
fresh namespace per case; process-wide state of the target (warn-once flags, the
allocator, RNG state) is shared by the cases that one worker runs.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from conformance import checks, versions
from conformance.checks import CaseError, CaseTimeout, Context, describe_exception
from conformance.golden import GoldenError, GoldenStore
from conformance.inputs import build_inputs
from conformance.model import ERROR, FAILED, PASSED, SKIPPED, XFAILED, XPASSED, Case, Result
from conformance.targets import TargetInfo


def skip_reason(case: Case, info: TargetInfo) -> str | None:
    """Why ``case`` cannot run on the target described by ``info`` (None: it can)."""
    req = case.requires
    if req.targets is not None and info.name not in req.targets:
        return f"runs only on targets: {', '.join(req.targets)}"
    if req.torch and info.name == "torch" and not versions.in_range(info.version or "0", req.torch):
        return f"needs torch {req.torch}; target is torch {info.version}"
    if req.cuda and not info.cuda_available:
        return "needs CUDA; the target sees no CUDA device"
    if req.gpus and len(info.cuda_devices) < req.gpus:
        return f"needs {req.gpus} GPUs; the target sees {len(info.cuda_devices)}"
    return None


def capture(fn: Any) -> list[tuple[str, str]]:
    """Call ``fn()`` and return the warnings it raised as ``[(category_name, message)]``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [(w.category.__name__, str(w.message)) for w in caught]


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise CaseTimeout in the main thread after ``seconds`` (no-op elsewhere).

    An interval timer already running (pytest-timeout's, say) is restored afterwards
    with the time that is left on it.
    """
    usable = (
        seconds
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:
            left = max(outer_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def _program_location(case: Case, exc: BaseException) -> str:
    """`` (at path:line: `code`)`` for the innermost program line of a traceback."""
    lineno = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == checks.CODE_FILENAME:
            lineno = frame.lineno
    if lineno is None:
        return ""
    lines = case.program.splitlines()
    text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
    return f" (at {case.path}:{case.program_line + lineno - 1}: `{text}`)"


def _namespace(case: Case, adapter: Any) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The program's namespace, the numpy namespace of equals_np, and input failures."""
    ns: dict[str, Any] = {"__name__": "__case__", "np": np, "capture": capture}
    ns.update(adapter.namespace())
    np_ns: dict[str, Any] = {"np": np}
    for name, value in case.params.items():
        np_ns[name] = value
        if name == "dtype" or name.endswith("_dtype"):
            ns[name] = adapter.dtype(value)
            ns[f"{name}_name"] = value
        else:
            ns[name] = value
    try:
        tensors, arrays = build_inputs(case.inputs, case.id, adapter)
    except CaseTimeout:
        raise
    except Exception as exc:  # noqa: BLE001 - the target could not build an input
        return ns, np_ns, [f"building the inputs raised {describe_exception(exc)}"]
    ns.update(tensors)
    for name, array in arrays.items():
        ns[f"np_{name}"] = np_ns[f"np_{name}"] = array
    return ns, np_ns, []


def _memory_before(case: Case, adapter: Any) -> dict[tuple[str, str], int]:
    wanted = {
        (c.data["memory"]["stat"], c.data["memory"]["device"])
        for c in case.expect
        if c.kind == "memory" and "eval" not in c.data
    }
    return {key: adapter.memory_stat(*key) for key in wanted}


def _run_program(case: Case, adapter: Any, ctx: Context) -> list[str]:
    """Run the program, then its own raises/warns expectations and all checks."""
    raised: BaseException | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(checks.compiled(case.program, "exec"), ctx.ns)  # noqa: S102 - trusted case code
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            raised = exc
    ctx.program_warnings = list(caught)
    failures = []
    if case.raises is not None:
        problem = checks.match_exception(adapter, case.raises, raised)
        if problem:
            where = _program_location(case, raised) if raised is not None else ""
            failures.append(f"the program {problem}{where}")
    elif raised is not None:
        return [f"the program raised {describe_exception(raised)}{_program_location(case, raised)}"]
    if case.warns is not None:
        problem = checks.match_warnings(adapter, case.warns, ctx.program_warnings)
        if problem:
            failures.append(f"the program: {problem}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failures.extend(checks.run_checks(ctx))
    return failures


def run_case(
    case: Case,
    adapter: Any,
    info: TargetInfo,
    *,
    goldens: GoldenStore | None = None,
    record: bool = False,
    timeout: float | None = None,
) -> Result:
    """Run ``case`` on the target and return its Result.

    ``timeout`` (seconds) is enforced with SIGALRM when called in the main thread;
    ``goldens`` are compared for non-torch targets; ``record`` keeps the normalised
    values of a passed case in ``Result.values``.
    """
    start = time.perf_counter()
    reason = skip_reason(case, info)
    if reason is not None:
        return Result(case.id, SKIPPED, 0.0, reason)
    failures: list[str] = []
    ctx = None
    if case.requires.cuda:
        # objects an earlier case left to the garbage collector (CUDA graphs, streams)
        # must not be destroyed in the middle of this case (a capture, a memory delta)
        gc.collect()
    try:
        with time_limit(timeout):
            ns, np_ns, failures = _namespace(case, adapter)
            ctx = Context(case, adapter, ns, np_ns)
            if not failures:
                if goldens is not None and info.name != "torch":
                    stored = goldens.entry(case)
                    if stored is not None:
                        ctx.golden, ctx.golden_note = stored
                try:
                    ctx.memory_before = _memory_before(case, adapter)
                except Exception as exc:  # noqa: BLE001
                    failures = [f"reading memory stats raised {describe_exception(exc)}"]
                else:
                    failures = _run_program(case, adapter, ctx)
    except CaseTimeout:
        failures = [f"timed out after {timeout:g} s"]
    except (CaseError, GoldenError) as exc:
        return Result(case.id, ERROR, time.perf_counter() - start, f"case error: {exc}")
    except Exception as exc:  # noqa: BLE001 - the harness itself broke on this case
        text = "".join(traceback.format_exception(exc)).rstrip()
        return Result(case.id, ERROR, time.perf_counter() - start, f"internal error: {text}")
    duration = time.perf_counter() - start
    xfail = case.xfail_reason(info.name)
    if failures:
        message = "\n".join(failures)
        if xfail is not None:
            return Result(case.id, XFAILED, duration, f"xfail: {xfail}\n{message}")
        return Result(case.id, FAILED, duration, message)
    if xfail is not None:
        return Result(case.id, XPASSED, duration, f"passed but marked xfail: {xfail}")
    kept = ctx.values if record and ctx is not None else None
    return Result(case.id, PASSED, duration, "", kept)
