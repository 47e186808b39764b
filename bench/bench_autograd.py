"""refimpl's autograd engine against torch on the CPU, in one run (issue 4's benchmark).

Three measurements, each on refimpl and on torch with the same numpy data:

* ``mlp_fwd_bwd``: a 3-layer MLP (batch 64, width 512, float32, relu between layers)
  forward, ``.sum()``, backward into the six parameters (goal: at most 1.3x torch);
* ``mlp_jvp``: forward-mode AD through the same MLP (the six parameters are duals with
  random tangents; one run enters a dual level, runs forward, reads the output tangent;
  goal: at most 1.5x torch's forward AD);
* ``chain_1000``: 1,000 scalar ops (``y * 1.0001`` and ``y + 0.5``, alternating) on a
  0-dim tensor, then backward (goal: at most 3x torch) -- this is the per-op cost of
  recording a node plus running it;
* ``free_150k``: dropping the last reference to a 150,000-node graph (a chain of
  ``y * 1.0`` from a leaf), checked (on refimpl) with a weak reference to the node next
  to the leaf, with the cycle collector off (goal: under 1 s, absolute; torch's time is
  shown for scale). Freeing must not
  recurse: CPython's deallocation of nested objects is iterative ("trashcan"), and no
  node keeps a reference cycle.

numpy's OpenBLAS pool gets 1 thread (``OPENBLAS_NUM_THREADS``, unless already set) and
torch as many as that pool has: on a small shared machine two libraries' spinning
thread pools make multi-threaded timings meaningless. Samples alternate refimpl and torch so
that drift on a shared machine hits both; the median sample is reported and the goals
are judged on the ratio of medians (the ratio of the fastest samples is stored too).
When a goal is missed the refimpl side is profiled and the top functions are stored.

    python bench/bench_autograd.py          # writes bench/results/cpu/autograd.json
    python bench/bench_autograd.py --repeat 21 --profile
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import weakref
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl as t
from bench._common import cpu_model, measure, numpy_blas_threads, profile

RESULTS = Path(__file__).resolve().parent / "results" / "cpu" / "autograd.json"
BATCH, WIDTH, LAYERS = 64, 512, 3
CHAIN = 1000
FREE_NODES = 150_000


# -- the workloads ------------------------------------------------------------------------

def mlp_case(lib, data: dict):
    """Parameters as leaves of ``lib``; returns (run, grads) where run() does one step."""
    params = []
    for i in range(LAYERS):
        w = lib.from_numpy(data[f"w{i}"].copy()).requires_grad_(True)
        b = lib.from_numpy(data[f"b{i}"].copy()).requires_grad_(True)
        params += [w, b]
    x = lib.from_numpy(data["x"].copy())

    def run():
        for p in params:
            p.grad = None
        h = x
        for i in range(LAYERS):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < LAYERS - 1:
                h = h.relu()
        h.sum().backward()

    def grads():
        return [p.grad for p in params]

    return run, grads


def mlp_jvp_case(lib, data: dict):
    """Forward-mode AD through the same MLP: the parameters are duals (tangents from
    ``data``), and one run enters a level, runs forward and reads the output tangent."""
    fwAD = lib.autograd.forward_ad
    params, tangents = [], []
    for i in range(LAYERS):
        params += [lib.from_numpy(data[f"w{i}"].copy()), lib.from_numpy(data[f"b{i}"].copy())]
        tangents += [lib.from_numpy(data[f"tw{i}"].copy()),
                     lib.from_numpy(data[f"tb{i}"].copy())]
    x = lib.from_numpy(data["x"].copy())
    result = [None]

    def run():
        with fwAD.dual_level():
            ps = [fwAD.make_dual(p, tg) for p, tg in zip(params, tangents)]
            h = x
            for i in range(LAYERS):
                h = h @ ps[2 * i] + ps[2 * i + 1]
                if i < LAYERS - 1:
                    h = h.relu()
            result[0] = fwAD.unpack_dual(h).tangent

    return run, lambda: [result[0]]


def chain_case(lib):
    x = lib.tensor(0.25, requires_grad=True)

    def run():
        x.grad = None
        y = x
        for i in range(CHAIN):
            y = y * 1.0001 if i % 2 == 0 else y + 0.5
        y.backward()

    return run, lambda: [x.grad]


def free_graph(lib, nodes: int) -> dict:
    """Build a ``nodes``-long chain, then time dropping it; the graph must be gone."""
    x = lib.ones(1, requires_grad=True)
    start = time.perf_counter()
    y = x
    for _ in range(nodes):
        y = y * 1.0
    built = time.perf_counter() - start
    probe = None
    if lib is t:
        # walk to the node next to the leaf (torch is not walked: holding Python wrappers
        # of its 150k nodes makes its own teardown recurse and crash)
        first = y.grad_fn
        for _ in range(nodes - 1):
            first = first.next_functions[0][0]
        probe = weakref.ref(first)
        del first
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        del y
        freed = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
    return {"build_s": round(built, 3), "free_s": round(freed, 4),
            "freed_without_gc": None if probe is None else probe() is None}


def check_same(name: str, ours: list, theirs: list) -> None:
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a.tolist(), np.float64),
                                   np.asarray(b.tolist(), np.float64),
                                   rtol=2e-3, atol=2e-3, err_msg=name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="samples per side")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--profile", action="store_true",
                    help="profile refimpl even when every goal is met")
    ap.add_argument("--free-nodes", type=int, default=FREE_NODES)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    import torch

    blas = numpy_blas_threads()
    default_threads = torch.get_num_threads()
    rng = np.random.default_rng(0)
    data = {"x": rng.standard_normal((BATCH, WIDTH), dtype=np.float32)}
    for i in range(LAYERS):
        data[f"w{i}"] = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32)
                         / np.sqrt(WIDTH)).astype(np.float32)
        data[f"b{i}"] = rng.standard_normal(WIDTH, dtype=np.float32) * 0.1
        data[f"tw{i}"] = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32)
        data[f"tb{i}"] = rng.standard_normal(WIDTH, dtype=np.float32)

    results = []
    cases = [
        ("mlp_fwd_bwd", 1.3, blas, mlp_case(t, data), mlp_case(torch, data)),
        ("chain_1000", 3.0, blas, chain_case(t), chain_case(torch)),
        ("mlp_jvp", 1.5, blas, mlp_jvp_case(t, data), mlp_jvp_case(torch, data)),
    ]
    for name, goal, threads, (ours, our_grads), (theirs, their_grads) in cases:
        torch.set_num_threads(threads)
        ours()
        theirs()
        check_same(name, our_grads(), their_grads())
        m = measure({"refimpl": ours, "torch": theirs}, 1, args.repeat, args.warmup)
        ratio = m["refimpl"]["median_ns"] / m["torch"]["median_ns"]
        ratio_min = m["refimpl"]["min_ns"] / m["torch"]["min_ns"]
        row = {"name": name, "goal_ratio": goal, "ratio": round(ratio, 3),
               "ratio_of_minimums": round(ratio_min, 3), "meets_goal": ratio <= goal,
               "torch_threads": threads, "refimpl": m["refimpl"], "torch": m["torch"]}
        if args.profile or ratio > goal:
            row["refimpl_profile"] = profile(ours, 3, "ms_per_run", 1e3)
        results.append(row)
        print(f"{name:12s} refimpl {m['refimpl']['median_ns'] / 1e6:9.3f} ms   torch "
              f"{m['torch']['median_ns'] / 1e6:9.3f} ms   ratio {ratio:6.2f} (of minimums "
              f"{ratio_min:4.2f})  goal <= {goal}, torch threads {threads}")

    torch.set_num_threads(1)
    ours_free = free_graph(t, args.free_nodes)
    theirs_free = free_graph(torch, args.free_nodes)
    ok = ours_free["free_s"] < 1.0 and ours_free["freed_without_gc"]
    results.append({"name": "free_150k", "nodes": args.free_nodes, "goal_s": 1.0,
                    "meets_goal": ok, "refimpl": ours_free, "torch": theirs_free})
    print(f"{'free_150k':12s} refimpl {ours_free['free_s']:9.4f} s    torch "
          f"{theirs_free['free_s']:9.4f} s    (refimpl build {ours_free['build_s']} s, "
          f"freed without gc: {ours_free['freed_without_gc']})  goal < 1 s")
    torch.set_num_threads(default_threads)

    report = {
        "benchmark": "bench/bench_autograd.py",
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                    "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "torch": torch.__version__, "refimpl": t.__version__},
        "threads": {"numpy_blas": blas, "torch_default": default_threads},
        "method": {"timer": "time.perf_counter_ns", "statistic": "median of samples",
                   "repeat": args.repeat, "interleaved": True},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
