"""LU-based linear algebra (issue #10): linalg.lu_factor(_ex), lu, lu_unpack, lu_solve,
solve(_ex), inv_ex; the checks and helpers the other ``linalg_*`` modules share.

One primitive op, ``linalg_lu_factor_ex`` (LAPACK's getrf: packed LU, 1-based int32
pivots, int32 infos), carries the kernels and the derivative rules; everything else is
written over it in refimpl ops, so it runs on both devices and differentiates through
the factorisation: ``lu_unpack`` builds ``P``, ``L`` and ``U`` with ``tril``/``triu``
and a one-hot permutation, ``lu_solve`` permutes rows with ``gather`` and runs two
triangular solves (``linalg_solve_triangular``), ``solve`` is ``lu_factor`` +
``lu_solve`` and ``inv_ex`` is ``solve`` against the identity, as in torch.

CPU: getrf written in numpy (``_linalg_np.lu``, LAPACK's pivot choice). CUDA: cuSOLVER's getrf/getrs (``refimpl.cuda._cusolver``).
Functions that raise on a singular matrix read the infos (a synchronisation on CUDA,
as in torch); the ``_ex`` variants never do unless ``check_errors=True``.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops import _linalg_np as _np_la
from refimpl.ops._helpers import broadcast_shapes, np_result
from refimpl.ops._linalg_np import flat as _flat
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _h, _tn
from refimpl.ops.linalg_functions import _LinAlgError

LinAlgError = _LinAlgError
from refimpl.ops.reduction import named_result, structseq_pair

for _name, _fields in (("linalg_lu_factor", ("LU", "pivots")),
                       ("linalg_lu_factor_ex", ("LU", "pivots", "info")),
                       ("linalg_lu", ("P", "L", "U")), ("lu_unpack", ("P", "L", "U")),
                       ("_lu_with_info", ("LU", "pivots", "info")),
                       ("linalg_solve_ex", ("result", "info")),
                       ("linalg_inv_ex", ("inverse", "info"))):
    structseq_pair(_name, _fields)


# -- shared checks ------------------------------------------------------------------------

def check_matrix(name: str, x: Tensor, label: str = "A") -> None:
    """torch's "must have at least 2 dimensions" error of ``linalg.<name>``."""
    if x.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor {label} must have at least 2 dimensions.")


