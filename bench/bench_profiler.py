"""The profiler's own overhead, refimpl against torch, in one run (issue 15's benchmark).

One program of 1,000 ops (``y * 1.0001`` and ``y + 0.5`` alternating on a 16-element
float32 tensor, with the first input requiring grad so that every op records an
autograd node) is timed three ways on each library:

* ``off``: no profiler;
* ``cpu``: inside ``profiler.profile(activities=[CPU])``;
* ``cpu_shapes_memory``: with ``record_shapes=True, profile_memory=True`` as well.

The goal is a profiled/unprofiled ratio of at most 2 on refimpl (torch's is about
that). Each profiled sample includes entering and leaving the profile and building
the events (``events()``), since that is what a user pays. Samples alternate the
variants so that machine noise hits them alike; medians are reported.

    python bench/bench_profiler.py     # writes bench/results/cpu/profiler.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "cpu" / "profiler.json"
OPS = 1000
GOAL = 2.0


def program(lib, data: np.ndarray):
    """The 1,000-op program (its result is returned so nothing is optimised away)."""
    y = lib.tensor(data, requires_grad=True)
    for i in range(OPS // 2):
        y = y * 1.0001
        y = y + 0.5
    return y


def variants(lib, data: np.ndarray) -> dict:
    """The three ways to run the program on ``lib``."""
    prof = lib.profiler
    cpu = [prof.ProfilerActivity.CPU]

    def off() -> None:
        program(lib, data)

    def profiled() -> None:
        with prof.profile(activities=cpu) as p:
            program(lib, data)
        p.events()

    def profiled_full() -> None:
        with prof.profile(activities=cpu, record_shapes=True, profile_memory=True) as p:
            program(lib, data)
        p.events()

    return {"off": off, "cpu": profiled, "cpu_shapes_memory": profiled_full}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import torch

    import refimpl

    torch.set_num_threads(1)
    data = np.linspace(-1, 1, 16, dtype=np.float32)
    libs = {"refimpl": refimpl, "torch": torch}
    runs = {name: variants(lib, data) for name, lib in libs.items()}
    samples: dict = {lib: {v: [] for v in fns} for lib, fns in runs.items()}
    for fns in runs.values():
        for fn in fns.values():
            fn()  # warm-up: imports, kernel caches, the profiler's first use
    for _ in range(args.repeat):
        for lib, fns in runs.items():
            for variant, fn in fns.items():
                start = time.perf_counter_ns()
                fn()
                samples[lib][variant].append((time.perf_counter_ns() - start) / 1e6)
    results: dict = {}
    for lib, by_variant in samples.items():
        medians = {v: float(np.median(s)) for v, s in by_variant.items()}
        results[lib] = {
            "median_ms": medians,
            "ratio_vs_off": {v: medians[v] / medians["off"] for v in medians if v != "off"},
            # what profiling adds per op, session start/stop and event building included
            "extra_us_per_op": {v: (medians[v] - medians["off"]) * 1e3 / OPS
                                for v in medians if v != "off"},
        }
    refimpl_ratio = results["refimpl"]["ratio_vs_off"]["cpu"]
    report = {
        "benchmark": "profiler overhead, 1,000-op program",
        "machine": {"cpu": cpu_model(), "python": platform.python_version(),
                    "numpy": np.__version__, "torch": torch.__version__},
        "ops": OPS, "repeat": args.repeat, "goal_ratio": GOAL,
        "results": results,
        "goal_met": refimpl_ratio <= GOAL,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for lib, r in results.items():
        ratios = ", ".join(f"{v} {x:.2f}x" for v, x in r["ratio_vs_off"].items())
        print(f"{lib:8s} off {r['median_ms']['off']:.2f} ms; profiled: {ratios}")
    print(f"goal (refimpl cpu ratio <= {GOAL}): {'met' if report['goal_met'] else 'missed'}")


if __name__ == "__main__":
    main()
