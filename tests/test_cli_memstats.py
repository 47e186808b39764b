"""``tensorctl memstats``: snapshots, replays and runs, through click's CliRunner.

The command object is exercised directly (``cli.main`` also imports commands that
other modules own).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.memstats import memstats
from refimpl.cuda import _allocator, _allocator_config, memory

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
SYNTHETIC = FIXTURES / "torch_synthetic.pickle"
MiB = 1 << 20


def invoke(*args: str) -> object:
    return CliRunner().invoke(memstats, list(args), catch_exceptions=False)


def assert_one_line_error(result: object, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("tensorctl memstats: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


# -- memstats FILE ----------------------------------------------------------------------------


def test_show_summarises_a_torch_snapshot() -> None:
    result = invoke(str(SYNTHETIC))
    assert result.exit_code == 0, result.output
    assert "segments" in result.output and "active_pending_free" not in result.output
    assert "0x7f3a60400000" in result.output  # the segment map lists every segment
    assert invoke("show", str(SYNTHETIC)).output == result.output


def test_reads_a_real_torch_snapshot_like_refimpls_own() -> None:
    """Both pickles were dumped on an H200 (torch 2.11.0+cu130) after the same calls:
    caching_allocator_alloc of 100 B, 3 MiB and 50 MiB, then a delete of the 3 MiB."""
    real = invoke(str(FIXTURES / "torch-2.11.0-h200.pickle"), "--json")
    ours = invoke(str(FIXTURES / "refimpl-h200.pickle"), "--json")
    assert real.exit_code == ours.exit_code == 0, real.output + ours.output
    assert json.loads(real.output) == json.loads(ours.output)
    assert json.loads(real.output)["segments"] == 3


def test_show_json_is_machine_readable() -> None:
    result = invoke(str(SYNTHETIC), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    snapshot = pickle.loads(SYNTHETIC.read_bytes())
    assert summary["segments"] == len(snapshot["segments"]) == 4
    assert summary["reserved_bytes"] == sum(s["total_size"] for s in snapshot["segments"])
    assert summary["blocks"] == {
        "total": 8, "active_allocated": 4, "active_pending_free": 1, "inactive": 3,
    }
    frag = summary["fragmentation"]
    assert frag["target_request"] == "largest failed request"
    assert frag["target_request_bytes"] == 2000 * MiB
    assert frag["external_bytes"] == frag["free_bytes"]  # nothing free can serve 2000 MiB
    assert frag["internal_bytes"] == summary["allocated_bytes"] - sum(
        b["requested_size"] for s in snapshot["segments"] for b in s["blocks"]
        if b["state"] == "active_allocated"
    )
    assert summary["trace_actions"]["oom"] == 1


def test_show_html_is_self_contained(tmp_path: Path) -> None:
    page = tmp_path / "snap.html"
    result = invoke(str(SYNTHETIC), "--html", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 2
    assert "<script" not in html and "src=" not in html and "<link" not in html
    assert "train.py" in html  # block tooltips carry the allocation stacks


def test_html_escapes_hostile_strings(tmp_path: Path) -> None:
    snapshot = pickle.loads(SYNTHETIC.read_bytes())
    frame = {"filename": "<img src=x onerror=alert(1)>", "line": 1, "name": "<script>x</script>"}
    snapshot["segments"][0]["blocks"][1]["frames"] = [frame]
    source = tmp_path / "evil.pickle"
    source.write_bytes(pickle.dumps(snapshot))
    page = tmp_path / "evil.html"
    assert invoke(str(source), "--html", str(page)).exit_code == 0
    html = page.read_text()
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("hostile_reduce.pickle", "posix.system"),
        ("truncated.pickle", "not a readable pickle"),
        ("not_a_snapshot.pickle", "segment 0 has the wrong type"),
        ("with_set.pickle", "set"),
    ],
)
def test_bad_files_give_one_line_and_exit_2(name: str, fragment: str) -> None:
    marker = Path("/tmp/tensorctl-pwned")
    marker.unlink(missing_ok=True)
    result = invoke(str(FIXTURES / name))
    assert_one_line_error(result, name)
    assert fragment in result.output or fragment.replace("posix", "os") in result.output
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x80\x05garbage", b"{'json': 1}", pickle.dumps({"segments": [{"address": "x"}]}),
     pickle.dumps({"segments": [{"address": 1, "blocks": [{"size": -5, "state": "x"}]}]}),
     pickle.dumps({"segments": []}, protocol=0)[:-1], b"N." * 3],
)
def test_malformed_payloads_give_one_line(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "bad.pickle"
    path.write_bytes(payload)
    assert_one_line_error(invoke(str(path)), "bad.pickle")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert_one_line_error(invoke(str(tmp_path / "nope.pickle")), "cannot read it")
    assert_one_line_error(invoke("show", str(tmp_path)))


def test_refimpl_dump_snapshot_is_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_allocator, "_allocators", {})
    monkeypatch.setattr(_allocator, "_history_settings", None)
    monkeypatch.setattr(_allocator_config, "_config", _allocator_config.AllocatorConfig())
    for name in ("_current_device", "_current_stream", "_lazy_init_hook",
                 "_is_initialized_hook", "_device_count"):
        monkeypatch.setattr(memory, name, None)
    monkeypatch.setattr(_allocator, "_factory", lambda i: _allocator.AddressSpaceSource(1 << 34))
    memory._record_memory_history("all")
    kept = [memory.caching_allocator_alloc(size) for size in (100, 5 * MiB, 50 * MiB)]
    path = tmp_path / "refimpl.pickle"
    memory._dump_snapshot(str(path))
    memory._record_memory_history(None)
    summary = json.loads(invoke(str(path), "--json").output)
    assert summary["segments"] == 3
    assert summary["allocated_bytes"] == 512 + 5 * MiB + 50 * MiB
    assert summary["trace_actions"] == {"alloc": 3, "segment_alloc": 3}
    assert len(kept) == 3


# -- memstats replay ------------------------------------------------------------------------


def test_replay_reports_both_sides() -> None:
    result = invoke("replay", str(SYNTHETIC), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    replay = report["replay"]
    assert replay["allocs"] == 8 and replay["frees"] == 4
    assert replay["preexisting_blocks"] == 0
    assert report["recorded"]["ooms"] == 1
    assert replay["ooms"] == 0  # the replay device is unbounded by default
    text = invoke("replay", str(SYNTHETIC), "--max-split-size-mb", "40").output
    assert "max_split_size_mb:40" in text and "peak reserved" in text


def test_replay_under_a_capacity_counts_ooms() -> None:
    report = json.loads(invoke("replay", str(SYNTHETIC), "--capacity", "64MiB", "--json").output)
    assert report["capacity"] == 64 * MiB
    assert report["replay"]["ooms"] >= 1
    frag = report["replay"]["fragmentation"]
    assert frag["target_request"] == "largest failed request"


def test_replay_settings_are_validated() -> None:
    assert_one_line_error(invoke("replay", str(SYNTHETIC), "--max-split-size-mb", "5"),
                          "max_split_size_mb too small")
    assert_one_line_error(invoke("replay", str(SYNTHETIC), "--alloc-conf", "expandable_segments:True"),
                          "expandable_segments")
    assert_one_line_error(invoke("replay", str(SYNTHETIC), "--garbage-collection-threshold", "0.5"),
                          "needs --capacity")
    assert_one_line_error(invoke("replay", str(SYNTHETIC), "--capacity", "lots"), "--capacity")
    assert_one_line_error(invoke("replay", str(FIXTURES / "hostile_reduce.pickle")))
    gc = invoke("replay", str(SYNTHETIC), "--capacity", "2GiB", "--garbage-collection-threshold",
                "0.5")
    assert gc.exit_code == 0, gc.output


def test_replay_checks_a_recorded_step_trace(tmp_path: Path) -> None:
    trace = Path(__file__).parent / "fixtures" / "trace_replay" / "refimpl-selfcheck.json"
    result = invoke("replay", str(trace))
    assert result.exit_code == 0 and "every figure matches" in result.output
    data = json.loads(trace.read_text())
    data["runs"][0]["steps"][3]["figures"]["reserved_bytes.all.current"] += 512
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    result = invoke("replay", str(tampered))
    assert result.exit_code == 1
    assert "step 3" in result.output and "reserved_bytes.all.current" in result.output
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_one_line_error(invoke("replay", str(broken)), "not valid JSON")


# -- memstats run ---------------------------------------------------------------------------

SCRIPT = """
import sys
from refimpl.cuda import memory
keep = [memory.caching_allocator_alloc(n) for n in (1000, 3 << 20, 40 << 20)]
memory.caching_allocator_delete(keep.pop(1))
print("script args", sys.argv[1:])
if "--oom" in sys.argv:
    memory.caching_allocator_alloc(1 << 40)
