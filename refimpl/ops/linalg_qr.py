"""QR and the remaining factorisation-based functions (issue #10): linalg.qr / qr,
geqrf, linalg.householder_product, ormqr, linalg.ldl_factor(_ex), ldl_solve,
linalg.tensorinv, tensorsolve, linalg.vander, matrix_exp.

``linalg_qr`` is the primitive with kernels (CPU: ``numpy.linalg.qr``, LAPACK's
geqrf/orgqr, so signs agree with torch; CUDA: cuSOLVER geqrf + orgqr) and torch's
backward. ``geqrf`` is a kernel-only op (not differentiable, as in torch).
``householder_product`` and ``ormqr`` apply the reflectors ``H_i = I - tau_i v_i v_i^H``
with refimpl products (any device, differentiable); on CUDA, when no gradient is
recorded, they run cuSOLVER's orgqr/ormqr instead, as torch does. ``matrix_exp`` is a degree-18
Taylor polynomial with scaling and squaring, written in refimpl ops. LDL^H runs sytf2's
Bunch-Kaufman pivoting on the CPU (``_linalg_np.ldl``) and cuSOLVER's sytrf/Xsytrs on
CUDA (symmetric only: cuSOLVER has no Hermitian variant).
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops import _linalg_np as _np_la
from refimpl.ops._helpers import np_result
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
    cuda_no_grad,
    fortran,
    has_data,
    raise_info,
)
from refimpl.ops.linalg_triangular import linalg_solve_triangular
from refimpl.ops.reduction import structseq_pair

for _name, _fields in (("linalg_qr", ("Q", "R")), ("qr", ("Q", "R")), ("geqrf", ("a", "tau")),
                       ("linalg_ldl_factor", ("LD", "pivots")),
                       ("linalg_ldl_factor_ex", ("LD", "pivots", "info"))):
    structseq_pair(_name, _fields)

_MODES = ("reduced", "complete", "r")


# -- qr -------------------------------------------------------------------------------------

def _qr_check(A: Tensor, mode: str) -> tuple:
    check_matrix("linalg.qr", A)
    if mode not in _MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    check_float("linalg.qr", A, low="geqrf_cpu")
    m, n = A._shape[-2:]
    k = min(m, n)
    batch = A._shape[:-2]
    q = (0,) if mode == "r" else (*batch, m, m if mode == "complete" else k)
    r = (*batch, m if mode == "complete" else k, n)
    return q, r


def _qr_meta(A, mode="reduced") -> tuple:
    q, r = _qr_check(A, mode)
    return TensorSpec(q, A.dtype, A.device), TensorSpec(r, A.dtype, A.device)


def _qr_cpu(A, mode="reduced") -> tuple:
    q_shape, r_shape = _qr_check(A, mode)
    a = A._np
    if a.size == 0:
        eye = np.broadcast_to(np.eye(*q_shape[-2:], dtype=a.dtype), q_shape) if mode != "r" \
            else np.zeros(0, a.dtype)
        return np_result(eye, A.dtype), np.zeros(r_shape, a.dtype)
    if mode == "r":
        return np.zeros(0, a.dtype), fortran(np.linalg.qr(a, mode="r"), A.dtype)
    q, r = np.linalg.qr(a, mode=mode)
    return fortran(q, A.dtype), fortran(r, A.dtype)


def _qr_cuda(A, mode="reduced") -> tuple:
    q_shape, r_shape = _qr_check(A, mode)
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        packed, tau = _cusolver().geqrf(A)
        R = _cusolver().colmajor(packed.narrow(-2, 0, r_shape[-2]).triu())
        if mode == "r":
            return A.new_empty((0,)), R
        return _cusolver().orgqr(packed, tau, q_shape[-1]), R


def _qr_backward(ctx, gQ, gR):
    mode = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("mode", "reduced")
    A = ctx.args[0]
    Q, R = ctx.outputs
    m, n = A._shape[-2:]
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
            "through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    gQ = Q.new_zeros(Q._shape) if gQ is None else gQ
    gR = R.new_zeros(R._shape) if gR is None else gR
    if m >= n:
        return (_qr_square_backward(gQ, gR, Q, R),)
    from refimpl.ops.shape import cat

    gR1, gR2 = gR.narrow(-1, 0, m), gR.narrow(-1, m, n - m)
    gQ = gQ + A.narrow(-1, m, n - m).matmul(_h(gR2))
    g1 = _qr_square_backward(gQ, gR1, Q, R.narrow(-1, 0, m))
    return (cat([g1, Q.matmul(gR2)], -1),)


def _qr_square_backward(gQ: Tensor, gR: Tensor, Q: Tensor, R: Tensor) -> Tensor:
    """gA for A = QR with R square: ``(gQ + Q copyltu(M)) R^{-H}``,
    ``M = R gR^H - gQ^H Q``, ``copyltu`` mirroring the lower triangle (real diagonal)."""
    M = R.matmul(_h(gR)) - _h(gQ).matmul(Q)
    low = M.tril(-1)
    diag = M.tril().triu()
    if M.dtype.is_complex:
        diag = diag.real.to(M.dtype)
    sym = low + _h(low) + diag
    return linalg_solve_triangular(_h(R), gQ + Q.matmul(sym), upper=False, left=False)


def _qr_jvp(ctx, dA, *_):
    """Tangents of Q and R: with ``C = Q^H dA R^{-1}`` (square part), ``Q^H dQ`` is the
    skew-Hermitian ``X`` sharing C's strictly lower triangle, ``dR = (C - X) R``."""
    mode = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("mode", "reduced")
    m, n = ctx.args[0]._shape[-2:]
    if mode == "r" or (mode == "complete" and m > n):
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols." if mode == "complete" else
                           "The derivative of linalg.qr depends on Q, which is not computed "
                           "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
                           "going to differentiate through linalg.qr.")
    Q, R = ctx.outputs
    k = min(m, n)
    R1, dA1 = R.narrow(-1, 0, k), dA.narrow(-1, 0, k)
    b = linalg_solve_triangular(R1, dA1, upper=True, left=False)
    C = _h(Q).matmul(b)
    low = C.tril(-1)
    X = low - _h(low)
    if C.dtype.is_complex:
        X = X + 1j * C.tril().triu().imag
    dR1 = (C - X).matmul(R1)
    dQ = b - Q.matmul(C) + Q.matmul(X)
    if m >= n:
        return dQ, dR1
    from refimpl.ops.shape import cat

    dR2 = _h(Q).matmul(dA.narrow(-1, k, n - k) - dQ.matmul(R.narrow(-1, k, n - k)))
    return dQ, cat([dR1, dR2], -1)


