"""GPU reductions and softmax: refimpl (NVRTC template kernels) against torch, same run.

Each case runs on both runtimes over the same host data copied to the GPU: GPU time
between two CUDA events around one call, after a warm-up, ``--repeat`` samples, the
median reported. A spin kernel queued before the start event keeps the GPU busy while
the host queues the call, so the events time the GPU's work, not the host's launch
path. Bandwidth is (bytes read + bytes written) / time. Cases: the sum of 2^28 float32
(goal: at least 0.85x torch's GB/s), softmax over (8192, 8192) float32 along the last
dim (goal: at least 0.7x), and mean/amax of an (8192, 8192) float32 tensor along each
dim.

Usage (GPU machine): python3 bench/bench_gpu_reduce.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import refimpl as t
from bench._common import cpu_model, gpu_times_ms

_SPIN_CYCLES = 2_000_000  # about a millisecond: longer than either runtime's launch path
GOALS = {"sum_2^28_float32": 0.85, "softmax_8192x8192_float32": 0.7}


def _cases():
    # name, input shape (float32), the call
    return [
        ("sum_2^28_float32", (1 << 28,), lambda L, x: x.sum()),
        ("softmax_8192x8192_float32", (8192, 8192), lambda L, x: L.softmax(x, -1)),
        ("mean_dim0_8192x8192_float32", (8192, 8192), lambda L, x: x.mean(0)),
        ("mean_dim1_8192x8192_float32", (8192, 8192), lambda L, x: x.mean(1)),
        ("amax_dim0_8192x8192_float32", (8192, 8192), lambda L, x: x.amax(0)),
        ("amax_dim1_8192x8192_float32", (8192, 8192), lambda L, x: x.amax(1)),
    ]


def _events_ms(lib, fn, warmup: int, repeat: int) -> list[float]:
    """GPU milliseconds of ``repeat`` single calls, each between two CUDA events (the GPU
    kept busy while the host queues each call)."""
    return gpu_times_ms(lib, fn, repeat, warmup, spin_cycles=_SPIN_CYCLES)


def run_case(torch, case, host: np.ndarray, warmup: int, repeat: int) -> dict:
    name, shape, call = case
    data = host[: int(np.prod(shape))].reshape(shape)
    row = {"case": name, "shape": list(shape), "dtype": "float32"}
    for label, lib in (("refimpl", t), ("torch", torch)):
        x = lib.from_numpy(data).cuda()
        out = call(lib, x)
        nbytes = x.numel() * 4 + out.numel() * out.element_size()
        ms = _events_ms(lib, lambda lib=lib, x=x: call(lib, x), warmup, repeat)
        med = statistics.median(ms)
        row[label] = {"median_ms": med, "min_ms": min(ms), "samples": len(ms),
                      "gb_per_s": nbytes / (med * 1e-3) / 1e9}
        del x, out
    row["ratio_gb_per_s"] = row["refimpl"]["gb_per_s"] / row["torch"]["gb_per_s"]
    if name in GOALS:
        row["goal_ratio"] = GOALS[name]
        row["meets_goal"] = row["ratio_gb_per_s"] >= GOALS[name]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    import torch

    if not (t.cuda.is_available() and torch.cuda.is_available()):
        sys.exit("needs a CUDA device and torch built for CUDA")
    host = np.random.default_rng(0).standard_normal(1 << 28, dtype=np.float32)
    rows = [run_case(torch, c, host, args.warmup, args.repeat) for c in _cases()]
    from refimpl.cuda import _driver

    result = {
        "benchmark": "gpu_reduce",
        "machine": {"gpu": torch.cuda.get_device_name(0), "cpu": cpu_model(),
                    "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "torch_cuda": torch.version.cuda, "numpy": np.__version__,
                     "cuda_driver": _driver.driver_version(),
                     "nvrtc": list(_driver.nvrtc_version())},
        "method": "CUDA events around one call after a spin kernel; median of --repeat "
                  "samples after --warmup calls; GB/s = (input + output bytes) / time",
        "warmup": args.warmup, "repeat": args.repeat,
        "cases": rows,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    for r in rows:
        print(f"{r['case']:32s} refimpl {r['refimpl']['gb_per_s']:8.1f} GB/s  torch "
              f"{r['torch']['gb_per_s']:8.1f} GB/s  ratio {r['ratio_gb_per_s']:.3f}")


if __name__ == "__main__":
    main()
