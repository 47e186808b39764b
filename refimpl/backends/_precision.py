"""The float32 matmul precision shared by refimpl.backends.cuda.matmul and refimpl."""

from __future__ import annotations

import os
import warnings

_PRECISIONS = ("highest", "high", "medium")
# TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 makes TF32 matmuls the starting setting (CUDADEV-800).
_precision = "high" if os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "0") not in ("", "0") else "highest"


def get_float32_matmul_precision() -> str:
    """'highest' (full float32), 'high' or 'medium' (TF32 or lower allowed)."""
    return _precision


def set_float32_matmul_precision(precision: str) -> None:
    """Set the precision; an unknown name warns and changes nothing, as in torch."""
    global _precision
    if precision not in _PRECISIONS:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
            "setFloat32MatmulPrecision call has no effect.",
            UserWarning, stacklevel=2,
        )
        return
    _precision = precision