linalg_qr_op = defop("linalg_qr", meta=_qr_meta, cpu=_qr_cpu, cuda=_qr_cuda,
                     backward=_qr_backward, jvp=_qr_jvp, saves=("inputs", "outputs"),
                     extra={"method": False})


def linalg_qr(A: Tensor, mode: str = "reduced", *, out=None):
    """``(Q, R)`` with ``A = Q R`` (LAPACK's signs); mode ``'reduced'``, ``'complete'``
    or ``'r'`` (Q empty)."""
    return _outs("linalg_qr", tuple(linalg_qr_op(A, mode)), out)


@composite("qr")
def qr(input: Tensor, some: bool = True, *, out=None):
    """Legacy ``torch.qr`` (deprecated): ``linalg.qr``, ``some`` choosing reduced or
    complete."""
    import warnings

    warnings.warn(
        "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
        "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string "
        "parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = "
        "torch.linalg.qr(A, 'reduced' if some else 'complete')", UserWarning, stacklevel=2)
    return _outs("qr", tuple(linalg_qr_op(input, "reduced" if some else "complete")), out)


# -- geqrf, householder_product, ormqr -------------------------------------------------------

def _geqrf_meta(input) -> tuple:
    check_matrix("torch.geqrf", input, "input")
    if not (input.dtype.is_floating_point or input.dtype.is_complex) or input.dtype.itemsize < 4:
        raise NotImplementedError(f'"geqrf_cpu" not implemented for \'{_tn(input)}\'')
    k = min(input._shape[-2:])
    return (TensorSpec(input._shape, input.dtype, input.device),
            TensorSpec((*input._shape[:-2], k), input.dtype, input.device))


