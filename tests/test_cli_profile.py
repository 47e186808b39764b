"""``tensorctl profile``: runs under the profiler and trace summaries, through CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from cli.profile import profile
from refimpl.cuda import _allocator

SCRIPT = """
import refimpl as t
x = t.ones(16, 8)
w = t.ones(8, 4, requires_grad=True)
for _ in range(2):
    loss = (x @ w).relu().sum()
    loss.backward()
"""


def invoke(*args: str) -> object:
    return CliRunner().invoke(profile, list(args), catch_exceptions=False)


def assert_one_line_error(result: object, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("tensorctl profile: ") and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_profile_is_a_tensorctl_command() -> None:
    result = CliRunner().invoke(cli, ["profile", "--help"])
    assert result.exit_code == 0 and "profile run SCRIPT" in result.output


def test_run_prints_the_ops_memory_and_writes_the_trace(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    trace = tmp_path / "out.json"
    # the allocator view: none unless this process has used CUDA (GPU machines)
    allocator_view = "memory summary" if _allocator.device_allocators() else "no CUDA allocation"
    result = invoke("run", "--trace", str(trace), "--row-limit", "-1", str(script))
    assert result.exit_code == 0, result.output
    for text in ("exited normally", "aten::mm", "MmBackward0", "Memory seen by the profiler",
                 allocator_view):
        assert text in result.output
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "aten::mm") == 4  # 2 forward, 2 backward (only w needs a gradient)


def test_run_json_and_the_script_status(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(SCRIPT + "\nraise SystemExit(3)\n")
    result = invoke("run", "--json", "--trace", str(tmp_path / "t.json"), str(script))
    assert result.exit_code == 3
    summary = json.loads(result.output)
    rows = {r["name"]: r for r in summary["rows"]}
    assert rows["aten::mm"]["calls"] == 4 and rows["aten::relu"]["calls"] == 2
    assert summary["memory"]["cpu"]["allocations"] > 0


def test_show_summarises_a_torch_trace(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    a = torch.ones(8, 8)
    with torch.profiler.profile() as p:
        torch.mm(a, a)
    path = tmp_path / "torch.pt.trace.json"
    p.export_chrome_trace(str(path))
    result = invoke(str(path))  # shorthand of ``profile show``
    assert result.exit_code == 0, result.output
    assert "aten::mm" in result.output and "Self CPU time total" in result.output
    as_json = json.loads(invoke("show", "--json", str(path)).output)
    assert [r["calls"] for r in as_json["rows"] if r["name"] == "aten::mm"] == [1]


def test_bad_input_is_one_line_and_status_2(tmp_path: Path) -> None:
    assert_one_line_error(invoke(str(tmp_path / "missing.json")), "cannot read it")
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a trace"}')
    assert_one_line_error(invoke("show", str(bad)), "no traceEvents list")
    assert_one_line_error(invoke("run", str(tmp_path / "nope.py")), "no such file")
