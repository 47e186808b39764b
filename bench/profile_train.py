"""Where refimpl's training-step time goes: cProfile of ``bench_train``'s steps.

Runs one model's training steps (``bench/train_models.py``, the same steps
``bench_train.py`` times) under cProfile and prints the functions that cost the most,
by own time and by cumulative time, with the step count and the op-call counts, so
that per-step host costs can be read as microseconds per step.

    python bench/profile_train.py --kind cnn --size test --device cuda --steps 50
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench import train_models as M
from bench.bench_train import _stepper


def main(argv=None) -> int:
    """Profile ``--steps`` refimpl training steps and print the costliest functions."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["cnn", "transformer"], default="cnn")
    p.add_argument("--size", choices=["test", "bench"], default="test")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--top", type=int, default=45)
    opts = p.parse_args(argv)

    import torch

    _, model = M.paired_models(opts.kind, torch, refimpl, device=opts.device, size=opts.size)
    step = _stepper(refimpl, opts.kind, model, opts.device, opts.size)
    for _ in range(5):
        step()
    started = time.perf_counter()
    for _ in range(opts.steps):
        step()
    plain_ms = (time.perf_counter() - started) / opts.steps * 1e3
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(opts.steps):
        step()
    prof.disable()
    print(f"{opts.kind}/{opts.size} on {opts.device}: {plain_ms:.2f} ms per step "
          f"unprofiled; {opts.steps} steps profiled (times below are per {opts.steps} steps)")
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(opts.top)
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