def _geqrf_message(x: Tensor) -> None:
    if x.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")


def _geqrf_cpu(input) -> tuple:
    _geqrf_message(input)
    _geqrf_meta(input)
    a = input._np
    if a.size == 0:
        return a.copy(), np.zeros((*a.shape[:-2], min(a.shape[-2:])), a.dtype)
    h, tau = np.linalg.qr(a, mode="raw")
    return fortran(np.swapaxes(h, -1, -2), input.dtype), np_result(tau, input.dtype)


def _geqrf_cuda(input) -> tuple:
    _geqrf_message(input)
    _geqrf_meta(input)
    return _cusolver().geqrf(input)


def _geqrf_backward(ctx, *grads):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


geqrf_op = defop("geqrf", meta=_geqrf_meta, cpu=_geqrf_cpu, cuda=_geqrf_cuda,
                 backward=_geqrf_backward, extra={"method": False})


def geqrf(input: Tensor, *, out=None):
    """``(a, tau)``: LAPACK's geqrf (R above the diagonal, the reflectors below it)."""
    return _outs("geqrf", tuple(geqrf_op(input)), out)


def _reflectors(A: Tensor, k: int) -> Tensor:
    """The Householder vectors ``v_i`` as columns: unit diagonal, A below it, zero above."""
    m = A._shape[-2]
    V = A.narrow(-1, 0, k).tril(-1)
    return V + _eye_like(A, m, k)


def _apply(V: Tensor, tau: Tensor, C: Tensor, left: bool, adjoint: bool) -> Tensor:
    """``op(Q) C`` or ``C op(Q)`` for ``Q = H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^H``."""
    k = tau._shape[-1]
    # Q C applies H_k first; Q^H C applies H_1^H first; C Q applies H_1 first
    order = range(k) if left == adjoint else range(k - 1, -1, -1)
    for i in order:
        v = V.narrow(-1, i, 1)
        t = tau.narrow(-1, i, 1).unsqueeze(-1)
        if adjoint and t.dtype.is_complex:
            t = t.conj()
        if left:
            C = C - (t * v).matmul(_h(v).matmul(C))
        else:
            C = C - C.matmul(v).matmul(t * _h(v))
    return C


@composite("linalg_householder_product")
def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """``linalg.householder_product``: the first ``n`` columns of ``H_1 ... H_k``."""
    name = "torch.linalg.householder_product"
    if A.dim() < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    m, n = A._shape[-2:]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if tau._shape[-1:] and n < tau._shape[-1]:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    if tau.dim() != A.dim() - 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {tau.dim()} and input.ndim is equal to "
                           f"{A.dim()}")
    if tau._shape[:-1] != A._shape[:-2]:
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau._shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{name}: tau dtype {_tn(tau)} does not match input dtype {_tn(A)}")
    if not (A.dtype.is_floating_point or A.dtype.is_complex) or A.dtype.itemsize < 4:
        raise NotImplementedError(f'"orgqr_cpu" not implemented for \'{_tn(A)}\'')
    k = tau._shape[-1]
    if cuda_no_grad(A, tau):
        return _done(_cusolver().orgqr(A, tau, n), out, "linalg_householder_product")
    eye = _eye_like(A, m, n).expand(A._shape)
    if k == 0:  # no reflector: the identity, still connected to A's graph (zero gradient)
        eye = eye + A * 0
    return _done(_apply(_reflectors(A, k), tau, eye, True, False), out,
                 "linalg_householder_product")


