"""``torch.profiler``: profile a program's ops, ranges, GPU kernels and memory.

``profile`` records in cycles chosen by a ``schedule`` (wait, warmup, active, repeat,
skip_first; PROF-050); each active cycle is one ``refimpl.autograd.profiler.profile``
session, handed to ``on_trace_ready`` when it ends (``tensorboard_trace_handler`` writes
it as a Chrome trace file). Results: ``events()``, ``key_averages()`` and its
``table()``, ``export_chrome_trace(path)``. See spec/profiler.md.
"""

from __future__ import annotations

import enum
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Self

from refimpl.profiler._events import EventList
from refimpl.profiler._session import profile as _session
from refimpl.profiler._session import record_function

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    """What to record: host-side ops (CPU) and GPU kernels (CUDA)."""

    CPU = 0
    CUDA = 2


class ProfilerAction(enum.Enum):
    """What the profiler does at a step of its schedule."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def supported_activities() -> set[ProfilerActivity]:
    """CPU, and CUDA where a GPU is usable."""
    from refimpl import cuda

    found = {ProfilerActivity.CPU}
    if cuda.is_available():
        found.add(ProfilerActivity.CUDA)
    return found


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """The action of each step: ``skip_first`` steps of NONE, then cycles of ``wait``
    NONE, ``warmup`` WARMUP and ``active`` RECORD steps (the last RECORD_AND_SAVE),
    ``repeat`` times (0: without end). ``skip_first_wait`` drops the first cycle's wait.
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


_warned_clears = False  # the cycle warning is given once per process, as torch's


def _record_always(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each cycle to
    ``dir_name/<worker>.<ns>.pt.trace.json`` (``.gz`` when ``use_gzip``)."""

    def handler(prof: profile) -> None:
        nonlocal worker_name
        try:
            os.makedirs(dir_name, exist_ok=True)
        except OSError as exc:
            raise RuntimeError("Can't create directory: " + dir_name) from exc
        if not worker_name:
            worker_name = f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker_name}.{time.time_ns()}.pt.trace.json"
        path = os.path.join(dir_name, name)
        if not use_gzip:
            prof.export_chrome_trace(path)
            return
        import gzip
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, name)
            prof.export_chrome_trace(plain)
            with open(plain, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                dst.write(src.read())

    return handler


class profile:
    """Profile a block or a training loop (``torch.profiler.profile``).

    Used as a context manager, or with ``start()`` / ``step()`` / ``stop()``. Without a
    ``schedule`` it records from start to stop; with one, ``step()`` moves along it
    and each step is a ``ProfilerStep#N`` range.
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[[profile], Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None,
                 execution_trace_observer: Any = None, acc_events: bool = False,
                 use_cuda: bool | None = None,
                 custom_trace_id_callback: Callable | None = None) -> None:
        if activities is not None:
            acts = set()
            for act in activities:
                if act in acts:
                    raise ValueError(f"Activity {act} specified more than once")
                if isinstance(act, ProfilerActivity):  # others are dropped, as torch does
                    acts.add(act)
        else:
            acts = supported_activities()
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead",
                          FutureWarning, stacklevel=2)
            if use_cuda:
                acts.add(ProfilerActivity.CUDA)
            else:
                acts.discard(ProfilerActivity.CUDA)
        if not acts:
            raise AssertionError("No valid profiler activities found")
        self.activities = acts
        self.use_device = "cuda" if ProfilerActivity.CUDA in acts else None
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.acc_events = acc_events
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _record_always
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self.profiler: _session | None = None
        self._step_range: record_function | None = None
        self._recording = False

    # -- the session of one cycle -------------------------------------------------------

    def _prepare(self) -> None:
        global _warned_clears
        if self.profiler is not None and not self.acc_events and not _warned_clears:
            _warned_clears = True
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle. Only events from "
                "the current cycle will be reported. To keep events across cycles, set "
                "acc_events=True.", stacklevel=3)
        if self.profiler is None or not self.acc_events:
            self.profiler = _session(
                use_device=self.use_device, record_shapes=self.record_shapes,
                profile_memory=self.profile_memory, with_stack=self.with_stack,
                with_flops=self.with_flops, acc_events=self.acc_events)

    def _start_trace(self) -> None:
        if self.profiler is None:
            self._prepare()
        if self.profiler is not None and not self._recording:
            self.profiler.entered = False
            self.profiler._start()
            self._recording = True

    def _stop_trace(self) -> None:
        if self.profiler is not None and self._recording:
            self.profiler._stop()
            self._recording = False

    def _trace_ready(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _transit(self, prev: ProfilerAction | None, now: ProfilerAction | None) -> None:
        """Act on a change of schedule action (the transitions torch's profiler takes)."""
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev == A.RECORD_AND_SAVE:
            self._stop_trace()
            self._trace_ready()
            if now in (A.WARMUP,) + recording:
                self._prepare()
            if now in recording:
                self._start_trace()
            return
        if prev == A.RECORD:
            if now in (A.NONE, A.WARMUP):
                warnings.warn(f"Incorrect schedule: RECORD followed by {now.name}",
                              stacklevel=3)
                self._stop_trace()
            elif now is None:
                self._stop_trace()
                self._trace_ready()
            return
        if prev == A.WARMUP:
            if now == A.NONE:
                warnings.warn("Incorrect schedule: WARMUP followed by NONE", stacklevel=3)
            if now in recording:
                self._start_trace()
            elif now in (A.NONE, None):
                self._start_trace()
                self._stop_trace()
            return
        if prev == A.NONE:
            if now in (A.WARMUP,) + recording:
                self._prepare()
            if now in recording:
                self._start_trace()

    # -- the public control -------------------------------------------------------------

    def start(self) -> None:
        """Begin at step 0 of the schedule."""
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._enter_step()

    def stop(self) -> None:
        """End the profile (the last cycle is handed to ``on_trace_ready`` if recording)."""
        self._exit_step()
        self._transit(self.current_action, None)

    def step(self) -> None:
        """Mark the start of the next step and act on the schedule's action for it."""
        self._exit_step()
        prev = self.current_action
        action = self.schedule(self.step_num + 1)
        if action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError(
                "ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must "
                "not be returned by a user-provided schedule")
        self.step_num += 1
        self.current_action = action
        self._transit(prev, action)
        if self.record_steps:
            self._enter_step()

    def _enter_step(self) -> None:
        self._step_range = record_function(f"ProfilerStep#{self.step_num}")
        self._step_range.__enter__()

    def _exit_step(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        self.stop()
        return False

    # -- results ------------------------------------------------------------------------

    def _results(self) -> _session:
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        return self.profiler

    def events(self) -> EventList:
        """The recorded events of the last cycle (FunctionEvent objects)."""
        return self._results().function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged by name (and input shapes, stack frames, overload)."""
        return self._results().key_averages(group_by_input_shape, group_by_stack_n,
                                            group_by_overload_name)

    def export_chrome_trace(self, path: str) -> None:
        """Write the last cycle as a Chrome trace-event JSON file."""
        self._results().export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write ``frame;frame;... value`` lines (flame graph input) for ``metric``."""
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        metrics = ("self_cpu_time_total", "self_cuda_time_total")
        if metric not in metrics:
            raise ValueError("metric should be one of: " + str(list(metrics)))
        attr = metric.replace("cuda", "device")
        with open(path, "w", encoding="utf-8") as f:
            for event in self.events():
                value = int(getattr(event, attr))
                if event.stack and value > 0:
                    frames = ";".join(s.replace(" ", "_") for s in reversed(event.stack))
                    f.write(f"{frames} {value}\n")
