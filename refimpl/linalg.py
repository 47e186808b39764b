"""``refimpl.linalg``: torch.linalg's functions (spec TENSOR-307, TENSOR-508).

Norms, products and powers are written in refimpl ops, so they run on every device
and differentiate through the ops they use; ``det``, ``inv`` and ``cross`` are the ops of
``refimpl.ops.linalg_functions``. Functions that need a matrix decomposition refimpl
does not have (singular values for ``ord=2``, ``-2`` and ``'nuc'``) raise
``NotImplementedError`` naming it.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops.linalg_functions import det as _det
from refimpl.ops.linalg_functions import inverse, linalg_cross
from refimpl.ops.reduction_stats import linalg_vector_norm

__all__ = ["cross", "det", "diagonal", "inv", "matmul", "matrix_norm", "matrix_power",
           "multi_dot", "norm", "vecdot", "vector_norm"]

_INF = math.inf


def _tn(x: Tensor) -> str:
    return D.type_name(x.dtype)


# The C++ type names torch's multi_dot message prints
_CPP = {"float32": "float", "float64": "double", "float16": "c10::Half",
        "bfloat16": "c10::BFloat16", "int32": "int", "int64": "long int",
        "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
        "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def _cpp_name(x: Tensor) -> str:
    return _CPP.get(x.dtype.name, x.dtype.name)


def _check_float(name: str, x: Tensor) -> None:
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_tn(x)}")


def _done(result: Tensor, out: Tensor | None) -> Tensor:
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None,
                out: Tensor | None = None) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all elements when None), as a vector."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    return _done(linalg_vector_norm(x, ord, dim, keepdim, **kwargs), out)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None,
                out: Tensor | None = None) -> Tensor:
    """The ``ord``-norm of the matrices of ``A`` over the two dims ``dim``: ``'fro'``,
    ``inf``/``-inf`` (max/min absolute row sum), ``1``/``-1`` (columns), ``'nuc'`` (sum
    of the singular values), ``2``/``-2`` (largest/smallest singular value)."""
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    _check_float("matrix_norm", A)
    d0, d1 = (wrap_dim(d, A.dim()) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return _done(linalg_vector_norm(A, 2, (d0, d1), keepdim), out)
    if ord in ("nuc", 2, -2):  # from the singular values of the matrices moved last
        sv = svdvals(A.movedim((d0, d1), (-2, -1)))
        result = sv.sum(-1) if ord == "nuc" else sv.amax(-1) if ord == 2 else sv.amin(-1)
        if keepdim:
            result = result.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
        return _done(result, out)
    if ord not in (_INF, -_INF, 1, -1):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # inf: the largest absolute row sum (sum along the columns, d1); 1: the columns'
    summed, over = (d1, d0) if ord in (_INF, -_INF) else (d0, d1)
    sums = A.abs().sum(summed, keepdim=True)
    result = sums.amax(over, keepdim=True) if ord > 0 else sums.amin(over, keepdim=True)
    if not keepdim:
        result = result.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    return _done(result, out)


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, out: Tensor | None = None,
         dtype=None) -> Tensor:
    """A vector norm (``dim`` an int or one dim, or ``A`` 1-D) or a matrix norm (two dims,
    or ``A`` 2-D); with neither ``ord`` nor ``dim``, the 2-norm of all elements."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype,
                               out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                           f"Got {list(dim)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.dim() not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must "
                           f"be 1D or 2D. Got {A.dim()}D.")
    if A.dim() == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)


def det(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The determinant of each square matrix of ``A``."""
    return _done(_det(A), out)


def inv(A: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The inverse of each square matrix of ``A`` (torch's error for a singular one)."""
    return _done(inverse(A), out)


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Tensor | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcasting)."""
    return _done(linalg_cross(input, other, dim=dim), out)


def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``refimpl.matmul``."""
    return _done(input.matmul(other), out)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonal of each matrix of ``A``, as a view."""
    return A.diagonal(offset, dim1, dim2)


@composite("linalg_vecdot")
def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out: Tensor | None = None) -> Tensor:
    """``sum(conj(x) * y)`` along ``dim`` (broadcasting)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found "
                           f"x of type {_tn(x)} and y of type {_tn(y)} instead")
    lhs = x.conj() if x.dtype.is_complex else x
    return _done((lhs * y).sum(dim), out)


def _square(name: str, A: Tensor) -> None:
    if A.dim() < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A._shape[-2]} by {A._shape[-1]} matrices")


