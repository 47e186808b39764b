"""CUDA elementwise kernels: refimpl against torch in the same run.

GPU time from CUDA events (median of ``--repeat`` launches after warm-up) for
2**28-element float32 add and mul, float16 and bfloat16 add, a broadcast add
((16384, 16384) + (16384, 1)); effective bandwidth (bytes read + written / time)
next to the device's measured device-to-device copy bandwidth; host time of a
one-element CUDA add (the Python and launch overhead per op). Writes JSON to --out.

    python bench/bench_gpu_pointwise.py --out bench/results/h100/gpu_pointwise.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from bench._common import gpu_times_ms


def _gpu_ms(lib, fn, repeat: int, warmup: int = 3) -> float:
    """Median milliseconds of ``fn`` between two CUDA events."""
    return statistics.median(gpu_times_ms(lib, fn, repeat, warmup))


def _host_us(fn, sync, number: int = 2000, repeat: int = 7) -> float:
    """Median microseconds per call of ``fn`` (launches only; the GPU keeps up)."""
    for _ in range(200):
        fn()
    sync()
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best.append((time.perf_counter() - t0) / number * 1e6)
        sync()
    return statistics.median(best)


def run(repeat: int) -> dict:
    """Measure every case on refimpl and torch; returns the JSON-ready report."""
    import torch

    import refimpl as t
    from refimpl.cuda import _driver

    n = 1 << 28
    result: dict = {"machine": {"gpu": torch.cuda.get_device_name(0),
                                "host": platform.node(), "python": platform.python_version(),
                                "torch": torch.__version__, "cuda": torch.version.cuda,
                                "driver": _driver.driver_version(),
                                "numpy": np.__version__},
                    "repeat": repeat, "cases": {}}
    rsync, tsync = t.cuda.synchronize, torch.cuda.synchronize

    # device-to-device copy bandwidth (torch's copy_ of 2**28 float32: read + write)
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    copy_ms = _gpu_ms(torch, lambda d=dst, s=src: d.copy_(s), repeat)
    result["copy_GBps"] = 2 * n * 4 / copy_ms / 1e6
    del src, dst

    cases = {
        "add_f32_2^28": ((n,), (n,), "float32", lambda a, b: a + b),
        "mul_f32_2^28": ((n,), (n,), "float32", lambda a, b: a * b),
        "add_f16_2^28": ((n,), (n,), "float16", lambda a, b: a + b),
        "add_bf16_2^28": ((n,), (n,), "bfloat16", lambda a, b: a + b),
        "bcast_add_16384x16384+16384x1": ((16384, 16384), (16384, 1), "float32",
                                          lambda a, b: a + b),
    }
    for name, (sa, sb, dt, fn) in cases.items():
        ta = torch.ones(sa, dtype=getattr(torch, dt), device="cuda")
        tb = torch.ones(sb, dtype=getattr(torch, dt), device="cuda")
        ra = t.ones(sa, dtype=getattr(t, dt), device="cuda")
        rb = t.ones(sb, dtype=getattr(t, dt), device="cuda")
        check = fn(ra, rb)
        assert check.device.type == "cuda" and check.shape == sa
        del check
        t_ms = _gpu_ms(torch, lambda f=fn, a=ta, b=tb: f(a, b), repeat)
        r_ms = _gpu_ms(t, lambda f=fn, a=ra, b=rb: f(a, b), repeat)
        itemsize = ta.element_size()
        nbytes = (2 * ta.numel() + tb.numel()) * itemsize
        result["cases"][name] = {
            "refimpl_ms": r_ms, "torch_ms": t_ms,
            "refimpl_GBps": nbytes / r_ms / 1e6, "torch_GBps": nbytes / t_ms / 1e6,
            "refimpl_over_torch_bandwidth": t_ms / r_ms,
            "refimpl_GBps_over_copy": nbytes / r_ms / 1e6 / result["copy_GBps"]}
        del ta, tb, ra, rb
        t.cuda.empty_cache()
        torch.cuda.empty_cache()

    rx, ry = t.ones(1, device="cuda"), t.ones(1, device="cuda")
    tx, ty = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
    r_us = _host_us(lambda: rx + ry, rsync)
    t_us = _host_us(lambda: tx + ty, tsync)
    result["host_one_element_add"] = {"refimpl_us": r_us, "torch_us": t_us,
                                      "ratio": r_us / t_us}
    return result


def main() -> None:
    """Parse arguments, run, print and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the JSON report")
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    report = run(args.repeat)
    text = json.dumps(report, indent=2)
    print(text)
    with open(args.out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
