"""Functions built on the spectral decompositions (spec TENSOR-307): pinv/pinverse,
matrix_rank, cond and lstsq.

``linalg_pinv`` is an op of its own, as in torch: its gradient is the analytic one
of the pseudo-inverse (``LinalgPinvBackward0``), not the one through the SVD, so it
has no gauge to fix. Its kernels compose refimpl's SVD (``eigh`` when ``hermitian``)
on the input's device. ``lstsq`` follows torch's drivers: on the CPU ``gelsy``
(default), ``gelsd``, ``gelss`` and ``gels``, all computed from numpy's SVD (the
minimum-norm solution with singular values at most ``rcond * s_max`` dropped; torch's
outputs per driver: ``rank`` except for ``gels``, ``singular_values`` for ``gelsd``/
``gelss``, ``residuals`` for a tall full-rank system except for ``gelsy``); on CUDA
only ``gels``, through cuSOLVER's QR. Its gradient goes through the pseudo-inverse,
as torch's.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import broadcast_shapes, sum_to
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h, _tn
from refimpl.ops.linalg_spectral import (
    _linalg_eigh,
    _linalg_svd,
    check_matrix,
    real_dtype,
)
from refimpl.ops.reduction import named_result, structseq_pair

structseq_pair("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))


def _raw(fn):
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        return fn()


def _eps(dtype: D.dtype) -> float:
    return float(np.finfo(real_dtype(dtype).np).eps)


def _as_tensor(x, like: Tensor) -> Tensor:
    from refimpl.ops.factories import tensor

    if isinstance(x, Tensor):
        return x
    return tensor(float(x), dtype=D.float64, device=like.device)


def _tolerance(A: Tensor, smax: Tensor, atol, rtol) -> Tensor:
    """``max(atol, rtol * smax)`` with torch's defaults: ``rtol = eps * max(m, n)`` unless
    an ``atol > 0`` is given (then 0); computed in float64 on ``A``'s device."""
    default = _eps(A.dtype) * max(A._shape[-2], A._shape[-1])
    smax = smax.to(D.float64)
    a = None if atol is None else _as_tensor(atol, A).to(D.float64)
    if rtol is None:
        r = _as_tensor(default, A) if a is None else (a > 0).logical_not() * default
    else:
        r = _as_tensor(rtol, A).to(D.float64)
    tol = r * smax
    if a is not None:
        tol = tol.maximum(a)
    return tol


def _spectrum(A: Tensor, hermitian: bool) -> tuple:
    """(values whose magnitudes are the singular values, U, Vh) of each matrix; for a
    Hermitian A, its eigenvalues with U the eigenvectors and Vh None."""
    if hermitian:
        L, V = _linalg_eigh(A, "L", True)
        return L, V, None
    U, S, Vh = _linalg_svd(A, False, True)
    return S, U, Vh


# -- pinv ------------------------------------------------------------------------------------

def _check_pinv(A: Tensor, hermitian: bool) -> None:
    if A.dim() < 2 or A.dtype.name not in ("float32", "float64", "complex64", "complex128"):
        shape = ", ".join(str(s) for s in A._shape)
        raise RuntimeError(f"linalg.pinv({_tn(A)}{{[{shape}]}}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")
    if hermitian:
        check_matrix("eigh", A, square=True)


def _pinv_meta(A, atol=None, rtol=None, hermitian=False) -> TensorSpec:
    _check_pinv(A, hermitian)
    return TensorSpec((*A._shape[:-2], A._shape[-1], A._shape[-2]), A.dtype, A.device)


def _pinv_kernel(A, atol=None, rtol=None, hermitian=False) -> Tensor:
    _check_pinv(A, hermitian)

    def compute() -> Tensor:
        from refimpl.ops.factories import zeros

        if A.numel() == 0:
            return zeros((*A._shape[:-2], A._shape[-1], A._shape[-2]), dtype=A.dtype,
                         device=A.device)
        values, U, Vh = _spectrum(A, hermitian)
        mags = values.abs()
        tol = _tolerance(A, mags.amax(-1, keepdim=True), atol, rtol)
        keep = mags.to(D.float64) > tol
        inv = (1 / values).where(keep, values.new_zeros(()))
        if hermitian:
            return (U * inv.unsqueeze(-2).to(U.dtype)).matmul(_h(U))
        return (_h(Vh) * inv.unsqueeze(-2).to(U.dtype)).matmul(_h(U))
    return _raw(compute)


