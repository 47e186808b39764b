"""How much one process's refimpl training step moves with the host, torch left out.

Runs the CNN test-size training step (``bench/train_models.py``) on CUDA in this process
only, 40 samples of 5 steps after 20 warm-up steps, and prints the median, fastest and
slowest sample with the CPU the process last ran on and its ``PYTHONHASHSEED``. Started
in many fresh processes (see ``bench/results/h200/host_modes.txt``) it shows whether
``bench_train.py``'s spread between runs comes from the code's state (hash seed, CPU)
or from the host's speed over time.

    for s in 1 2 3; do PYTHONHASHSEED=$s python bench/host_modes.py; done
    python bench/host_modes.py --torch      # torch imported too (its threads exist)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench import train_models as M
from bench.bench_train import _stepper


def main() -> None:
    if "--torch" in sys.argv:
        import torch  # noqa: F401 (its import alone starts its threads)
    device = "cuda" if "--cpu" not in sys.argv else "cpu"
    refimpl.manual_seed(0)
    model = M.make_cnn(refimpl, "test").to(device)
    step = _stepper(refimpl, "cnn", model, device, "test")
    for _ in range(20):
        step()
    samples = []
    for _ in range(40):
        t0 = time.perf_counter_ns()
        for _ in range(5):
            step()
        samples.append((time.perf_counter_ns() - t0) / 5e6)
    cpu = Path("/proc/self/stat").read_text().split()[38]
    print(f"seed={os.environ.get('PYTHONHASHSEED', 'random')} torch={'--torch' in sys.argv} "
          f"cpu={cpu} median={statistics.median(samples):.3f} ms min={min(samples):.3f} "
          f"max={max(samples):.3f}")


if __name__ == "__main__":
    main()
