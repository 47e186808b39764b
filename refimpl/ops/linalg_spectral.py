"""Spectral decompositions (spec TENSOR-307): eigh/eigvalsh and svd/svdvals, with the
legacy ``svd`` (``some=``, ``compute_uv=``, returning ``V``).

The ops are torch's underlying ones, ``_linalg_eigh(A, UPLO, compute_v)`` and
``_linalg_svd(A, full_matrices, compute_uv, driver)``, whose gradients torch records
as ``LinalgEighBackward0`` / ``LinalgSvdBackward0``; the public functions are thin
wrappers that ask for the vectors only when ``A`` may need a gradient, as torch does.

Conventions (torch's): eigenvalues ascending, singular values descending, singular
values and eigenvalues of ``eigh`` real for complex input. Vectors are defined up to
a sign (a phase ``e^{i phi}`` for complex): CPU results come from numpy's LAPACK
(``syevd``, ``gesdd``), whose signs may differ from torch's MKL build; CUDA results come
from cuSOLVER (``refimpl.cuda._cusolver_spectral``). Gradients reject losses that
depend on the phase of complex vectors with torch's "ill-defined" errors.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h, _tn
from refimpl.ops.reduction import named_result, structseq_pair


class _LinAlgError(RuntimeError):
    """A decomposition that did not converge (torch's ``LinAlgError``, a RuntimeError)."""


for _name, _fields in (("linalg_eigh", ("eigenvalues", "eigenvectors")),
                       ("linalg_svd", ("U", "S", "Vh")), ("svd", ("U", "S", "V"))):
    structseq_pair(_name, _fields)


# -- shared checks and helpers -----------------------------------------------------------

def check_matrix(name: str, A: Tensor, *, square: bool = False, floating: bool = True
                 ) -> None:
    """torch's input checks of ``linalg.<name>``: at least 2 dims, square when asked,
    floating or complex (unless ``floating`` is False: then only the kernel's dtype
    dispatch rejects other dtypes, as for eigh); low precision rejected by the
    ``linalg_<name>`` kernel's dtype dispatch."""
    if A.dim() < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if square and A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A._shape[-2]} by {A._shape[-1]} matrices")
    if floating and not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_tn(A)}")
    if A.dtype.name not in ("float32", "float64", "complex64", "complex128"):
        device = "cuda" if A.device.type == "cuda" else "cpu"
        raise NotImplementedError(f'"linalg_{name}_{device}" not implemented for '
                                  f"'{_tn(A)}'")


def real_dtype(dtype: D.dtype) -> D.dtype:
    """The real counterpart of a complex dtype (the dtype itself when real)."""
    return {"complex64": D.float32, "complex128": D.float64}.get(dtype.name, dtype)


def needs_grad(A: Tensor) -> bool:
    """Whether ``A`` may need a gradient here (backward or forward mode), as torch's
    ``_may_require_fw_or_bw_grad``: then the vectors are computed too."""
    from refimpl.autograd.grad_mode import is_grad_enabled

    return bool((A.requires_grad and is_grad_enabled())
                or getattr(A, "_fw_grads", None) is not None)


def batch_prefix(arr: np.ndarray, index: int) -> str:
    """torch's ``(Batch element i): `` prefix of a per-matrix error in a batch."""
    return f"(Batch element {index}): " if arr.ndim > 2 else ""


def _eye_like(n: int, like: Tensor) -> Tensor:
    from refimpl.ops.factories import eye

    return eye(n, dtype=real_dtype(like.dtype), device=like.device)


def _off_diagonal_divide(X: Tensor, E: Tensor) -> Tensor:
    """``X / E`` off the diagonal and 0 on it (``E``'s diagonal is replaced by 1 first)."""
    n = X._shape[-1]
    eye = _eye_like(n, E)
    return X / (E + eye) * (1 - eye)


def _cuda():
    from refimpl.cuda import _cusolver_spectral

    return _cusolver_spectral


# -- eigh ----------------------------------------------------------------------------------

def _check_eigh(A: Tensor, UPLO: str) -> None:
    check_matrix("eigh", A, square=True, floating=False)
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_meta(A, UPLO="L", compute_v=True) -> tuple:
    _check_eigh(A, UPLO)
    vectors = A._shape if compute_v else (0,)
    return (TensorSpec(A._shape[:-1], real_dtype(A.dtype), A.device),
            TensorSpec(vectors, A.dtype, A.device))


