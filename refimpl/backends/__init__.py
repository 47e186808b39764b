"""Backend flags: process-global switches read by matmul and convolution backends.

The matmul flags steer refimpl's cuBLAS calls (``refimpl.cuda._blas`` reads them on
every product: TF32 for float32/complex64, reduced-precision reductions for
float16/bfloat16), with torch's defaults and coupling (``allow_tf32`` on matmuls
mirrors ``float32_matmul_precision``). refimpl has no cuDNN: its flags are state kept
so that programs that set and restore them behave the same (spec CUDADEV-800..804).
"""

from __future__ import annotations

from refimpl.backends import cuda, cudnn

__all__ = ["cuda", "cudnn"]
