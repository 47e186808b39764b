"""Host microseconds per kernel launch: ctypes arguments against packed ones (issue 14).

A custom kernel's launch used to build one ctypes object per argument and a pointer
array per call (``_driver.launch``, still used by the rarer kernels); the hot kernels
now pack plain values into a per-thread buffer (``_driver.launch_packed``). This times
both paths in one process, sampled in alternation, on the same kernel and arguments:
the one-launch batch-norm forward (10 parameters) of a CNN-sized input. For scale, the
whole batch-norm op (refimpl's CUDA kernel module, no autograd) is timed against torch's
``torch.batch_norm`` on the same shapes.

    python bench/bench_launch_args.py --out bench/results/h200/launch_args.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl
from bench._common import cpu_model, measure


def main(argv=None) -> int:
    """Time the launch paths and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--number", type=int, default=200)
    p.add_argument("--repeat", type=int, default=40)
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    import torch

    from refimpl.cuda import _driver, streams
    from refimpl.cuda import _norm_kernels as K

    shape, c, eps = (8, 8, 12, 12), 8, 1e-5
    x = refimpl.randn(*shape, device="cuda")
    w, b = refimpl.ones(c, device="cuda"), refimpl.zeros(c, device="cuda")
    y = refimpl.empty_like(x)
    mean, var = refimpl.empty(c, device="cuda"), refimpl.empty(c, device="cuda")
    K.batch_norm(x, w, b, None, None, True, eps)  # compiles and loads the kernels
    fn, name, _ = K._functions[("bn_one", x.dtype, x.device.index)]
    hw = shape[2] * shape[3]
    m = shape[0] * hw
    ptr = K._ptr

    def ctypes_args():
        args = [ctypes.c_uint64(ptr(x)), ctypes.c_uint64(ptr(y)), ctypes.c_uint64(ptr(w)),
                ctypes.c_uint64(ptr(b)), ctypes.c_uint64(ptr(mean)), ctypes.c_uint64(ptr(var)),
                ctypes.c_longlong(c), ctypes.c_longlong(hw), ctypes.c_longlong(m),
                ctypes.c_float(eps)]
        _driver.launch(0, fn, (c, 1, 1), (256, 1, 1), args, streams.current_stream_handle(0))

    def packed_args():
        _driver.launch_packed(0, fn, (c, 1, 1), (256, 1, 1), "PPPPPPqqqf",
                              (ptr(x), ptr(y), ptr(w), ptr(b), ptr(mean), ptr(var), c, hw, m,
                               eps), streams.current_stream_handle(0), 0, name)

    tx = torch.randn(*shape, device="cuda")
    tw, tb = torch.ones(c, device="cuda"), torch.zeros(c, device="cuda")

    def refimpl_op():
        K.batch_norm(x, w, b, None, None, True, eps)

    def torch_op():
        torch.batch_norm(tx, tw, tb, None, None, True, 0.1, eps, False)

    fns = {"launch_ctypes_args": ctypes_args, "launch_packed": packed_args,
           "refimpl_batch_norm_kernel": refimpl_op, "torch_batch_norm": torch_op}
    times = measure(fns, opts.number, opts.repeat, warmup=50)
    refimpl.cuda.synchronize()
    torch.cuda.synchronize()
    us = {k: v["median_ns"] / 1e3 for k, v in times.items()}
    result = {
        "benchmark": "launch_args",
        "machine": {"node": platform.node(), "cpu": cpu_model(), "python": platform.python_version(),
                    "torch": torch.__version__, "refimpl": refimpl.__version__,
                    "gpu": torch.cuda.get_device_name(0)},
        "kernel": f"{name}, input {shape}",
        "us_per_call": us,
        "samples": times,
        "packed_saves_us_per_launch": us["launch_ctypes_args"] - us["launch_packed"],
        "packed_over_ctypes": us["launch_packed"] / us["launch_ctypes_args"],
        "refimpl_over_torch_batch_norm": us["refimpl_batch_norm_kernel"] / us["torch_batch_norm"],
    }
    for k, v in us.items():
        print(f"{k:28s} {v:7.2f} us")
    print(f"packed saves {result['packed_saves_us_per_launch']:.2f} us per launch "
          f"({result['packed_over_ctypes']:.2f}x); batch norm op refimpl/torch "
          f"{result['refimpl_over_torch_batch_norm']:.2f}x")
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