def check_float(name: str, x: Tensor, low: str | None = None) -> None:
    """Floating or complex input; ``low``: how float16/bfloat16 are refused (torch's
    kernel-name NotImplementedError, or a RuntimeError when None)."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_tn(x)}")
    if x.dtype.itemsize < 4 or x.dtype is D.complex32:
        if low is not None:
            raise NotImplementedError(f'"{low}" not implemented for \'{_tn(x)}\'')
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {_tn(x)}")


def check_square(name: str, x: Tensor, label: str = "A", prefix: str = "") -> None:
    """Batches of square matrices (``prefix`` starts the message, e.g. ``"linalg.solve: "``)."""
    if x._shape[-1] != x._shape[-2]:
        raise RuntimeError(f"{prefix}{label} must be batches of square matrices, but they are "
                           f"{x._shape[-2]} by {x._shape[-1]} matrices")


def has_data(x: Tensor) -> bool:
    """Whether ``x`` holds values (not a meta tensor, not a fake tensor's storage)."""
    from refimpl._storage import UntypedStorage

    return x.device.type != "meta" and x._storage.__class__ is UntypedStorage


def batch_where(info: Tensor) -> list[tuple[int, int]]:
    """The (batch index, info) of every non-zero info (reads the device: a sync)."""
    flat = info.detach().reshape(-1).cpu()._np
    return [(int(b), int(v)) for b, v in enumerate(flat) if v]


def raise_info(info: Tensor, batched: bool, message) -> None:
    """Raise ``message(info)`` (prefixed with the batch element) for the first non-zero
    info, as torch's ``_linalg_check_errors``."""
    if not has_data(info):  # meta and fake tensors: nothing to check (as torch's meta kernels)
        return
    bad = batch_where(info)
    if bad:
        b, v = bad[0]
        where = f"(Batch element {b}): " if batched else ""
        exc, text = message(v)
        raise exc(text.format(where=where))


def cuda_no_grad(*tensors: Tensor) -> bool:
    """CUDA operands that no gradient will flow through: cuSOLVER's routine runs as is
    (with gradients, the differentiable composite of refimpl ops runs instead)."""
    from refimpl.autograd.grad_mode import is_grad_enabled

    return tensors[0].device.type == "cuda" and has_data(tensors[0]) and not (
        is_grad_enabled() and any(t.requires_grad for t in tensors))


def fortran(arr: np.ndarray, dtype: D.dtype) -> Tensor:
    """A CPU result whose matrices are column-major, as LAPACK (and torch) returns them."""
    base = Tensor._from_array(np.ascontiguousarray(np_result(np.swapaxes(arr, -1, -2), dtype)))
    shape = arr.shape
    strides, step = [1, max(shape[-2], 1)], shape[-2] * shape[-1]
    for size in reversed(shape[:-2]):
        strides.insert(0, step)
        step *= size
    return Tensor._make(base._storage, shape, tuple(strides), 0, dtype)


def _cusolver():
    from refimpl.cuda import _cusolver

    return _cusolver


# -- lu_factor_ex: the primitive ----------------------------------------------------------

def _lu_check(name: str, A: Tensor) -> None:
    if A.dim() < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A._shape)} instead")
    if not (A.dtype.is_floating_point or A.dtype.is_complex) or A.dtype.itemsize < 4:
        raise NotImplementedError(f'"lu_cpu" not implemented for \'{_tn(A)}\'')


def _lu_specs(A: Tensor) -> tuple:
    m, n = A._shape[-2:]
    batch = A._shape[:-2]
    return (TensorSpec(A._shape, A.dtype, A.device),
            TensorSpec((*batch, min(m, n)), D.int32, A.device),
            TensorSpec(batch, D.int32, A.device))


def _lu_meta(A, *, pivot=True, check_errors=False) -> tuple:
    _lu_check("torch.lu_factor", A)
    return _lu_specs(A)


