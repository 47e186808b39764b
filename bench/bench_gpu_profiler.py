"""The profiler on the GPU, refimpl and torch in one run: tables, traces, overhead.

The same small CUDA program (a 2-layer MLP step written with elementwise ops, ``mm``,
``relu``, ``sum`` and backward, batch 64, width 256) is run on each library:

* once under ``profiler.profile(activities=[CPU, CUDA], profile_memory=True)``: the
  key-averages table (sorted by CUDA time) is printed and saved, the Chrome trace
  written to ``--out``, and the kernel events counted (with their total time);
* ``--repeat`` times unprofiled and profiled (CPU and CUDA activities), timed with the
  device synchronised, for the profiled/unprofiled ratio (goal: at most 2 on refimpl).

    python bench/bench_gpu_profiler.py --out DIR   # writes DIR/gpu_profiler.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BATCH, WIDTH, STEPS = 64, 256, 5


def make_step(lib):
    """One training step of the MLP on ``lib`` (weights from a fixed numpy draw)."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, WIDTH), dtype=np.float32), device="cuda")
    w1 = lib.tensor(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) * 0.05,
                    device="cuda", requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((WIDTH, 1), dtype=np.float32) * 0.05,
                    device="cuda", requires_grad=True)

    def step() -> float:
        h = (x.mm(w1) * 1.0 + 0.1).relu()
        loss = (h.mm(w2) ** 2).sum()
        loss.backward()
        with lib.no_grad():
            for w in (w1, w2):
                w -= 1e-4 * w.grad
                w.grad = None
        return loss

    return step


def run_steps(lib, step) -> None:
    for _ in range(STEPS):
        step()
    lib.cuda.synchronize()


def profile_once(lib, step, out: Path, name: str) -> dict:
    A = lib.profiler.ProfilerActivity
    with lib.profiler.profile(activities=[A.CPU, A.CUDA], profile_memory=True) as p:
        run_steps(lib, step)
    trace = out / f"{name}.pt.trace.json"
    p.export_chrome_trace(str(trace))
    table = p.key_averages().table(sort_by="cuda_time_total", row_limit=15)
    (out / f"{name}_table.txt").write_text(table)
    print(f"== {name} ==\n{table}")
    kernels = [e for e in p.events() if e.device_type.name == "CUDA"]
    durations = [e.time_range.end - e.time_range.start for e in kernels]
    return {"kernels": len(kernels), "kernel_time_us": float(sum(durations)),
            "all_kernel_times_positive": bool(durations) and min(durations) > 0,
            "trace": trace.name, "trace_bytes": trace.stat().st_size}


def overhead(lib, step, repeat: int) -> dict:
    A = lib.profiler.ProfilerActivity
    samples: dict = {"off": [], "profiled": []}
    for _ in range(repeat):
        start = time.perf_counter()
        run_steps(lib, step)
        samples["off"].append(time.perf_counter() - start)
        start = time.perf_counter()
        with lib.profiler.profile(activities=[A.CPU, A.CUDA]) as p:
            run_steps(lib, step)
        p.events()
        samples["profiled"].append(time.perf_counter() - start)
    med = {k: float(np.median(v)) * 1e3 for k, v in samples.items()}
    return {"median_ms": med, "ratio": med["profiled"] / med["off"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import torch

    import refimpl

    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"machine": {"gpu": torch.cuda.get_device_name(0),
                                "python": platform.python_version(),
                                "torch": torch.__version__},
                    "batch": BATCH, "width": WIDTH, "steps": STEPS, "results": {}}
    for name, lib in (("refimpl", refimpl), ("torch", torch)):
        step = make_step(lib)
        run_steps(lib, step)  # warm-up: kernel compilation, allocator, cuBLAS handles
        result = profile_once(lib, step, args.out, name)
        result["overhead"] = overhead(lib, step, args.repeat)
        report["results"][name] = result
        print(f"{name}: {result['kernels']} kernels, {result['kernel_time_us']:.1f} us; "
              f"profiled/unprofiled {result['overhead']['ratio']:.2f}x")
    (args.out / "gpu_profiler.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