orgqr = householder_product


@composite("ormqr")
def ormqr(input: Tensor, input2: Tensor, input3: Tensor, left: bool = True,
          transpose: bool = False, *, out=None) -> Tensor:
    """``op(Q) C`` (``C op(Q)`` when not ``left``) for ``Q`` given as geqrf's reflectors
    ``input`` and ``tau = input2``; ``op`` is the conjugate transpose when ``transpose``."""
    A, tau, C = input, input2, input3
    for label, t in (("input", A), ("other", C)):
        if t.dim() < 2:
            raise RuntimeError(f"torch.ormqr: {label} must have at least 2 dimensions.")
    rows = C._shape[-2] if left else C._shape[-1]
    if tau._shape[-1] > min(rows, A._shape[-1]):
        raise RuntimeError("torch.ormqr: tau.shape[-1] must be equal to min(other.shape["
                           f"{-2 if left else -1}], input.shape[-1])")
    if A._shape[-2] != rows:
        raise RuntimeError(f"torch.ormqr: {'other.shape[-2]' if left else 'other.shape[-1]'} "
                           "must be equal to input.shape[-2]")
    if C.dtype is not A.dtype:
        raise RuntimeError("torch.ormqr: Expected input and other to have the same dtype, but "
                           f"input has dtype{_tn(A)} and other has dtype {_tn(C)}")
    if tau.dtype is not A.dtype:
        raise RuntimeError("torch.ormqr: Expected input and tau to have the same dtype, but "
                           f"input has dtype{_tn(A)} and tau has dtype {_tn(tau)}")
    check_float("torch.ormqr", A, low="ormqr_cpu")
    k = tau._shape[-1]
    if cuda_no_grad(A, tau, C):
        batch = C._shape[:-2]
        return _done(_cusolver().ormqr(A.expand(*batch, *A._shape[-2:]),
                                       tau.expand(*batch, k), C, left, bool(transpose)), out,
                     "ormqr")
    return _done(_apply(_reflectors(A, k), tau, C, left, bool(transpose)), out, "ormqr")



# -- ldl ----------------------------------------------------------------------------------

def _ldl_meta(A, *, hermitian=False, check_errors=False) -> tuple:
    check_matrix("torch.linalg.ldl_factor_ex", A)
    check_square("", A, prefix="torch.linalg.ldl_factor_ex: ")
    check_float("torch.linalg.ldl_factor_ex", A, low="ldl_factor_kernel_cpu")
    return (TensorSpec(A._shape, A.dtype, A.device),
            TensorSpec(A._shape[:-1], D.int32, A.device),
            TensorSpec(A._shape[:-2], D.int32, A.device))


def _ldl_cpu(A, *, hermitian=False, check_errors=False) -> tuple:
    _ldl_meta(A)
    n = A._shape[-1]
    ld, piv, info = _np_la.ldl(_flat(A._np, n, n),
                               bool(hermitian) and A.dtype.is_complex)
    result = (fortran(ld.reshape(A._shape), A.dtype), piv.reshape(A._shape[:-1]),
              info.reshape(A._shape[:-2]))
    if check_errors:
        raise_info(Tensor._from_array(result[2]), A.dim() > 2, _ldl_message)
    return result


def _ldl_message(v: int):
    return RuntimeError, ("torch.linalg.ldl_factor_ex: {where}The factorization could not be "
                          f"completed because the input is singular (D[{v},{v}] is zero).")


def _ldl_cuda(A, *, hermitian=False, check_errors=False) -> tuple:
    _ldl_meta(A)
    if hermitian and A.dtype.is_complex:
        raise NotImplementedError(
            "refimpl has no CUDA kernel for 'linalg.ldl_factor' with hermitian=True on "
            "complex input (cuSOLVER has no hetrf); no CPU fallback is used")
    from refimpl.autograd.grad_mode import no_grad

    ld, piv, info = _cusolver().ldl_factor(A)
    with no_grad():  # sytrf leaves the upper triangle as it was: zero it, as torch does
        ld = _cusolver().colmajor(ld.tril())
    if check_errors:
        raise_info(info, A.dim() > 2, _ldl_message)
    return ld, piv, info


