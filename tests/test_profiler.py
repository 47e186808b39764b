"""refimpl.profiler internals: hooks, nesting, memory, kernels (with a fake driver), traces.

The behaviours torch shares are conformance cases (conformance/cases/profiler/); these
tests cover what only refimpl has: the hook points and their removal, the op-name data,
the kernel-timing bookkeeping (driven by a fake driver, since CI has no GPU), the
trace writer and the trace summary.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import refimpl as t
from refimpl import _dispatch
from refimpl.autograd import engine
from refimpl.cuda import _driver
from refimpl.ops._registry import REGISTRY
from refimpl.profiler import _collect, _cuda, _names, _summary
from refimpl.profiler._events import DeviceType
from refimpl.profiler._session import build_events

CPU = t.profiler.ProfilerActivity.CPU


def test_hooks_are_attached_only_while_recording() -> None:
    call = engine.GraphTask._call
    assert _dispatch.PROFILE_LAYER is None and _driver.LAUNCH_OBSERVER is None
    with t.profiler.profile(activities=[CPU]):
        assert _dispatch.PROFILE_LAYER is _collect.ACTIVE is not None
        assert engine.GraphTask._call is not call
    assert _dispatch.PROFILE_LAYER is None and _collect.ACTIVE is None
    assert engine.GraphTask._call is call


def test_a_second_session_while_one_records_is_refused() -> None:
    with (t.profiler.profile(activities=[CPU]),
          pytest.raises(RuntimeError, match="already enabled")):
        t.autograd.profiler.profile().__enter__()
    assert _collect.ACTIVE is None


def test_every_op_has_an_aten_name_and_the_name_table_names_real_ops() -> None:
    import refimpl.nn.functional  # noqa: F401 (registers the layer ops the table names)

    for name in REGISTRY:
        event = _names.profiler_name(name)
        assert event.startswith("aten::") and "." not in event, event
    assert set(_names.RENAMED) <= set(REGISTRY)
    assert set(_names.SCHEMA_ARITY) <= set(REGISTRY)
    assert _names.profiler_name("sum.dim_IntList") == "aten::sum"
    assert _names.profiler_name("_scatter_value") == "aten::scatter"


def test_nesting_self_times_and_inclusive_memory() -> None:
    x = t.ones(10, 10)
    with (t.profiler.profile(activities=[CPU], profile_memory=True) as p,
          t.profiler.record_function("block")):
        y = x.clone()
        z = y * 2
    events = p.events()
    block = next(e for e in events if e.name == "block")
    assert [c.name for c in block.cpu_children] == ["aten::clone", "aten::mul"]
    children = sum(c.cpu_time_total for c in block.cpu_children)
    assert block.self_cpu_time_total == pytest.approx(block.cpu_time_total - children)
    assert block.cpu_memory_usage == 800 and block.self_cpu_memory_usage == 0
    assert block.is_user_annotation and block.trace_name == "block"
    assert float(z.sum()) == 200.0


def test_ranges_left_open_are_closed_with_their_parent() -> None:
    with t.profiler.profile(activities=[CPU]) as p:
        outer = t.profiler.record_function("outer").__enter__()
        t.profiler.record_function("inner").__enter__()
        outer.__exit__(None, None, None)
    names = [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in p.events()]
    assert names == [("outer", None), ("inner", "outer")]


def test_record_function_outside_a_profile_records_nothing_and_checks_its_name() -> None:
    with t.profiler.record_function("alone"):
        pass
    with pytest.raises(RuntimeError, match="Expected a value of type 'str' for argument 'name'"):
        t.profiler.record_function(3).__enter__()


class FakeDriver:
    """Timing events of a fake device: each recorded event gets the next fake time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.clock_ms = 0.0
        self.times: dict[int, float] = {}
        self.next_event = 100
        self.destroyed: list[int] = []
        for name in ("synchronize", "event_create", "event_record", "event_synchronize",
                     "event_elapsed_ms", "event_destroy", "stream_capture_info", "_call",
                     "_load"):
            monkeypatch.setattr(_driver, name, getattr(self, name))

    def synchronize(self, device: int) -> None:
        pass

    def event_create(self, device: int, flags: int) -> int:
        self.next_event += 1
        return self.next_event

    def event_record(self, device: int, event: int, stream: int) -> None:
        self.clock_ms += 0.25
        self.times[event] = self.clock_ms

    def event_synchronize(self, device: int, event: int) -> None:
        pass

    def event_elapsed_ms(self, device: int, start: int, end: int) -> float:
        return self.times[end] - self.times[start]

    def event_destroy(self, device: int, event: int) -> None:
        self.destroyed.append(event)

    def stream_capture_info(self, device: int, stream: int) -> tuple[int, int]:
        return (1, 9) if stream == 99 else (0, 0)

    def _load(self, name: str) -> object:
        return type("D", (), {"CUfunction": staticmethod(int)})

    def _call(self, name: str, *args: object) -> bytes:
        assert name == "cuFuncGetName"
        return b"fake_kernel"


