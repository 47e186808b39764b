"""Where a training step's host time goes, in wall-clock microseconds (no cProfile).

For one model of ``bench/train_models.py``, times each phase of the step (zero_grad,
forward, loss, backward, optimizer step, ``.item()``) for refimpl and torch in the same
run, and for refimpl the exclusive time of every dispatched op (nested ops' time is
charged to them, not to their caller), so that per-op costs read as real microseconds
rather than profiler-inflated ones.

    python bench/profile_step_ops.py --kind transformer --device cuda --steps 200
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench import train_models as M
from refimpl.ops import _registry

_clock = time.perf_counter_ns


def _phases(lib, kind: str, model, device: str, size: str, steps: int) -> dict:
    """Median nanoseconds of each phase of ``steps`` training steps."""
    opt = M.make_optimizer(lib, kind, model)
    model.train()
    data = [(lib.tensor(x, device=device), lib.tensor(y, device=device))
            for x, y in M.batches(kind, 4, size)]
    names = ("zero_grad", "forward", "loss", "backward", "step", "item")
    samples = {n: [] for n in names}
    for i in range(steps + 5):
        x, y = data[i % 4]
        t0 = _clock()
        opt.zero_grad()
        t1 = _clock()
        out = model(x)
        t2 = _clock()
        loss = lib.nn.functional.cross_entropy(out, y)
        t3 = _clock()
        loss.backward()
        t4 = _clock()
        opt.step()
        t5 = _clock()
        loss.item()
        t6 = _clock()
        if i >= 5:
            for n, a, b in zip(names, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                samples[n].append(b - a)
    return {n: sorted(v)[len(v) // 2] for n, v in samples.items()}


def _op_times(kind: str, model, device: str, size: str, steps: int) -> tuple[dict, int]:
    """Exclusive nanoseconds per refimpl op name over ``steps`` steps, and the step total."""
    from refimpl import _dispatch, _tensor_methods

    totals: dict = collections.defaultdict(lambda: [0, 0])
    stack: list = []
    inner = _dispatch.dispatch

    def timed(op, args, kwargs):
        stack.append(0)
        t0 = _clock()
        try:
            return inner(op, args, kwargs)
        finally:
            spent = _clock() - t0
            nested = stack.pop()
            rec = totals[op.name]
            rec[0] += spent - nested
            rec[1] += 1
            if stack:
                stack[-1] += spent

    def frame(label, fn):
        """``fn`` timed as a frame of its own, labelled ``label(*args)``."""
        def run(*args, **kwargs):
            stack.append(0)
            t0 = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = _clock() - t0
                nested = stack.pop()
                rec = totals[label(*args)]
                rec[0] += spent - nested
                rec[1] += 1
                if stack:
                    stack[-1] += spent
        return run

    from refimpl.autograd import _device_threads, engine
    from refimpl.nn.modules.module import Module

    opt = M.make_optimizer(refimpl, kind, model)
    data = [(refimpl.tensor(x, device=device), refimpl.tensor(y, device=device))
            for x, y in M.batches(kind, 4, size)]
    for i in range(5):
        M.train_step(refimpl, model, opt, *data[i % 4]).item()
    # the frames outside dispatched ops: module calls, backward nodes, optimizer step
    patched = [(_registry, "_dispatch_fn", timed), (_tensor_methods, "dispatch", timed),
               (Module, "__call__", frame(lambda m, *a: f"[module {type(m).__name__}]",
                                          Module._call_impl)),
               (engine, "call_function", frame(lambda n, i: f"[node {n.name()}]",
                                               engine.call_function)),
               (engine.GraphTask, "_drain", frame(lambda *a: "[engine: ready-node loop]",
                                                  engine.GraphTask._drain)),
               (_device_threads, "run_on", frame(lambda *a: "[engine: device-thread handoff]",
                                                 _device_threads.run_on)),
               (engine, "run_backward", frame(lambda *a: "[engine: graph task set-up]",
                                              engine.run_backward)),
               (type(opt), "step", frame(lambda o, *a: "[optimizer step]", type(opt).step)),
               (type(opt), "zero_grad", frame(lambda o, *a: "[zero_grad]",
                                              type(opt).zero_grad))]
    saved = [(obj, name, obj.__dict__.get(name)) for obj, name, _ in patched]
    for obj, name, fn in patched:
        setattr(obj, name, fn)
    try:
        t0 = _clock()
        for i in range(steps):
            M.train_step(refimpl, model, opt, *data[i % 4]).item()
        total = _clock() - t0
    finally:
        for obj, name, old in saved:
            if old is None:
                delattr(obj, name)
            else:
                setattr(obj, name, old)
    return dict(totals), total


def main(argv=None) -> int:
    """Print the phase table (refimpl and torch) and refimpl's per-op table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", choices=["cnn", "transformer"], default="cnn")
    p.add_argument("--size", choices=["test", "bench"], default="test")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--steps", type=int, default=100)
    opts = p.parse_args(argv)

    import torch

    tm, rm = M.paired_models(opts.kind, torch, refimpl, device=opts.device, size=opts.size)
    tm = tm.to(opts.device)
    ref = _phases(refimpl, opts.kind, rm, opts.device, opts.size, opts.steps)
    ref_t = _phases(torch, opts.kind, tm, opts.device, opts.size, opts.steps)
    print(f"{opts.kind}/{opts.size} on {opts.device}, median us per phase "
          f"({opts.steps} steps, refimpl {refimpl.__version__}, torch {torch.__version__})")
    print(f"{'phase':<10} {'refimpl':>9} {'torch':>9} {'ratio':>6}")
    for name in ref:
        a, b = ref[name] / 1e3, ref_t[name] / 1e3
        print(f"{name:<10} {a:9.1f} {b:9.1f} {a / b if b else float('nan'):6.2f}")
    a, b = sum(ref.values()) / 1e3, sum(ref_t.values()) / 1e3
    print(f"{'total':<10} {a:9.1f} {b:9.1f} {a / b:6.2f}")

    ops, total = _op_times(opts.kind, rm, opts.device, opts.size, opts.steps)
    n = opts.steps
    in_ops = sum(v[0] for k, v in ops.items() if not k.startswith("["))
    framed = sum(v[0] for k, v in ops.items() if k.startswith("["))
    print(f"\nrefimpl ops and [frames], exclusive us per step (step {total / n / 1e3:.1f} us "
          f"with timing; {in_ops / n / 1e3:.1f} us inside dispatched ops, "
          f"{framed / n / 1e3:.1f} us in the frames' own code, the rest elsewhere)")
    print(f"{'op':<34} {'calls':>6} {'us/step':>8} {'us/call':>8}")
    for name, (ns, calls) in sorted(ops.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:<34} {calls / n:6.1f} {ns / n / 1e3:8.1f} {ns / calls / 1e3:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