def _lu_message(name: str):
    def message(v: int):
        return RuntimeError, (
            f"{name}: {{where}}U[{v},{v}] is zero and using it on lu_solve would result in a "
            "division by zero. If you still want to perform the factorization, consider "
            "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return message


def _lu_cpu(A, *, pivot=True, check_errors=False) -> tuple:
    _lu_check("torch.lu_factor", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    m, n = A._shape[-2:]
    batch = A._shape[:-2]
    lu, piv, info = _np_la.lu(_flat(A._np, m, n))
    result = (fortran(lu.reshape(A._shape), A.dtype), piv.reshape(*batch, min(m, n)),
              info.reshape(batch))
    if check_errors:
        raise_info(Tensor._from_array(result[2]), A.dim() > 2,
                   _lu_message("torch.linalg.lu_factor_ex"))
    return result


def _lu_cuda(A, *, pivot=True, check_errors=False) -> tuple:
    _lu_check("torch.lu_factor", A)
    result = _cusolver().lu_factor(A, pivot)
    if check_errors:
        raise_info(result[2], A.dim() > 2, _lu_message("torch.linalg.lu_factor_ex"))
    return result


def _lu_parts(LU: Tensor) -> tuple[Tensor, Tensor, int, int]:
    m, n = LU._shape[-2:]
    k = min(m, n)
    lower = LU.narrow(-1, 0, k).tril(-1)
    upper = LU.narrow(-2, 0, k).triu()
    return lower, upper, m, n


def _eye_like(x: Tensor, rows: int, cols: int) -> Tensor:
    from refimpl.ops.factories import eye

    return eye(rows, cols, dtype=x.dtype, device=x.device)


def _tri_solve(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
               unitriangular: bool = False) -> Tensor:
    from refimpl.ops.linalg_triangular import linalg_solve_triangular

    return linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


def _lu_backward(ctx, g_lu, *_):
    """The gradient of A = P L U from the packed factor's (square, wide and tall cases)."""
    LU, piv = ctx.outputs[0], ctx.outputs[1]
    if g_lu is None:
        return (None,)
    L, U, m, n = _lu_parts(LU)
    k = min(m, n)
    L = L + _eye_like(LU, m, k)
    P = _perm_matrix(piv, m, LU.dtype)
    gL, gU = g_lu.narrow(-1, 0, k).tril(-1), g_lu.narrow(-2, 0, k).triu()
    if m == n:
        phi = (_h(L).matmul(gL)).tril(-1) + gU.matmul(_h(U)).triu()
        x = _tri_solve(_h(L), phi, upper=True, unitriangular=True)
        return (P.matmul(_tri_solve(_h(U), x, upper=False, left=False)),)
    if m < n:
        U1, U2, gU1, gU2 = U.narrow(-1, 0, k), U.narrow(-1, k, n - k), gU.narrow(-1, 0, k), \
            gU.narrow(-1, k, n - k)
        phi = (_h(L).matmul(gL) - gU2.matmul(_h(U2))).tril(-1) + gU1.matmul(_h(U1)).triu()
        left = _tri_solve(_h(U1), phi, upper=False, left=False)
        from refimpl.ops.shape import cat

        g = cat([left, gU2], -1)
        return (P.matmul(_tri_solve(_h(L), g, upper=True, unitriangular=True)),)
    L1, L2, gL1, gL2 = L.narrow(-2, 0, k), L.narrow(-2, k, m - k), gL.narrow(-2, 0, k), \
        gL.narrow(-2, k, m - k)
    phi = (_h(L1).matmul(gL1)).tril(-1) + (gU.matmul(_h(U)) - _h(L2).matmul(gL2)).triu()
    top = _tri_solve(_h(L1), phi, upper=True, unitriangular=True)
    from refimpl.ops.shape import cat

    g = cat([top, gL2], -2)
    return (P.matmul(_tri_solve(_h(U), g, upper=False, left=False)),)


def _lu_jvp(ctx, dA, *_):
    LU, piv = ctx.outputs[0], ctx.outputs[1]
    L, U, m, n = _lu_parts(LU)
    k = min(m, n)
    L = L + _eye_like(LU, m, k)
    pt_da = _h(_perm_matrix(piv, m, LU.dtype)).matmul(dA)
    if m == n:
        c = _tri_solve(L, pt_da, upper=False, unitriangular=True)
        c = _tri_solve(U, c, upper=True, left=False)
        return L.matmul(c.tril(-1)) + c.triu().matmul(U)
    from refimpl.ops.shape import cat

    if m < n:
        g = _tri_solve(L, pt_da, upper=False, unitriangular=True)
        U1, U2 = U.narrow(-1, 0, k), U.narrow(-1, k, n - k)
        c = _tri_solve(U1, g.narrow(-1, 0, k), upper=True, left=False)
        x = c.tril(-1)
        du1 = c.triu().matmul(U1)
        du2 = g.narrow(-1, k, n - k) - x.matmul(U2)
        lower = L.matmul(x)
        return cat([lower, lower.new_zeros((*lower._shape[:-1], n - k))], -1) + cat([du1, du2], -1)
    h = _tri_solve(U, pt_da, upper=True, left=False)
    L1, L2 = L.narrow(-2, 0, k), L.narrow(-2, k, m - k)
    c = _tri_solve(L1, h.narrow(-2, 0, k), upper=False, unitriangular=True)
    du = c.triu().matmul(U)
    dl1 = L1.matmul(c.tril(-1))
    dl2 = h.narrow(-2, k, m - k) - L2.matmul(c.triu())
    return cat([dl1, dl2], -2) + cat([du, du.new_zeros((*du._shape[:-2], m - k, n))], -2)


linalg_lu_factor_ex_op = defop(
    "linalg_lu_factor_ex", meta=_lu_meta, cpu=_lu_cpu, cuda=_lu_cuda, backward=_lu_backward,
    jvp=_lu_jvp, diff_outputs=(0,), saves=("outputs",), node="LinalgLuFactorExBackward0",
    extra={"method": False})


# -- permutations -------------------------------------------------------------------------

def lu_permutation(piv: Tensor, m: int) -> Tensor:
    """The int64 row order ``perm`` of 1-based pivots ``(..., k)``: ``(P^T A)[i] =
    A[perm[i]]``. CPU: numpy; CUDA: one NVRTC kernel (a thread per matrix)."""
    batch, k = piv._shape[:-1], piv._shape[-1]
    if not has_data(piv):  # meta and fake tensors: the shape only
        return piv.new_empty((*batch, m), dtype=D.int64)
    if piv.device.type == "cuda":
        return _cusolver().lu_permutation(piv, m)
    perm = _np_la.permutation(_flat(piv._np, k), m)
    return Tensor._from_array(perm.reshape(*batch, m))


def _perm_matrix(piv: Tensor, m: int, dtype) -> Tensor:
    """``P`` of ``A = P L U`` as a matrix of ``dtype``: ``P[r, i] = (perm[i] == r)``."""
    import refimpl

    perm = lu_permutation(piv, m)
    rows = refimpl.arange(m, device=piv.device).unsqueeze(-1)
    return (perm.unsqueeze(-2) == rows).to(dtype)


# -- public functions ---------------------------------------------------------------------

def linalg_lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False,
                        out=None):
    """``(LU, pivots, info)`` of ``A = P L U`` (LAPACK's packed form, 1-based pivots)."""
    kwargs = {} if out is None else {"out": out}
    return named_result("linalg_lu_factor_ex",
                        linalg_lu_factor_ex_op(A, pivot=pivot, check_errors=check_errors,
                                               **kwargs), out)


@composite("linalg_lu_factor")
def linalg_lu_factor(A: Tensor, *, pivot: bool = True, out=None):
    """``(LU, pivots)``; raises torch's error when a pivot ``U[i, i]`` is exactly zero."""
    _lu_check("torch.lu_factor", A)
    LU, piv, info = linalg_lu_factor_ex_op(A, pivot=pivot)
    raise_info(info, A.dim() > 2, _lu_message("torch.linalg.lu_factor"))
    return _outs("linalg_lu_factor", (LU, piv), out)


# the op torch names in its out= autograd error, where it is not the function's own
_OUT_OPS = {"linalg_lu_factor": "linalg_lu_factor_ex", "linalg_solve_ex": "_linalg_solve_ex",
            "linalg_solve": "_linalg_solve_ex"}


def _check_out_grad(name: str, results) -> None:
    """torch's error for ``out=`` when the result would need a gradient."""
    from refimpl.autograd.grad_mode import is_grad_enabled

    if is_grad_enabled() and any(isinstance(r, Tensor) and r.requires_grad for r in results):
        raise RuntimeError(
            f"{_OUT_OPS.get(name, name)}(): functions with out=... arguments don't support "
            "automatic differentiation, but one of the arguments requires grad.")


def _outs(name: str, result: tuple, out):
    if out is None:
        return named_result(name, result)
    from refimpl._dispatch import _write_out

    _check_out_grad(name, result)
    for o, r in zip(out, result):
        _write_out(o, r.detach(), name)
    return named_result(name, tuple(out), out)


@composite("_lu_with_info")
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False, out=None):
    """Legacy ``torch.lu``: ``(LU, pivots)`` or ``(LU, pivots, infos)`` (deprecated)."""
    import warnings

    warnings.warn(
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex "
        "and will be removed in a future PyTorch release.", UserWarning, stacklevel=2)
    LU, piv, info = linalg_lu_factor_ex_op(A, pivot=pivot)
    if not get_infos:
        raise_info(info, A.dim() > 2, _lu_message("torch.linalg.lu_factor"))
        return _outs("linalg_lu_factor", (LU, piv), out) if out is not None else (LU, piv)
    return _outs("_lu_with_info", (LU, piv, info), out)


