"""Triangular solves and Cholesky (issue #10): linalg.solve_triangular, triangular_solve,
linalg.cholesky(_ex), cholesky (legacy, ``upper=``), cholesky_solve, cholesky_inverse.

Two primitive ops carry kernels and derivative rules: ``linalg_solve_triangular``
(CPU: back substitution in numpy, ``_linalg_np.trisolve``; CUDA: cuBLAS trsm) and
``linalg_cholesky_ex`` (CPU: ``numpy.linalg.cholesky``, with potrf's ``info`` worked out
by ``_linalg_np.cholesky`` when a matrix is not positive-definite; CUDA: cuSOLVER
potrf). The rest is written over them: ``cholesky_solve`` is two triangular solves,
``cholesky_inverse`` is ``cholesky_solve`` against the identity.
"""

from __future__ import annotations

import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops import _linalg_np as _np_la
from refimpl.ops._helpers import broadcast_shapes
from refimpl.ops._linalg_np import flat as _flat
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h, _tn
from refimpl.ops.linalg_factor import (
    _cusolver,
    _done,
    _eye_like,
    _outs,
    check_float,
    check_matrix,
    check_square,
    fortran,
    raise_info,
)
from refimpl.ops.linalg_functions import _LinAlgError
from refimpl.ops.reduction import named_result, structseq_pair

structseq_pair("linalg_cholesky_ex", ("L", "info"))
structseq_pair("triangular_solve", ("solution", "cloned_coefficient"))


# -- solve_triangular -------------------------------------------------------------------

def _tri_check(A: Tensor, B: Tensor, left: bool) -> tuple:
    name = "linalg.solve_triangular"
    check_matrix(name, A)
    check_matrix(name, B, "B")
    check_square("", A, prefix=f"{name}: ")
    n, rows = A._shape[-1], (B._shape[-2] if left else B._shape[-1])
    if rows != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{B._shape[-2]}x{B._shape[-1]})")
    dtype = D.promote_types(A.dtype, B.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise NotImplementedError(f'"triangular_solve_cpu" not implemented for \'{_tn(dtype)}\'')
    batch = broadcast_shapes(A._shape[:-2], B._shape[:-2])
    return (*batch, *B._shape[-2:]), dtype


def _tri_meta(A, B, *, upper, left=True, unitriangular=False) -> TensorSpec:
    shape, dtype = _tri_check(A, B, left)
    return TensorSpec(shape, dtype, A.device)


def _tri_cpu(A, B, *, upper, left=True, unitriangular=False) -> np.ndarray:
    shape, dtype = _tri_check(A, B, left)
    a, b = A._np.astype(dtype.np, copy=False), B._np.astype(dtype.np, copy=False)
    if left:
        x = _np_la.trisolve(a, b, bool(upper), bool(unitriangular))
    else:  # X A = B  <=>  A^T X^T = B^T
        x = np.swapaxes(_np_la.trisolve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2),
                                        not upper, bool(unitriangular)), -1, -2)
    return fortran(np.broadcast_to(x, shape), dtype)


def _tri_cuda(A, B, *, upper, left=True, unitriangular=False) -> Tensor:
    shape, dtype = _tri_check(A, B, left)
    A, B = A.to(dtype), B.to(dtype)
    batch = shape[:-2]
    n = A._shape[-1]
    A = A.expand(*batch, n, n)
    B = B.expand(shape)
    if left:
        return _cusolver().trsm(A, B, bool(upper), bool(unitriangular))
    x = _cusolver().trsm(A.mT, B.mT, not upper, bool(unitriangular))
    # X^T's buffer read with swapped strides: X itself, a fresh tensor (not a view)
    return Tensor._make(x._storage, (*x._shape[:-2], x._shape[-1], x._shape[-2]),
                        (*x._stride[:-2], x._stride[-1], x._stride[-2]), x._offset, x.dtype)


def _masked(x: Tensor, upper: bool, unit: bool) -> Tensor:
    """``x`` restricted to the triangle a triangular solve reads."""
    return x.triu(1 if unit else 0) if upper else x.tril(-1 if unit else 0)


def _tri_backward(ctx, g):
    A = ctx.args[0]
    X = ctx.outputs[0]
    upper, left = ctx.kwargs["upper"], ctx.kwargs.get("left", True)
    unit = ctx.kwargs.get("unitriangular", False)
    need = ctx.needs_input_grad
    from refimpl.ops._helpers import sum_to

    gB = linalg_solve_triangular(_h(A), g, upper=not upper, left=left, unitriangular=unit)
    gA = None
    if need[0]:
        gA = -(gB.matmul(_h(X)) if left else _h(X).matmul(gB))
        gA = sum_to(_masked(gA, upper, unit), A.shape)
    return gA, sum_to(gB, ctx.args[1].shape) if need[1] else None


