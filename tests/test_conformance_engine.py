"""The conformance engine: case-file validation, loading, values, running, goldens, reports.

Run with ``python -m pytest tests/test_conformance_engine.py``. Cases that need a
target use real torch (the oracle); they are skipped where torch is not installed.
"""

from __future__ import annotations

import json
import math
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conformance import golden, inputs, report, runner, seedmap, values, versions
from conformance.execute import run_case
from conformance.loader import CasesPathError, load_cases
from conformance.model import InputSpec
from conformance.selection import KeywordError, parse_keyword, select
from conformance.targets import target_missing
from conformance.yamlio import load_yaml

BAD = Path(__file__).parent / "conformance_fixtures" / "bad"
SELFTEST = Path(__file__).resolve().parent.parent / "conformance" / "cases" / "_selftest"
needs_torch = pytest.mark.skipif(target_missing("torch"), reason="torch is not installed")

# (file, line, words the one-line message must contain)
BROKEN = [
    ("bad_yaml_syntax.yaml", 8, "invalid YAML"),
    ("top_level_list.yaml", 1, "top level must be a mapping"),
    ("tags_not_list.yaml", 4, "tags must be a list"),
    ("unknown_key.yaml", 5, "unknown key 'expcet' in case (did you mean 'expect'?)"),
    ("missing_program.yaml", 2, "has no 'program'"),
    ("missing_id.yaml", 5, "case has no 'id'"),
    ("bad_regex.yaml", 6, "bad regex"),
    ("unknown_exception.yaml", 7, "unknown exception type 'RuntimError'"),
    ("unknown_warning.yaml", 6, "did you mean 'UserWarning'?"),
    ("binary_garbage.yaml", 1, "not a UTF-8 text file"),
    ("nul_bytes.yaml", 4, "binary file"),
    ("empty.yaml", 1, "empty file"),
    ("params_not_list.yaml", 5, "param 'dtype' must be a list"),
    ("unknown_generator.yaml", 5, "unknown input generator"),
    ("bad_torch_range.yaml", 5, "bad requires.torch range"),
    ("program_syntax_error.yaml", 6, "syntax error in program"),
    ("duplicate_key.yaml", 5, "duplicate key 'program'"),
    ("bad_dtype.yaml", 5, "did you mean 'float32'?"),
    ("unknown_param_ref.yaml", 7, "unknown param ${dtyp}"),
    ("bad_id.yaml", 2, "bad id"),
    ("raises_without_eval.yaml", 6, "needs 'eval'"),
    ("check_without_kind.yaml", 6, "did you mean 'value'?"),
    ("no_cases.yaml", 1, "no 'cases'"),
    ("wrong_value_type.yaml", 4, "timeout must be a number"),
]


def write_cases(folder: Path, text: str, name: str = "cases.yaml", area: str = "demo") -> Path:
    """Write one case file under ``folder/area`` and return the folder."""
    (folder / area).mkdir(parents=True, exist_ok=True)
    (folder / area / name).write_text(textwrap.dedent(text))
    return folder


def load_one(folder: Path, text: str):
    """The cases of one case file written from ``text``."""
    loaded = load_cases(write_cases(folder, text))
    assert not loaded.errors, [str(e) for e in loaded.errors]
    return loaded.cases


@pytest.fixture(scope="module")
def torch_target():
    """The torch adapter and its info, imported once for the module."""
    if target_missing("torch"):
        pytest.skip("torch is not installed")
    from conformance.targets import load_target

    adapter = load_target("torch")
    return adapter, adapter.info()