@composite("lu_unpack")
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True, *, out=None):
    """``(P, L, U)`` from ``lu_factor``'s output (empty tensors for the parts not asked)."""
    check_matrix("torch.lu_unpack", LU_data, "LU_data")
    if LU_pivots.dtype is not D.int32:
        raise RuntimeError(
            "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 "
            "dtype.\nNote: this function is intended to be used with the output produced by "
            "torch.linalg.lu_factor")
    m, n = LU_data._shape[-2:]
    k = min(m, n)
    if LU_pivots._shape[-1:] != (k,) and unpack_pivots:
        raise RuntimeError(f"torch.lu_unpack: Expected LU_pivots.size(-1) == min(LU_data.size("
                           f"-1), LU_data.size(-2)), but got {LU_pivots._shape[-1]} and {k}")
    empty = LU_data.new_empty((0,))
    if unpack_data:
        lower, U, _, _ = _lu_parts(LU_data)
        L = lower + _eye_like(LU_data, m, k)
    else:
        L = U = empty
    P = _perm_matrix(LU_pivots, m, LU_data.dtype) if unpack_pivots else empty
    return _outs("lu_unpack", (P, L, U), out)


@composite("linalg_lu")
def linalg_lu(A: Tensor, *, pivot: bool = True, out=None):
    """``(P, L, U)`` with ``A = P L U``."""
    _lu_check("linalg.lu", A)
    LU, piv, _ = linalg_lu_factor_ex_op(A, pivot=pivot)
    P, L, U = lu_unpack(LU, piv)
    return _outs("linalg_lu", (P, L, U), out)