def pinv_adjoint(A: Tensor, P: Tensor, grad: Tensor) -> Tensor:
    """The gradient with respect to ``A`` of a loss with gradient ``grad`` at ``P = pinv(A)``."""
    m, n = A._shape[-2], A._shape[-1]
    Ph, Gh = _h(P), _h(grad)
    # the adjoint of dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
    if m <= n:
        K = Gh.matmul(P)
        KPh = K.matmul(Ph)
        gA = -_h(P.matmul(K)) + KPh - A.matmul(P).matmul(KPh) + Ph.matmul(P).matmul(Gh - K.matmul(A))
    else:
        K = P.matmul(Gh)
        PhK = Ph.matmul(K)
        gA = -_h(K.matmul(P)) + (Gh - A.matmul(K)).matmul(P).matmul(Ph) + PhK - PhK.matmul(P).matmul(A)
    return gA


def pinv_tangent(A: Tensor, P: Tensor, dA: Tensor) -> Tensor:
    """The tangent of ``P = pinv(A)`` along ``dA``."""
    dAh, Ph = _h(dA), _h(P)
    left = P.matmul(Ph).matmul(dAh).matmul(-A.matmul(P) + _identity(A._shape[-2], A))
    right = (_identity(A._shape[-1], A) - P.matmul(A)).matmul(dAh).matmul(Ph).matmul(P)
    return -P.matmul(dA).matmul(P) + left + right


def _pinv_backward(ctx, grad):
    return (pinv_adjoint(ctx.args[0], ctx.outputs[0], grad),)


def _pinv_jvp(ctx, dA, *_):
    return pinv_tangent(ctx.args[0], ctx.outputs[0], dA)


def _identity(n: int, like: Tensor) -> Tensor:
    from refimpl.ops.factories import eye

    return eye(n, dtype=like.dtype, device=like.device)


_linalg_pinv = defop("linalg_pinv", meta=_pinv_meta, cpu=_pinv_kernel, cuda=_pinv_kernel,
                     backward=_pinv_backward, jvp=_pinv_jvp, node="LinalgPinvBackward0",
                     saves=("inputs", "outputs"), extra={"method": False})


def pinv(A: Tensor, rcond=None, hermitian: bool = False, *, atol=None, rtol=None, out=None
         ) -> Tensor:
    """The pseudo-inverse of each matrix: singular values (eigenvalue magnitudes when
    ``hermitian``) at most ``max(atol, rtol * s_max)`` are treated as 0. ``rcond`` is the
    older name of ``rtol``."""
    if rcond is not None:
        if atol is not None or rtol is not None:
            raise TypeError("linalg_pinv() received an invalid combination of arguments - got "
                            "(Tensor, rcond=..., atol=...), but rcond cannot be combined with "
                            "atol or rtol")
        atol, rtol = 0.0, rcond
    kwargs = {} if out is None else {"out": out}
    return _linalg_pinv(A, atol, rtol, hermitian, **kwargs)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``linalg.pinv(input, rcond=rcond)`` (torch's older name and default)."""
    return pinv(input, rcond)


# -- matrix_rank -----------------------------------------------------------------------------

def matrix_rank(A: Tensor, tol=None, hermitian: bool = False, *, atol=None, rtol=None,
                out=None) -> Tensor:
    """The number of singular values (eigenvalue magnitudes when ``hermitian``) greater
    than ``max(atol, rtol * s_max)``, as int64; ``tol`` is the older name of ``atol``."""
    if tol is not None:
        if atol is not None or rtol is not None:
            raise TypeError("linalg_matrix_rank() received an invalid combination of arguments "
                            "- got (Tensor, tol=..., atol=...), but tol cannot be combined "
                            "with atol or rtol")
        atol, rtol = tol, 0.0
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least "
                           "2 dimensions.")
    if A.dtype.name not in ("float32", "float64", "complex64", "complex128"):
        raise RuntimeError("This function doesn't handle types other than float and double")
    from refimpl.ops.linalg_spectral import eigvalsh, svdvals

    def compute() -> Tensor:
        mags = eigvalsh(A).abs() if hermitian else svdvals(A)
        if mags._shape[-1] == 0:
            return mags.sum(-1).to(D.int64)
        tol_ = _tolerance(A, mags.amax(-1, keepdim=True), atol, rtol)
        return (mags.to(D.float64) > tol_).sum(-1)
    result = _raw(compute)
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


