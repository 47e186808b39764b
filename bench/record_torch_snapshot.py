"""Record real torch memory snapshots (with their allocation history) as test fixtures.

On a machine with a GPU and torch::

    python bench/record_torch_snapshot.py --out DIR

runs each scenario below in its own process (allocator settings are read once, at
CUDA initialisation, so each needs a fresh one) and writes
``DIR/torch-<version>-<gpu>-<scenario>.pickle.gz``: ``torch.cuda.memory._snapshot()``
pickled and gzip-compressed. ``tensorctl memstats`` reads these files directly, and
``tests/test_replay_fidelity.py`` checks that replaying each history under its own
recorded settings ends with exactly the recorded segments.

Scenarios (a small MLP trained with Adam on varying batch sizes, so that both pools,
splits and merges are exercised):

* ``train``: default settings, history recorded from the first allocation; a side
  stream works on tensors of the default stream (``record_stream``: frees that
  complete later), small tensors (small pool), and ``empty_cache()`` every few steps;
* ``capped``: ``max_split_size_mb:64,roundup_power2_divisions:4,
  garbage_collection_threshold:0.6`` under a per-process memory fraction of about
  1.25 GiB, with requests that do not fit: out-of-memory errors, releases of cached
  segments inside ``malloc`` and garbage collection;
* ``ring``: like ``train`` with a history ring buffer too short for the whole run
  (the history begins mid-run; blocks and segments predate it).

Stacks are kept (``context="all"``, Python frames) but cut to the innermost
``--max-frames`` frames of each entry so that each fixture stays small.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import subprocess
import sys
from pathlib import Path

SCENARIOS = {
    "train": {"alloc_conf": "", "max_entries": 1_000_000},
    "capped": {
        "alloc_conf": "max_split_size_mb:64,roundup_power2_divisions:4,"
        "garbage_collection_threshold:0.6",
        "max_entries": 1_000_000,
    },
    "ring": {"alloc_conf": "", "max_entries": 700},
}
MiB = 1 << 20


def _workload(torch, scenario: str) -> list:
    """The program whose memory is recorded; returns tensors kept alive at the end."""
    dev = "cuda"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 3072), torch.nn.GELU(), torch.nn.Linear(3072, 1024)
    ).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    side = torch.cuda.Stream()
    kept: list = []
    batches = (64, 384, 96, 512, 32, 200)
    steps = 24
    for step in range(steps):
        bs = batches[step % len(batches)]
        x = torch.randn(bs, 1024, device=dev)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        # small-pool tensors of assorted sizes, some kept a few steps
        smalls = [torch.empty(n, device=dev) for n in (1, 100, 5000, 70_000, 200_000)]
        kept.append(smalls[step % len(smalls)])
        if len(kept) > 6:
            kept.pop(0)
        # a default-stream tensor used on the side stream: its free waits for that stream
        shared = torch.empty(1_500_000 + 37_000 * step, device=dev)
        shared.fill_(1.0)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            busy = torch.randn(1536, 1536, device=dev)
            for _ in range(4):
                busy = busy @ busy
                busy = busy / busy.norm()
            shared.mul_(2.0)
            side_only = torch.empty(2_600_000, device=dev)  # the side stream's own pool
            side_only.zero_()
        shared.record_stream(side)
        del shared, busy, side_only
        if scenario == "capped":
            try:  # a request larger than what is left: OOM, after releasing the cache
                huge = torch.empty(300 * MiB // 4 * (1 + step % 3), device=dev)
                del huge
            except torch.cuda.OutOfMemoryError:
                pass
            big = [torch.empty((80 + 10 * (step % 4)) * MiB // 4, device=dev) for _ in range(3)]
            del big[1]
            kept.append(big[0])
            if len(kept) > 6:
                kept.pop(0)
        if step % 7 == 6:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    torch.cuda.synchronize()
    kept.append(torch.empty(3 * MiB // 4, device=dev))  # live at the end
    return [model, opt, kept]


def _trim(snapshot: dict, max_frames: int) -> dict:
    """Keep the innermost ``max_frames`` frames of each stack (fixture size)."""
    for trace in snapshot.get("device_traces", []):
        for entry in trace:
            entry["frames"] = entry.get("frames", [])[:max_frames]
    for segment in snapshot.get("segments", []):
        segment["frames"] = segment.get("frames", [])[:max_frames]
        for block in segment.get("blocks", []):
            block["frames"] = block.get("frames", [])[:max_frames]
    return snapshot


def record_one(scenario: str, path: Path, max_frames: int) -> None:
    """Run one scenario in this process (its settings must already be in the environment)."""
    import torch

    settings = SCENARIOS[scenario]
    torch.cuda.init()
    if scenario == "capped":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(1.25 * 1024 * MiB / total)
    torch.cuda.memory._record_memory_history(
        "all", context="all", stacks="python", max_entries=settings["max_entries"]
    )
    alive = _workload(torch, scenario)
    snapshot = _trim(torch.cuda.memory._snapshot(), max_frames)
    torch.cuda.memory._record_memory_history(None)
    data = pickle.dumps(snapshot, protocol=4)
    path.write_bytes(gzip.compress(data, 9, mtime=0))
    traces = snapshot["device_traces"]
    print(
        f"{path.name}: {len(snapshot['segments'])} segments, "
        f"{sum(len(t) for t in traces)} trace entries, {len(data)} bytes pickled, "
        f"{path.stat().st_size} compressed"
    )
    del alive


def main() -> None:
    """Record every scenario (or one, with --scenario) in a fresh process each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for the .pickle.gz files")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), help="record only this one")
    parser.add_argument("--max-frames", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.child:
        import torch

        gpu = torch.cuda.get_device_name(0).split()[-1].lower()
        version = torch.__version__.split("+")[0]
        path = out / f"torch-{version}-{gpu}-{args.scenario}.pickle.gz"
        record_one(args.scenario, path, args.max_frames)
        return
    failed = 0
    for scenario in [args.scenario] if args.scenario else list(SCENARIOS):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=SCENARIOS[scenario]["alloc_conf"])
        result = subprocess.run(
            [sys.executable, __file__, "--out", str(out), "--scenario", scenario,
             "--max-frames", str(args.max_frames), "--child"],
            env=env, check=False,
        )
        failed += result.returncode != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