def _check_solve_shapes(name: str, A: Tensor, B: Tensor, left: bool) -> None:
    n, rows = A._shape[-1], (B._shape[-2] if left else B._shape[-1])
    if rows != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({A._shape[-2]}x{A._shape[-1]} and {B._shape[-2]}x{B._shape[-1]})")


@composite("linalg_lu_solve")
def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,
                    adjoint: bool = False, out=None) -> Tensor:
    """``A^{-1} B`` (``B A^{-1}`` when not ``left``; ``A^H`` when ``adjoint``) from
    ``lu_factor``'s output."""
    check_matrix("linalg.lu_solve", LU, "LU")
    check_matrix("linalg.lu_solve", B, "B")
    check_square("", LU, prefix="torch.linalg.lu_solve: ")
    if pivots.dtype is not D.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    if LU.dtype is not B.dtype:
        raise RuntimeError("linalg.lu_solve: Expected LU and B to have the same dtype, but found "
                           f"LU of type {_tn(LU)} and B of type {_tn(B)} instead")
    _check_solve_shapes("linalg.lu_solve", LU, B, left)
    if pivots._shape[-1:] != LU._shape[-1:]:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the "
                           "dimension of the matrix")
    if not left:
        x = _h(linalg_lu_solve(LU, pivots, _h(B), adjoint=not adjoint))
        return _done(x.resolve_conj() if x.dtype.is_complex else x, out, "linalg_lu_solve")
    return _done(_lu_solve_left(LU, pivots, B, adjoint), out, "linalg_lu_solve")


def _lu_solve_left(LU: Tensor, pivots: Tensor, B: Tensor, adjoint: bool) -> Tensor:
    n = LU._shape[-1]
    batch = broadcast_shapes(LU._shape[:-2], B._shape[:-2], pivots._shape[:-1])
    B = B.expand(*batch, *B._shape[-2:])
    LU = LU.expand(*batch, n, n)
    pivots = pivots.expand(*batch, n)
    if cuda_no_grad(LU, B):
        return _cusolver().lu_solve(LU, pivots, B, adjoint)
    perm = lu_permutation(pivots, n).unsqueeze(-1)
    unit = _eye_like(LU, n, n)
    L, U = LU.tril(-1) + unit, LU.triu()
    if not adjoint:
        rows = B.gather(-2, perm.expand(*B._shape))
        y = _tri_solve(L, rows, upper=False, unitriangular=True)
        return _tri_solve(U, y, upper=True)
    y = _tri_solve(_h(U), B, upper=False)
    z = _tri_solve(_h(L), y, upper=True, unitriangular=True)
    inverse_perm = perm.squeeze(-1).argsort(-1).unsqueeze(-1)
    return z.gather(-2, inverse_perm.expand(*z._shape))