"""


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Fresh registry objects: `run --simulate` resets the registry in place.
    monkeypatch.setattr(_allocator, "_factory", None)
    monkeypatch.setattr(_allocator, "_allocators", {})
    monkeypatch.setattr(_allocator, "_history_settings", None)
    monkeypatch.setattr(_allocator, "_global_oom_observers", [])
    monkeypatch.setattr(_allocator_config, "_config", _allocator_config.AllocatorConfig())
    for name in ("_current_device", "_current_stream", "_lazy_init_hook",
                 "_is_initialized_hook", "_device_count"):
        monkeypatch.setattr(memory, name, getattr(memory, name))
    path = tmp_path / "job.py"
    path.write_text(SCRIPT)
    return path


def test_run_shows_the_allocator_at_exit(script: Path, tmp_path: Path) -> None:
    snap = tmp_path / "end.pickle"
    result = invoke("run", "--simulate", "--capacity", "1GiB", "--snapshot", str(snap),
                    str(script), "a", "--flag")
    assert result.exit_code == 0, result.output
    assert "script args ['a', '--flag']" in result.output
    assert "PyTorch CUDA memory summary, device ID 0" in result.output
    assert "exited normally" in result.output and "Fragmentation" in result.output
    saved = pickle.loads(snap.read_bytes())
    assert len(saved["segments"]) == 3


def test_run_reports_the_oom_that_ended_the_script(script: Path) -> None:
    result = invoke("run", "--simulate", "--capacity", "1GiB", str(script), "--oom")
    assert result.exit_code == 1
    assert "stopped by an out-of-memory error" in result.output
    assert "CUDA OOMs: 1" in result.output
    assert "largest failed request" in result.output


def test_run_missing_script(script: Path, tmp_path: Path) -> None:
    result = invoke("run", "--simulate", str(tmp_path / "absent.py"))
    assert_one_line_error(result, "absent.py")


def test_help_texts_define_fragmentation() -> None:
    assert "External fragmentation" in invoke("replay", "--help").output
    assert "memstats run SCRIPT" in invoke("--help").output
