"""Determinants (issue #10): linalg.slogdet / slogdet, logdet, and the CUDA kernels of
det and inverse (ops of ``linalg_functions``).

``linalg_slogdet`` is an op: CPU through ``numpy.linalg.slogdet``; CUDA from cuSOLVER's
getrf (the product of U's diagonal, the permutation's sign from the pivots, all on the
device); torch's backward and jvp (the sign's gradient for complex input included).
``logdet`` is written over it.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops._helpers import np_result
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h
from refimpl.ops.linalg_factor import (
    _cusolver,
    _eye_like,
    _inv_message,
    _outs,
    check_float,
    check_matrix,
    check_square,
    raise_info,
)
from refimpl.ops.reduction import structseq_pair

for _name in ("linalg_slogdet", "slogdet"):
    structseq_pair(_name, ("sign", "logabsdet"))


# -- CUDA kernels of det and inverse (ops of linalg_functions) ----------------------------

def _lu_diag_sign(A: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(diagonal of U, the permutation's sign as A's dtype, infos) on the device."""
    import refimpl

    lu_, piv, info = _cusolver().lu_factor(A)
    n = A._shape[-1]
    swaps = (piv != refimpl.arange(1, n + 1, dtype=D.int32, device=A.device)).sum(-1)
    sign = (1 - 2 * (swaps % 2)).to(A.dtype)
    return lu_.diagonal(0, -2, -1), sign, info


def det_cuda(input: Tensor) -> Tensor:
    """det on the device: the product of U's diagonal times the permutation's sign."""
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.linalg_functions import _check_square

    _check_square("det", input)
    with no_grad():
        diag, sign, _ = _lu_diag_sign(input)
        return diag.prod(-1) * sign


def inverse_cuda(input: Tensor) -> Tensor:
    """inverse on the device: getrf, getrs against the identity, infos checked (a sync)."""
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.linalg_functions import _check_square

    _check_square("inv", input)
    n = input._shape[-1]
    with no_grad():
        lu_, piv, info = _cusolver().lu_factor(input)
        raise_info(info, input.dim() > 2, _inv_message)
        eye = _eye_like(input, n, n).expand(input._shape)
        return _cusolver().lu_solve(lu_, piv, eye, False)


# -- slogdet, logdet ----------------------------------------------------------------------

def _slogdet_check(name: str, A: Tensor) -> None:
    check_matrix(name, A)
    check_square("", A, prefix=f"{name}: ")
    check_float(name, A)


def _slogdet_meta(A) -> tuple:
    _slogdet_check("linalg.slogdet", A)
    real = A.dtype.to_real() if A.dtype.is_complex else A.dtype
    return TensorSpec(A._shape[:-2], A.dtype, A.device), TensorSpec(A._shape[:-2], real, A.device)


def _slogdet_cpu(A) -> tuple:
    _slogdet_check("linalg.slogdet", A)
    sign, logabs = np.linalg.slogdet(A._np)
    real = A.dtype.to_real() if A.dtype.is_complex else A.dtype
    return np_result(sign, A.dtype), np_result(logabs, real)


def _slogdet_cuda(A) -> tuple:
    _slogdet_check("linalg.slogdet", A)
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        diag, sign, _ = _lu_diag_sign(A)
        mag = diag.abs()
        unit = (diag / mag.where(mag != 0, mag.new_ones(()))).where(mag != 0, diag.new_zeros(()))
        return sign * unit.prod(-1), mag.log().sum(-1)


def _slogdet_weight(ctx, g_sign, g_log) -> Tensor:
    """``w`` with ``grad_A = w * A^{-H}``: ``g_logabsdet - i Im(conj(g_sign) sign)``."""
    sign = ctx.outputs[0]
    w = g_log if g_log is not None else None
    if sign.dtype.is_complex:
        w = (w if w is not None else sign.real.new_zeros(sign._shape)).to(sign.dtype)
        if g_sign is not None:
            w = w - 1j * (g_sign.conj() * sign).imag
    return w


def _slogdet_backward(ctx, g_sign, g_log):
    A = ctx.args[0]
    w = _slogdet_weight(ctx, g_sign, g_log)
    if w is None:
        return (None,)
    from refimpl.ops.linalg_functions import inverse

    return (w.unsqueeze(-1).unsqueeze(-1) * _h(inverse(A)),)


def _slogdet_jvp(ctx, dA):
    from refimpl.ops.linalg_functions import inverse

    A, sign = ctx.args[0], ctx.outputs[0]
    t = (inverse(A) * dA.transpose(-2, -1)).sum((-2, -1))
    if not A.dtype.is_complex:
        return sign.new_zeros(sign._shape), t
    return sign * (1j * t.imag), t.real


linalg_slogdet_op = defop(
    "linalg_slogdet", meta=_slogdet_meta, cpu=_slogdet_cpu, cuda=_slogdet_cuda,
    backward=_slogdet_backward, jvp=_slogdet_jvp, saves=("inputs", "outputs"),
    extra={"method": False})


def linalg_slogdet(A: Tensor, *, out=None):
    """``(sign, logabsdet)`` of the determinant of each matrix."""
    return _outs("linalg_slogdet", tuple(linalg_slogdet_op(A)), out)


@composite("slogdet")
def slogdet(input: Tensor, *, out=None):
    """``torch.slogdet``: ``linalg.slogdet``."""
    return _outs("slogdet", tuple(linalg_slogdet_op(input)), out)


@composite("logdet")
def logdet(input: Tensor) -> Tensor:
    """``log(det(A))``: NaN for a negative real determinant, ``-inf`` for zero."""
    check_matrix("logdet", input)
    check_square("", input, prefix="logdet: ")
    check_float("logdet", input)
    sign, logabs = linalg_slogdet_op(input)
    if input.dtype.is_complex:
        return logabs + sign.log()
    return logabs.where(sign >= 0, logabs.new_full((), float("nan")))


__all__ = ["logdet", "slogdet"]
TENSOR_METHODS = ("logdet", "slogdet")