# -- cond --------------------------------------------------------------------------------------

_NORMS = (None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc")


def cond(A: Tensor, p=None, *, out=None) -> Tensor:
    """The condition number of each matrix in the ``p`` norm: the ratio of the extreme
    singular values for ``p`` in (None, 2, -2), else ``norm(A) * norm(inv(A))`` (``inf``
    for a singular matrix)."""
    if p not in _NORMS:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p in (None, 2, -2):
        from refimpl.ops.linalg_spectral import svdvals

        S = svdvals(A)
        result = (S[..., 0] / S[..., -1]) if p != -2 else (S[..., -1] / S[..., 0])
    else:
        result = _cond_by_inverse(A, p)
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def _matrix_norm(A: Tensor, p) -> Tensor:
    import refimpl.linalg as L

    if p == "nuc":
        from refimpl.ops.linalg_spectral import svdvals

        return svdvals(A).sum(-1)
    return L.matrix_norm(A, p)


def _cond_by_inverse(A: Tensor, p) -> Tensor:
    import refimpl.linalg as L
    from refimpl.ops.linalg_spectral import _LinAlgError

    if A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but "
                           f"they are {A._shape[-2]} by {A._shape[-1]} matrices")
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError("linalg.inv: Expected a floating point or complex tensor as input. "
                           f"Got {_tn(A)}")
    if A.numel() == 0:
        return _matrix_norm(A, p)
    try:
        inverse = L.inv(A)
    except (_LinAlgError, RuntimeError) as e:
        if "singular" not in str(e):
            raise
        inverse = _inverse_or_inf(A)
    result = _matrix_norm(A, p) * _matrix_norm(inverse, p)
    return result.where(result.isnan().logical_not(), result.new_full((), math.inf))


def _inverse_or_inf(A: Tensor) -> Tensor:
    """The inverse of each matrix of a batch, a matrix of ``inf`` for a singular one."""
    import refimpl.linalg as L
    from refimpl.ops.shape import stack

    flat = A.reshape(-1, *A._shape[-2:])
    parts = []
    for i in range(flat._shape[0]):
        try:
            parts.append(L.inv(flat[i]))
        except RuntimeError as e:
            if "singular" not in str(e):
                raise
            parts.append(flat[i].new_full(flat[i].shape, math.inf))
    return stack(parts).reshape(A.shape)


# -- lstsq -----------------------------------------------------------------------------------

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _vector_rhs(A: Tensor, B: Tensor) -> bool:
    """Whether ``B`` holds vectors (one fewer dim than ``A``: a 1-D ``B``, or ``A``'s
    shape without its last dim), as torch decides."""
    return A.dim() - 1 == B.dim() and (B.dim() == 1 or B._shape == A._shape[:-1])