# -- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "line", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_case_file_gives_one_located_error(name: str, line: int, words: str) -> None:
    loaded = load_cases(BAD / name)
    assert len(loaded.errors) == 1
    message = str(loaded.errors[0])
    assert message.startswith(f"{BAD / name}:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_every_bad_fixture_is_covered_by_a_test() -> None:
    assert {p.name for p in BAD.glob("*.yaml")} == {b[0] for b in BROKEN}


def test_duplicate_id_across_files_names_both_places() -> None:
    loaded = load_cases(BAD / "duplicate")
    expected = (
        f"{BAD / 'duplicate' / 'second.yaml'}:5: duplicate case id 'bad.duplicate' "
        f"(first defined at {BAD / 'duplicate' / 'first.yaml'}:2)"
    )
    assert [str(e) for e in loaded.errors] == [expected]


def test_missing_cases_path_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(CasesPathError, match="no such file or directory"):
        load_cases(tmp_path / "nope")
    with pytest.raises(CasesPathError, match="no case files"):
        load_cases(tmp_path)


def test_yaml_keeps_lines_and_reads_check_kind_true_as_a_name(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: 1e-6\nexpect:\n  - true: 'x'\nprog: |\n  line\n")
    data = load_yaml(path)
    assert data["a"] == 1e-6
    assert list(data["expect"][0]) == ["true"]
    assert data.key_line("expect") == 2
    assert data["expect"].item_line(0) == 3
    assert data.value_line("prog") == 5  # a block scalar's text starts after `|`


# -- loading ----------------------------------------------------------------------------


def test_defaults_params_and_substitution(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path,
        """
        defaults:
          source: research
          tags: [base]
          requires: {torch: ">=2.0"}
        cases:
          - id: demo.matrix
            tags: [extra]
            requires: {targets: [torch]}
            params:
              dtype: [float32, int64]
              device: [cpu, cuda]
            inputs:
              x: {randn: [2], dtype: "${dtype}", device: "${device}"}
            program: out = x
            expect:
              - value: out
                dtype: "${dtype}"
        """,
    )
    assert [c.id for c in cases] == [
        "demo.matrix[float32-cpu]",
        "demo.matrix[float32-cuda]",
        "demo.matrix[int64-cpu]",
        "demo.matrix[int64-cuda]",
    ]
    first, second = cases[0], cases[1]
    assert first.tags == ("base", "extra")
    assert first.requires.torch == ">=2.0" and first.requires.targets == ("torch",)
    assert first.inputs[0].dtype == "float32" and first.inputs[0].device == "cpu"
    assert first.expect[0].data["dtype"] == "float32"
    assert not first.requires.cuda and second.requires.cuda  # a cuda param implies requires.cuda
    assert second.device == "cuda" and first.area == "demo"


def test_value_literal_dtype_is_inferred_like_torch(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path,
        """
        cases:
          - id: demo.literals
            source: research
            inputs:
              i: {value: [1, 2]}
              f: {value: [1, 2.5]}
              b: {value: [true, false]}
            program: pass
        """,
    )
    assert [s.dtype for s in cases[0].inputs] == ["int64", "float32", "bool"]


# -- inputs -----------------------------------------------------------------------------


def test_input_seed_is_stable_and_depends_on_case_and_name() -> None:
    spec = InputSpec("x", "randn", (3,), "float32")
    first = inputs.numpy_input(spec, "case.a")
    assert np.array_equal(first, inputs.numpy_input(spec, "case.a"))
    assert not np.array_equal(first, inputs.numpy_input(spec, "case.b"))
    assert (
        inputs.seed_for("case.a", "x")
        == inputs.seed_for("case.a", "x")
        != inputs.seed_for("case.a", "y")
    )
    explicit = InputSpec("x", "randn", (3,), "float32", seed=5)
    assert np.array_equal(inputs.numpy_input(explicit, "a"), inputs.numpy_input(explicit, "b"))


def test_bfloat16_inputs_hold_values_bfloat16_can_represent() -> None:
    import ml_dtypes

    array = inputs.numpy_input(InputSpec("x", "randn", (64,), "bfloat16"), "c")
    assert array.dtype == np.float32
    assert np.array_equal(array, array.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_randint_stays_in_range_and_dtype() -> None:
    array = inputs.numpy_input(InputSpec("i", "randint", (-3, 4, (100,)), "int32"), "c")
    assert array.dtype == np.int32 and array.min() >= -3 and array.max() < 4


# -- values -----------------------------------------------------------------------------


def tensor(data, dtype="float32"):
    """A normalised tensor value."""
    return {"tensor": data, "dtype": dtype, "shape": list(np.shape(data)), "device": "cpu"}


def test_default_tolerances_follow_format_md() -> None:
    assert values.tolerance("float32") == (1.3e-6, pytest.approx(1e-5))
    assert values.tolerance("float16")[0] == 1e-3
    assert values.tolerance("bfloat16")[0] == 1e-2
    assert values.tolerance("float64")[0] == 1e-7
    assert values.tolerance("int64") == (0.0, 0.0)
    assert values.tolerance("float32", rtol=0.5) == (0.5, pytest.approx(1e-5))


def test_compare_floats_within_tolerance_and_nan_equals_nan() -> None:
    assert values.compare(tensor([1.0, math.nan]), [1.0 + 1e-7, math.nan]) is None
    assert values.compare(1.0, 1.0 + 1e-9) is None
    assert values.compare(tensor([1.0]), [1.1], rtol=0.2) is None


def test_compare_reports_count_index_and_errors() -> None:
    diff = values.compare(tensor([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 2.0], [3.0, 4.5]]))
    assert diff is not None
    assert "1 of 4 elements differ (float32" in diff
    assert "first mismatch at index [1, 1]: actual 4.0, expected 4.5" in diff
    assert "max abs error 0.5 at [1, 1]" in diff


def test_integers_compare_exactly_and_shapes_must_match() -> None:
    assert values.compare(tensor([2**40 + 1], "int64"), [2**40]) is not None
    assert "shape [2] != expected shape [3]" in values.compare(tensor([1, 2], "int64"), [1, 2, 3])
    assert values.compare(True, 1) is not None  # a bool is not a number here
    assert values.compare([1, "a", None], [1, "a", None]) is None


def test_facts_check_dtype_shape_device() -> None:
    value = tensor([[1.0]], "float64") | {"device": "cuda:0"}
    assert (
        values.check_facts(value, {"dtype": "float64", "shape": [1, 1], "device": "cuda"}) is None
    )
    problem = values.check_facts(value, {"dtype": "float32", "device": "cpu"})
    assert "dtype is float64, expected float32" in problem and "device is cuda:0" in problem
    assert values.check_facts("dtype:int64", {"dtype": "int64"}) is None


def test_normalise_torch_values(torch_target) -> None:
    adapter, _ = torch_target
    import torch

    assert values.normalise(torch.tensor([1.5], dtype=torch.bfloat16), adapter) == tensor(
        [1.5], "bfloat16"
    )
    assert values.normalise(torch.tensor([1 + 2j]), adapter)["tensor"] == [[1.0, 2.0]]
    assert values.normalise([torch.float16, torch.device("cpu"), torch.Size([2])], adapter) == [
        "dtype:float16",
        "device:cpu",
        [2],
    ]
    meta = values.normalise(torch.empty(2, device="meta"), adapter)
    assert meta["tensor"] is None and meta["device"] == "meta"


# -- selection and versions -------------------------------------------------------------


def test_keyword_expressions() -> None:
    match = parse_keyword("views and not (cuda or Strides)")
    assert match("tensor.views.t")
    assert not match("tensor.views.t[cuda]")
    assert not match("tensor.views.strides")
    assert parse_keyword("VIEW")("a.view.b")
    for bad in ("a and", "(a", "and a", "a b"):
        with pytest.raises(KeywordError):
            parse_keyword(bad)


def test_select_by_area_tag_device(tmp_path: Path) -> None:
    write_cases(
        tmp_path, "cases:\n  - {id: a.x, source: research, tags: [t1], program: pass}\n", area="one"
    )
    write_cases(
        tmp_path,
        "cases:\n  - {id: b.y, source: research, params: {device: [cpu, cuda]}, program: pass}\n",
        area="two",
    )
    cases = load_cases(tmp_path).cases
    assert [c.id for c in select(cases, areas=["one"])] == ["a.x"]
    assert [c.id for c in select(cases, tags=["t1"])] == ["a.x"]
    assert [c.id for c in select(cases, devices=["cuda"])] == ["b.y[cuda]"]


def test_version_ranges() -> None:
    assert versions.in_range("2.13.0+cpu", ">=2.11")
    assert not versions.in_range("2.4.1", ">=2.11, <3")
    assert versions.in_range("2.11.3", "==2.11.*") and not versions.in_range("2.12", "==2.11.*")
    with pytest.raises(ValueError):
        versions.parse_range(">= two")


# -- running one case -------------------------------------------------------------------

OUTCOME_CASES = """
cases:
  - {id: r.pass, source: research, program: "out = t.ones(2)", expect: [{value: out, equals: [1, 1]}]}
  - {id: r.fail, source: research, program: "out = t.ones(2)", expect: [{value: out, equals: [1, 2]}]}
  - {id: r.xfail, source: research, xfail: known, program: "assert False"}
  - {id: r.xpass, source: research, xfail: {torch: only on torch}, program: "pass"}
  - {id: r.skip, source: research, requires: {targets: [refimpl]}, program: "pass"}
  - {id: r.cuda, source: research, requires: {gpus: 64}, program: "pass"}
  - {id: r.old, source: research, requires: {torch: "<2.0"}, program: "pass"}
  - {id: r.broken, source: research, program: "pass", expect: [{value: "1", equals_np: "np.nope"}]}
  - {id: r.raises, source: research, program: "t.ones(2) + t.ones(3)"}
  - {id: r.slow, source: research, program: "while True: pass"}
"""


def test_outcomes_of_run_case(tmp_path: Path, torch_target) -> None:
    adapter, info = torch_target
    cases = load_one(tmp_path, OUTCOME_CASES)
    results = {c.id: run_case(c, adapter, info, timeout=0.5) for c in cases}
    outcome = {k: r.outcome for k, r in results.items()}
    assert outcome == {
        "r.pass": "passed", "r.fail": "failed", "r.xfail": "xfailed", "r.xpass": "xpassed",
        "r.skip": "skipped", "r.cuda": "skipped", "r.old": "skipped", "r.broken": "error",
        "r.raises": "failed", "r.slow": "failed",
    }  # fmt: skip
    assert "first mismatch at index [1]: actual 1.0, expected 2" in results["r.fail"].message
    assert "runs only on targets: refimpl" in results["r.skip"].message
    assert results["r.cuda"].message in (
        "needs CUDA; the target sees no CUDA device",
        f"needs 64 GPUs; the target sees {len(info.cuda_devices)}",
    )
    assert "np.nope" in results["r.broken"].message
    assert (
        "RuntimeError" in results["r.raises"].message
        and "cases.yaml:" in results["r.raises"].message
    )
    assert "timed out after 0.5 s" in results["r.slow"].message


def test_selftest_cases_pass_on_torch(torch_target) -> None:
    adapter, info = torch_target
    loaded = load_cases(SELFTEST)
    assert not loaded.errors
    kinds = {check.kind for case in loaded.cases for check in case.expect}
    assert kinds == {
        "value",
        "true",
        "same_storage",
        "is",
        "raises",
        "warns",
        "no_warnings",
        "memory",
    }
    for case in loaded.cases:
        result = run_case(case, adapter, info)
        assert result.outcome in ("passed", "skipped"), (case.id, result.message)


def test_check_failures_explain_themselves(tmp_path: Path, torch_target) -> None:
    adapter, info = torch_target
    (case,) = load_one(
        tmp_path,
        """
        cases:
          - id: c.checks
            source: research
            inputs: {x: {randn: [2, 3]}}
            program: |
              y = x.clone()
              import warnings
              warnings.warn("spoken", UserWarning)
            expect:
              - same_storage: [x, y]
              - is: [x, y]
              - true: "y.dim() == 3"
              - warns: {category: DeprecationWarning}
                eval: "x + 1"
              - raises: {type: ValueError}
                eval: "x + 1"
              - no_warnings: true
        """,
    )
    message = run_case(case, adapter, info).message
    assert "`x` and `y` have different storages" in message
    assert "`x` is not `y`" in message
    assert "`y.dim() == 3` is false: left side 2, right side 3" in message
    assert "expected a warning DeprecationWarning" in message
    assert "did not raise ValueError" in message
    assert "the program warned: UserWarning: spoken" in message
    assert message.count("check ") == 6


# -- the pool ---------------------------------------------------------------------------

CRASHING_CASES = """
cases:
  - {id: p.before, source: research, program: "out = t.ones(1)"}
  - id: p.segv
    source: research
    program: |
      import ctypes
      ctypes.string_at(0)
  - id: p.stuck
    source: research
    timeout: 0.5
    program: |
      import signal, time
      signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
      time.sleep(30)
  - {id: p.after, source: research, program: "out = t.ones(1)"}
"""


@needs_torch
def test_pool_survives_a_segfault_and_kills_a_stuck_worker(tmp_path: Path) -> None:
    cases = load_one(tmp_path, CRASHING_CASES)
    options = runner.RunOptions(
        target="torch", jobs=2, kill_grace=0.5, golden_dir=None, batch_size=1
    )
    result = runner.run(cases, options)
    outcome = {c.id: r for c, r in result.pairs}
    assert outcome["p.before"].outcome == outcome["p.after"].outcome == "passed"
    assert outcome["p.segv"].outcome == "error" and "SIGSEGV" in outcome["p.segv"].message
    assert outcome["p.stuck"].outcome == "failed" and "worker killed" in outcome["p.stuck"].message
    assert result.info.name == "torch" and result.not_run == 0


@needs_torch
def test_fail_fast_stops_early(tmp_path: Path) -> None:
    text = "cases:\n" + "".join(
        f"  - {{id: f.c{i}, source: research, program: 'assert {i} != 1'}}\n" for i in range(30)
    )
    cases = load_one(tmp_path, text)
    for jobs in (0, 1):
        options = runner.RunOptions(target="torch", jobs=jobs, fail_fast=True, golden_dir=None)
        result = runner.run(cases, options)
        assert sum(r.outcome == "failed" for _, r in result.pairs) == 1
        assert result.not_run > 0 and len(result.pairs) + result.not_run == 30


def test_unimportable_target_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_target_mod.py").write_text("raise ImportError('half written\\nmodule')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = load_one(tmp_path / "cases", "cases:\n  - {id: u.x, source: research, program: pass}\n")
    for name in ("broken_target_mod", "no_such_target_mod"):
        with pytest.raises(runner.TargetUnavailable) as info:
            runner.run(cases, runner.RunOptions(target=name, jobs=0))
        assert f"cannot import target {name!r}" in str(info.value) and "\n" not in str(info.value)


# -- goldens and reports ----------------------------------------------------------------


@needs_torch
def test_record_then_compare_goldens(tmp_path: Path) -> None:
    (tmp_path / "torch_alias.py").write_text("import sys, torch\nsys.modules[__name__] = torch\n")
    cases = load_one(
        tmp_path / "cases",
        """
        cases:
          - id: g.sum
            source: research
            inputs: {x: {randn: [3]}}
            program: out = x * 2
            expect:
              - value: out
              - value: out.sum()
        """,
    )
    gold = tmp_path / "golden"
    gold.mkdir()
    (gold / "demo.json").write_text(
        json.dumps({"format": 1, "cases": {"other.case": {"values": []}}})
    )
    recorded = runner.run(
        cases, runner.RunOptions(target="torch", jobs=0, record=True, golden_dir=gold)
    )
    (path,) = golden.record(gold, recorded.pairs, recorded.info.torch_version)
    stored = json.loads(path.read_text())["cases"]
    assert set(stored) == {"g.sum", "other.case"}  # other entries are kept
    assert [v["expr"] for v in stored["g.sum"]["values"]] == ["out", "out.sum()"]
    assert list(gold.iterdir()) == [path]  # no temporary files left behind

    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        alias = runner.RunOptions(target="torch_alias", jobs=0, golden_dir=gold)
        assert runner.run(cases, alias).pairs[0][1].outcome == "passed"
        stored["g.sum"]["values"][1]["value"]["tensor"] += 1.0
        path.write_text(json.dumps({"format": 1, "cases": stored}))
        ((_, result),) = runner.run(cases, alias).pairs
    finally:
        sys.path.remove(str(tmp_path))
    assert (
        result.outcome == "failed" and "differs from the torch golden (torch 2." in result.message
    )


def test_golden_encoding_is_strict_json() -> None:
    data = golden.encode({"v": [math.nan, math.inf, -math.inf, 1.0]})
    text = json.dumps(data, allow_nan=False)
    back = golden.decode(json.loads(text))["v"]
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf, 1.0]


def _pairs(tmp_path: Path):
    from conformance.model import Result

    cases = load_one(tmp_path, OUTCOME_CASES)
    outcomes = ["passed", "failed", "xfailed", "xpassed", "skipped", "skipped", "skipped", "error",
                "failed", "failed"]  # fmt: skip
    return [
        (c, Result(c.id, o, 0.01, f"msg <{o}> & \x00"))
        for c, o in zip(cases, outcomes, strict=True)
    ]


def test_json_report_shape(tmp_path: Path) -> None:
    data = report.json_report(_pairs(tmp_path), target="torch", torch_version="2.13", device="cpu")
    assert data["summary"] == {
        "total": 10, "passed": 1, "failed": 4, "skipped": 3, "xfailed": 1, "errors": 1, "xpassed": 1,
    }  # fmt: skip
    assert set(data["cases"][0]) >= {"id", "outcome", "duration", "message", "area", "source"}
    report.write_json(tmp_path / "r.json", data)
    assert json.loads((tmp_path / "r.json").read_text())["target"] == "torch"


def test_junit_xml_is_well_formed(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    report.write_junit(path, _pairs(tmp_path), target="torch")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "10"
    assert root.get("failures") == "4" and root.get("errors") == "1" and root.get("skipped") == "4"
    cases = root.findall("testsuite/testcase")
    assert [c.get("name") for c in cases][:2] == ["r.pass", "r.fail"]
    assert cases[1].find("failure") is not None and cases[2].find("skipped").get("type") == "xfail"


# -- coverage ---------------------------------------------------------------------------


def test_seed_map_and_spec_coverage(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path / "cases",
        """
        cases:
          - {id: s.one, source: "doc.py::T::test_a", spec: [AREA-001], program: pass}
          - {id: s.two, source: "doc.py::T::test_unlisted", spec: [AREA-999], program: pass}
        """,
    )
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "doc.py.yaml").write_text(
        textwrap.dedent(
            """
            document: doc.py
            tests:
              - {test: "T::test_a", status: ported, cases: [s.one, s.gone]}
              - {test: "T::test_b", status: out-of-scope, reason: sparse tensors}
              - {test: "T::test_c", status: pending, area: x, spec: [AREA-001, AREA-404],
                 reason: waits for graphs}
            """
        )
    )
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "area.md").write_text(
        "# Area\n\n**AREA-001** First.\ntext\n\n### AREA-002 Second\n\n- **AREA-003:** Third.\n"
        "```\n**AREA-004** inside a fence is an example\n```\nrefers to AREA-001 only\n"
    )
    documents, errors = seedmap.load_seed_map(tmp_path / "seed")
    clauses, problems = seedmap.parse_spec(tmp_path / "spec")
    assert not errors and not problems
    assert list(clauses) == ["AREA-001", "AREA-002", "AREA-003"]
    assert clauses["AREA-002"].title == "Second" and clauses["AREA-001"].line == 3
    data = seedmap.coverage(cases, documents, clauses)
    (doc,) = data["documents"]
    assert doc["ported"] == [{"test": "T::test_a", "cases": ["s.one", "s.gone"], "tests": []}]
    assert doc["out_of_scope"] == [{"test": "T::test_b", "reason": "sparse tensors"}]
    assert doc["pending"] == ["T::test_c"]
    assert data["clauses"][0]["cases"] == ["s.one"] and data["clauses"][1]["cases"] == []
    problems = "\n".join(data["problems"])
    assert "unknown case id 's.gone'" in problems
    assert "'doc.py::T::test_unlisted', which no seed map lists" in problems
    assert "unknown clause AREA-999" in problems
    assert "T::test_c cites unknown clause AREA-404" in problems


