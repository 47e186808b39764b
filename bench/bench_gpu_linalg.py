"""GPU factorisations and solvers: refimpl (cuSOLVER/cuBLAS through nvmath-python) against
torch, same run.

Each case times one call on both runtimes from operands of the same shape and dtype:
CUDA events around the call, after a warm-up, ``--repeat`` samples, the median
reported. No spin kernel is queued: refimpl loops over the matrices of a batch on the
host, one cuSOLVER call each (torch uses batched routines for small matrices), and that
host time is part of what is measured. Cases: large single matrices (LU solve,
Cholesky, QR, triangular solve) and a batch of small ones.

Usage (GPU machine): python3 bench/bench_gpu_linalg.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import refimpl as t
from bench._common import cpu_model, gpu_times_ms

CASES = [
    # name, function, batch, n, dtype
    ("solve_4096_float64", "solve", 1, 4096, "float64"),
    ("solve_4096_float32", "solve", 1, 4096, "float32"),
    ("cholesky_4096_float32", "cholesky", 1, 4096, "float32"),
    ("qr_2048_float32", "qr", 1, 2048, "float32"),
    ("solve_triangular_4096_float32", "solve_triangular", 1, 4096, "float32"),
    ("solve_ex_256x32_float32", "solve_ex", 256, 32, "float32"),
]


def _call(lib, name: str, a, b):
    la = lib.linalg
    if name == "solve":
        return lambda: la.solve(a, b)
    if name == "solve_ex":
        return lambda: la.solve_ex(a, b)
    if name == "cholesky":
        return lambda: la.cholesky_ex(a)
    if name == "qr":
        return lambda: la.qr(a)
    return lambda: la.solve_triangular(a, b, upper=True)


def _operands(lib, name: str, batch: int, n: int, dtype: str):
    """A well-conditioned (for Cholesky: positive-definite) matrix and a right-hand side."""
    dt = getattr(lib, dtype)
    shape = (n, n) if batch == 1 else (batch, n, n)
    a = lib.empty(*shape, dtype=dt, device="cuda").uniform_(-1, 1)
    eye = lib.eye(n, dtype=dt, device="cuda")
    a = a @ a.mT + n * eye if name == "cholesky" else a + n * eye
    b = lib.empty(*shape[:-1], 16, dtype=dt, device="cuda").uniform_(-1, 1)
    return a, b


def run_case(torch, case, warmup: int, repeat: int) -> dict:
    name, fn, batch, n, dtype = case
    row = {"case": name, "function": fn, "batch": batch, "n": n, "dtype": dtype}
    for label, lib in (("refimpl", t), ("torch", torch)):
        a, b = _operands(lib, fn, batch, n, dtype)
        ms = gpu_times_ms(lib, _call(lib, fn, a, b), repeat, warmup)
        row[label] = {"median_ms": statistics.median(ms), "min_ms": min(ms), "samples": len(ms)}
        del a, b
    row["ratio_time"] = row["refimpl"]["median_ms"] / row["torch"]["median_ms"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    import nvmath
    import torch

    rows = []
    for case in CASES:
        row = run_case(torch, case, args.warmup, args.repeat)
        rows.append(row)
        print(f"{row['case']:32s} refimpl {row['refimpl']['median_ms']:9.3f} ms  "
              f"torch {row['torch']['median_ms']:9.3f} ms  time ratio {row['ratio_time']:.2f}",
              flush=True)
    result = {
        "benchmark": "gpu_linalg",
        "machine": {"gpu": t.cuda.get_device_name(0), "cpu": cpu_model(),
                    "python": platform.python_version()},
        "versions": {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                     "nvmath-python": nvmath.__version__},
        "timing": "CUDA events around one call (host time inside included); median of the "
                  "samples after warm-up",
        "cases": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
