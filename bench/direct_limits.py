"""Where the CUDA direct kernels should stop: training-step times under several size limits.

The convolution's direct kernels (``refimpl.cuda._conv_kernels.DIRECT_MACS``,
``DIRECT_GW_SUM``), the linear layer's ``small_mm`` (``SMALL_MM_MACS``) and attention's
``bmm_small`` (``refimpl.cuda._attention_kernels.SMALL_MACS``) replace im2col, cuBLAS
calls and layout copies below a number of multiply-adds. This times refimpl's training
steps (``bench/train_models.py``) under each configuration of those limits, interleaved
round by round in one process so that the machine's drift touches them alike, and torch's
step in the same process for scale. It prints one line per model and size: the median
step time (microseconds) of each configuration and its ratio to torch's.

    python bench/direct_limits.py [--sizes bench,test] [--rounds 6] [--steps 60]

Results kept: ``bench/results/h200/direct_limits.txt``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# log2 of (DIRECT_MACS, DIRECT_GW_SUM, SMALL_MM_MACS, attention SMALL_MACS)
CONFIGS = {"old": (22, 13, 20, 20), "mid": (24, 13, 22, 22), "big": (26, 13, 24, 24),
           "big+gw": (26, 15, 24, 24)}


def _apply(config: tuple) -> None:
    from refimpl.cuda import _attention_kernels as AK
    from refimpl.cuda import _conv_kernels as CK

    CK.DIRECT_MACS, CK.DIRECT_GW_SUM, CK.SMALL_MM_MACS, AK.SMALL_MACS = (1 << v for v in config)


def _median_step(lib, model, opt, data, steps: int, skip: int) -> float:
    from bench import train_models as M

    times = []
    for i in range(steps):
        t0 = time.perf_counter_ns()
        M.train_step(lib, model, opt, *data[i % len(data)]).item()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times[skip:]) / 1e3


def main(argv=None) -> int:
    """Print the step times of every configuration, model and size."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="bench,test")
    p.add_argument("--rounds", type=int, default=6, help="rounds (the first is warm-up)")
    p.add_argument("--steps", type=int, default=60, help="steps per configuration and round")
    opts = p.parse_args(argv)
    import torch

    import refimpl
    from bench import train_models as M
    from refimpl.cuda import _attention_kernels as AK
    from refimpl.cuda import _conv_kernels as CK

    current = (CK.DIRECT_MACS, CK.DIRECT_GW_SUM, CK.SMALL_MM_MACS, AK.SMALL_MACS)
    print("configurations (log2 DIRECT_MACS, DIRECT_GW_SUM, SMALL_MM_MACS, SMALL_MACS):",
          CONFIGS)
    try:
        for size in opts.sizes.split(","):
            for kind in ("cnn", "transformer"):
                tm, rm = M.paired_models(kind, torch, refimpl, device="cuda", size=size)
                opt = M.make_optimizer(refimpl, kind, rm)
                data = [(refimpl.tensor(x, device="cuda"), refimpl.tensor(y, device="cuda"))
                        for x, y in M.batches(kind, 4, size)]
                found: dict = {name: [] for name in CONFIGS}
                for rnd in range(opts.rounds):
                    for name, config in CONFIGS.items():
                        _apply(config)
                        step = _median_step(refimpl, rm, opt, data, opts.steps, 10)
                        if rnd:
                            found[name].append(step)
                tt = tm.cuda()
                topt = M.make_optimizer(torch, kind, tt)
                tdata = [(torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda"))
                         for x, y in M.batches(kind, 4, size)]
                theirs = _median_step(torch, tt, topt, tdata, 100, 20)
                cells = " ".join(f"{name}={statistics.median(v):.0f} "
                                 f"({statistics.median(v) / theirs:.2f}x)"
                                 for name, v in found.items())
                print(f"{size} {kind} torch {theirs:.0f} {cells}", flush=True)
    finally:
        CK.DIRECT_MACS, CK.DIRECT_GW_SUM, CK.SMALL_MM_MACS, AK.SMALL_MACS = current
    return 0


if __name__ == "__main__":
    sys.exit(main())