def _tri_jvp(ctx, dA, dB):
    A, X = ctx.args[0], ctx.outputs[0]
    upper, left = ctx.kwargs["upper"], ctx.kwargs.get("left", True)
    unit = ctx.kwargs.get("unitriangular", False)
    rhs = dB
    if dA is not None:
        da = _masked(dA, upper, unit)
        term = da.matmul(X) if left else X.matmul(da)
        rhs = -term if rhs is None else rhs - term
    return linalg_solve_triangular(A, rhs, upper=upper, left=left, unitriangular=unit)


linalg_solve_triangular = defop(
    "linalg_solve_triangular", meta=_tri_meta, cpu=_tri_cpu, cuda=_tri_cuda,
    backward=_tri_backward, jvp=_tri_jvp, saves=("inputs", "outputs"), extra={"method": False})


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False, out=None) -> Tensor:
    """``linalg.solve_triangular``: ``X`` with ``A X = B`` (``X A = B`` when not ``left``)
    for triangular ``A`` (only its ``upper``/lower triangle is read)."""
    kwargs = {} if out is None else {"out": out}
    return linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular,
                                   **kwargs)


@composite("triangular_solve")
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out=None):
    """Legacy ``torch.triangular_solve``: ``(solution, cloned_coefficient)`` of
    ``op(A) X = b`` (``op`` the transpose when ``transpose``)."""
    warnings.warn(
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand "
        "will be removed in a future PyTorch release.", UserWarning, stacklevel=2)
    for label, t in (("b", b), ("A", A)):
        if t.dim() < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {label} to have at least 2 "
                               f"dimensions, but it has {t.dim()} dimensions instead")
    if b.dtype is not A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_tn(b)} and A of type {_tn(A)} instead.")
    check_square("", A)
    if A._shape[-1] != b._shape[-2]:
        raise RuntimeError(
            f"Incompatible matrix sizes for triangular_solve: each A matrix is {A._shape[-2]} by "
            f"{A._shape[-1]} but each b matrix is {b._shape[-2]} by {b._shape[-1]}")
    coeff = A.mT if transpose else A
    x = linalg_solve_triangular(coeff, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = x._shape[:-2]
    clone = A.expand(*batch, *A._shape[-2:]).clone()
    return _outs("triangular_solve", (x, clone), out)


# -- cholesky -----------------------------------------------------------------------------

def _chol_check(name: str, A: Tensor) -> None:
    check_matrix(name, A)
    check_square("", A, prefix=f"{name}: ")
    check_float(name, A, low="cholesky_cpu")


def _chol_meta(A, *, upper=False, check_errors=False) -> tuple:
    _chol_check("linalg.cholesky", A)
    return TensorSpec(A._shape, A.dtype, A.device), TensorSpec(A._shape[:-2], D.int32, A.device)


def _chol_message(name: str):
    def message(v: int):
        return _LinAlgError, (
            f"{name}: {{where}}The factorization could not be completed because the input is "
            f"not positive-definite (the leading minor of order {v} is not positive-definite).")
    return message


def _chol_cpu(A, *, upper=False, check_errors=False) -> tuple:
    _chol_check("linalg.cholesky", A)
    n = A._shape[-1]
    a = _flat(A._np, n, n)
    if upper:  # potrf('U') reads the upper triangle: the lower one of A^H
        a = np.swapaxes(a, -1, -2).conj()
    low, info = _np_la.cholesky(a)
    fac = np.swapaxes(low, -1, -2).conj() if upper else low
    result = fortran(fac.reshape(A._shape), A.dtype), info.reshape(A._shape[:-2])
    if check_errors:
        raise_info(Tensor._from_array(result[1]), A.dim() > 2,
                   _chol_message("linalg.cholesky_ex"))
    return result


def _chol_cuda(A, *, upper=False, check_errors=False) -> tuple:
    _chol_check("linalg.cholesky", A)
    fac, info = _cusolver().cholesky(A, bool(upper))
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():  # potrf leaves the other triangle as it was: zero it, as torch does
        fac = _cusolver().colmajor(fac.triu() if upper else fac.tril())
    if check_errors:
        raise_info(info, A.dim() > 2, _chol_message("linalg.cholesky_ex"))
    return fac, info


def _phi(x: Tensor) -> Tensor:
    """The lower triangle of ``x`` with its diagonal halved."""
    return x.tril(-1) + 0.5 * x.tril().triu()


def _chol_backward(ctx, gL, *_):
    """``L^{-H} M L^{-1}`` with ``T = tril(L^H gL)`` and ``M = (T + tril(T, -1)^H) / 2``."""
    if gL is None:
        return (None,)
    L = ctx.outputs[0]
    if ctx.kwargs.get("upper", False):
        L, gL = _h(L), _h(gL)
    low = _h(L).matmul(gL).tril()
    inner = 0.5 * (low + _h(low.tril(-1)))
    x = linalg_solve_triangular(_h(L), inner, upper=True)
    return (linalg_solve_triangular(L, x, upper=False, left=False),)


def _chol_jvp(ctx, dA):
    L = ctx.outputs[0]
    upper = ctx.kwargs.get("upper", False)
    if upper:
        L = _h(L)
    c = linalg_solve_triangular(L, dA, upper=False)
    c = linalg_solve_triangular(_h(L), c, upper=True, left=False)
    dL = L.matmul(_phi(c))
    return (_h(dL) if upper else dL), None


linalg_cholesky_ex_op = defop(
    "linalg_cholesky_ex", meta=_chol_meta, cpu=_chol_cpu, cuda=_chol_cuda,
    backward=_chol_backward, jvp=_chol_jvp, diff_outputs=(0,), saves=("outputs",),
    extra={"method": False})


def linalg_cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False,
                       out=None):
    """``(L, info)`` of ``A = L L^H`` (``U^H U`` when ``upper``); ``info`` is the order of
    the first leading minor that is not positive-definite (0 when none)."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_cholesky_ex",
                        linalg_cholesky_ex_op(A, upper=upper, check_errors=check_errors,
                                              **kwargs), out)


@composite("linalg_cholesky")
def linalg_cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor; torch's LinAlgError for a matrix that is not positive-definite
    (the infos are read: a sync on CUDA, as in torch)."""
    L, info = linalg_cholesky_ex_op(A, upper=upper)
    raise_info(info, A.dim() > 2, _chol_message("linalg.cholesky"))
    return _done(L, out, "linalg_cholesky_ex")


