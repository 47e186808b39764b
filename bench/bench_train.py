"""Training-step time of refimpl against torch, same run (issue 14's benchmark).

Two models from ``bench/train_models.py``, each built in torch and copied into refimpl
through ``load_state_dict``:

* ``cnn``: conv, batch norm, ReLU, max pooling, linear, cross-entropy; SGD with momentum;
* ``transformer``: one pre-norm transformer block (attention, layer norm, GELU MLP) and a
  linear head; AdamW.

each at the unit tests' ``test`` size (per-op overhead dominates) and the larger ``bench``
size (``train_models.SIZES``).

One step is zero_grad, forward, loss, backward, optimizer step, and ``loss.item()`` (which
also waits for the GPU). Samples alternate refimpl and torch; the median is reported and
the goals are judged on the ratio of medians: at most 2x torch on the CPU, at most 1.5x
on the GPU (``--device cuda``). The median of each round's ratio (a refimpl sample over
the torch sample right after it) is reported beside it: it follows the host's drift
within a run, which the ratio of medians does not. On the CPU, numpy's OpenBLAS and torch get one thread
each (two libraries' spinning pools make small-model timings meaningless), and glibc's
mmap and trim thresholds are fixed for the process (``bench._common.fix_malloc_thresholds``;
``--malloc default`` leaves them moving, and the CPU timings at the bench size then vary
by up to 1.5x from one run to the next, for both libraries).

    python bench/bench_train.py                          # bench/results/cpu/train.json
    python bench/bench_train.py --device cuda --out F
    python bench/bench_train.py --device cuda --runs 5 --out F   # five fresh processes

A run's ratios move with the host between processes (on the lent H200s the CNN's by up
to 0.4 from one run to the next), so ``--runs N`` repeats the whole benchmark in N fresh
processes and writes, per case, each run's ratios and their median, range and count of
runs over the goal (``summarize_runs``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench import train_models as M
from bench._common import cpu_model, fix_malloc_thresholds, measure

RESULTS = Path(__file__).resolve().parent / "results" / "cpu" / "train.json"
GOALS = {"cpu": 2.0, "cuda": 1.5}


def _stepper(lib, kind: str, model, device: str, size: str):
    opt = M.make_optimizer(lib, kind, model)
    model.train()
    data = [(lib.tensor(x, device=device), lib.tensor(y, device=device))
            for x, y in M.batches(kind, 4, size)]
    state = {"i": 0}

    def step() -> float:
        x, y = data[state["i"] % 4]
        state["i"] += 1
        return M.train_step(lib, model, opt, x, y).item()

    return step


def bench(kind: str, size: str, torch, device: str, number: int, repeat: int) -> dict:
    """Median milliseconds per training step of refimpl and torch, and their ratio."""
    tm, rm = M.paired_models(kind, torch, refimpl, device=device, size=size)
    tm = tm.to(device)
    fns = {"refimpl": _stepper(refimpl, kind, rm, device, size),
           "torch": _stepper(torch, kind, tm, device, size)}
    times = measure(fns, number=number, repeat=repeat, warmup=3, keep=True)
    ref_ms = times["refimpl"]["median_ns"] / 1e6
    torch_ms = times["torch"]["median_ns"] / 1e6
    ratio = ref_ms / torch_ms
    # each round's refimpl sample over the torch sample taken right after it: the host's
    # speed drifts within a run, and a round's two samples share its speed
    rounds = [r / t for r, t in zip(times["refimpl"].pop("values_ns"),
                                    times["torch"].pop("values_ns"))]
    return {"refimpl_ms_per_step": ref_ms, "torch_ms_per_step": torch_ms,
            "refimpl_over_torch": ratio,
            "refimpl_over_torch_min": times["refimpl"]["min_ns"] / times["torch"]["min_ns"],
            "refimpl_over_torch_rounds_median": statistics.median(rounds),
            "goal": f"<= {GOALS[device]}", "met": ratio <= GOALS[device], "samples": times}


def summarize_runs(reports: list[dict]) -> dict:
    """Per case of several runs' reports: each run's ratio of medians and rounds median,
    and the ratios' median, min, max and the runs over the goal."""
    summary = {}
    for case in reports[0]["cases"]:
        rows = [r["cases"][case] for r in reports]
        ratios = [row["refimpl_over_torch"] for row in rows]
        goal = float(rows[0]["goal"].split()[-1])
        summary[case] = {"ratios": ratios,
                         "rounds_medians": [row["refimpl_over_torch_rounds_median"]
                                            for row in rows],
                         "median": statistics.median(ratios), "min": min(ratios),
                         "max": max(ratios), "runs_over_goal": sum(x > goal for x in ratios),
                         "goal": rows[0]["goal"]}
    return summary


def _runs(args, argv: list[str]) -> None:
    """``--runs N``: the benchmark in N fresh processes (their own reports in a temporary
    folder), then one report of the runs."""
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            one = Path(tmp) / f"run{i}.json"
            cmd = [sys.executable, __file__, *_without_runs(argv), "--out", str(one)]
            subprocess.run(cmd, check=True)
            reports.append(json.loads(one.read_text()))
    summary = summarize_runs(reports)
    print(f"{args.runs} runs:")
    for case, row in summary.items():
        print(f"{case:<18} median {row['median']:.2f}  range {row['min']:.2f}-{row['max']:.2f}"
              f"  over the goal ({row['goal']}) in {row['runs_over_goal']} of {args.runs}")
    report = {"benchmark": "train, several runs", "machine": reports[-1]["machine"],
              "runs": args.runs, "summary": summary, "reports": reports}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


def _without_runs(argv: list[str]) -> list[str]:
    """The command line minus ``--runs N`` and ``--out F`` (each child writes its own)."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--runs", "--out"):
            skip = True
        elif not a.startswith(("--runs=", "--out=")):
            kept.append(a)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--number", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--malloc", choices=["fixed", "default"], default="fixed",
                        help="glibc's mmap/trim thresholds: fixed (stable timings) or moving")
    parser.add_argument("--runs", type=int, default=1,
                        help="repeat the benchmark in this many fresh processes")
    args = parser.parse_args()
    if args.runs > 1:
        _runs(args, sys.argv[1:])
        return
    malloc = fix_malloc_thresholds() if args.malloc == "fixed" else None
    import torch

    if args.device == "cpu":
        torch.set_num_threads(1)
    machine = {"platform": platform.platform(), "cpu": cpu_model(),
               "python": platform.python_version(), "torch": torch.__version__,
               "refimpl": refimpl.__version__, "device": args.device,
               "malloc": malloc or "glibc default (moving mmap threshold)"}
    if args.device == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(0)
    report = {"benchmark": "train", "machine": machine,
              "sizes": M.SIZES,
              "cases": {f"{kind}_{size}": bench(kind, size, torch, args.device, args.number,
                                                args.repeat)
                        for size in ("test", "bench") for kind in ("cnn", "transformer")}}
    for kind, case in report["cases"].items():
        print(f"{kind:<18} refimpl {case['refimpl_ms_per_step']:8.2f} ms  torch "
              f"{case['torch_ms_per_step']:8.2f} ms  ratio {case['refimpl_over_torch']:.2f}"
              f" (rounds {case['refimpl_over_torch_rounds_median']:.2f})"
              f"  goal {case['goal']} {'met' if case['met'] else 'MISSED'}")
    out = args.out or (RESULTS if args.device == "cpu" else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
