"""Where a training step's GPU time goes, kernel by kernel, for refimpl and torch.

The step is host-bound, so a profiler's event pairs around refimpl's launches would time
the host's gaps as well as the kernels. Here each profiled step is queued behind a spin
kernel (``refimpl.cuda._sleep``): the GPU starts on the step only once all of it is
queued, and runs its kernels back to back. torch's profiler reads the kernels' own
times (CUPTI), so its steps need no spin.

    python bench/profile_gpu_kernels.py --kind transformer --size bench
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench import train_models as M


def profile(lib, kind: str, model, size: str, steps: int, spin: int, rows: int) -> str:
    """The profiler's table of ``steps`` training steps, by the kernels' own GPU time."""
    opt = M.make_optimizer(lib, kind, model)
    data = [(lib.tensor(x, device="cuda"), lib.tensor(y, device="cuda"))
            for x, y in M.batches(kind, 4, size)]
    for i in range(10):
        M.train_step(lib, model, opt, *data[i % 4]).item()
    acts = [lib.profiler.ProfilerActivity.CPU, lib.profiler.ProfilerActivity.CUDA]
    with lib.profiler.profile(activities=acts) as prof:
        for i in range(steps):
            lib.cuda.synchronize()
            if lib is refimpl:
                refimpl.cuda._sleep(spin)  # the GPU waits while the step is queued
            M.train_step(lib, model, opt, *data[i % 4])
            lib.cuda.synchronize()
    return prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["cnn", "transformer"], default="cnn")
    p.add_argument("--size", choices=["test", "bench"], default="bench")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--spin", type=int, default=100_000_000,
                   help="clock cycles of the spin kernel before each refimpl step")
    p.add_argument("--rows", type=int, default=22)
    args = p.parse_args()
    import torch

    tm, rm = M.paired_models(args.kind, torch, refimpl, device="cuda", size=args.size)
    print(f"{args.kind}/{args.size}, {args.steps} steps, {torch.cuda.get_device_name(0)}, "
          f"torch {torch.__version__}, refimpl {refimpl.__version__} (the spin kernel is "
          "refimpl's first row)")
    for lib, model in ((refimpl, rm), (torch, tm.to("cuda"))):
        print(f"{lib.__name__}:")
        print(profile(lib, args.kind, model, args.size, args.steps, args.spin, args.rows))


if __name__ == "__main__":
    main()
