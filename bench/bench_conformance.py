"""Conformance engine overhead: how many simple cases per second the runner sustains.

Generates N simple cases (elementwise ops, a view with an aliasing check, a
reduction against a literal, a tiny backward), then runs them on the target with
``-j 0`` (in process), ``-j 1`` and ``-j 2`` worker processes, and writes
``bench/results/conformance_overhead.json`` with the machine and versions.

    python bench/bench_conformance.py                 # torch target, 1000 cases
    python bench/bench_conformance.py --cases 400 --jobs 2

"steady" rates leave out the one-time start of the workers (process start and the
target's import, which does not grow with the number of cases); "overhead" is the
engine's time per case beyond building the inputs and running the program itself
(measured in process). Each measurement is repeated (``--repeat``) and the median
run is reported, since the machine may be shared. The goal (200 cases/s with
``-j 2``) is judged on the steady rate, the engine's own per-case cost; the
end-to-end rate of the run is reported next to it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance import checks, inputs, runner
from conformance.loader import load_cases
from conformance.report import atomic_write
from conformance.targets import load_target

RESULTS = Path(__file__).resolve().parent / "results" / "conformance_overhead.json"
GOAL_CASES_PER_S = 200

_TEMPLATES = [
    """  - id: bench.add_{i}
    inputs:
      x: {{randn: [4, 4]}}
      y: {{randn: [4, 4]}}
    program: out = x + y
    expect:
      - value: out
        equals_np: "np_x + np_y"
        dtype: float32
""",
    """  - id: bench.view_{i}
    inputs:
      x: {{randn: [3, 4]}}
    program: v = x.t()
    expect:
      - same_storage: [x, v]
      - value: v.stride()
        equals: [1, 4]
""",
    """  - id: bench.sum_{i}
    inputs:
      z: {{value: [[1, 2], [3, 4]], dtype: int64}}
    program: s = z.sum()
    expect:
      - value: s
        equals: 10
""",
    """  - id: bench.mul_{i}
    inputs:
      x: {{randint: [0, 9, [8]], dtype: int32}}
    program: out = x * 3
    expect:
      - value: out
        equals_np: "np_x * 3"
      - true: "out.dtype == t.int32"
""",
    """  - id: bench.grad_{i}
    inputs:
      x: {{randn: [3], dtype: float64, requires_grad: true}}
    program: |
      (x * x).sum().backward()
    expect:
      - value: x.grad
        equals_np: "2 * np_x"
""",
]


def write_cases(directory: Path, count: int, per_file: int = 50) -> None:
    """Write ``count`` simple cases into YAML files of ``per_file`` cases each."""
    area = directory / "bench"
    area.mkdir(parents=True, exist_ok=True)
    for start in range(0, count, per_file):
        body = "".join(
            _TEMPLATES[i % len(_TEMPLATES)].format(i=i)
            for i in range(start, min(count, start + per_file))
        )
        (area / f"bench_{start:05d}.yaml").write_text(
            "defaults:\n  source: research\ncases:\n" + body
        )


def program_baseline(cases: list, target: str) -> float:
    """Seconds per case to build inputs and run the program alone (no checks, no engine)."""
    adapter = load_target(target)
    start = time.perf_counter()
    for case in cases:
        tensors, _ = inputs.build_inputs(case.inputs, case.id, adapter)
        exec(checks.compiled(case.program, "exec"), {"t": adapter.t, **tensors})  # noqa: S102
    return (time.perf_counter() - start) / len(cases)


def measure_median(folder: Path, target: str, jobs: int, repeat: int) -> dict:
    """The run with the median total time out of ``repeat`` runs, each in a fresh
    process (as each ``tensorctl run-conformance`` is: nothing is warm)."""
    command = [sys.executable, __file__, "--single", str(jobs), "--folder", str(folder)]
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [*command, "--target", target], capture_output=True, text=True, check=True
        )
        runs.append(json.loads(out.stdout))
    runs.sort(key=lambda r: r["total_s"])
    return runs[len(runs) // 2] | {"repeats": repeat}


def measure(cases: list, target: str, jobs: int) -> dict:
    """Run every case once and time it."""
    if jobs == 0:
        load_target(target)  # in process the import is paid before the run, as under pytest
    options = runner.RunOptions(target=target, jobs=jobs, golden_dir=None)
    outcome = runner.run(cases, options)
    bad = [r for _, r in outcome.pairs if r.outcome not in ("passed",)]
    if bad:
        raise SystemExit(f"benchmark cases failed on {target}: {bad[0].id}: {bad[0].message}")
    steady = outcome.duration - outcome.worker_start
    return {
        "jobs": jobs,
        "cases": len(cases),
        "total_s": round(outcome.duration, 3),
        "worker_start_s": round(outcome.worker_start, 3),
        "cases_per_s": round(len(cases) / outcome.duration, 1),
        "steady_cases_per_s": round(len(cases) / steady, 1) if steady > 0 else None,
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> None:
    """Run the benchmark and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="number of generated cases")
    parser.add_argument("--target", default="torch")
    parser.add_argument("--jobs", default="0,1,2", help="comma-separated -j values")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--single", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single is not None:  # one measurement, in this fresh process
        print(json.dumps(measure(load_cases(args.folder).cases, args.target, args.single)))
        return
    load_before = list(os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        write_cases(Path(tmp), args.cases)
        start = time.perf_counter()
        loaded = load_cases(tmp)
        load_s = time.perf_counter() - start
        if loaded.errors:
            raise SystemExit(str(loaded.errors[0]))
        cases = loaded.cases
        runs = [
            measure_median(Path(tmp), args.target, int(j), args.repeat)
            for j in args.jobs.split(",")
        ]
        baseline = min(program_baseline(cases, args.target) for _ in range(args.repeat))
    in_process = next((r for r in runs if r["jobs"] == 0), None)
    overhead_us = None
    if in_process:
        overhead_us = round((in_process["total_s"] / len(cases) - baseline) * 1e6, 1)
    two = next((r for r in runs if r["jobs"] == 2), None)
    result = {
        "benchmark": "conformance engine overhead",
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "versions": {
            "tensorctl": _version("tensorctl") or "source checkout",
            "numpy": _version("numpy"),
            "torch": _version("torch"),
            "pyyaml": _version("pyyaml"),
        },
        "target": args.target,
        "load": {
            "cases": len(cases),
            "seconds": round(load_s, 3),
            "cases_per_s": round(len(cases) / load_s, 1),
        },
        "program_baseline_us_per_case": round(baseline * 1e6, 1),
        "engine_overhead_us_per_case": overhead_us,
        "runs": runs,
        "load_average_before": load_before,
        "goal": {
            "cases_per_s_with_j2": GOAL_CASES_PER_S,
            "judged_on": "steady_cases_per_s of the -j 2 run",
            "met": bool(two and (two["steady_cases_per_s"] or 0) >= GOAL_CASES_PER_S),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