def _done(result: Tensor, out: Tensor | None, name: str) -> Tensor:
    """``result``, or written into ``out`` (torch's checks) when given; ``name``: the op."""
    if out is None:
        return result
    from refimpl._dispatch import _write_out

    _check_out_grad(name, (result,))
    _write_out(out, result.detach(), name)
    return out


@composite("lu_solve")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out=None) -> Tensor:
    """Legacy ``torch.lu_solve(b, LU_data, LU_pivots)`` (deprecated)."""
    return linalg_lu_solve(LU_data, LU_pivots, b, out=out)


def _solve_message(v: int):
    return _LinAlgError, ("torch.linalg.solve: {where}The solver failed because the input "
                          "matrix is singular.")


@composite("linalg_solve_ex")
def linalg_solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False,
                    out=None):
    """``(result, info)``: ``X`` with ``A X = B`` (``X A = B`` when not ``left``) and the
    LU factorisation's infos; B is a vector (batch) when it has one dim less than A."""
    check_matrix("linalg.solve", A)
    check_square("", A, prefix="linalg.solve: ")
    check_float("linalg.solve", A, low="lu_cpu")
    if A.dtype is not B.dtype:
        raise RuntimeError("linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {_tn(A)} and B of type {_tn(B)} instead")
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B._shape == A._shape[:-1])
    rhs = B.unsqueeze(-1) if vector else B
    if vector and not left:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"XA = B ({A._shape[-2]}x{A._shape[-1]} and {B._shape[-1]}x1)")
    if rhs.dim() < 2:
        raise RuntimeError("linalg.solve: The input tensor B must have at least 2 dimensions.")
    _check_solve_shapes("linalg.solve", A, rhs, left)
    LU, piv, info = linalg_lu_factor_ex_op(A)
    x = linalg_lu_solve(LU, piv, rhs, left=left)
    if vector:
        x = x.squeeze(-1)
    if check_errors:
        raise_info(info, A.dim() > 2, _solve_message)
    return _outs("linalg_solve_ex", (x, info), out)


@composite("linalg_solve")
def linalg_solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``); torch's LinAlgError when a
    matrix is singular (the infos are read: a sync on CUDA, as in torch)."""
    x, info = linalg_solve_ex(A, B, left=left)
    raise_info(info, A.dim() > 2, _solve_message)
    return _done(x, out, "linalg_solve")


def _inv_message(v: int):
    return _LinAlgError, (f"linalg.inv: {{where}}The diagonal element {v} is zero, the "
                          "inversion could not be completed because the input matrix is "
                          "singular.")


@composite("linalg_inv_ex")
def linalg_inv_ex(A: Tensor, *, check_errors: bool = False, out=None):
    """``(inverse, info)``: ``solve_ex(A, I)``, as torch computes it."""
    check_matrix("linalg.inv", A)
    check_square("", A, prefix="linalg.inv: ")
    check_float("linalg.inv", A)
    n = A._shape[-1]
    LU, piv, info = linalg_lu_factor_ex_op(A)
    inv = linalg_lu_solve(LU, piv, _eye_like(A, n, n).expand(A._shape))
    if check_errors:
        raise_info(info, A.dim() > 2, _inv_message)
    return _outs("linalg_inv_ex", (inv, info), out)


__all__ = ["lu", "lu_solve", "lu_unpack"]
TENSOR_METHODS = ("lu", "lu_solve")
