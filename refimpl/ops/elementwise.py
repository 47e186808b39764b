"""Elementwise ops: unary and binary math with broadcasting and torch's promotion.

Each op is one ``defop`` call (meta, CPU kernel, backward, jvp) built from the small
factories below; in-place variants (``add_``) reuse the op through ``kind="inplace"``.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl.ops._helpers import (
    broadcast_shapes, compute_np_dtype, np_result, result_type, sum_to, to_np,
)
from refimpl.ops._registry import OpDef, TensorSpec, defop
from refimpl._tensor import Tensor


def _shape(x) -> tuple:
    return x._shape if isinstance(x, Tensor) else ()


def _device(*xs):
    for x in xs:
        if isinstance(x, Tensor):
            return x.device
    return None


def binary_meta(a, b, **_) -> TensorSpec:
    """Broadcast shape, promoted dtype."""
    return TensorSpec(broadcast_shapes(_shape(a), _shape(b)), result_type(a, b), _device(a, b))


def _binary_cpu(fn):
    def kernel(a, b, **kwargs):
        if isinstance(a, Tensor) and isinstance(b, Tensor) and a._shape != b._shape:
            broadcast_shapes(a._shape, b._shape)  # raises torch's message
        dtype = result_type(a, b)
        with np.errstate(all="ignore"):
            out = fn(to_np(a, dtype), to_np(b, dtype), dtype, **kwargs)
        return np_result(out, dtype)

    return kernel


def _check_alpha(a, b, alpha) -> None:
    dtype = result_type(a, b)
    if isinstance(alpha, float) and dtype.category < 2:
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number."
        )
    if isinstance(alpha, complex) and dtype.category < 3:
        raise RuntimeError(
            "For non-complex input tensors, argument alpha must not be a complex number."
        )


def _add(x, y, dtype, alpha=1):
    return x + y if alpha == 1 else x + y * alpha


def _add_cpu(a, b, *, alpha=1):
    _check_alpha(a, b, alpha)
    return _binary_cpu(_add)(a, b, alpha=alpha)


def _add_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    alpha = ctx.kwargs.get("alpha", 1)
    ga = sum_to(grad, a.shape) if isinstance(a, Tensor) else None
    gb = None
    if isinstance(b, Tensor):
        gb = sum_to(grad if alpha == 1 else grad * alpha, b.shape)
    return ga, gb


add = defop("add", meta=binary_meta, cpu=_add_cpu, backward=_add_backward,
            jvp=lambda ctx, ta, tb: _add_jvp(ctx, ta, tb))


def _add_jvp(ctx, ta, tb):
    alpha = ctx.kwargs.get("alpha", 1)
    if tb is not None and alpha != 1:
        tb = tb * alpha
    if ta is None:
        return tb
    return ta if tb is None else ta + tb


def _mul_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    ga = sum_to(grad * (b.conj() if isinstance(b, Tensor) else b), a.shape) \
        if isinstance(a, Tensor) else None
    gb = sum_to(grad * a.conj(), b.shape) if isinstance(b, Tensor) else None
    return ga, gb


mul = defop("mul", meta=binary_meta, cpu=_binary_cpu(lambda x, y, dt: x * y),
            backward=_mul_backward)


def unary_meta(a, **_) -> TensorSpec:
    """Same shape and dtype as the input."""
    return TensorSpec(a._shape, a.dtype, a.device)


neg = defop("neg", meta=unary_meta, cpu=lambda a: np_result(-to_np(a, a.dtype), a.dtype),
            backward=lambda ctx, g: (-g,))


def inplace(op: OpDef) -> OpDef:
    """Declare ``<name>_``: the in-place form of ``op``, writing into input 0."""
    return defop(op.name + "_", kind="inplace", base=op, meta=op.meta, backward=op.backward,
                 jvp=op.jvp, node=op.node)


add_ = inplace(add)
mul_ = inplace(mul)
neg_ = inplace(neg)

__all__ = ["add", "add_", "mul", "mul_", "neg", "neg_", "binary_meta", "unary_meta", "inplace"]
_ = (D, compute_np_dtype)