def _lstsq_check(A: Tensor, B: Tensor, driver) -> tuple:
    """torch's checks; returns (vector right-hand side?, driver)."""
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.dim() < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if A.dtype is not B.dtype:
        raise RuntimeError("torch.linalg.lstsq: Expected input and other to have the same dtype, "
                           f"but got input's dtype {_tn(A)} and other's dtype {_tn(B)}")
    if not (A.dim() - B.dim() in (0, 1)):
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = _vector_rhs(A, B)
    if vector and A._shape[-2] != B._shape[-1]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-1)")
    if not vector and A._shape[-2] != B._shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    cuda = A.device.type == "cuda"
    if cuda and driver not in (None, "gels"):
        raise RuntimeError("torch.linalg.lstsq: `driver` other than `gels` is not supported on "
                           "CUDA")
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy,"
                           " gelsd, gelss)")
    if A.dtype.name not in ("float32", "float64", "complex64", "complex128"):
        raise RuntimeError("This function doesn't handle types other than float and double")
    return vector, driver or ("gels" if cuda else "gelsy")


def _lstsq_shapes(A: Tensor, B: Tensor, vector: bool, driver: str) -> tuple:
    m, n = A._shape[-2:]
    rhs = B.unsqueeze(-1) if vector else B
    batch = broadcast_shapes(A._shape[:-2], rhs._shape[:-2])
    nrhs = rhs._shape[-1]
    sol = (*batch, n) if vector else (*batch, n, nrhs)
    rank = batch if driver != "gels" else (0,)
    sv = (*batch, min(m, n)) if driver in ("gelsd", "gelss") else (0,)
    return batch, sol, rank, sv


def _lstsq_meta(A, B, rcond=None, *, driver=None) -> tuple:
    vector, drv = _lstsq_check(A, B, driver)
    _batch, sol, rank, sv = _lstsq_shapes(A, B, vector, drv)
    rdt = real_dtype(A.dtype)
    # residuals' shape depends on the ranks found: the meta shape is the empty one
    return (TensorSpec(sol, A.dtype, A.device), TensorSpec((0,), rdt, A.device),
            TensorSpec(rank, D.int64, A.device), TensorSpec(sv, rdt, A.device))


def _lstsq_cpu(A, B, rcond=None, *, driver=None) -> tuple:
    vector, drv = _lstsq_check(A, B, driver)
    batch, _sol_shape, rank_shape, sv_shape = _lstsq_shapes(A, B, vector, drv)
    m, n = A._shape[-2:]
    a = np.broadcast_to(A._np, (*batch, m, n))
    b = B._np[..., None] if vector else B._np
    b = np.broadcast_to(b, (*batch, m, b.shape[-1]))
    rdt = real_dtype(A.dtype).np
    if a.size == 0 or b.size == 0:
        x = np.zeros((*batch, n, b.shape[-1]), A.dtype.np)
        s = np.zeros((*batch, min(m, n)), rdt)
        ranks = np.zeros(batch, np.int64)
    else:
        U, s, Vh = np.linalg.svd(a, full_matrices=False)
        if drv == "gels":
            cut = np.zeros(s.shape[:-1] + (1,), rdt)
        else:
            r = _eps(A.dtype) * max(m, n) if rcond is None or rcond < 0 else rcond
            cut = r * s[..., :1]
        keep = s > cut
        inv = np.where(keep, 1 / np.where(keep, s, 1), 0)
        coeffs = np.conj(np.swapaxes(U, -1, -2)) @ b * inv[..., None]
        x = np.conj(np.swapaxes(Vh, -1, -2)) @ coeffs
        ranks = keep.sum(-1).astype(np.int64)
    residuals = np.zeros((0,), rdt)
    if m > n and drv != "gelsy" and (drv == "gels" or bool((ranks == n).all())):
        residuals = (np.abs(a @ x - b) ** 2).sum(-2).astype(rdt)
        if vector:
            residuals = residuals[..., 0]
    if vector:
        x = x[..., 0]
    return (x.astype(A.dtype.np, copy=False), residuals,
            ranks.reshape(rank_shape) if drv != "gels" else np.zeros((0,), np.int64),
            s.astype(rdt).reshape(sv_shape) if drv in ("gelsd", "gelss") else np.zeros((0,), rdt))


