"""``matmul`` on CUDA as one cuBLAS GEMM when no autograd graph is to be recorded.

``linalg.matmul``'s composite (torch's: batch dims broadcast by ``expand``, folded by
``reshape``, one ``bmm`` or ``mm``, the result reshaped) costs several dispatched ops, and
a copy for each operand whose batch dims do not fold. Where no graph is recorded and
nothing watches the ops (``_direct_ok``), ``matmul_direct`` hands the operands to
``refimpl.cuda._blas.gemm`` as strided views instead: a left operand whose batch dims
fold into its rows makes one 2-d GEMM; otherwise each operand's batch dims become one
batch stride (0 where broadcast), and only an operand that no single stride can walk is
copied. The result is the composite's: a fresh contiguous tensor of the same shape and
values. Shape errors and everything else are left to the composite (None).
"""

from __future__ import annotations

import math

from refimpl._autocast import AUTOCAST
from refimpl._state import FW, STATE
from refimpl._tensor import PLAIN, Tensor
from refimpl.cuda import _blas
from refimpl.ops._helpers import broadcast_shapes


def _direct_ok(a: Tensor, b: Tensor) -> bool:
    """Whether a product may skip the composite's ops: plain CUDA tensors of one cuBLAS
    dtype and device without math bits, no graph to record, and nothing that watches or
    rewrites ops (dispatch modes, the profiler, fake tensors, forward AD, autocast)."""
    from refimpl import _dispatch

    dev = a._storage.device
    return (dev.type == "cuda" and type(a) in PLAIN and type(b) in PLAIN
            and b._storage.device == dev and a.dtype is b.dtype and _blas.blas_dtype(a.dtype)
            and not (a._conj_bit or a._neg_bit or b._conj_bit or b._neg_bit)
            and not (_dispatch.MODE_STACK or _dispatch.PROFILE_LAYER is not None
                     or _dispatch.FAKE_LAYER is not None or FW.active or AUTOCAST.active)
            and not (STATE.grad_enabled and (a.requires_grad or b.requires_grad)))


def _fold(sizes, strides) -> int | None:
    """The one stride that walks dims ``sizes`` (row-major) as a single dim, or None."""
    step = None
    for size, stride in zip(reversed(sizes), reversed(strides)):
        if size == 1:
            continue
        if step is None:
            step, span = stride, stride * size
        elif stride != span:
            return None
        else:
            span = stride * size
    return 0 if step is None else step


def _batch_strides(t: Tensor, dims: int, batch: tuple) -> list[int]:
    """The strides of ``t``'s leading ``dims`` dims expanded to ``batch`` (0 = broadcast)."""
    own = [st if sz != 1 else 0 for sz, st in zip(t._shape[:dims], t._stride[:dims])]
    return [0] * (len(batch) - len(own)) + own


def _operand(t: Tensor, rows: int, cols: int, mat: tuple, batch: tuple, nb: int) -> Tensor:
    """``t``'s matrices (strides ``mat``; a 1-d ``t`` is one matrix) over ``batch`` as a
    3-d (nb, rows, cols) tensor with one batch stride: a view, or a dense copy of the
    broadcast operand when no single stride walks its batch dims."""
    strides = _batch_strides(t, max(t.dim() - 2, 0), batch)
    step = _fold(batch, strides)
    if step is None:
        view = Tensor._make(t._storage, (*batch, rows, cols), (*strides, *mat), t._offset,
                            t.dtype)
        dense = _blas.dense_copy(view)
        return Tensor._make(dense._storage, (nb, rows, cols), (rows * cols, cols, 1), 0,
                            t.dtype)
    return Tensor._make(t._storage, (nb, rows, cols), (step, *mat), t._offset, t.dtype)


def matmul_direct(a: Tensor, b: Tensor, da: int, db: int) -> Tensor | None:
    """``matmul`` on CUDA as one cuBLAS GEMM (plus a copy only where an operand's batch
    dims cannot be walked with one stride), where ``_direct_ok`` holds and the shapes
    are valid; None otherwise (the composite then runs, with its errors and graph). The
    result is the composite's: a fresh contiguous tensor of the same shape."""
    if not _direct_ok(a, b):
        return None
    k = a._shape[-1]
    if (b._shape[0] if db == 1 else b._shape[-2]) != k:
        return None
    n = a._shape[-2] if da > 1 else 1
    m = b._shape[-1] if db > 1 else 1
    try:
        batch = broadcast_shapes(a._shape[:-2], b._shape[:-2])
    except RuntimeError:
        return None
    nb = math.prod(batch)
    shape = (*batch, *((n,) if da > 1 else ()), *((m,) if db > 1 else ()))
    out = Tensor._empty(shape, a.dtype, a._storage.device)
    a_mat = (a._stride[-2], a._stride[-1]) if da > 1 else (k * a._stride[0], a._stride[0])
    b_mat = (b._stride[-2], b._stride[-1]) if db > 1 else (b._stride[0], 1)
    if db <= 2 and da > 2:
        rows = _fold((*a._shape[:-1],), (*a._stride[:-1],))
        if rows is not None:  # the left operand's batch dims fold into its rows: one mm
            left = Tensor._make(a._storage, (nb * n, k), (rows, a._stride[-1]), a._offset,
                                a.dtype)
            right = Tensor._make(b._storage, (k, m), b_mat, b._offset, b.dtype)
            flat = Tensor._make(out._storage, (nb * n, m), (m, 1), 0, out.dtype)
            _blas.gemm(flat, left, right)
            return out
    left = _operand(a, n, k, a_mat, batch, nb)
    right = _operand(b, k, m, b_mat, batch, nb)
    _blas.gemm(Tensor._make(out._storage, (nb, n, m), (n * m, m, 1), 0, out.dtype),
                 left, right)
    return out


__all__: list[str] = []