def test_malformed_seed_map_is_located(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("document: d\ntests:\n  - {test: a, status: portd}\n")
    _, errors = seedmap.load_seed_map(tmp_path)
    expected = (
        f"{tmp_path / 'x.yaml'}:3: bad status 'portd' (one of ported, out-of-scope, pending)"
        " (did you mean 'ported'?)"
    )
    assert [str(e) for e in errors] == [expected]


def test_pending_test_cited_by_cases_stays_pending(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path / "cases",
        """
        cases:
          - {id: s.part, source: "doc.py::T::test_p", program: pass}
        """,
    )
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "doc.py.yaml").write_text(
        textwrap.dedent(
            """
            document: doc.py
            tests:
              - {test: "T::test_p", status: pending, reason: waits for CUDA graphs}
              - {test: "T::test_g", status: ported, tests: [tests/gpu/nowhere.py::test_x]}
            """
        )
    )
    documents, errors = seedmap.load_seed_map(tmp_path / "seed")
    assert not errors
    (doc,) = seedmap.coverage(cases, documents, {})["documents"]
    assert doc["pending"] == ["T::test_p"]
    assert doc["partial"] == [
        {"test": "T::test_p", "cases": ["s.part"], "reason": "waits for CUDA graphs"}
    ]
    problems = seedmap.coverage(cases, documents, {})["problems"]
    where = tmp_path / "seed" / "doc.py.yaml"
    missing = "'tests/gpu/nowhere.py::test_x'"
    assert problems == [f"{where}:5: T::test_g names missing test file {missing}"]


