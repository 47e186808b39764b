"""General eigendecomposition and randomized low-rank SVD (spec TENSOR-307):
linalg.eig/eigvals, svd_lowrank, pca_lowrank.

``_linalg_eig(A, compute_v)`` returns complex eigenvalues and unit-norm right
eigenvectors (LAPACK's ``geev`` normalisation: each vector of 2-norm 1 with its largest
component real) for real or complex input; the CPU kernel is numpy's ``geev``, the
CUDA kernel cuSOLVER's ``Xgeev``. Its gradient is torch's (``LinalgEigBackward0``),
real for real input, with the "ill-defined" error for losses that depend on the
eigenvectors' phases.

``svd_lowrank``/``pca_lowrank`` are torch's randomized range finder (Halko et al.)
written with refimpl ops: a Gaussian test matrix from refimpl's generator, ``niter``
power iterations with re-orthonormalisation, then an exact SVD of the small
projected matrix. The orthonormal bases come from the SVD's left factor (refimpl's
QR belongs to the other linalg family); any orthonormal basis of the same range
gives the same approximation.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h, _tn
from refimpl.ops.linalg_spectral import _linalg_svd, batch_prefix, needs_grad
from refimpl.ops.reduction import named_result, structseq_pair

structseq_pair("linalg_eig", ("eigenvalues", "eigenvectors"))

_COMPLEX = {"float32": D.complex64, "float64": D.complex128, "complex64": D.complex64,
            "complex128": D.complex128}


def _check_eig(A: Tensor) -> None:
    if A.dim() < 2:
        raise RuntimeError("linalg.eig: The input tensor A must have at least 2 dimensions.")
    if A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.eig: A must be batches of square matrices, but they are "
                           f"{A._shape[-2]} by {A._shape[-1]} matrices")
    if A.dtype.name not in _COMPLEX:
        if A.dtype.is_floating_point or A.dtype is D.complex32:
            device = "cuda" if A.device.type == "cuda" else "cpu"
            raise NotImplementedError(f'"linalg_eig_out_{device}" not implemented for '
                                      f"'{_tn(A)}'")
        raise RuntimeError(f"Unknown Complex ScalarType for {_tn(A)}")


def _check_finite(A: Tensor, finite: bool) -> None:
    if not finite:
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")


def _eig_meta(A, compute_v=True) -> tuple:
    _check_eig(A)
    c = _COMPLEX[A.dtype.name]
    return (TensorSpec(A._shape[:-1], c, A.device),
            TensorSpec(A._shape if compute_v else (0,), c, A.device))


def _eig_cpu(A, compute_v=True) -> tuple:
    _check_eig(A)
    arr = A._np
    _check_finite(A, bool(np.isfinite(arr).all()))
    c = _COMPLEX[A.dtype.name].np
    if arr.size == 0:
        return np.zeros(arr.shape[:-1], c), np.zeros(arr.shape if compute_v else (0,), c)
    try:
        if compute_v:
            w, v = np.linalg.eig(arr)
        else:
            w, v = np.linalg.eigvals(arr), np.zeros((0,), c)
    except np.linalg.LinAlgError:
        from refimpl.ops.linalg_spectral import _LinAlgError

        flat = arr.reshape(-1, *arr.shape[-2:])
        b = next(i for i, m in enumerate(flat) if not _converges(m))
        raise _LinAlgError(f"linalg.eig: {batch_prefix(arr, b)}The algorithm failed to "
                           "converge because the input matrix is ill-conditioned or has too "
                           "many repeated eigenvalues") from None
    return w.astype(c), v.astype(c)


def _converges(m: np.ndarray) -> bool:
    try:
        np.linalg.eigvals(m)
    except np.linalg.LinAlgError:
        return False
    return True


def _eig_cuda(A, compute_v=True) -> tuple:
    _check_eig(A)
    _check_finite(A, bool(A.isfinite().all()))
    from refimpl.cuda import _cusolver_spectral

    return _cusolver_spectral.eig(A, bool(compute_v))


def _solve_adjoint(V: Tensor, X: Tensor) -> Tensor:
    """``V^{-H} X`` (through ``refimpl.linalg.inv``, on the tensors' device)."""
    import refimpl.linalg as L

    return L.inv(_h(V)).matmul(X)


def _eig_backward(ctx, gL, gV):
    A = ctx.args[0]
    L, V = ctx.outputs[0], ctx.outputs[1]
    Vh = _h(V)
    if gV is None:
        gA = _solve_adjoint(V, gL.unsqueeze(-1) * Vh)
    else:
        VhgV = Vh.matmul(gV)
        diag = VhgV.diagonal(0, -2, -1)
        if not bool(diag.imag.abs().le(1e-3).all()):
            raise RuntimeError(
                "linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                "multiplication by e^{i phi}. The specified loss function depends on this "
                "quantity, so it is ill-defined.")
        # project out the change of the vectors' norms (they stay of norm 1)
        VhgV = VhgV - Vh.matmul(V * diag.real.unsqueeze(-2))
        Lc = L.conj()
        n = L._shape[-1]
        from refimpl.ops.factories import eye

        eye_ = eye(n, dtype=D.float64 if L.dtype is D.complex128 else D.float32,
                   device=L.device)
        inner = VhgV / (Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + eye_) * (1 - eye_)
        if gL is not None:
            inner = inner + gL.diag_embed()
        gA = _solve_adjoint(V, inner.matmul(Vh))
    if not A.dtype.is_complex:
        gA = gA.real
    return (gA,)


def _eig_jvp(ctx, dA, *_):
    L, V = ctx.outputs[0], ctx.outputs[1]
    import refimpl.linalg as L_

    dA = dA.to(V.dtype)
    dP = L_.inv(V).matmul(dA).matmul(V)
    dL = dP.diagonal(0, -2, -1)
    if V._shape == (0,):
        return dL, None
    n = L._shape[-1]
    from refimpl.ops.factories import eye

    eye_ = eye(n, dtype=D.float64 if L.dtype is D.complex128 else D.float32, device=L.device)
    dV = V.matmul(dP / (L.unsqueeze(-2) - L.unsqueeze(-1) + eye_) * (1 - eye_))
    # keep the vectors of norm 1: remove the real part of V^H dV's diagonal
    dV = dV - V * (_h(V).matmul(dV)).diagonal(0, -2, -1).real.unsqueeze(-2)
    return dL, dV


_linalg_eig = defop("_linalg_eig", meta=_eig_meta, cpu=_eig_cpu, cuda=_eig_cuda,
                    backward=_eig_backward, jvp=_eig_jvp, node="LinalgEigBackward0",
                    saves=("inputs", "outputs"), extra={"method": False})


def eig(A: Tensor, *, out=None):
    """``(eigenvalues, eigenvectors)`` of square matrices, complex, vectors of norm 1."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_eig", _linalg_eig(A, True, **kwargs), out)


def eigvals(A: Tensor, *, out=None) -> Tensor:
    """The complex eigenvalues of square matrices (differentiable)."""
    values = _linalg_eig(A, needs_grad(A))[0]
    if out is None:
        return values
    out.resize_(values.shape).copy_(values)
    return out


# -- randomized low-rank SVD -----------------------------------------------------------------

def _basis(Y: Tensor) -> Tensor:
    """An orthonormal basis of the range of ``Y`` (its reduced SVD's left factor)."""
    return _linalg_svd(Y, False, True)[0]


def _approximate_basis(A: Tensor, q: int, niter: int, M: Tensor | None,
                       generator=None) -> Tensor:
    """An orthonormal ``m x q`` matrix whose range approximates the range of ``A - M``."""
    from refimpl.ops.random import randn

    n = A._shape[-1]
    real = {"complex64": D.float32, "complex128": D.float64}.get(A.dtype.name, A.dtype)
    R = randn(n, q, dtype=real, device=A.device, generator=generator).to(A.dtype)

    def times(X: Tensor) -> Tensor:
        return A.matmul(X) if M is None else A.matmul(X) - M.matmul(X)

    def adjoint_times(X: Tensor) -> Tensor:
        return _h(A).matmul(X) if M is None else _h(A).matmul(X) - _h(M).matmul(X)

    Q = _basis(times(R))
    for _ in range(niter):
        Q = _basis(times(_basis(adjoint_times(Q))))
    return Q


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2, M: Tensor | None = None
                ) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, V)``, a rank-``q`` approximation ``A - M ~ U diag(S) V^H`` by randomized
    subspace iteration (``niter`` power iterations)."""
    q = 6 if q is None else q
    m, n = A._shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n or n > q:
        # decompose A^H: the small matrix stays q x m
        Ah = _h(A)
        Mh = None if M is None else _h(M)
        Q = _approximate_basis(Ah, q, niter, Mh)
        B = _h(Q).matmul(Ah) if Mh is None else _h(Q).matmul(Ah - Mh)
        U, S, Vh = _linalg_svd(B, False, True)
        return _h(Vh), S, Q.matmul(U)
    Q = _approximate_basis(A, q, niter, M)
    B = _h(Q).matmul(A) if M is None else _h(Q).matmul(A - M)
    U, S, Vh = _linalg_svd(B, False, True)
    return Q.matmul(U), S, _h(Vh)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2
                ) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, V)`` of the principal components of ``A`` (rows are samples), centred on the
    column means when ``center``; ``q`` defaults to ``min(6, m, n)``."""
    m, n = A._shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (isinstance(q, int) and 0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not (isinstance(niter, int) and niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter)
    return svd_lowrank(A - A.mean(-2, keepdim=True), q, niter)


__all__ = ["pca_lowrank", "svd_lowrank"]
