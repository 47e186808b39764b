"""``torch.cuda.jiterator``: elementwise kernels written by the user in CUDA C++.

``_create_jit_fn(code)`` takes the source of one templated device function, for example
``"template <typename T> T my_op(T x, T y, T alpha) { return -x + alpha * y; }"``, and
returns a callable: its positional arguments are CUDA tensors (broadcast together, in
their common dtype), the function's remaining parameters are the keyword arguments
given at creation (defaults that a call may override). The function is compiled with
NVRTC into refimpl's elementwise kernel generator (``refimpl/cuda/_pointwise.py``), so
it gets the same layouts, broadcasting and launch plans as refimpl's own ops.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["_create_jit_fn", "_create_multi_output_jit_fn"]

_NAME = re.compile(r"(\w+)\s*\(")
_MAX_INPUTS = 8


def _function_name(code: str) -> str:
    """The name of the (single) function ``code`` defines, after any template header."""
    body = re.sub(r"^\s*template\s*<[^>]*>", "", code.strip())
    m = _NAME.search(body)
    if m is None:
        raise ValueError(f"jiterator: no function definition found in {code!r}")
    return m.group(1)


class _JittedFunction:
    """A compiled-on-first-use elementwise function (see the module docstring)."""

    def __init__(self, code_string: str, num_outputs: int, **kwargs: Any) -> None:
        self.code_string = code_string
        self.kernel_name = _function_name(code_string)
        self.num_outputs = num_outputs
        self.kwargs_dict = dict(kwargs)
        self._kernels: dict = {}

    def __call__(self, *tensors, **kwargs):
        from refimpl import _dtype as D
        from refimpl import cuda
        from refimpl.cuda import _pointwise

        if not cuda.is_available():
            raise AssertionError(
                "Jiterator is only supported on CUDA and ROCm GPUs, none are available.")
        if len(tensors) > _MAX_INPUTS:
            raise AssertionError("jiterator only supports up to 8 tensor inputs.")
        if len(tensors) > _pointwise.MAX_OPERANDS:
            raise NotImplementedError(
                f"refimpl's jiterator takes at most {_pointwise.MAX_OPERANDS} tensor inputs "
                f"(its elementwise kernel generator's limit), got {len(tensors)}")
        values = dict(self.kwargs_dict)
        for key, value in kwargs.items():
            if key not in self.kwargs_dict:
                raise KeyError(f"{key} is not declared in function definition")
            values[key] = value
        dtype = tensors[0].dtype
        for x in tensors[1:]:
            dtype = D.promote_types(dtype, x.dtype)
        names = tuple(values)
        key = (len(tensors), names)
        kernel = self._kernels.get(key)
        if kernel is None:
            operands = ", ".join([*"abcd"[:len(tensors)], *names])
            kernel = self._kernels[key] = _pointwise.Elementwise(
                f"{self.kernel_name}({operands})", f"jiterator_{self.kernel_name}", names,
                prelude=self.code_string + "\n")
        return kernel(list(tensors), dtype, compute=dtype,
                      params=[(values[n], dtype) for n in names])


def _create_jit_fn(code_string: str, **kwargs: Any) -> Callable:
    """A callable running ``code_string``'s function elementwise over CUDA tensors."""
    return _JittedFunction(code_string, 1, **kwargs)


def _create_multi_output_jit_fn(code_string: str, num_outputs: int, **kwargs: Any) -> Callable:
    """torch's multi-output form (the function returns through reference arguments)."""
    raise NotImplementedError(
        "refimpl's jiterator has no multi-output kernels yet (_create_multi_output_jit_fn)")