linalg_ldl_factor_ex_op = defop("linalg_ldl_factor_ex", meta=_ldl_meta, cpu=_ldl_cpu,
                                cuda=_ldl_cuda, differentiable=False,
                                extra={"method": False})


def linalg_ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False,
                         out=None):
    """``(LD, pivots, info)``: LAPACK's sytrf (Bunch-Kaufman), lower, packed."""
    return _outs("linalg_ldl_factor_ex",
                 tuple(linalg_ldl_factor_ex_op(A, hermitian=hermitian,
                                               check_errors=check_errors)), out)


@composite("linalg_ldl_factor")
def linalg_ldl_factor(A: Tensor, *, hermitian: bool = False, out=None):
    """``(LD, pivots)``; raises for a singular ``D`` (torch reports LAPACK's code)."""
    LD, piv, info = linalg_ldl_factor_ex_op(A, hermitian=hermitian)
    bad = [(b, v) for b, v in enumerate(info.reshape(-1).cpu()._np) if v] \
        if has_data(info) else []
    if bad:
        raise RuntimeError(
            'false INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/aten/src/ATen/native/'
            'BatchLinearAlgebra.cpp":1642, please report a bug to PyTorch. '
            f"torch.linalg.ldl_factor: Unknown error code: {int(bad[0][1])}.")
    return _outs("linalg_ldl_factor", (LD, piv), out)


@composite("linalg_ldl_solve")
def linalg_ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False,
                     out=None) -> Tensor:
    """``A^{-1} B`` from ``ldl_factor``'s output (sytrs: numpy on the CPU, cuSOLVER's
    Xsytrs on CUDA)."""
    name = "torch.linalg.ldl_solve"
    check_matrix(name, LD)
    if B.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(B.dim(), 1)}"
                         f", {max(B.dim(), 1) - 1}], but got -2)")
    if pivots.dtype.category > 1 or pivots.dtype is D.bool_:
        raise RuntimeError(f"{name}: Expected pivots to be integers. Got {_tn(pivots)}")
    if pivots._shape != LD._shape[:-1]:
        raise RuntimeError(f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, "
                           f"but got pivots with shape {list(pivots._shape)} instead")
    if LD._shape[-1] != B._shape[-2]:
        raise RuntimeError(
            f"Incompatible matrix sizes for {name}: each A matrix is {LD._shape[-2]} by "
            f"{LD._shape[-1]} but each b matrix is {B._shape[-2]} by {B._shape[-1]}")
    if LD.dtype is not B.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_tn(B)} and A of type {_tn(LD)} instead.")
    check_float(name, LD)
    pivots = pivots.to(D.int32)
    from refimpl.ops._helpers import broadcast_shapes

    n = LD._shape[-1]
    batch = broadcast_shapes(LD._shape[:-2], B._shape[:-2])
    if LD.device.type == "cuda":
        if hermitian and LD.dtype.is_complex:
            raise NotImplementedError(
                "refimpl has no CUDA kernel for 'linalg.ldl_solve' with hermitian=True on "
                "complex input (cuSOLVER has no hetrs); no CPU fallback is used")
        x = _cusolver().ldl_solve(LD, pivots, B.expand(*batch, *B._shape[-2:]))
        return _done(x, out, "linalg_ldl_solve")
    ld = _flat(np.broadcast_to(LD._np, (*batch, n, n)), n, n)
    pv = _flat(np.broadcast_to(pivots._np, (*batch, n)), n)
    b = _flat(np.broadcast_to(B._np, (*batch, *B._shape[-2:])), *B._shape[-2:])
    x = np.stack([_np_la.ldl_solve(ld[i], pv[i], b[i], hermitian and LD.dtype.is_complex)
                  for i in range(ld.shape[0])]) if ld.shape[0] else b.copy()
    return _done(Tensor._from_array(np_result(x.reshape(*batch, *B._shape[-2:]), LD.dtype)),
                 out, "linalg_ldl_solve")


