"""CUDA indexing and data-movement kernels: refimpl against torch in the same run.

GPU time from CUDA events (median of ``--repeat`` runs after warm-up) of gather,
index_select, index_put with accumulate (many duplicate indices), scatter_add, cat,
flip, a stable sort of one long row and of many short rows, topk, nonzero and
unique, on the same data for both libraries. The ops that synchronize for their
output size (nonzero, unique) include that synchronization. Writes JSON to --out.

    python bench/bench_gpu_indexing.py --out bench/results/gpu_indexing-h100.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics

import numpy as np

from bench._common import gpu_times_ms


def _gpu_ms(lib, fn, repeat: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn`` between two CUDA events."""
    return statistics.median(gpu_times_ms(lib, fn, repeat, warmup))


def _cases(lib, rng_data: dict) -> dict:
    """name -> zero-argument callable running the op on ``lib``'s CUDA tensors."""
    def dev(name, dtype=None):
        arr = rng_data[name]
        return lib.from_numpy(arr).to("cuda") if dtype is None else \
            lib.from_numpy(arr).to("cuda").to(dtype)

    x = dev("x")              # (4096, 4096) float32
    idx = dev("idx")          # (4096, 4096) int64 in [0, 4096)
    rows = dev("rows")        # (65536,) int64 in [0, 4096)
    dup = dev("dup")          # (1 << 22,) int64 in [0, 1024)
    vals = dev("vals")        # (1 << 22,) float32
    base = lib.zeros(1024, device="cuda")
    long_row = dev("long_row")   # (1 << 20,) float32
    short_rows = dev("short_rows")  # (8192, 128) float32
    mask = dev("mask")        # (1 << 24,) bool
    small = dev("small")      # (1 << 20,) int64 in [0, 1000)
    return {
        "gather_16M": lambda: x.gather(1, idx),
        "index_select_64k_rows": lambda: x.index_select(0, rows),
        "index_put_accumulate_4M": lambda: base.index_put((dup,), vals, accumulate=True),
        "scatter_add_4M": lambda: base.scatter_add(0, dup, vals),
        "cat_2x16M": lambda: lib.cat([x, x]),
        "flip_16M": lambda: x.flip(0, 1),
        "sort_1M_one_row": lambda: lib.sort(long_row, stable=True),
        "sort_8192x128": lambda: lib.sort(short_rows, dim=1, stable=True),
        "topk_8192x128_k8": lambda: short_rows.topk(8, dim=1),
        "nonzero_16M": lambda: mask.nonzero(),
        "unique_1M": lambda: lib.unique(small),
    }


def run(repeat: int) -> dict:
    """Measure every case on refimpl and torch; returns the JSON-ready report."""
    import torch

    import refimpl as t

    rng = np.random.default_rng(0)
    data = {
        "x": rng.standard_normal((4096, 4096)).astype(np.float32),
        "idx": rng.integers(0, 4096, (4096, 4096)),
        "rows": rng.integers(0, 4096, 65536),
        "dup": rng.integers(0, 1024, 1 << 22),
        "vals": rng.standard_normal(1 << 22).astype(np.float32),
        "long_row": rng.standard_normal(1 << 20).astype(np.float32),
        "short_rows": rng.standard_normal((8192, 128)).astype(np.float32),
        "mask": rng.random(1 << 24) < 0.3,
        "small": rng.integers(0, 1000, 1 << 20),
    }
    report: dict = {"machine": {"gpu": torch.cuda.get_device_name(0),
                                "host": platform.node(), "torch": torch.__version__,
                                "cuda": torch.version.cuda},
                    "repeat": repeat, "cases": {}}
    ref = _cases(t, data)
    tor = _cases(torch, data)
    for name in ref:
        r = _gpu_ms(t, ref[name], repeat)
        q = _gpu_ms(torch, tor[name], repeat)
        report["cases"][name] = {"refimpl_ms": r, "torch_ms": q, "ratio": r / q}
        print(f"{name:28s} refimpl {r:9.3f} ms  torch {q:9.3f} ms  x{r / q:7.2f}", flush=True)
    return report


def main() -> None:
    """Parse arguments, run, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    report = run(args.repeat)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
