"""refimpl's CPU tensor core against torch, in one run (issue 2's benchmark).

Four measurements, each on refimpl and on torch with the same numpy data:

* ``add_1elem``: ``x + y`` on one-element float32 tensors: the per-op overhead of the
  dispatch path (goal: at most 3x torch);
* ``add_2p24`` / ``sum_2p24``: ``x + y`` and ``x.sum()`` on 2**24 float32 elements
  (goal: at most 1.3x torch);
* ``matmul_512``: ``a @ b`` on 512x512 float32 matrices (goal: at most 1.3x torch).

torch runs with as many threads as numpy uses for the same work: numpy's elementwise
and reduction loops are single-threaded, its matmul runs on OpenBLAS's thread pool, so
torch gets 1 thread for the first three and OpenBLAS's count for ``matmul_512`` (both
counts are recorded). Each measurement warms up, then takes ``--repeat`` samples of
``number`` calls, alternating refimpl and torch sample by sample so that drift on a
shared machine hits both; the median sample is reported (goals are judged on the ratio
of medians; the ratio of the fastest samples is stored too, as the machine may be
shared). When a goal is missed the
refimpl side is profiled with cProfile and the top functions are stored with the
results.

    python bench/bench_core.py                    # writes bench/results/core_cpu.json
    python bench/bench_core.py --repeat 50 --profile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl as t
from bench._common import cpu_model, measure, numpy_blas_threads, profile

RESULTS = Path(__file__).resolve().parent / "results" / "core_cpu.json"


def benchmarks(torch, blas_threads: int) -> list:
    """(name, goal ratio, torch threads, number, refimpl fn, torch fn) per benchmark."""
    rng = np.random.default_rng(0)
    one_a, one_b = np.ones(1, np.float32), np.full(1, 2.0, np.float32)
    big_a = rng.standard_normal(2 ** 24, dtype=np.float32)
    big_b = rng.standard_normal(2 ** 24, dtype=np.float32)
    m_a = rng.standard_normal((512, 512), dtype=np.float32)
    m_b = rng.standard_normal((512, 512), dtype=np.float32)
    r = {k: t.from_numpy(v) for k, v in
         {"one_a": one_a, "one_b": one_b, "big_a": big_a, "big_b": big_b, "m_a": m_a,
          "m_b": m_b}.items()}
    p = {k: torch.from_numpy(v) for k, v in
         {"one_a": one_a, "one_b": one_b, "big_a": big_a, "big_b": big_b, "m_a": m_a,
          "m_b": m_b}.items()}
    return [
        ("add_1elem", 3.0, 1, 2000, lambda: r["one_a"] + r["one_b"],
         lambda: p["one_a"] + p["one_b"]),
        ("add_2p24", 1.3, 1, 1, lambda: r["big_a"] + r["big_b"],
         lambda: p["big_a"] + p["big_b"]),
        ("sum_2p24", 1.3, 1, 1, lambda: r["big_a"].sum(), lambda: p["big_a"].sum()),
        ("matmul_512", 1.3, blas_threads, 5, lambda: r["m_a"] @ r["m_b"],
         lambda: p["m_a"] @ p["m_b"]),
    ]


def check_same(name: str, ours, theirs) -> None:
    """The two sides must compute the same thing before their times are compared."""
    a, b = np.asarray(ours._np, np.float64), theirs.numpy().astype(np.float64)
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-2, err_msg=name)


def main(argv=None) -> int:
    """Run the benchmarks, print a table and write the JSON results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=31, help="samples per side")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up calls per sample size")
    ap.add_argument("--profile", action="store_true", help="profile refimpl even when "
                    "every goal is met")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    import torch

    blas = numpy_blas_threads()
    default_torch_threads = torch.get_num_threads()
    results = []
    for name, goal, threads, number, ours, theirs in benchmarks(torch, blas):
        torch.set_num_threads(threads)
        check_same(name, ours(), theirs())
        m = measure({"refimpl": ours, "torch": theirs}, number, args.repeat,
                    args.warmup * number)
        ratio = m["refimpl"]["median_ns"] / m["torch"]["median_ns"]
        ratio_min = m["refimpl"]["min_ns"] / m["torch"]["min_ns"]
        row = {"name": name, "goal_ratio": goal, "ratio": round(ratio, 3),
               "ratio_of_minimums": round(ratio_min, 3),
               "meets_goal": ratio <= goal, "numpy_threads": blas if "matmul" in name else 1,
               "torch_threads": threads, "calls_per_sample": number,
               "refimpl": m["refimpl"], "torch": m["torch"]}
        if args.profile or ratio > goal:
            row["refimpl_profile"] = profile(ours, max(number * 20, 20), "us_per_op", 1e6)
        results.append(row)
        print(f"{name:12s} refimpl {m['refimpl']['median_ns'] / 1e3:10.2f} us   torch "
              f"{m['torch']['median_ns'] / 1e3:10.2f} us   ratio {ratio:6.2f} (of minimums "
              f"{ratio_min:4.2f})  goal <= {goal}, torch threads {threads}")
    torch.set_num_threads(default_torch_threads)
    report = {
        "benchmark": "bench/bench_core.py",
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "torch": torch.__version__, "refimpl": t.__version__},
        "threads": {"numpy_blas": blas, "numpy_elementwise": 1,
                    "torch_default": default_torch_threads},
        "method": {"timer": "time.perf_counter_ns", "statistic": "median of samples",
                   "repeat": args.repeat, "interleaved": True},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