# -- tensorinv, tensorsolve, vander, matrix_exp --------------------------------------------

@composite("linalg_tensorinv")
def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The inverse of ``A`` seen as a matrix ``prod(shape[:ind]) x prod(shape[ind:])``."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A._shape[:ind]), math.prod(A._shape[ind:])
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    from refimpl.ops.linalg_functions import inverse

    inv = inverse(A.reshape(rows, cols))
    return _done(inv.reshape(*A._shape[ind:], *A._shape[:ind]), out, "linalg_tensorinv")


@composite("linalg_tensorsolve")
def tensorsolve(A: Tensor, B: Tensor, dims=None, *, out=None) -> Tensor:
    """``X`` with ``tensordot(A, X, X.ndim) = B``; ``dims`` of A move to the end first."""
    if dims is not None:
        nd = A.dim()
        dims = [d % nd for d in dims]
        A = A.permute(*[d for d in range(nd) if d not in dims], *dims)
    rows = math.prod(B._shape)
    rest = A._shape[B.dim():]
    cols = math.prod(rest)
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:"
                           f"]) == prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    from refimpl.ops.linalg_factor import linalg_solve

    x = linalg_solve(A.reshape(rows, cols), B.reshape(rows))
    return _done(x.reshape(rest), out, "linalg_tensorsolve")


@composite("linalg_vander")
def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """``linalg.vander``: columns ``x**0, x**1, ..., x**(N-1)`` (N = x.shape[-1] default)."""
    if x.dtype is D.bool_:
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {_tn(x)}")
    if x.dim() == 0:
        x = x.reshape(1)
    n = x._shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    from refimpl.ops.shape import cat

    dt = D.int64 if x.dtype.category <= 1 else x.dtype
    base = x.to(dt).unsqueeze(-1)
    powers = base.expand(*x._shape, n - 1).cumprod(-1)
    return cat([base.new_ones((*x._shape, 1)), powers], -1)


@composite("linalg_matrix_exp")
def matrix_exp(A: Tensor) -> Tensor:
    """``exp(A)``: a degree-18 Taylor polynomial of ``A / 2^s`` squared ``s`` times, ``s``
    chosen per matrix from its 1-norm (the largest ``s`` is read back: a sync on CUDA);
    single precision is evaluated in double precision and rounded once."""
    name = "linalg.matrix_exp"
    check_matrix(name, A)
    check_square("", A, prefix=f"{name}: ")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_tn(A)}")
    n = A._shape[-1]
    if A.numel() == 0:
        return A.clone()
    if n == 1:
        return A.exp()
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():  # per matrix: s = ceil(log2(|A|_1)), at least 0
        norm = A.detach().abs().sum(-2).amax(-1)
        steps = norm.log2().ceil().clamp(min=0).nan_to_num(0, 0, 0)
        most = int(steps.amax().cpu().item()) if steps.numel() and has_data(steps) else 0
        scale = (2.0 ** -steps).to(A.dtype).unsqueeze(-1).unsqueeze(-1)
    wide = {D.float32: D.float64, D.complex64: D.complex128}.get(A.dtype)
    X = (A.to(wide) if wide else A) * scale.to(wide or A.dtype)
    eye = _eye_like(X, n, n)
    result, term = eye + X, X
    for i in range(2, 19):
        term = term.matmul(X) / i
        result = result + term
    for i in range(most):
        live = (steps > i).unsqueeze(-1).unsqueeze(-1)
        result = result.matmul(result).where(live, result)
    return result.to(A.dtype) if wide else result


__all__ = ["geqrf", "matrix_exp", "orgqr", "ormqr", "qr"]
TENSOR_METHODS = ("geqrf", "matrix_exp", "orgqr", "ormqr", "qr")
