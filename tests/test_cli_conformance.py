"""``tensorctl run-conformance``, ``list-cases`` and ``coverage`` as a user sees them:
exit codes, one-line errors, summaries, diffs and report files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.conformance import COMMANDS, coverage, list_cases, run_conformance
from conformance.targets import target_missing

ROOT = Path(__file__).resolve().parent.parent
BAD = Path(__file__).parent / "conformance_fixtures" / "bad"
SELFTEST = ROOT / "conformance" / "cases" / "_selftest"
needs_torch = pytest.mark.skipif(target_missing("torch"), reason="torch is not installed")

MIXED = """
defaults:
  source: "doc.py::T::test_mixed"
cases:
  - id: m.pass
    inputs: {x: {randn: [2, 2]}}
    program: out = x + 1
    expect: [{value: out, equals_np: "np_x + 1"}]
  - id: m.fail
    inputs: {x: {randn: [2, 2]}}
    program: out = x + 1
    expect: [{value: out, equals_np: "np_x + 2"}]
  - {id: m.xfail, xfail: not yet, program: "assert False"}
  - {id: m.skip, requires: {gpus: 64}, program: pass}
"""


def run(command, *args: str):
    """Invoke a click command the way the console script would."""
    return CliRunner().invoke(command, [str(a) for a in args])


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A folder with one area of passing, failing, xfailed and skipped cases."""
    root = tmp_path / "suite"
    (root / "mixed").mkdir(parents=True)
    (root / "mixed" / "m.yaml").write_text(textwrap.dedent(MIXED))
    return root


def test_commands_are_exported() -> None:
    assert [c.name for c in COMMANDS] == ["run-conformance", "list-cases", "coverage", "lint-cases"]


