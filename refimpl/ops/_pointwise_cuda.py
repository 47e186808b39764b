"""CUDA glue of the elementwise op builders: from an op's expression to its kernel.

``run_cuda`` keeps one ``refimpl.cuda._pointwise.Elementwise`` per (expression,
parameter names) and runs it; ``cuda_fields`` gives ``defop`` an implementation's CUDA
kernel and its write-into form (used by in-place ops and ``out=``, see
``write_out_directly``); the error helpers give torch's CUDA messages.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import OpDef

_gen = None


def generator():
    """``refimpl.cuda._pointwise`` (imported on the first CUDA call)."""
    global _gen
    if _gen is None:
        from refimpl.cuda import _pointwise as _gen
    return _gen


def cuda_kernel_name(kernel: str) -> str:
    """torch's CUDA kernel name for a CPU kernel name (``atan2_cpu`` -> ``atan2_cuda``)."""
    for suffix in ("_vml_cpu", "_cpu_out", "_cpu"):
        if kernel.endswith(suffix):
            return kernel[: -len(suffix)] + "_cuda"
    return kernel + "_cuda"


def not_implemented_cuda(kernel: str, dtype: D.dtype) -> NotImplementedError:
    """torch's error for a CUDA kernel without ``dtype``."""
    return NotImplementedError(f'"{cuda_kernel_name(kernel)}" not implemented for '
                               f"'{dtype._legacy}'")


def no_cuda_complex(name: str, dtype: D.dtype) -> NotImplementedError:
    """An op whose CUDA expression has no complex form."""
    return NotImplementedError(f"refimpl has no CUDA kernel for '{name}' on {dtype}")


_KERNELS: dict = {}


def run_cuda(expr, inputs, out_dtype: D.dtype, compute, params=None, shape=None, out=None,
             name: str = "pointwise"):
    """Run one CUDA expression (see ``refimpl.cuda._pointwise.pointwise``); the kernel
    object of each (expression, parameter names) is kept, with its launch plans."""
    key = expr if params is None else (expr, *params)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS.setdefault(key, generator().Elementwise(
            expr, name, () if params is None else tuple(params)))
    return k.run(inputs, out_dtype, compute, () if params is None else tuple(params.values()),
                 shape, out)


def cuda_expr(spec, dtype: D.dtype, args: tuple, kwargs: dict) -> tuple:
    """(expression, params) of an op's ``cuda`` spec: a string or a function of the call."""
    if isinstance(spec, str):
        return spec, None
    return spec(dtype, *args, **kwargs)


def is_cuda(x) -> bool:
    """Whether ``x`` is a tensor on a CUDA device."""
    return isinstance(x, Tensor) and x._storage.device.type == "cuda"


def cuda_fields(impl, extra: dict | None = None) -> dict:
    """``defop`` keywords declaring ``impl``'s CUDA kernel (and its write-into form)."""
    from refimpl._memory_format import pointwise_layout

    return {"cuda": impl.cuda, "extra": {**(extra or {}), "cuda_into": impl.cuda_into,
                                         "layout": pointwise_layout}}


def write_out_directly(op: OpDef, into, out: Tensor, args: tuple, kwargs: dict) -> bool:
    """``op(..., out=out)`` on CUDA computed straight into ``out`` when that is exactly
    what copying the result would give: same shape and dtype, every tensor operand on
    ``out``'s device, no partial overlap. Returns False to take the general path."""
    from refimpl._dispatch import tensors_in

    dev = out._storage.device
    for t in tensors_in(args, kwargs):
        if t._storage.device != dev and t._shape:
            return False
    spec = op.meta(*args, **kwargs)
    if spec.shape != out._shape or spec.dtype is not out.dtype:
        return False
    if not can_write_inplace(out, (*args, *kwargs.values())):
        return False
    into(out, *args, **kwargs)
    return True


def can_write_inplace(self: Tensor, operands) -> bool:
    """Whether an elementwise result can be written straight into ``self``.

    An operand sharing ``self``'s memory must be ``self`` element for element (same
    offset, broadcast strides equal to ``self``'s); a partial overlap computes into a
    fresh tensor first.
    """
    for x in operands:
        if isinstance(x, Tensor) and x is not self and x._storage is self._storage:
            if x._offset != self._offset:
                return False
            lead = len(self._shape) - len(x._shape)
            if lead < 0:
                return False
            for size, st, target, own in zip(x._shape, x._stride, self._shape[lead:],
                                              self._stride[lead:]):
                if target != 1 and (size == 1 or st != own):
                    return False
            if lead and any(n != 1 for n in self._shape[:lead]):
                return False
    return True