def _eigh_cpu(A, UPLO="L", compute_v=True) -> tuple:
    _check_eigh(A, UPLO)
    arr = A._np
    rdt = real_dtype(A.dtype).np
    if arr.size == 0:
        return (np.zeros(arr.shape[:-1], rdt),
                np.zeros(arr.shape if compute_v else (0,), A.dtype.np))
    uplo = UPLO.upper()
    try:
        if compute_v:
            w, v = np.linalg.eigh(arr, UPLO=uplo)
        else:
            w, v = np.linalg.eigvalsh(arr, UPLO=uplo), np.zeros((0,), A.dtype.np)
    except np.linalg.LinAlgError:
        _raise_eigh_failure(arr, uplo)
    return w.astype(rdt, copy=False), v.astype(A.dtype.np, copy=False)


def _raise_eigh_failure(arr: np.ndarray, uplo: str):
    flat = arr.reshape(-1, *arr.shape[-2:])
    for b, m in enumerate(flat):
        try:
            np.linalg.eigvalsh(m, UPLO=uplo)
        except np.linalg.LinAlgError:
            # LAPACK's info is not reported by numpy: n - 1 off-diagonal elements left
            # (what syevd reports for a matrix of non-finite values)
            raise _LinAlgError(
                f"linalg.eigh: {batch_prefix(arr, b)}The algorithm failed to converge because "
                "the input matrix is ill-conditioned or has too many repeated eigenvalues "
                f"(error code: {max(m.shape[-1] - 1, 1)}).") from None
    raise _LinAlgError("linalg.eigh: The algorithm failed to converge")


def _eigh_cuda(A, UPLO="L", compute_v=True) -> tuple:
    _check_eigh(A, UPLO)
    return _cuda().eigh(A, UPLO.upper(), bool(compute_v))


def _eigh_backward(ctx, gL, gV):
    L, V = ctx.outputs[0], ctx.outputs[1]
    if gV is None:
        return ((V * gL.unsqueeze(-2)).matmul(_h(V)),)
    VhgV = _h(V).matmul(gV)
    if V.dtype.is_complex:
        imag = VhgV.diagonal(0, -2, -1).imag
        if not bool(imag.abs().le(1e-3).all()):
            raise RuntimeError(
                "linalg_eigh_backward: The eigenvectors in the complex case are specified up "
                "to multiplication by e^{i phi}. The specified loss function depends on this "
                "quantity, so it is ill-defined.")
    skew = (VhgV - _h(VhgV)) * 0.5
    inner = _off_diagonal_divide(skew, L.unsqueeze(-2) - L.unsqueeze(-1))
    if gL is not None:
        inner = inner + gL.diag_embed()
    return (V.matmul(inner).matmul(_h(V)),)


def _eigh_jvp(ctx, dA, *_):
    L, V = ctx.outputs[0], ctx.outputs[1]
    dP = _h(V).matmul(dA).matmul(V)
    dL = dP.diagonal(0, -2, -1)
    dL = dL.real if dL.dtype.is_complex else dL
    if V._shape == (0,):
        return dL, None
    dV = V.matmul(_off_diagonal_divide(dP, L.unsqueeze(-2) - L.unsqueeze(-1)))
    return dL, dV


_linalg_eigh = defop("_linalg_eigh", meta=_eigh_meta, cpu=_eigh_cpu, cuda=_eigh_cuda,
                     backward=_eigh_backward, jvp=_eigh_jvp, node="LinalgEighBackward0",
                     saves=("outputs",), extra={"method": False})


