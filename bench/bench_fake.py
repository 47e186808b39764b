"""refimpl's FakeTensorMode against torch's, on the CPU, in one run.

The workload is a 1,000-op program of mixed ops (matmul, elementwise with tensors and
Python numbers, reductions, views, in-place ops, activations, casts, concatenation) on
fakes of a small MLP-like shape, traced under each library's ``FakeTensorMode``:

* ``cold``: every call clears the dispatch cache first (``FakeTensorMode.cache_clear()``)
  and builds a fresh mode, so every op runs its fake kernel (torch: its meta/fake
  implementation; refimpl: the op's meta function);
* ``warm``: the cache is filled by a first run and kept, so repeated ops hit it.

Goal: refimpl at most 1.0x torch's time in both. Also measured: a fake matmul of two
2^20 x 2^20 float32 matrices (2^40 elements each, 4 TiB real) must finish at once and
allocate nothing (peak RSS growth is recorded).

Samples alternate refimpl and torch; the median is reported and goals are judged on the
ratio of medians.

    python bench/bench_fake.py            # writes bench/results/cpu/fake.json
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl as r
from bench._common import cpu_model, measure
from refimpl._subclasses import fake_tensor as rfake

RESULTS = Path(__file__).resolve().parent / "results" / "cpu" / "fake.json"
OPS = 1000


def program(lib, x, w1, w2, b):
    """1,000 ops of mixed kinds on fakes; returns the op count actually issued."""
    n = 0
    h = x
    while n < OPS:
        y = lib.mm(h, w1)             # matmul
        y = y + b                     # broadcast add
        y = y * 0.5                   # tensor-scalar
        y = y.relu()                  # activation
        z = y.t()                     # view
        z = z.contiguous()            # copy
        s = z.sum(1)                  # reduction
        m = y.mean(1, keepdim=True)   # reduction with keepdim
        y = y - m                     # broadcast sub
        y.mul_(1.5)                   # in-place
        c = lib.cat([y, y], 1)        # concatenation
        c = c[:, : w2.shape[0]]       # slicing view
        h2 = lib.mm(c, w2)            # matmul
        h2 = h2.to(lib.float16).float()  # casts
        h = lib.tanh(h2)              # activation
        h = h.reshape(h.shape[0], -1)  # view
        h = h + s[: h.shape[1]].unsqueeze(0) * 0  # slice, unsqueeze, mul, add
        n += 21
    return n


def setup(lib, fake_mod):
    mode = fake_mod.FakeTensorMode()
    with mode:
        x = lib.empty(64, 128)
        w1 = lib.empty(128, 256)
        w2 = lib.empty(256, 128)
        b = lib.empty(256)
    return mode, (x, w1, w2, b)


def runner(lib, fake_mod, cold: bool):
    mode, args = setup(lib, fake_mod)

    def run():
        if cold:
            fake_mod.FakeTensorMode.cache_clear()
        with mode:
            program(lib, *args)

    return run


def huge_matmul(lib, fake_mod) -> dict:
    """A fake 2^20 x 2^20 @ 2^20 x 2^20 float32 matmul: time and RSS growth."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with fake_mod.FakeTensorMode():
        a = lib.empty(2 ** 20, 2 ** 20)
        b = lib.empty(2 ** 20, 2 ** 20)
        c = a @ b
    elapsed = time.perf_counter() - start
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return {"seconds": round(elapsed, 6), "rss_growth_kib": grown,
            "shape": list(c.shape), "numel": c.numel()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    import torch
    from torch._subclasses import fake_tensor as tfake

    results = {}
    for label, cold in (("cold", True), ("warm", False)):
        fns = {"refimpl": runner(r, rfake, cold), "torch": runner(torch, tfake, cold)}
        res = measure(fns, number=1, repeat=args.repeat, warmup=1)
        ratio = res["refimpl"]["median_ns"] / res["torch"]["median_ns"]
        results[label] = {
            "refimpl_ms": round(res["refimpl"]["median_ns"] / 1e6, 3),
            "torch_ms": round(res["torch"]["median_ns"] / 1e6, 3),
            "refimpl_min_ms": round(res["refimpl"]["min_ns"] / 1e6, 3),
            "torch_min_ms": round(res["torch"]["min_ns"] / 1e6, 3),
            "ratio": round(ratio, 3), "goal": "<= 1.0", "met": ratio <= 1.0,
        }
        print(f"{label}: refimpl {results[label]['refimpl_ms']} ms, torch "
              f"{results[label]['torch_ms']} ms, ratio {ratio:.3f}")
    ops = program(r, *setup(r, rfake)[1])
    results["ops_per_program"] = ops
    results["huge_matmul"] = {"refimpl": huge_matmul(r, rfake), "torch": huge_matmul(torch, tfake)}
    print("huge matmul:", results["huge_matmul"])
    out = {
        "benchmark": "fake tensor mode: 1,000 mixed ops, cold and warm dispatch cache",
        "machine": {"cpu": cpu_model(), "python": platform.python_version(),
                    "torch": torch.__version__, "refimpl": r.__version__},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
