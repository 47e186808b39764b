"""``torch.cuda.jiterator``: elementwise kernels written by the user in CUDA C++.

``_create_jit_fn(code)`` takes the source of one templated device function, for example
``"template <typename T> T my_op(T x, T y, T alpha) { return -x + alpha * y; }"``, and
returns a callable: its positional arguments are CUDA tensors (broadcast together, in
their common dtype), the function's remaining parameters are the keyword arguments
given at creation (defaults that a call may override). The function is compiled with
NVRTC into refimpl's elementwise kernel generator (``refimpl/cuda/_pointwise.py``), so
it gets the same layouts, broadcasting and launch plans as refimpl's own ops.

``_create_multi_output_jit_fn(code, num_outputs)`` takes a ``void`` function that writes
its results through trailing reference parameters (``T& out0, T& out1``). Each output is
computed by its own kernel, which calls the function and keeps one of the results: the
function is elementwise and pure, so every kernel sees the same values, and the outputs
are what one kernel writing them all would give.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["_create_jit_fn", "_create_multi_output_jit_fn"]

# a templated function definition: "template <...> ReturnType name(" ...
_DEFINITION = re.compile(r"template\s*<[^>]*>\s*[\w:]+\s+(\w+)\s*\(", re.DOTALL)
_MAX_INPUTS = 8


def _function_name(code: str) -> str:
    """The name of the entry function: the last templated function ``code`` defines
    (earlier ones are helpers it may call)."""
    names = _DEFINITION.findall(code)
    if not names or "{" not in code:
        raise Exception(  # noqa: TRY002 - torch raises a plain Exception here
            f"Couldn't parse code, please check correctness:\n {code}")
    return names[-1]


class _JittedFunction:
    """A compiled-on-first-use elementwise function (see the module docstring)."""

    def __init__(self, code_string: str, return_by_ref: bool, num_outputs: int,
                 **kwargs: Any) -> None:
        if not (return_by_ref or num_outputs == 1):
            raise AssertionError("Return by value only works for single output.")
        self.code_string = code_string
        self.kernel_name = _function_name(code_string)
        self.return_by_ref = return_by_ref
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
        params = [(values[n], dtype) for n in names]
        outs = tuple(self._kernel(len(tensors), names, k)(list(tensors), dtype, compute=dtype,
                                                          params=params)
                     for k in range(self.num_outputs))
        return outs[0] if self.num_outputs == 1 else outs

    def _kernel(self, n_inputs: int, names: tuple, output: int):
        """The elementwise kernel computing output ``output`` for these operands."""
        from refimpl.cuda import _pointwise

        key = (n_inputs, names, output)
        kernel = self._kernels.get(key)
        if kernel is None:
            operands = ", ".join([*"abcdefgh"[:n_inputs], *names])
            prelude = self.code_string + "\n"
            call = self.kernel_name
            if self.return_by_ref:  # a wrapper keeping the output-th reference result
                call = f"jiterator_pick{output}_{self.kernel_name}"
                refs = ", ".join(f"out[{i}]" for i in range(self.num_outputs))
                prelude += (
                    f"template <typename T, typename... A> T {call}(T first, A... rest) {{\n"
                    f"    T out[{self.num_outputs}];\n"
                    f"    {self.kernel_name}(first, rest..., {refs});\n"
                    f"    return out[{output}];\n}}\n")
            kernel = self._kernels[key] = _pointwise.Elementwise(
                f"{call}({operands})", f"jiterator_{self.kernel_name}_{output}", names,
                prelude=prelude)
        return kernel


def _create_jit_fn(code_string: str, **kwargs: Any) -> Callable:
    """A callable running ``code_string``'s function elementwise over CUDA tensors."""
    return _JittedFunction(code_string, False, 1, **kwargs)


def _create_multi_output_jit_fn(code_string: str, num_outputs: int, **kwargs: Any) -> Callable:
    """A callable running ``code_string``'s ``void`` function elementwise, its results
    written through ``num_outputs`` trailing reference parameters: one tensor when
    ``num_outputs`` is 1, else a tuple."""
    return _JittedFunction(code_string, True, num_outputs, **kwargs)
