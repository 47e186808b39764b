"""Backend flags: process-global switches read by matmul and convolution backends.

refimpl has no cuBLAS or cuDNN; the flags exist with torch's defaults and coupling
(``allow_tf32`` on matmuls mirrors ``float32_matmul_precision``) so that programs that
set and restore them behave the same (spec CUDADEV-800..804).
"""

from __future__ import annotations

from refimpl.backends import cuda, cudnn

__all__ = ["cuda", "cudnn"]