@composite("cholesky")
def cholesky(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """Legacy ``torch.cholesky`` (deprecated): ``linalg.cholesky`` with ``cholesky:`` errors."""
    warnings.warn(
        "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in "
        "a future PyTorch release.", UserWarning, stacklevel=2)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f'"cholesky_cpu" not implemented for \'{_tn(input)}\'')
    check_matrix("cholesky", input)
    check_square("", input, prefix="cholesky: ")
    L, info = linalg_cholesky_ex_op(input, upper=upper)
    raise_info(info, input.dim() > 2, _chol_message("cholesky"))
    return _done(L, out, "cholesky")


def _chol_solve(B: Tensor, L: Tensor, upper: bool) -> Tensor:
    """``A^{-1} B`` for ``A = L L^H`` (``U^H U``). On CUDA without a gradient: cuSOLVER's
    potrs. Otherwise ``A`` is built from the factor and solved by LU: its value reads only
    L's triangle (as potrs does), while the gradient treats every entry of ``L`` as part
    of the product, as torch's formula does."""
    from refimpl.ops._helpers import broadcast_shapes
    from refimpl.ops.linalg_factor import cuda_no_grad, linalg_solve

    if cuda_no_grad(L, B):
        batch = broadcast_shapes(L._shape[:-2], B._shape[:-2])
        n = L._shape[-1]
        return _cusolver().potrs(L.expand(*batch, n, n), B.expand(*batch, *B._shape[-2:]),
                                 upper)
    other = L.triu(1) if not upper else L.tril(-1)
    used = (L.triu() if upper else L.tril()) + (other - other.detach())
    A = _h(used).matmul(used) if upper else used.matmul(_h(used))
    return linalg_solve(A, B)


@composite("cholesky_solve")
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """``A^{-1} B`` for ``B = input`` and ``A``'s Cholesky factor ``input2``."""
    B, L = input, input2
    if B.dtype is not L.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_tn(B)} and A of type {_tn(L)} instead.")
    for label, t in (("b", B), ("u", L)):
        if t.dim() < 2:
            raise RuntimeError(f"{label} should have at least 2 dimensions, but has {t.dim()} "
                               "dimensions instead")
    check_square("", L)
    if L._shape[-1] != B._shape[-2]:
        raise RuntimeError(
            f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L._shape[-2]} by "
            f"{L._shape[-1]} but each b matrix is {B._shape[-2]} by {B._shape[-1]}")
    if not (L.dtype.is_floating_point or L.dtype.is_complex) or L.dtype.itemsize < 4:
        raise NotImplementedError(f'"cholesky_solve_cpu" not implemented for \'{_tn(L)}\'')
    return _done(_chol_solve(B, L, upper), out, "cholesky_solve")


@composite("cholesky_inverse")
def cholesky_inverse(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """``A^{-1}`` from ``A``'s Cholesky factor."""
    check_matrix("cholesky_inverse", input)
    check_square("", input, prefix="cholesky_inverse: ")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(
            f'"cholesky_inverse_out_cpu" not implemented for \'{_tn(input)}\'')
    from refimpl.ops.linalg_factor import cuda_no_grad

    if cuda_no_grad(input):
        return _done(_cusolver().potri(input, upper), out, "cholesky_inverse")
    n = input._shape[-1]
    eye = _eye_like(input, n, n).expand(input._shape)
    return _done(_chol_solve(eye, input, upper), out, "cholesky_inverse")


__all__ = ["cholesky", "cholesky_inverse", "cholesky_solve", "triangular_solve"]
TENSOR_METHODS = ("cholesky", "cholesky_inverse", "cholesky_solve", "triangular_solve")