def _lstsq_cuda(A, B, rcond=None, *, driver=None) -> tuple:
    vector, drv = _lstsq_check(A, B, driver)
    batch, *_ = _lstsq_shapes(A, B, vector, drv)
    from refimpl.cuda import _cusolver_spectral as cs

    m, n = A._shape[-2:]
    rhs = B.unsqueeze(-1) if vector else B
    a = A.expand(*batch, m, n)
    b = rhs.expand(*batch, m, rhs._shape[-1])
    x, rows = cs.gels(a, b)

    def finish() -> tuple:
        rdt = real_dtype(A.dtype)
        res = rows.abs().pow(2).sum(-2).to(rdt) if m > n else rows.new_zeros((0,), dtype=rdt)
        empty = x.new_zeros((0,), dtype=rdt)
        sol = x.squeeze(-1) if vector else x
        residuals = res.squeeze(-1) if (vector and m > n) else res
        return sol, residuals, x.new_zeros((0,), dtype=D.int64), empty
    return cs._raw(finish)


def _residual_rows(A: Tensor, X: Tensor, rhs: Tensor) -> Tensor:
    return A.matmul(X) - rhs


def _lstsq_backward(ctx, gX, gR=None, *_):
    A, B = ctx.args[0], ctx.args[1]
    X = ctx.outputs[0]
    vector = _vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    sol = X.unsqueeze(-1) if vector else X
    need = ctx.needs_input_grad
    gA = gB = None
    if gX is not None:
        P = pinv(A)
        g = gX.unsqueeze(-1) if vector else gX
        if need[0]:
            gA = pinv_adjoint(A, P, g.matmul(_h(rhs)))
        if need[1]:
            gB = _h(P).matmul(g)
    if gR is not None and ctx.outputs[1].numel():
        # residuals = sum |A X - B|^2 over rows; X is optimal, so only the explicit
        # dependence on A and B remains
        R = _residual_rows(A, sol, rhs) * (2 * (gR.unsqueeze(-1) if vector else gR)
                                           ).unsqueeze(-2)
        gA = (0 if gA is None else gA) + R.matmul(_h(sol)) if need[0] else gA
        gB = (0 if gB is None else gB) - R if need[1] else gB
    if gA is not None:
        gA = sum_to(gA, A.shape)
    if gB is not None:
        gB = sum_to(gB.squeeze(-1) if vector else gB, B.shape)
    return gA, gB


def _lstsq_jvp(ctx, dA, dB, *_):
    A, B = ctx.args[0], ctx.args[1]
    X, residuals = ctx.outputs[0], ctx.outputs[1]
    vector = _vector_rhs(A, B)
    P = pinv(A)
    rhs = B.unsqueeze(-1) if vector else B
    sol = X.unsqueeze(-1) if vector else X
    dB_ = None if dB is None else (dB.unsqueeze(-1) if vector else dB)
    dX = dR = None
    if dA is not None:
        dX = pinv_tangent(A, P, dA).matmul(rhs)
        dR = dA.matmul(sol)
    if dB_ is not None:
        part = P.matmul(dB_)
        dX = part if dX is None else dX + part
        dR = -dB_ if dR is None else dR - dB_
    dres = None
    if residuals.numel():
        R = _residual_rows(A, sol, rhs)
        prod = R.conj() * dR if R.dtype.is_complex else R * dR
        dres = 2 * (prod.real if prod.dtype.is_complex else prod).sum(-2)
        dres = dres.squeeze(-1) if vector else dres
    if vector and dX is not None:
        dX = dX.squeeze(-1)
    return dX, dres, None, None


_linalg_lstsq = defop("linalg_lstsq", meta=_lstsq_meta, cpu=_lstsq_cpu, cuda=_lstsq_cuda,
                      backward=_lstsq_backward, jvp=_lstsq_jvp, node="LinalgLstsqBackward0",
                      diff_outputs=(0, 1), saves=("inputs", "outputs"),
                      extra={"method": False})


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None,
          out=None):
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||``, with torch's
    outputs per ``driver``."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_lstsq", _linalg_lstsq(A, B, rcond, driver=driver, **kwargs),
                        out)


__all__ = ["pinverse"]
TENSOR_METHODS = ("pinverse",)