def test_pending_needs_a_reason(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("document: d\ntests:\n  - {test: a, status: pending}\n")
    _, errors = seedmap.load_seed_map(tmp_path)
    assert [str(e) for e in errors] == [f"{tmp_path / 'x.yaml'}:3: pending test 'a' gives no 'reason'"]


# -- device-generic cases -----------------------------------------------------------------


def test_devices_all_runs_a_case_on_every_device(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path,
        """
        defaults:
          devices: all
        cases:
          - id: d.sum
            source: research
            params:
              dtype: [float32, float64]
            inputs:
              x: {randn: [3]}
              h: {randn: [2], device: cpu}
            program: "y = x.sum()"
          - id: d.cpu_only
            source: research
            devices: [cpu]
            program: "y = t.ones(2, device=device)"
        """,
    )
    ids = [c.id for c in cases]
    assert ids == ["d.sum[float32-cpu]", "d.sum[float32-cuda]", "d.sum[float64-cpu]",
                   "d.sum[float64-cuda]", "d.cpu_only[cpu]"]  # fmt: skip
    by_id = {c.id: c for c in cases}
    cuda = by_id["d.sum[float32-cuda]"]
    assert cuda.requires.cuda and cuda.device == "cuda" and cuda.params["device"] == "cuda"
    assert [i.device for i in cuda.inputs] == ["cuda", "cpu"]
    cpu = by_id["d.sum[float64-cpu]"]
    assert not cpu.requires.cuda and [i.device for i in cpu.inputs] == ["cpu", "cpu"]


def test_cuda_instance_of_a_device_generic_case_is_skipped_without_cuda(tmp_path: Path) -> None:
    cases = load_one(
        tmp_path,
        """
        cases:
          - id: d.ones
            source: research
            devices: all
            program: "y = t.ones(2, device=device)"
            expect:
              - value: y
                equals_np: "np.ones(2, np.float32)"
        """,
    )
    run = runner.run(cases, runner.RunOptions(target="refimpl", jobs=0, golden_dir=None))
    results = {case.id: result for case, result in run.pairs}
    assert results["d.ones[cpu]"].outcome == "passed"
    if not run.info.cuda_devices:
        cuda = results["d.ones[cuda]"]
        assert cuda.outcome == "skipped" and "CUDA" in cuda.message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("devices: [cpu, tpu]", "bad device 'tpu' in devices"),
        ("devices: [cpu, cpu]", "device 'cpu' listed twice in devices"),
        ("devices: []", "devices is empty"),
        ("devices: all\n    params: {device: [cpu]}", "cannot also have a 'device' param"),
    ],
)
def test_bad_devices_are_located(tmp_path: Path, text: str, words: str) -> None:
    write_cases(tmp_path, f"cases:\n  - id: d.x\n    source: research\n    {text}\n    program: pass\n")
    errors = [str(e) for e in load_cases(tmp_path).errors]
    assert len(errors) == 1 and words in errors[0], errors


