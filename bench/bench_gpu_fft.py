"""CUDA FFTs on cuFFT, refimpl against torch in the same run.

Transforms timed (the plan made in warm-up, as a program that repeats a transform sees):

* ``fft_c64_1m``: one 2^20-point complex64 ``fft``;
* ``rfft_f32_batched``: ``rfft`` of 256 signals of 4096 float32 points (last dim);
* ``irfft_f32_batched``: its inverse back to 4096 points.

For each, GPU milliseconds between two CUDA events around one call (a sleep kernel
queued first keeps the GPU busy while the host queues the call, so host overhead does
not show), and the host wall time of one call plus synchronize; median of ``--repeat``
samples, the samples of torch and refimpl alternating. Each result is also checked
against torch's (largest error relative to the largest magnitude). JSON with the
machine and versions goes to ``--out``.
Usage on the GPU machine: ``PYTHONPATH=. python3 bench/bench_gpu_fft.py --out F``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import gpu_times_ms  # after the path is set

_SPIN = 2_000_000  # sleep-kernel cycles queued before each timed call (about 1 ms)


def _cases(lib, arrays: dict) -> dict:
    """name -> zero-argument function running the transform on ``lib``'s tensors."""
    x = lib.tensor(arrays["c"], device="cuda")
    r = lib.tensor(arrays["r"], device="cuda")
    spec = lib.fft.rfft(r)
    return {
        "fft_c64_1m": lambda: lib.fft.fft(x),
        "rfft_f32_batched": lambda: lib.fft.rfft(r),
        "irfft_f32_batched": lambda: lib.fft.irfft(spec, n=r.shape[-1]),
    }


def _wall_ms(lib, fn) -> float:
    lib.cuda.synchronize()
    start = time.perf_counter()
    fn()
    lib.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def measure(libs: dict, repeat: int) -> dict:
    """GPU and wall milliseconds per call of each case on each library, and the
    refimpl-torch disagreement of each case's result."""
    rng = np.random.default_rng(0)
    arrays = {
        "c": (rng.standard_normal(2**20) + 1j * rng.standard_normal(2**20)).astype(np.complex64),
        "r": rng.standard_normal((256, 4096)).astype(np.float32),
    }
    fns = {name: _cases(lib, arrays) for name, lib in libs.items()}
    results: dict = {name: {} for name in libs}
    for case in fns["torch"]:
        outs = {name: fns[name][case]().cpu().numpy() for name in libs}
        ref = outs["torch"]
        err = float(np.abs(outs["refimpl"] - ref).max() / max(np.abs(ref).max(), 1e-30))
        gpu: dict = {name: [] for name in libs}
        wall: dict = {name: [] for name in libs}
        for name, lib in libs.items():
            gpu_times_ms(lib, fns[name][case], 1, warmup=3)
        for _ in range(repeat):
            for name, lib in libs.items():
                gpu[name].extend(gpu_times_ms(lib, fns[name][case], 1, warmup=0,
                                              spin_cycles=_SPIN))
                wall[name].append(_wall_ms(lib, fns[name][case]))
        for name in libs:
            results[name][case] = {"gpu_ms": statistics.median(gpu[name]),
                                   "wall_ms": statistics.median(wall[name])}
        results["refimpl"][case]["max_rel_error_vs_torch"] = err
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    import refimpl
    from refimpl.cuda import _cufft

    results = measure({"torch": torch, "refimpl": refimpl}, args.repeat)
    ratios = {case: {k: results["refimpl"][case][k] / results["torch"][case][k]
                     for k in ("gpu_ms", "wall_ms")} for case in results["torch"]}
    try:
        import nvmath

        nvmath_version = nvmath.__version__
    except ImportError:
        nvmath_version = None
    report = {
        "benchmark": "gpu_fft",
        "machine": {"gpu": torch.cuda.get_device_name(0), "python": platform.python_version(),
                    "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                    "refimpl": "0.1.0", "nvmath_python": nvmath_version,
                    "cufft_version_refimpl": _cufft.version(),
                    "numpy": np.__version__},
        "params": vars(args) | {"out": str(args.out)},
        "results": results,
        "ratios_refimpl_over_torch": ratios,
        "plan_cache_size": {"torch": torch.backends.cuda.cufft_plan_cache[0].size,
                            "refimpl": refimpl.backends.cuda.cufft_plan_cache[0].size},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
