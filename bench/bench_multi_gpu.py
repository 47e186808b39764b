"""Peer copies between two GPUs: refimpl against torch in the same process, JSON kept.

``python bench/bench_multi_gpu.py --out bench/results/h200x2/multi_gpu.json`` on a machine
with two GPUs. Each case copies a tensor from device ``src`` to device ``dst`` with
``dst_tensor.copy_(src_tensor)``, timed on the GPU between two CUDA events recorded on
the source device's current stream (where torch and refimpl both queue a copy between
devices), refimpl and torch sampled in alternation:

* ``peer_copy_1gib_0to1`` / ``peer_copy_1gib_1to0``: 1 GiB, contiguous float32 (the
  memcpy path: ``cuMemcpyPeerAsync`` over the peer link);
* ``peer_copy_strided_256mib_0to1``: 256 MiB read through a transposed view (the copy
  kernel on the source device writing the peer's memory).

For each case: the median GPU time of each library in milliseconds, the bandwidth in
GB/s (10^9 bytes per second) and ``bandwidth_ratio`` = refimpl's bandwidth over torch's
(issue 17 asks for at least 0.9 on the 1 GiB copy). Every copy is checked: the
destination must hold the source's values.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GiB = 1 << 30


def _timed_copy(lib, dst, src, src_device: int) -> float:
    """GPU milliseconds of one ``dst.copy_(src)``, events on the source device's stream."""
    with lib.cuda.device(src_device):
        start = lib.cuda.Event(enable_timing=True)
        end = lib.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


def _tensors(lib, case: dict):
    """(source, destination) tensors of the case on ``lib``, the source filled with a ramp."""
    n = case["bytes"] // 4
    src_dev, dst_dev = f"cuda:{case['src']}", f"cuda:{case['dst']}"
    if case["strided"]:
        side = int(n ** 0.5)
        src = lib.arange(side * side, device=src_dev, dtype=lib.float32).view(side, side).t()
        dst = lib.empty(side, side, device=dst_dev)
    else:
        src = lib.arange(n, device=src_dev, dtype=lib.float32)
        dst = lib.empty(n, device=dst_dev)
    return src, dst


def _check(lib, dst, src) -> bool:
    """Whether ``dst`` equals ``src`` (compared on the destination device)."""
    return bool(lib.equal(dst, src.to(dst.device)))


def run_case(libs: dict, case: dict, repeat: int, warmup: int) -> dict:
    """Time one case on every library, in alternation."""
    data = {name: _tensors(lib, case) for name, lib in libs.items()}
    for name, lib in libs.items():
        src, dst = data[name]
        for _ in range(warmup):
            _timed_copy(lib, dst, src, case["src"])
    times: dict = {name: [] for name in libs}
    for _ in range(repeat):
        for name, lib in libs.items():
            src, dst = data[name]
            times[name].append(_timed_copy(lib, dst, src, case["src"]))
    out: dict = {"bytes": case["bytes"], "src": case["src"], "dst": case["dst"],
                 "strided": case["strided"], "repeat": repeat}
    for name, lib in libs.items():
        src, dst = data[name]
        ms = statistics.median(times[name])
        out[f"{name}_ms"] = ms
        out[f"{name}_min_ms"] = min(times[name])
        out[f"{name}_gbps"] = case["bytes"] / (ms / 1000) / 1e9
        out[f"{name}_correct"] = _check(lib, dst, src)
    if "torch" in libs:
        out["bandwidth_ratio"] = out["refimpl_gbps"] / out["torch_gbps"]
    del data
    return out


CASES = {
    "peer_copy_1gib_0to1": {"bytes": GiB, "src": 0, "dst": 1, "strided": False},
    "peer_copy_1gib_1to0": {"bytes": GiB, "src": 1, "dst": 0, "strided": False},
    "peer_copy_strided_256mib_0to1": {"bytes": GiB // 4, "src": 0, "dst": 1, "strided": True},
}


def main() -> None:
    """Run the cases and write the report (stdout, and ``--out`` when given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--no-torch", action="store_true", help="time refimpl only")
    args = parser.parse_args()

    import refimpl

    libs: dict = {"refimpl": refimpl}
    machine: dict = {}
    if not args.no_torch:
        import torch

        libs["torch"] = torch
        machine["torch"] = torch.__version__
        machine["cuda"] = torch.version.cuda
    if refimpl.cuda.device_count() < 2:
        raise SystemExit("bench_multi_gpu needs two GPUs")
    machine["gpus"] = [refimpl.cuda.get_device_name(i) for i in range(2)]
    machine["peer_access"] = [refimpl.cuda.can_device_access_peer(0, 1),
                              refimpl.cuda.can_device_access_peer(1, 0)]
    report = {"machine": machine, "cases": {}}
    for name, case in CASES.items():
        report["cases"][name] = run_case(libs, case, args.repeat, args.warmup)
        print(name, json.dumps(report["cases"][name]), flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
