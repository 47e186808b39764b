"""numpy kernels of the factorisations that ``numpy.linalg`` does not expose.

LAPACK's getrf (LU with partial pivoting, 1-based pivots and an ``info`` per matrix),
potrf's ``info`` (the order of the first leading minor that is not positive-definite),
triangular solves, and sytf2's Bunch-Kaufman LDL^H are written here, vectorised over the
batch: each loop runs over the rows or columns of one matrix, and every step works on
all matrices of the batch at once. Arrays are ``(batch, rows, cols)``, row-major; the
results follow LAPACK's conventions (pivot choice by ``|re| + |im|`` for complex, as
``i?amax`` does), so they agree with torch's CPU results.
"""

from __future__ import annotations

import numpy as np


def _mag(x: np.ndarray) -> np.ndarray:
    """LAPACK's ``cabs1``: |x| for reals, |re| + |im| for complex (i?amax's measure)."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def lu(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """getrf on a batch ``(B, m, n)``: packed LU, 1-based int32 pivots ``(B, k)``, and
    int32 infos (``j`` when ``U[j-1, j-1]`` is exactly zero, first such ``j``)."""
    a = a.copy()
    nb, m, n = a.shape
    k = min(m, n)
    piv = np.zeros((nb, k), np.int32)
    info = np.zeros(nb, np.int32)
    rows = np.arange(nb)
    with np.errstate(all="ignore"):
        for j in range(k):
            p = j + np.argmax(_mag(a[:, j:, j]), axis=1) if m > j else np.full(nb, j)
            piv[:, j] = p + 1
            top = a[rows, j, :].copy()
            a[rows, j, :] = a[rows, p, :]
            a[rows, p, :] = top
            d = a[:, j, j]
            zero = d == 0
            info[(info == 0) & zero] = j + 1
            a[:, j + 1:, j] /= np.where(zero, 1, d)[:, None]
            a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, j, None, j + 1:]
    return a, piv, info


def permutation(piv: np.ndarray, m: int) -> np.ndarray:
    """The row order ``perm`` (``(P^T A)[i] = A[perm[i]]``) of 1-based pivots ``(B, k)``."""
    nb, k = piv.shape
    perm = np.broadcast_to(np.arange(m), (nb, m)).copy()
    rows = np.arange(nb)
    for j in range(k):
        p = piv[:, j].astype(np.int64) - 1
        top = perm[:, j].copy()
        perm[:, j] = perm[rows, p]
        perm[rows, p] = top
    return perm


def trisolve(t: np.ndarray, b: np.ndarray, upper: bool, unit: bool = False) -> np.ndarray:
    """``X`` with ``T X = B`` for triangular ``T`` ``(B, n, n)`` and ``B`` ``(B, n, k)``
    (only ``T``'s ``upper``/lower triangle is read; ``unit``: ones on its diagonal).
    A zero on the diagonal gives inf/nan, as trsm does."""
    n = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(b.shape, t.shape[:-2] + b.shape[-2:]),
                 np.result_type(t, b))
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(all="ignore"):
        for i in order:
            rest = slice(i + 1, n) if upper else slice(0, i)
            acc = b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, rest], x[..., rest, :])
            x[..., i, :] = acc if unit else acc / t[..., i, i, None]
    return x


def cholesky(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """potrf (lower) on a batch ``(B, n, n)``, reading the lower triangle: ``L`` and
    int32 infos; a matrix that fails keeps the columns computed before its failure."""
    nb, n, _ = a.shape
    info = np.zeros(nb, np.int32)
    try:
        return np.linalg.cholesky(a).astype(a.dtype, copy=False), info
    except np.linalg.LinAlgError:
        pass  # a matrix is not positive definite: the column loop below finds where
    low = np.tril(a)
    out = np.zeros_like(a)
    with np.errstate(all="ignore"):
        for j in range(n):
            left = out[:, j, :j]
            d = low[:, j, j].real - np.sum(_abs2(left), axis=-1)
            bad = ~(d > 0) & (info == 0)
            info[bad] = j + 1
            live = info == 0
            dj = np.sqrt(np.where(live, d, 1))
            out[:, j, j] = np.where(live, dj, 0)
            below = low[:, j + 1:, j] - np.einsum("bij,bj->bi", out[:, j + 1:, :j], left.conj())
            out[:, j + 1:, j] = np.where(live[:, None], below / dj[:, None], 0)
    return out, info


def _abs2(x: np.ndarray) -> np.ndarray:
    return (x.real ** 2 + x.imag ** 2) if np.iscomplexobj(x) else x * x


_BK_ALPHA = (1 + np.sqrt(17.0)) / 8


def ldl(a: np.ndarray, hermitian: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sytf2/hetf2 (lower, Bunch-Kaufman) on one matrix per batch element, as LAPACK: the
    packed factor, 1-based pivots (negative pairs for 2x2 blocks) and infos."""
    nb, n, _ = a.shape
    out = np.tril(a).astype(a.dtype)
    piv = np.zeros((nb, n), np.int32)
    info = np.zeros(nb, np.int32)
    for b in range(nb):
        info[b] = _ldl_one(out[b], piv[b], hermitian)
    return out, piv, info


def _ldl_one(w: np.ndarray, piv: np.ndarray, herm: bool) -> int:
    """One lower Bunch-Kaufman factorisation in place (w holds the lower triangle)."""
    n = w.shape[0]
    cj = np.conj if herm else (lambda v: v)
    full = w + np.tril(w, -1).T.conj() if herm else w + np.tril(w, -1).T
    info = 0
    k = 0
    with np.errstate(all="ignore"):
        while k < n:
            diag = abs(full[k, k].real) if herm else _mag(full[k, k])
            colmax = 0.0
            imax = k
            if k + 1 < n:
                imax = k + 1 + int(np.argmax(_mag(full[k + 1:, k])))
                colmax = _mag(full[imax, k])
            if max(diag, colmax) == 0 or np.isnan(diag):
                info = info or k + 1
                piv[k] = k + 1
                k += 1
                continue
            if diag >= _BK_ALPHA * colmax:
                kp, size = k, 1
            else:
                row = np.concatenate([full[imax, k:imax], full[imax + 1:, imax]])
                rowmax = float(np.max(_mag(row))) if row.size else 0.0
                ddiag = abs(full[imax, imax].real) if herm else _mag(full[imax, imax])
                if diag >= _BK_ALPHA * colmax * (colmax / rowmax):
                    kp, size = k, 1
                elif ddiag >= _BK_ALPHA * rowmax:
                    kp, size = imax, 1
                else:
                    kp, size = imax, 2
            kk = k + size - 1
            if kp != kk:  # LAPACK swaps the trailing block only, not L's earlier columns
                full[[kk, kp], k:] = full[[kp, kk], k:]
                full[k:, [kk, kp]] = full[k:, [kp, kk]]
            if size == 1:
                d = full[k, k].real if herm else full[k, k]
                l_col = full[k + 1:, k] / d
                full[k + 1:, k + 1:] -= np.outer(l_col, cj(full[k + 1:, k]))
                full[k + 1:, k] = l_col
                full[k, k + 1:] = cj(l_col)
                piv[k] = kp + 1
            else:
                d = full[k:k + 2, k:k + 2].copy()
                cols = full[k + 2:, k:k + 2].copy()
                l_cols = cols @ np.linalg.inv(d)
                full[k + 2:, k + 2:] -= l_cols @ cj(cols).T
                full[k + 2:, k:k + 2] = l_cols
                full[k:k + 2, k + 2:] = cj(l_cols).T
                piv[k] = piv[k + 1] = -(kp + 1)
            k += size
    w[...] = np.tril(full)
    return info


def flat(arr: np.ndarray, *tail: int) -> np.ndarray:
    """``arr`` as a contiguous ``(batch, *tail)`` array (an empty batch included)."""
    lead = arr.shape[:arr.ndim - len(tail)]
    return np.ascontiguousarray(arr).reshape((int(np.prod(lead, dtype=np.int64)), *tail))


def ldl_solve(ld: np.ndarray, piv: np.ndarray, b: np.ndarray, herm: bool) -> np.ndarray:
    """sytrs/hetrs (lower) for one packed factor: interchanges and ``L`` column by column,
    the 1x1/2x2 blocks of ``D``, then ``L^T`` (``L^H``) and the interchanges backwards."""
    n = ld.shape[0]
    cj = np.conj if herm else (lambda v: v)
    x = b.astype(np.result_type(ld, b), copy=True)
    k = 0
    while k < n:
        if piv[k] > 0:
            kp = piv[k] - 1
            x[[k, kp]] = x[[kp, k]]
            x[k + 1:] -= np.outer(ld[k + 1:, k], x[k])
            x[k] /= ld[k, k].real if herm else ld[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            x[[k + 1, kp]] = x[[kp, k + 1]]
            x[k + 2:] -= np.outer(ld[k + 2:, k], x[k]) + np.outer(ld[k + 2:, k + 1], x[k + 1])
            d = np.array([[ld[k, k], cj(ld[k + 1, k])], [ld[k + 1, k], ld[k + 1, k + 1]]])
            x[k:k + 2] = np.linalg.solve(d, x[k:k + 2])
            k += 2
    k = n - 1
    while k >= 0:
        if piv[k] > 0:
            x[k] -= cj(ld[k + 1:, k]) @ x[k + 1:]
            kp = piv[k] - 1
            x[[k, kp]] = x[[kp, k]]
            k -= 1
        else:
            x[k] -= cj(ld[k + 1:, k]) @ x[k + 1:]
            x[k - 1] -= cj(ld[k + 1:, k - 1]) @ x[k + 1:]
            kp = -piv[k] - 1
            x[[k, kp]] = x[[kp, k]]
            k -= 2
    return x