def eigh(A: Tensor, UPLO: str = "L", *, out=None):
    """``(eigenvalues, eigenvectors)`` of Hermitian (symmetric) matrices, read from the
    ``UPLO`` triangle; eigenvalues real and ascending, eigenvectors in the columns."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_eigh", _linalg_eigh(A, UPLO, True, **kwargs), out)


def eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:
    """The real eigenvalues of Hermitian matrices, ascending (differentiable)."""
    values = _linalg_eigh(A, UPLO, needs_grad(A))[0]
    if out is None:
        return values
    out.resize_(values.shape).copy_(values)
    return out


# -- svd -----------------------------------------------------------------------------------

def _check_svd(A: Tensor, driver) -> None:
    check_matrix("svd", A)
    if driver is not None and A.device.type != "cuda":
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    if driver is not None and driver not in ("gesvd", "gesvdj", "gesvda"):
        raise RuntimeError("torch.linalg.svd: unknown svd driver " + str(driver) + " in svd_cuda"
                           " computation. Expected one of (gesvd, gesvdj, gesvda).")


def _svd_shapes(A: Tensor, full_matrices: bool, compute_uv: bool) -> tuple:
    *batch, m, n = A._shape
    k = min(m, n)
    if not compute_uv:
        return (0,), (*batch, k), (0,)
    if full_matrices:
        return (*batch, m, m), (*batch, k), (*batch, n, n)
    return (*batch, m, k), (*batch, k), (*batch, k, n)


def _svd_meta(A, full_matrices=False, compute_uv=True, driver=None) -> tuple:
    _check_svd(A, driver)
    u, s, v = _svd_shapes(A, full_matrices, compute_uv)
    return (TensorSpec(u, A.dtype, A.device), TensorSpec(s, real_dtype(A.dtype), A.device),
            TensorSpec(v, A.dtype, A.device))


def _svd_cpu(A, full_matrices=False, compute_uv=True, driver=None) -> tuple:
    _check_svd(A, driver)
    arr = A._np
    us, ss, vs = _svd_shapes(A, full_matrices, compute_uv)
    rdt = real_dtype(A.dtype).np
    if arr.size == 0:
        # nothing to decompose: the (square) vector matrices are identities
        def ident(shape):
            out = np.zeros(shape, A.dtype.np)
            if len(shape) >= 2 and shape[-1] == shape[-2]:
                out[...] = np.eye(shape[-1], dtype=A.dtype.np)
            return out
        return ident(us), np.zeros(ss, rdt), ident(vs)
    finite = np.isfinite(arr).reshape(-1, arr.shape[-2] * arr.shape[-1]).all(-1)
    if not finite.all():
        b = int(np.argmin(finite))
        raise _LinAlgError(f"linalg.svd: {batch_prefix(arr, b)}The algorithm failed to converge "
                           "because the input matrix contained non-finite values.")
    if not compute_uv:
        return (np.zeros(us, A.dtype.np), np.linalg.svd(arr, compute_uv=False).astype(rdt),
                np.zeros(vs, A.dtype.np))
    U, S, Vh = np.linalg.svd(arr, full_matrices=bool(full_matrices))
    return U.astype(A.dtype.np, copy=False), S.astype(rdt, copy=False), \
        Vh.astype(A.dtype.np, copy=False)


def _svd_cuda(A, full_matrices=False, compute_uv=True, driver=None) -> tuple:
    _check_svd(A, driver)
    return _cuda().svd(A, bool(full_matrices), bool(compute_uv), driver)


def _reduced(ctx, gU, gVh) -> tuple:
    """(gU, gVh, U, Vh) cut to the first k = min(m, n) vectors (full_matrices=True: the
    other vectors are not determined by A, torch ignores their gradient)."""
    U, S, Vh = ctx.outputs
    k = S._shape[-1]
    if U._shape[-1] != k:
        U = U.narrow(-1, 0, k)
        gU = None if gU is None else gU.narrow(-1, 0, k)
    if Vh._shape[-2] != k:
        Vh = Vh.narrow(-2, 0, k)
        gVh = None if gVh is None else gVh.narrow(-2, 0, k)
    return gU, gVh, U, S, Vh


def _svd_backward(ctx, gU, gS, gVh):
    gU, gVh, U, S, Vh = _reduced(ctx, gU, gVh)
    m, n = U._shape[-2], Vh._shape[-1]
    if gU is None and gVh is None:
        return (U.matmul(gS.unsqueeze(-1) * Vh),)
    complex_ = U.dtype.is_complex
    UhgU = _h(U).matmul(gU) if gU is not None else None
    VhgV = Vh.matmul(_h(gVh)) if gVh is not None else None
    UhgU = None if UhgU is None else UhgU - _h(UhgU)
    VhgV = None if VhgV is None else VhgV - _h(VhgV)
    if complex_:
        zero = S.new_zeros(S.shape)
        iu = UhgU.diagonal(0, -2, -1).imag if UhgU is not None else zero
        iv = VhgV.diagonal(0, -2, -1).imag if VhgV is not None else zero
        if not bool(((iu + iv).abs() <= 1e-2 + 1e-2 * iv.abs()).all()):
            raise RuntimeError(
                "svd_backward: The singular vectors in the complex case are specified up to "
                "multiplication by e^{i phi}. The specified loss function depends on this "
                "phase term, making it ill-defined.")
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    row, col = S.unsqueeze(-2), S.unsqueeze(-1)
    if UhgU is not None and VhgV is not None:
        gA = _off_diagonal_divide(UhgU * row + col * VhgV, E)
    elif UhgU is not None:
        gA = _off_diagonal_divide(UhgU, E) * row
    else:
        gA = col * _off_diagonal_divide(VhgV, E)
    if gS is not None:
        gA = gA + gS.diag_embed()
    if complex_ and UhgU is not None:
        gA = gA + (UhgU.diagonal(0, -2, -1) / (2 * S)).diag_embed()
    if m > n and gU is not None:
        gUS = gU / row
        gA = (U.matmul(gA) + gUS - U.matmul(_h(U).matmul(gUS))).matmul(Vh)
    elif m < n and gVh is not None:
        SgVh = gVh / col
        gA = U.matmul(gA.matmul(Vh) + SgVh - SgVh.matmul(_h(Vh)).matmul(Vh))
    else:
        gA = U.matmul(gA).matmul(Vh)
    return (gA,)


def _svd_jvp(ctx, dA, *_):
    U, S, Vh = ctx.outputs
    k = S._shape[-1]
    Ur, Vhr = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
    dP = _h(Ur).matmul(dA).matmul(_h(Vhr))
    dS = dP.diagonal(0, -2, -1)
    dS = dS.real if dS.dtype.is_complex else dS
    if U._shape == (0,) or U._shape[-1] != k or Vh._shape[-2] != k:
        # vectors not computed, or full_matrices: torch's jvp covers the reduced ones only
        return None, dS, None
    m, n = U._shape[-2], Vh._shape[-1]
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    row, col = S.unsqueeze(-2), S.unsqueeze(-1)
    dUk = _off_diagonal_divide(dP * row + col * _h(dP), E)
    dVk = _off_diagonal_divide(col * dP + _h(dP) * row, E)
    if U.dtype.is_complex:
        dUk = dUk + (1j * dP.diagonal(0, -2, -1).imag / S).diag_embed()
    dU = Ur.matmul(dUk)
    dV = _h(Vhr).matmul(dVk)
    if m > n:
        dAV = dA.matmul(_h(Vhr)) / row
        dU = dU + dAV - Ur.matmul(_h(Ur).matmul(dAV))
    elif m < n:
        dAhU = _h(dA).matmul(Ur) / row
        dV = dV + dAhU - _h(Vhr).matmul(Vhr.matmul(dAhU))
    return dU, dS, _h(dV)


_linalg_svd = defop("_linalg_svd", meta=_svd_meta, cpu=_svd_cpu, cuda=_svd_cuda,
                    backward=_svd_backward, jvp=_svd_jvp, node="LinalgSvdBackward0",
                    saves=("outputs",), extra={"method": False})


def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None, out=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, singular values descending."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_svd",
                        _linalg_svd(A, full_matrices, True, driver=driver, **kwargs), out)


def svdvals(A: Tensor, *, driver: str | None = None, out=None) -> Tensor:
    """The singular values of ``A``, descending (differentiable)."""
    values = _linalg_svd(A, False, needs_grad(A), driver=driver)[1]
    if out is None:
        return values
    out.resize_(values.shape).copy_(values)
    return out


def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out=None):
    """torch.svd (deprecated form): ``(U, S, V)`` with ``V`` (not ``Vh``); ``some=False``
    gives the full square factors, ``compute_uv=False`` zero-filled ``U`` and ``V``."""
    if input.dim() < 2:
        raise RuntimeError("linalg.svd: input should have at least 2 dimensions, but has "
                           f"{input.dim()} dimensions instead")
    if compute_uv:
        U, S, Vh = _linalg_svd(input, not some, True)
        V = Vh.mH
    else:
        S = _linalg_svd(input, False, needs_grad(input))[1]
        *batch, m, n = input._shape
        from refimpl.ops.factories import zeros

        U = zeros((*batch, m, m), dtype=input.dtype, device=input.device)
        V = zeros((*batch, n, n), dtype=input.dtype, device=input.device)
    if out is not None:
        for o, r in zip(out, (U, S, V)):
            o.resize_(r.shape).copy_(r)
        return named_result("svd", tuple(out), out)
    return named_result("svd", (U, S, V))


__all__ = ["svd"]
TENSOR_METHODS = ("svd",)
