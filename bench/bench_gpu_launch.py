"""Host microseconds per small CUDA op, refimpl against torch, same run (issue 14).

Each op runs on tiny tensors (launch overhead dominates), ``number`` calls per sample,
followed by one synchronize; the median of ``repeat`` samples is reported per call.
``--profile DIR`` also writes a cProfile of the refimpl calls per op (``DIR/<op>.prof``
and a text summary ``DIR/<op>.txt``).

    python bench/bench_gpu_launch.py --out bench/results/h100/gpu_launch.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl

OPS = {
    "add": lambda lib, a, b: lib.add(a, b),
    "mul": lambda lib, a, b: a * b,
    "sum": lambda lib, a, b: a.sum(),
    "mm": lambda lib, a, b: lib.mm(a, b),
    "add_backward": None,
}


def _inputs(lib, requires_grad: bool = False):
    a = lib.ones((16, 16), device="cuda", requires_grad=requires_grad)
    b = lib.ones((16, 16), device="cuda")
    return a, b


def _fn(lib, op: str):
    if op == "add_backward":
        a, b = _inputs(lib, requires_grad=True)
        return lambda: (a * b).sum().backward()
    a, b = _inputs(lib)
    f = OPS[op]
    return lambda: f(lib, a, b)


def _time_us(lib, fn, number: int, repeat: int) -> float:
    for _ in range(20):
        fn()
    lib.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        lib.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    samples.sort()
    return samples[len(samples) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--number", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    import torch

    rows = {}
    for op in OPS:
        r = _time_us(refimpl, _fn(refimpl, op), args.number, args.repeat)
        t = _time_us(torch, _fn(torch, op), args.number, args.repeat)
        rows[op] = {"refimpl_us": r, "torch_us": t, "refimpl_over_torch": r / t}
        print(f"{op:14s} refimpl {r:8.1f} us  torch {t:7.1f} us  ratio {r / t:6.2f}")
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            fn = _fn(refimpl, op)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.number):
                fn()
            prof.disable()
            prof.dump_stats(str(args.profile / f"{op}.prof"))
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(45)
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(60)
            (args.profile / f"{op}.txt").write_text(buf.getvalue())
    result = {"machine": platform.node(), "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(0), "ops": rows}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