def _interval_case(case_id: str, log: Path, exclusive: bool) -> str:
    flag = "    exclusive: true\n" if exclusive else ""
    return (f"  - id: {case_id}\n    source: research\n{flag}    program: |\n"
            "      import os, time\n      start = time.monotonic()\n      time.sleep(0.3)\n"
            f"      with open({str(log)!r}, 'a') as f:\n"
            f"          f.write(f'{case_id} {{start}} {{time.monotonic()}} {{os.getpid()}}\\n')\n")


def test_exclusive_cases_run_alone_after_the_others(tmp_path: Path) -> None:
    log = tmp_path / "intervals.txt"
    text = "cases:\n" + "".join(
        _interval_case(f"x.c{i}", log, exclusive=i in (1, 3)) for i in range(5))
    cases = load_one(tmp_path, text)
    assert [c.exclusive for c in cases] == [False, True, False, True, False]
    reported: list[str] = []
    result = runner.run(cases, runner.RunOptions(target="refimpl", jobs=3, golden_dir=None),
                        on_result=lambda case, _: reported.append(case.id))
    assert [c.id for c, _ in result.pairs] == [c.id for c in cases]  # the files' order
    assert all(r.outcome == "passed" for _, r in result.pairs), result.pairs
    assert set(reported[-2:]) == {"x.c1", "x.c3"}  # after every shared case
    rows = {cid: (float(a), float(b), pid) for cid, a, b, pid in
            (line.split() for line in log.read_text().splitlines())}
    for alone in ("x.c1", "x.c3"):
        a0, a1, _ = rows[alone]
        others = [v for k, v in rows.items() if k != alone]
        assert all(b1 <= a0 or a1 <= b0 for b0, b1, _ in others), rows  # no overlap
    assert rows["x.c1"][2] == rows["x.c3"][2]  # one worker runs them, one after the other


def test_exclusive_must_be_a_bool(tmp_path: Path) -> None:
    text = "cases:\n  - {id: x.bad, source: research, exclusive: 1, program: 'pass'}\n"
    loaded = load_cases(write_cases(tmp_path, text))
    assert not loaded.cases
    assert any("exclusive must be true or false, got 1" in str(e) for e in loaded.errors)


def test_fail_fast_stops_before_the_exclusive_cases(tmp_path: Path) -> None:
    text = ("cases:\n"
            "  - {id: x.bad, source: research, program: 'assert False'}\n"
            "  - {id: x.alone, source: research, exclusive: true, program: 'pass'}\n")
    cases = load_one(tmp_path, text)
    result = runner.run(cases, runner.RunOptions(target="refimpl", jobs=2, golden_dir=None,
                                                 fail_fast=True))
    assert [c.id for c, _ in result.pairs] == ["x.bad"]
    assert result.not_run == 1
