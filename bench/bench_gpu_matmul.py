"""GPU matrix products: refimpl (cuBLAS through nvmath-python) against torch, same run.

Each case times ``a @ b`` on both runtimes from the same operands' shapes and dtypes:
GPU time between two CUDA events around one call, after a warm-up, ``--repeat``
samples, the median reported. A spin kernel queued before the start event keeps the
GPU busy while the host queues the product, so the events time the GPU's work, not
the host's launch path (which bench_core measures). Cases: 8192^3 float32 with TF32 off and on, 8192^3
bfloat16, and a batched float16 product. Throughput is 2*M*N*K*batch / time.

Usage (GPU machine): python3 bench/bench_gpu_matmul.py --out results.json
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

_SPIN_CYCLES = 2_000_000  # about a millisecond: longer than either runtime's launch path
CASES = [
    # name, batch, m, k, n, dtype, tf32
    ("mm_8192_float32", 1, 8192, 8192, 8192, "float32", False),
    ("mm_8192_float32_tf32", 1, 8192, 8192, 8192, "float32", True),
    ("mm_8192_bfloat16", 1, 8192, 8192, 8192, "bfloat16", False),
    ("bmm_64x1024_float16", 64, 1024, 1024, 1024, "float16", False),
    ("bmm_64x1024_float32", 64, 1024, 1024, 1024, "float32", False),
]


def _events_ms(lib, fn, warmup: int, repeat: int) -> list[float]:
    """GPU milliseconds of ``repeat`` single calls, each between two CUDA events (the GPU
    kept busy while the host queues each call)."""
    return gpu_times_ms(lib, fn, repeat, warmup, spin_cycles=_SPIN_CYCLES)


def _operands(lib, batch: int, m: int, k: int, n: int, dtype: str):
    """Operands with values in [-1, 1), drawn on the device by the runtime's generator."""
    shape_a = (m, k) if batch == 1 else (batch, m, k)
    shape_b = (k, n) if batch == 1 else (batch, k, n)
    dt = getattr(lib, dtype)
    return (lib.empty(*shape_a, dtype=dt, device="cuda").uniform_(-1, 1),
            lib.empty(*shape_b, dtype=dt, device="cuda").uniform_(-1, 1))


def run_case(torch, case, warmup: int, repeat: int) -> dict:
    name, batch, m, k, n, dtype, tf32 = case
    flops = 2.0 * batch * m * n * k
    row = {"case": name, "batch": batch, "m": m, "k": k, "n": n, "dtype": dtype, "tf32": tf32}
    for label, lib in (("refimpl", t), ("torch", torch)):
        lib.backends.cuda.matmul.allow_tf32 = tf32
        a, b = _operands(lib, batch, m, k, n, dtype)
        ms = _events_ms(lib, lambda a=a, b=b: a @ b, warmup, repeat)
        med = statistics.median(ms)
        row[label] = {"median_ms": med, "min_ms": min(ms), "samples": len(ms),
                      "tflops": flops / (med * 1e-3) / 1e12}
        del a, b
        lib.backends.cuda.matmul.allow_tf32 = False
    row["ratio_tflops"] = row["refimpl"]["tflops"] / row["torch"]["tflops"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    import nvmath
    import torch

    from refimpl.cuda import _blas

    rows = []
    for case in CASES:
        row = run_case(torch, case, args.warmup, args.repeat)
        rows.append(row)
        print(f"{row['case']:24s} refimpl {row['refimpl']['tflops']:7.1f} TFLOP/s  "
              f"torch {row['torch']['tflops']:7.1f} TFLOP/s  ratio {row['ratio_tflops']:.3f}",
              flush=True)
    result = {
        "benchmark": "gpu_matmul",
        "goal": "refimpl >= 0.95x torch TFLOP/s",
        "machine": {"gpu": t.cuda.get_device_name(0), "cpu": cpu_model(),
                    "python": platform.python_version()},
        "versions": {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                     "nvmath-python": nvmath.__version__,
                     "cublas": _blas.version()},
        "timing": "CUDA events around one call; median of the samples after warm-up",
        "cases": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