def matrix_power(A: Tensor, n: int, *, out: Tensor | None = None) -> Tensor:
    """``A`` multiplied by itself ``n`` times (the identity for 0, powers of the inverse for
    negative ``n``), by repeated squaring."""
    _square("matrix_power", A)
    if n == 0:
        from refimpl.ops.factories import eye

        ident = eye(A._shape[-1], dtype=A.dtype, device=A.device)
        # as torch: A's copy overwritten (so the result carries A's graph, zero gradient)
        return _done(A.contiguous().clone().copy_(ident.expand(A.shape)), out)
    if n < 0:
        A, n = inverse(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    if result is A:
        result = A.clone()
    return _done(result, out)


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The cheapest parenthesisation of a chain of matrices (dims[i] x dims[i+1])."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


@composite("linalg_multi_dot")
def multi_dot(tensors, *, out: Tensor | None = None) -> Tensor:
    """The product of a chain of matrices in the cheapest order; the first may be a row
    vector and the last a column vector (1-D), as in torch."""
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    for i, x in enumerate(tensors):
        if i in (0, n - 1):
            if x.dim() not in (1, 2):
                which = "first" if i == 0 else "last"
                raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got "
                                   f"{x.dim()}D")
        elif x.dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {x.dim()}D")
        if x.dtype is not tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {_cpp_name(tensors[0])} and tensor {i} {_cpp_name(x)}")
    first_1d, last_1d = tensors[0].dim() == 1, tensors[-1].dim() == 1
    mats = list(tensors)
    if first_1d:
        mats[0] = mats[0].unsqueeze(0)
    if last_1d:
        mats[-1] = mats[-1].unsqueeze(1)
    for i in range(n - 1):
        if mats[i]._shape[1] != mats[i + 1]._shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                f"{list(tensors[i + 1].shape)} cannot be multiplied")
    split = _chain_order([mats[0]._shape[0]] + [m._shape[1] for m in mats])

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return mats[i]
        k = split[i][j]
        return product(i, k).mm(product(k + 1, j))

    result = product(0, n - 1)
    if first_1d:
        result = result.squeeze(0)
    if last_1d:
        result = result.squeeze(-1)
    return _done(result, out)


# -- spectral functions (refimpl.ops.linalg_spectral*) ----------------------------------------
from refimpl.ops.linalg_spectral import eigh, eigvalsh, svdvals
from refimpl.ops.linalg_spectral import linalg_svd as svd
from refimpl.ops.linalg_spectral_eig import eig, eigvals
from refimpl.ops.linalg_spectral_solve import cond, lstsq, matrix_rank, pinv

__all__ += ["cond", "eig", "eigh", "eigvals", "eigvalsh", "lstsq", "matrix_rank", "pinv", "svd",
            "svdvals"]

# -- factorisations and solvers (refimpl.ops.linalg_factor, _det, _triangular, _qr) ------
from refimpl.ops.linalg_det import linalg_slogdet as slogdet
from refimpl.ops.linalg_factor import LinAlgError
from refimpl.ops.linalg_factor import linalg_inv_ex as inv_ex
from refimpl.ops.linalg_factor import linalg_lu as lu
from refimpl.ops.linalg_factor import linalg_lu_factor as lu_factor
from refimpl.ops.linalg_factor import linalg_lu_factor_ex as lu_factor_ex
from refimpl.ops.linalg_factor import linalg_lu_solve as lu_solve
from refimpl.ops.linalg_factor import linalg_solve as solve
from refimpl.ops.linalg_factor import linalg_solve_ex as solve_ex
from refimpl.ops.linalg_qr import householder_product, matrix_exp, tensorinv, tensorsolve, vander
from refimpl.ops.linalg_qr import linalg_ldl_factor as ldl_factor
from refimpl.ops.linalg_qr import linalg_ldl_factor_ex as ldl_factor_ex
from refimpl.ops.linalg_qr import linalg_ldl_solve as ldl_solve
from refimpl.ops.linalg_qr import linalg_qr as qr
from refimpl.ops.linalg_triangular import linalg_cholesky as cholesky
from refimpl.ops.linalg_triangular import linalg_cholesky_ex as cholesky_ex
from refimpl.ops.linalg_triangular import solve_triangular

__all__ += ["LinAlgError", "cholesky", "cholesky_ex", "householder_product", "inv_ex",
            "ldl_factor", "ldl_factor_ex", "ldl_solve", "lu", "lu_factor", "lu_factor_ex",
            "lu_solve", "matrix_exp", "qr", "slogdet", "solve", "solve_ex", "solve_triangular",
            "tensorinv", "tensorsolve", "vander"]
