"""CUDA graph replay and capture, refimpl against torch in the same run.

A graph of ``--kernels`` small kernels (in-place adds on a 1024-element float32
tensor) is captured once per library; then:

* replay: GPU time per kernel replayed, from CUDA events around ``--replays``
  back-to-back replays (median of ``--repeat`` samples after warm-up; the samples of
  torch and refimpl alternate, so that clock changes during the run hit both);
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


def _interleaved_gpu_ms(fns: dict, repeat: int) -> dict:
    """Median GPU milliseconds of each ``(lib, fn)`` of ``fns``, between two events on
    the lib's current stream; the samples of the libraries alternate, so that a change
    of the GPU's clocks during the run falls on both alike."""
    samples: dict = {name: [] for name in fns}
    for _ in range(repeat):
        for name, (lib, fn) in fns.items():
            samples[name].extend(gpu_times_ms(lib, fn, 1, warmup=0))
    return {name: statistics.median(v) for name, v in samples.items()}


def measure(libs: dict, kernels: int, replays: int, repeat: int, captures: int) -> dict:
    """Per-kernel replay and eager GPU time (us) and capture wall time (ms) of each
    library of ``libs`` (name -> module), measured in alternation."""
    graphs = {name: _capture(lib, kernels)[:2] for name, lib in libs.items()}
    replay_fns, eager_fns, correct = {}, {}, {}
    for name, lib in libs.items():
        g, a = graphs[name]

        def replay(g=g):
            for _ in range(replays):
                g.replay()

        def eager(a=a):
            for _ in range(kernels):
                a.add_(1)

        for _ in range(3):
            replay()
            eager()
        lib.cuda.synchronize()
        before = a.cpu().tolist()[0]
        g.replay()
        lib.cuda.synchronize()
        correct[name] = a.cpu().tolist()[0] == before + kernels
        replay_fns[name], eager_fns[name] = (lib, replay), (lib, eager)
    replay_ms = _interleaved_gpu_ms(replay_fns, repeat)
    eager_ms = _interleaved_gpu_ms(eager_fns, repeat)
    capture_s: dict = {name: [] for name in libs}
    for _ in range(captures):
        for name, lib in libs.items():
            g2, _, elapsed = _capture(lib, kernels)
            capture_s[name].append(elapsed)
            g2.reset()
    return {name: {
        "replay_us_per_kernel": replay_ms[name] * 1e3 / (replays * kernels),
        "eager_us_per_kernel": eager_ms[name] * 1e3 / kernels,
        "capture_ms": statistics.median(capture_s[name]) * 1e3,
        "replay_correct": correct[name],
    } for name in libs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=41)
    parser.add_argument("--captures", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import torch

    import refimpl

    results = measure({"torch": torch, "refimpl": refimpl}, args.kernels, args.replays,
                      args.repeat, args.captures)
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
