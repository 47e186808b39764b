"""The profiler on a real GPU: kernel times, device memory, traces, the CLI's CUDA view.

A small CUDA program (elementwise ops, a reduction, a backward) is profiled with the
CUDA activity: every kernel refimpl launched must be an event of device type CUDA with a
positive duration on the stream where it ran, counted in its op's device time; the
table must show the CUDA columns and the trace the kernels. Skipped without a GPU.
"""

from __future__ import annotations

import json

import pytest

import refimpl as t
from refimpl.profiler._events import DeviceType

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

A = t.profiler.ProfilerActivity


def _program():
    x = t.ones(1 << 16, device="cuda", requires_grad=True)
    y = (x * 2 + 1).relu()
    loss = y.sum()
    loss.backward()
    return x.grad


def test_kernels_have_positive_times_on_their_stream(tmp_path) -> None:
    _program()  # compile the kernels outside the profile
    with t.profiler.profile(activities=[A.CPU, A.CUDA], profile_memory=True) as p:
        grad = _program()
    events = p.events()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    assert len(kernels) >= 4
    assert all(k.time_range.elapsed_us() > 0 for k in kernels)
    stream = t.cuda.current_stream().cuda_stream
    assert {k.thread for k in kernels} == {stream}
    mul = next(e for e in events if e.name == "aten::mul")
    assert mul.device_time_total > 0 and mul.kernels
    launches = [e for e in events if e.name == "cuLaunchKernel"]
    assert len(launches) == len(kernels)
    table = p.key_averages().table(sort_by="cuda_time_total", row_limit=20)
    assert "Self CUDA" in table and "CUDA Mem" in table
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel") == len(kernels)
    assert float(grad.sum()) == 2.0 * (1 << 16)


def test_kernels_on_a_side_stream_are_timed_there() -> None:
    side = t.cuda.Stream()
    x = t.ones(4096, device="cuda")
    with t.profiler.profile(activities=[A.CPU, A.CUDA]) as p:
        with t.cuda.stream(side):
            y = x * 3
        side.synchronize()
    kernels = [e for e in p.events() if e.device_type == DeviceType.CUDA]
    assert kernels and {k.thread for k in kernels} == {side.cuda_stream}
    assert all(k.time_range.elapsed_us() > 0 for k in kernels)
    assert float(y.sum()) == 3.0 * 4096