@pytest.mark.parametrize("name", sorted(p.name for p in BAD.glob("*.yaml")))
def test_broken_case_file_is_one_line_and_exit_2(name: str) -> None:
    result = run(run_conformance, "--target", "torch", "--cases", BAD / name)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{BAD / name}:")
    assert "Traceback" not in result.output


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    checks = [
        (["--cases", tmp_path / "missing"], "no such file or directory"),
        (["--target", "refimpl", "--record", "--cases", SELFTEST], "--record needs --target torch"),
        (["--cases", SELFTEST, "-k", "a and"], "expression ends too early"),
        (["--cases", SELFTEST, "-k", "nothing-matches-this"], "no cases match"),
        (["--cases", SELFTEST, "-j", "many"], "-j expects a number"),
        (["--cases", SELFTEST, "--target", "no_such_module_xyz"], "cannot import target"),
    ]
    for args, words in checks:
        result = run(run_conformance, *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.strip().count("\n") == 0 and words in result.output, result.output


@needs_torch
def test_selftest_passes_on_torch_with_reports(tmp_path: Path) -> None:
    result = run(
        run_conformance, "--target", "torch", "--cases", SELFTEST, "-j", "2",
        "--json", tmp_path / "r.json", "--junit-xml", tmp_path / "r.xml",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "conformance summary" in result.output and "_selftest" in result.output
    assert "target torch 2." in result.output and "passed" in result.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["target"] == "torch" and data["torch_version"].startswith("2.")
    assert data["device"] in ("cpu", "cpu,cuda")
    summary = data["summary"]
    assert summary["failed"] == summary["errors"] == 0
    assert summary["total"] == summary["passed"] + summary["skipped"] == len(data["cases"])
    assert {"id", "outcome", "duration", "message", "area", "source"} <= set(data["cases"][0])
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("tests") == str(summary["total"]) and root.get("failures") == "0"


@needs_torch
def test_failures_show_diff_and_source_and_exit_1(mixed: Path, tmp_path: Path) -> None:
    result = run(run_conformance, "--target", "torch", "--cases", mixed, "-j", "1", "-v",
                 "--json", tmp_path / "r.json")  # fmt: skip
    assert result.exit_code == 1
    out = result.output
    assert "FAILED m.fail" in out and "source: doc.py::T::test_mixed" in out
    assert "4 of 4 elements differ" in out and "max abs error 1" in out
    assert "SKIPPED m.skip: needs " in out and "XFAILED m.xfail" in out
    assert "1 passed, 1 failed, 1 skipped, 1 xfailed" in out
    outcomes = {
        c["id"]: c["outcome"] for c in json.loads((tmp_path / "r.json").read_text())["cases"]
    }
    assert outcomes == {
        "m.pass": "passed",
        "m.fail": "failed",
        "m.xfail": "xfailed",
        "m.skip": "skipped",
    }


@needs_torch
def test_filters_and_device_selection(mixed: Path) -> None:
    result = run(run_conformance, "--target", "torch", "--cases", mixed, "-k", "pass or skip",
                 "--device", "cpu", "-j", "0")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.output and "skipped" not in result.output.splitlines()[-1]


@needs_torch
def test_record_writes_goldens(tmp_path: Path) -> None:
    result = run(run_conformance, "--target", "torch", "--cases", SELFTEST, "-k", "values.add",
                 "--record", "--golden-dir", tmp_path, "-j", "0")  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = json.loads((tmp_path / "_selftest.json").read_text())
    entry = stored["cases"]["selftest.values.add_randn"]
    assert entry["device"] == "cpu" and entry["torch_version"].startswith("2.")
    assert entry["values"][0]["value"]["shape"] == [3, 4]


def test_absent_torch_skips_everything_with_one_line(mixed: Path, monkeypatch) -> None:
    from conformance import runner

    monkeypatch.setattr(runner, "target_missing", lambda name: True)
    result = run(run_conformance, "--target", "torch", "--cases", mixed)
    assert result.exit_code == 0, result.output
    notices = [line for line in result.output.splitlines() if "not installed" in line]
    assert notices == ["torch is not installed: skipping all 4 cases of target torch"]
    assert "4 skipped" in result.output


def test_list_cases_plain_and_json(mixed: Path) -> None:
    result = run(list_cases, "--cases", mixed, "--tag", "nope")
    assert result.exit_code == 0 and result.output == ""
    result = run(list_cases, "--cases", mixed, "-k", "not skip")
    assert result.output.split() == ["m.pass", "m.fail", "m.xfail"]
    rows = json.loads(run(list_cases, "--cases", mixed, "--json").output)
    assert rows[3] == {
        "id": "m.skip", "area": "mixed", "source": "doc.py::T::test_mixed", "spec": [], "tags": [],
        "device": "cuda", "path": str(mixed / "mixed" / "m.yaml"), "line": 14,
    }  # fmt: skip


def test_coverage_report_and_problems(mixed: Path, tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "doc.yaml").write_text(
        "document: doc.py\ntests:\n"
        "  - {test: T::test_mixed, status: ported, cases: [m.pass, m.fail]}\n"
        "  - {test: T::test_other, status: out-of-scope, reason: sparse}\n"
        "  - {test: T::test_later, status: pending, reason: waits for graphs}\n"
    )
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "a.md").write_text("**A-001** One.\n")
    result = run(coverage, "--cases", mixed, "--seed-map", seed, "--spec", spec, "-v")
    assert result.exit_code == 0, result.output
    assert (
        "doc.py" in result.output and "ported        T::test_mixed: m.pass, m.fail" in result.output
    )
    assert "out-of-scope  T::test_other: sparse" in result.output and "A-001: -" in result.output
    assert "pending       T::test_later: waits for graphs" in result.output
    data = json.loads(run(coverage, "--cases", mixed, "--seed-map", seed, "--spec", spec,
                          "--json", "-").output)  # fmt: skip
    assert data["documents"][0]["pending"] == ["T::test_later"] and data["problems"] == []
    (seed / "doc.yaml").write_text(
        "document: doc.py\ntests:\n  - {test: T::x, status: ported, cases: [gone]}\n"
    )
    result = run(coverage, "--cases", mixed, "--seed-map", seed, "--spec", spec)
    assert result.exit_code == 1 and "unknown case id 'gone'" in result.output
    (seed / "doc.yaml").write_text("document: doc.py\ntests: nope\n")
    result = run(coverage, "--cases", mixed, "--seed-map", seed)
    assert (
        result.exit_code == 2
        and result.output.strip() == f"{seed / 'doc.yaml'}:2: tests must be a list, got str 'nope'"
    )


def test_real_process_exit_code_and_no_traceback() -> None:
    code = "from cli.conformance import run_conformance; run_conformance()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "--cases", str(BAD / "binary_garbage.yaml")],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"{BAD / 'binary_garbage.yaml'}:1: not a UTF-8 text file (byte 0x89 at offset 0)"
    )
    assert "Traceback" not in proc.stdout + proc.stderr


@needs_torch
def test_pytest_collects_cases_by_id() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "-q", "--target", "torch", "-p", "no:cacheprovider",
         "-k", "selftest.values.add_randn or selftest.values.mul_by_dtype"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed" in proc.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    ids = [line.split("::")[-1] for line in listing.stdout.splitlines() if "::" in line]
    assert "selftest.values.mul_by_dtype[bfloat16]" in ids
    assert all(
        line.startswith("conformance/cases/")
        for line in listing.stdout.splitlines()
        if "::" in line
    )
