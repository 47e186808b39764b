"""CUDA graph replay and capture, refimpl against torch in the same run.

A graph of ``--kernels`` small kernels (in-place adds on a 1024-element float32
tensor) is captured once per library; then:

* replay: GPU time per kernel replayed, from CUDA events around ``--replays``
  back-to-back replays (median of ``--repeat`` samples after warm-up);
* eager: GPU time per kernel when the same adds are launched one by one (what a
  graph saves: the host launch cost shows up as GPU idle time between kernels);
* capture: host wall time of capture_begin + the adds + capture_end (median of
  ``--captures`` fresh captures).

Results (with ratios refimpl/torch and the machine) go to ``--out`` as JSON.
Usage on the GPU machine: ``PYTHONPATH=. python3 bench/bench_gpu_graphs.py --out F``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import gpu_times_ms  # after the path is set


def _capture(lib, kernels: int):
    s = lib.cuda.Stream()
    a = lib.zeros(1024, device="cuda")
    lib.cuda.synchronize()
    with lib.cuda.stream(s):
        a.add_(1)  # warm-up: kernel loaded before the capture
        s.synchronize()
        g = lib.cuda.CUDAGraph()
        start = time.perf_counter()
        g.capture_begin()
        for _ in range(kernels):
            a.add_(1)
        g.capture_end()
        elapsed = time.perf_counter() - start
    lib.cuda.current_stream().wait_stream(s)
    return g, a, elapsed


def _gpu_ms(lib, fn, repeat: int) -> float:
    """Median GPU milliseconds of ``fn`` between two events on the current stream."""
    return statistics.median(gpu_times_ms(lib, fn, repeat, warmup=0))


def measure(lib, kernels: int, replays: int, repeat: int, captures: int) -> dict:
    """Per-kernel replay and eager GPU time (us) and capture wall time (ms) for ``lib``."""
    g, a, _ = _capture(lib, kernels)

    def replay():
        for _ in range(replays):
            g.replay()

    def eager():
        for _ in range(kernels):
            a.add_(1)

    for _ in range(3):
        replay()
        eager()
    lib.cuda.synchronize()
    before = a.cpu().tolist()[0]
    g.replay()
    lib.cuda.synchronize()
    correct = a.cpu().tolist()[0] == before + kernels
    replay_ms = _gpu_ms(lib, replay, repeat)
    eager_ms = _gpu_ms(lib, eager, repeat)
    capture_s = []
    for _ in range(captures):
        g2, _, elapsed = _capture(lib, kernels)
        capture_s.append(elapsed)
        g2.reset()
    return {
        "replay_us_per_kernel": replay_ms * 1e3 / (replays * kernels),
        "eager_us_per_kernel": eager_ms * 1e3 / kernels,
        "capture_ms": statistics.median(capture_s) * 1e3,
        "replay_correct": correct,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--captures", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    import refimpl

    results = {}
    for name, lib in (("torch", torch), ("refimpl", refimpl)):
        results[name] = measure(lib, args.kernels, args.replays, args.repeat, args.captures)
    ratios = {k: results["refimpl"][k] / results["torch"][k]
              for k in ("replay_us_per_kernel", "eager_us_per_kernel", "capture_ms")}
    report = {
        "benchmark": "gpu_graphs",
        "machine": {"gpu": torch.cuda.get_device_name(0), "python": platform.python_version(),
                    "torch": torch.__version__, "refimpl": "0.1.0"},
        "params": vars(args) | {"out": str(args.out)},
        "results": results,
        "ratios_refimpl_over_torch": ratios,
        "goal": "replay_us_per_kernel ratio <= 1.1",
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
