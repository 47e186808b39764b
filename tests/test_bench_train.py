"""The training benchmark's bookkeeping (``bench/bench_train.py``): a case's ratios from
paired samples, and the summary of several runs. The timings themselves are never
asserted (benchmarks measure, tests check logic)."""

from __future__ import annotations

import statistics

import pytest

from bench import bench_train as B
from bench._common import measure


def _report(ratios: dict, goal: str = "<= 1.5") -> dict:
    return {"cases": {case: {"refimpl_over_torch": r, "refimpl_over_torch_rounds_median": r + 0.01,
                             "goal": goal} for case, r in ratios.items()}}


def test_summary_of_runs_counts_the_runs_over_the_goal():
    reports = [_report({"cnn_test": 1.2, "cnn_bench": 1.6}),
               _report({"cnn_test": 1.4, "cnn_bench": 1.5}),
               _report({"cnn_test": 1.3, "cnn_bench": 1.7})]
    summary = B.summarize_runs(reports)
    assert summary["cnn_test"]["ratios"] == [1.2, 1.4, 1.3]
    assert summary["cnn_test"]["median"] == 1.3
    assert (summary["cnn_test"]["min"], summary["cnn_test"]["max"]) == (1.2, 1.4)
    assert summary["cnn_test"]["runs_over_goal"] == 0
    # 1.5 meets "<= 1.5"; 1.6 and 1.7 do not
    assert summary["cnn_bench"]["runs_over_goal"] == 2
    assert summary["cnn_bench"]["rounds_medians"] == pytest.approx([1.61, 1.51, 1.71])


def test_child_command_lines_drop_runs_and_out():
    argv = ["--device", "cuda", "--runs", "3", "--out", "x.json", "--repeat=9", "--runs=2",
            "--out=y.json"]
    assert B._without_runs(argv) == ["--device", "cuda", "--repeat=9"]


def test_measure_keeps_each_functions_samples_in_order():
    calls = {"a": 0, "b": 0}

    def fn(name):
        def call():
            calls[name] += 1
        return call

    times = measure({"a": fn("a"), "b": fn("b")}, number=2, repeat=5, warmup=1, keep=True)
    assert calls == {"a": 11, "b": 11}
    for name in "ab":
        values = times[name]["values_ns"]
        assert len(values) == 5 == times[name]["samples"]
        assert times[name]["median_ns"] == statistics.median(values)
    assert "values_ns" not in measure({"a": fn("a")}, number=1, repeat=1, warmup=0)["a"]


def test_a_case_reports_the_median_of_its_rounds_ratios(monkeypatch):
    torch = pytest.importorskip("torch")
    # samples made up so that the rounds' ratios (2, 1, 2, 0.83, 2: median 2) and the
    # ratio of the medians (8 / 6) differ
    rounds = iter(range(1, 100))

    def fake_measure(fns, number, repeat, warmup, keep=False):
        values = {"refimpl": [], "torch": []}
        for _ in range(repeat):
            r = next(rounds)
            values["refimpl"].append(2.0 * r + 2)
            values["torch"].append(r + 1.0 if r % 2 else 3.0 * r)
        return {k: {"median_ns": statistics.median(v), "min_ns": min(v),
                    "stdev_ns": 0.0, "samples": len(v), "values_ns": list(v)}
                for k, v in values.items()}

    monkeypatch.setattr(B, "measure", fake_measure)
    case = B.bench("cnn", "test", torch, "cpu", number=1, repeat=5)
    want = statistics.median(
        (2.0 * r + 2) / (r + 1.0 if r % 2 else 3.0 * r) for r in range(1, 6))
    assert case["refimpl_over_torch_rounds_median"] == pytest.approx(want) == 2.0
    assert case["refimpl_over_torch"] == pytest.approx(8 / 6)
    assert "values_ns" not in case["samples"]["refimpl"]  # the report keeps aggregates only
