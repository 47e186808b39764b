"""Where one small CUDA op's host time goes: its parts timed alone, against torch.

Times (microseconds per call, median of alternating samples) of a one-element float32
``a + b`` on CUDA and of its parts (the raw ``cuLaunchKernel`` through cuda.bindings with
a prebuilt parameter array, an allocation and free of the caching allocator, the
elementwise kernel into a given output, the whole op without and with autograd
recording), of a 16x16 ``mm`` and refimpl's raw cuBLAS GEMM call; and torch's
``empty``/``add``/``add(out=)``/``mm`` in the same run. Then a cProfile of refimpl's op
by own time.

    python bench/profile_cuda_op.py [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refimpl as r
from bench._common import measure


def main(argv=None) -> int:
    """Print the part timings and the profile."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--number", type=int, default=2000)
    opts = p.parse_args(argv)
    import ctypes

    import torch

    from refimpl._tensor import Tensor
    from refimpl.cuda import _driver, streams
    from refimpl.cuda._pointwise import load_functions

    dev = r.device("cuda", 0)
    a, b = r.ones(1, device="cuda"), r.ones(1, device="cuda")
    out = r.empty(1, device="cuda")
    ag = r.ones(1, device="cuda", requires_grad=True)
    ta, tb = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
    tout = torch.empty(1, device="cuda")
    tag = torch.ones(1, device="cuda", requires_grad=True)
    m, tm = r.ones(16, 16, device="cuda"), torch.ones(16, 16, device="cuda")
    mout = r.empty(16, 16, device="cuda")
    from refimpl.cuda import _blas
    # an empty kernel launched with a prebuilt parameter array (the elementwise kernels'
    # hot path, launch_1d) and with a ctypes argument list (_driver.launch)
    nop = load_functions('extern "C" __global__ void nop(float* p) {}', ("nop",), 0)[0]
    arg = ctypes.c_uint64(out._storage._data.ptr)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    handle = streams.current_stream_handle(0)
    fns = {
        "cuLaunchKernel (launch_1d)": lambda: _driver.launch_1d(
            0, nop, 1, 128, ctypes.addressof(params), handle),
        "cuLaunchKernel (cuda.bindings)": lambda: _driver._load("driver").cuLaunchKernel(
            nop, 1, 1, 1, 128, 1, 1, 0, handle, ctypes.addressof(params), 0),
        "cuLaunchKernel (launch)": lambda: _driver.launch(0, nop, (1, 1, 1), (128, 1, 1),
                                                          [arg], handle),
        "refimpl stream handle": lambda: streams.current_stream_handle(0),
        "refimpl empty+free": lambda: Tensor._empty((1,), r.float32, dev),
        "refimpl a+b": lambda: a + b,
        "refimpl add(out=)": lambda: r.add(a, b, out=out),
        "refimpl a+b (records)": lambda: ag + b,
        "refimpl mm 16x16": lambda: m.mm(m),
        "refimpl _blas.gemm (raw)": lambda: _blas.gemm(mout, m, m),
        "torch mm 16x16": lambda: tm.mm(tm),
        "torch empty+free": lambda: torch.empty(1, device="cuda"),
        "torch a+b": lambda: ta + tb,
        "torch add(out=)": lambda: torch.add(ta, tb, out=tout),
        "torch a+b (records)": lambda: tag + tb,
    }
    times = measure(fns, number=opts.number, repeat=9, warmup=200)
    torch.cuda.synchronize()
    r.cuda.synchronize()
    for name, t in times.items():
        print(f"{name:26s} {t['median_ns'] / 1e3:8.2f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(opts.number):
        _ = ag + b
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("tottime").print_stats(opts.top)
    print(f"cProfile of {opts.number} recorded adds:")
    print(buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