def test_kernel_times_come_from_events_on_the_launch_stream(monkeypatch) -> None:
    fake = FakeDriver(monkeypatch)
    collector = _collect.Collector(cuda=True, record_shapes=False, profile_memory=False,
                                   with_stack=False)
    _collect.install(collector)
    try:
        op = collector.open("aten::mul")
        _driver.LAUNCH_OBSERVER(0, 0xABC, 7, True)
        _driver.LAUNCH_OBSERVER(0, 0xABC, 7, False)
        _driver.LAUNCH_OBSERVER(0, 0xABC, 99, True)  # into a graph capture: not timed
        _driver.LAUNCH_OBSERVER(0, 0xABC, 99, False)
        collector.close(op)
    finally:
        _collect.uninstall(collector)
    assert _driver.LAUNCH_OBSERVER is None
    events = build_events(collector, "cuda", False)
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    assert [(k.name, k.thread) for k in kernels] == [("fake_kernel", 7)]
    assert kernels[0].time_range.elapsed_us() == pytest.approx(250.0)
    mul = next(e for e in events if e.name == "aten::mul")
    assert mul.device_time_total == pytest.approx(250.0)
    assert mul.self_device_time_total == pytest.approx(250.0)
    assert [c.name for c in mul.cpu_children] == ["cuLaunchKernel"]
    assert len(fake.destroyed) == 3  # the launch's two events and the reference


def test_chrome_trace_schema(tmp_path) -> None:
    x = t.ones(4, 4)
    with t.profiler.profile(activities=[CPU], record_shapes=True, profile_memory=True) as p:
        with t.profiler.record_function("step"):
            y = t.mm(x, x)
        del y
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert trace["schemaVersion"] == 1 and trace["traceName"] == str(path)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in complete} == {"cpu_op", "user_annotation"}
    for e in complete:
        assert isinstance(e["ts"], float | int) and e["dur"] >= 0 and e["pid"] and e["tid"]
    memory = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert [m["args"]["Bytes"] for m in memory] == [64, -64]
    assert [m["args"]["Total Allocated"] for m in memory] == [64, 0]


def test_summary_of_a_torch_trace_and_of_a_profile(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    a = torch.ones(8, 8)
    with (torch.profiler.profile(profile_memory=True) as p,
          torch.profiler.record_function("outer")):
        b = torch.mm(a, a)
        del b
    path = tmp_path / "torch.json"
    p.export_chrome_trace(str(path))
    summary = _summary.summarize_trace(_summary.load_trace(str(path)))
    rows = {r["name"]: r for r in summary["rows"]}
    assert rows["aten::mm"]["calls"] == 1 and rows["outer"]["calls"] == 1
    assert rows["outer"]["cpu_total_us"] >= rows["aten::mm"]["cpu_total_us"]
    assert rows["outer"]["self_cpu_us"] < rows["outer"]["cpu_total_us"]
    assert summary["memory"]["cpu"]["allocated_bytes"] >= 256
    zipped = tmp_path / "torch.json.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    assert _summary.summarize_trace(_summary.load_trace(str(zipped)))["rows"] == summary["rows"]

    with t.profiler.profile(activities=[CPU], profile_memory=True) as q:
        c = t.mm(t.ones(8, 8), t.ones(8, 8))
    mine = _summary.summarize_profile(q)
    mm = next(r for r in mine["rows"] if r["name"] == "aten::mm")
    assert mm["calls"] == 1 and mm["cpu_memory"] == 256
    assert mine["memory"]["cpu"]["allocations"] == 3
    assert float(c[0, 0]) == 8.0


@pytest.mark.parametrize("content, problem", [
    (b"{", "not valid JSON"),
    (b"[1, 2]", "trace event 0 is not an object"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}', "no numeric 'dur'"),
    (b'{"events": []}', "no traceEvents list"),
    (b"\x1f\x8bnot gzip", "not a readable gzip file"),
])
def test_bad_traces_are_named(tmp_path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(_summary.TraceError, match=problem):
        _summary.load_trace(str(path))


def test_kernel_names_are_read_once(monkeypatch) -> None:
    FakeDriver(monkeypatch)
    _cuda._names.clear()
    assert _cuda.kernel_name(0x10) == "fake_kernel"
    monkeypatch.setattr(_driver, "_call", lambda *a: b"other")
    assert _cuda.kernel_name(0x10) == "fake_kernel"
    _cuda._names.clear()


def test_shapes_follow_torch_schemas() -> None:
    with t.profiler.profile(activities=[CPU], record_shapes=True) as p:
        t.ones(2, 3).add(t.ones(2, 3))
        t.ones(2, 3).sum()
    shapes = {e.name: e.input_shapes for e in p.events() if e.name in ("aten::add", "aten::sum")}
    assert shapes == {"aten::add": [[2, 3], [2, 3], []], "aten::sum": [[2, 3], []]}
    assert np.isfinite(p.key_averages().self_cpu_time_total)


def _layer_step(lib):
    """A small CNN's and an attention block's training step under the profiler: the
    names of the aten events and of the autograd nodes it records."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    norm, mlp = nn.LayerNorm(8), nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    x, y = lib.randn(2, 3, 8, 8), lib.tensor([1, 3])
    s = lib.randn(2, 2, 4, 8, requires_grad=True)
    with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU]) as p:
        loss = F.cross_entropy(cnn(x), y)
        h = norm(s)
        h = F.scaled_dot_product_attention(h, h, h)
        loss = loss + mlp(h).softmax(-1).sum()
        loss.backward()
    return {e.name for e in p.events()
            if e.name.startswith("aten::") or e.name.endswith("Backward0")}


def test_layer_ops_record_torchs_names() -> None:
    # the one-op layer kernels show as the aten ops torch records for the same work
    # (native_batch_norm, _convolution, max_pool2d_with_indices, nll_loss_forward, ...),
    # never as refimpl's private names; batch norm's running statistics show no ops
    torch = pytest.importorskip("torch")
    ours, theirs = _layer_step(t), _layer_step(torch)
    assert ours <= theirs, sorted(ours - theirs)
    assert {"aten::native_batch_norm", "aten::_convolution", "aten::convolution_backward",
            "aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::nll_loss_forward",
            "aten::native_layer_norm_backward", "aten::gelu_backward", "aten::batch_norm",
            "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
            "aten::_softmax_backward_data"} <= ours
