"""Dense factorisations on cuSOLVER (and cuBLAS's trsm): LU, Cholesky, QR, LDL, triangular
solves.

cuSOLVER is reached through ``nvmath.bindings.cusolverDn`` (the ``nvmath-python``
package, as cuBLAS is in ``_blas.py``), imported on the first factorisation, so CPU-only
installs never load it.

Conventions (torch's CUDA backend does the same):

* One cuSOLVER handle per (thread, device), created on first use and bound to the
  current stream before each call; work buffers come from refimpl's caching allocator
  on that stream, so they are freed in stream order.
* Layout. cuSOLVER is column-major, tensors are row-major. Every routine works on an
  explicit *column-major copy*: a fresh tensor of the operand's shape whose matrices
  have strides ``(1, rows)`` (batch strides ``rows * cols`` outside them), filled by the
  device copy kernel. The column-major buffer read by cuSOLVER is then the matrix
  itself, and the factor it writes in place is returned as that tensor (torch's factor
  outputs have these strides too). Nothing is transposed implicitly.
* Batches loop over the matrices, one call each, on the same stream: pointers are
  computed on the host from the batch strides, so nothing synchronises.
* ``info``: each routine writes an int32 per matrix into a device tensor that is
  returned as it is. Reading it (a synchronisation) is left to the callers that must
  raise (``linalg.solve``, ``cholesky``...), never done by the ``_ex`` variants.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _blas, _driver, _nvrtc, _tensor_ops, streams

_solver = None
_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_LOWER, _UPPER = 0, 1  # cublasFillMode_t
_OP = {"N": 0, "T": 1, "C": 2}  # cublasOperation_t
_LEFT, _RIGHT = 0, 1  # cublasSideMode_t
_NON_UNIT, _UNIT = 0, 1  # cublasDiagType_t


def _lib():
    """``nvmath.bindings.cusolverDn``, imported on first use with a clear error if missing."""
    global _solver
    if _solver is None:
        try:
            from nvmath.bindings import cusolverDn
        except ImportError as exc:
            raise RuntimeError(
                "refimpl factorises CUDA matrices with cuSOLVER through the 'nvmath-python' "
                f"package, which could not be imported ({exc}); install it with "
                "`pip install nvmath-python`") from exc
        _solver = cusolverDn
    return _solver


class _Handles(threading.local):
    def __init__(self) -> None:
        self.handles: dict[int, int] = {}


_handles = _Handles()


def _handle(idx: int) -> int:
    """This thread's cuSOLVER handle on device ``idx``, bound to its current stream."""
    h = _handles.handles.get(idx)
    lib = _lib()
    _driver.use_device(idx)  # the calls run in the tensor's device's context
    if h is None:
        h = _handles.handles[idx] = lib.create()
    lib.set_stream(h, int(streams.current_stream(idx).cuda_stream))
    return h


def _fn(t: Tensor, name: str):
    """The routine ``name`` for ``t``'s dtype (``getrf`` -> ``dgetrf``; orgqr/ormqr become
    ungqr/unmqr for complex)."""
    if t.dtype.name not in _PREFIX:
        raise NotImplementedError(f"cuSOLVER has no '{name}' for {t.dtype}")
    if t.dtype.is_complex:
        name = name.replace("orgqr", "ungqr").replace("ormqr", "unmqr")
    return getattr(_lib(), _PREFIX[t.dtype.name] + name)


def _idx(t: Tensor) -> int:
    return t._storage._data.device_index


def _ptr(t: Tensor) -> int:
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def colmajor_strides(shape: tuple) -> tuple:
    """The strides of a dense batch of column-major matrices of ``shape``."""
    strides, step = [1, max(shape[-2], 1)], shape[-2] * shape[-1]
    for size in reversed(shape[:-2]):
        strides.insert(0, step)
        step *= size
    return tuple(strides)


def colmajor(t: Tensor, shape: tuple | None = None) -> Tensor:
    """A fresh copy of ``t`` (broadcast to ``shape``) whose matrices are column-major."""
    shape = tuple(t._shape if shape is None else shape)
    if t._conj_bit or t._neg_bit:  # lazy conjugate/negative views are materialised first
        t = t.resolve_conj().resolve_neg()
    strides = colmajor_strides(shape)
    out = Tensor._make(Tensor._empty((_batch(shape),), t.dtype, t.device)._storage, shape,
                       strides, 0, t.dtype)
    if out.numel():
        _tensor_ops.copy_(out, t.expand(shape) if t._shape != shape else t)
    return out


def _batch(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _work(t: Tensor, elements: int) -> Tensor:
    return Tensor._empty((max(int(elements), 1),), t.dtype, t.device)


def _int32(shape: tuple, like: Tensor) -> Tensor:
    return Tensor._empty(shape, D.int32, like.device)


def lu_factor(a: Tensor, pivot: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """getrf on each matrix: (LU column-major, 1-based int32 pivots, int32 infos). Without
    pivoting the pivots are ``1..k`` (torch's convention)."""
    m, n = a._shape[-2:]
    k = min(m, n)
    lu = colmajor(a)
    batch = a._shape[:-2]
    piv, info = _int32((*batch, k), a), _int32(batch, a)
    if not pivot:
        import refimpl

        piv = refimpl.arange(1, k + 1, dtype=D.int32, device=a.device).expand(
            *batch, k).contiguous()
    if not lu.numel():
        _tensor_ops.fill_(info, 0)
        return lu, piv, info
    idx = _idx(a)
    h = _handle(idx)
    lwork = _fn(a, "getrf_buffer_size")(h, m, n, _ptr(lu), m)
    work = _work(a, lwork)
    size, isz = m * n * a.dtype.itemsize, 4
    getrf = _fn(a, "getrf")
    for b in range(_batch(batch)):
        getrf(h, m, n, _ptr(lu) + b * size, m, _ptr(work),
              _ptr(piv) + b * k * isz if pivot else 0, _ptr(info) + b * isz)
    return lu, piv, info


def lu_solve(lu: Tensor, piv: Tensor, b: Tensor, adjoint: bool) -> Tensor:
    """getrs: ``A^{-1} B`` (``A^{-H} B`` when ``adjoint``) for factors of ``lu``'s batch
    shape and a right-hand side already broadcast to it; the result is column-major."""
    n, nrhs = b._shape[-2:]
    x = colmajor(b)
    if not x.numel():
        return x
    plain = lu._stride == colmajor_strides(lu._shape) and not (lu._conj_bit or lu._neg_bit)
    lu = lu if plain else colmajor(lu)
    piv = piv.contiguous()
    h = _handle(_idx(b))
    info = _int32((1,), b)
    trans = _OP["C" if b.dtype.is_complex else "T"] if adjoint else _OP["N"]
    getrs = _fn(b, "getrs")
    asz, bsz = n * n * b.dtype.itemsize, n * nrhs * b.dtype.itemsize
    for i in range(_batch(b._shape[:-2])):
        getrs(h, trans, n, nrhs, _ptr(lu) + i * asz, n, _ptr(piv) + i * n * 4,
              _ptr(x) + i * bsz, n, _ptr(info))
    return x


def cholesky(a: Tensor, upper: bool) -> tuple[Tensor, Tensor]:
    """potrf on each matrix (reading its lower triangle, or its upper one when ``upper``):
    (factor column-major with the other triangle zeroed, int32 infos)."""
    n = a._shape[-1]
    batch = a._shape[:-2]
    fac, info = colmajor(a), _int32(batch, a)
    if not fac.numel():
        _tensor_ops.fill_(info, 0)
        return fac, info
    h = _handle(_idx(a))
    uplo = _UPPER if upper else _LOWER
    lwork = _fn(a, "potrf_buffer_size")(h, uplo, n, _ptr(fac), n)
    work = _work(a, lwork)
    potrf = _fn(a, "potrf")
    size = n * n * a.dtype.itemsize
    for b in range(_batch(batch)):
        potrf(h, uplo, n, _ptr(fac) + b * size, n, _ptr(work), lwork, _ptr(info) + b * 4)
    return fac, info


def potrs(fac: Tensor, b: Tensor, upper: bool) -> Tensor:
    """potrs: ``A^{-1} B`` for ``A = L L^H`` (``U^H U`` when ``upper``) from the factor's
    triangle, batches already broadcast to ``b``'s; column-major result."""
    n, nrhs = b._shape[-2:]
    x = colmajor(b)
    if not x.numel():
        return x
    fac = colmajor(fac)
    h = _handle(_idx(b))
    info = _int32((1,), b)
    fn = _fn(b, "potrs")
    isz = b.dtype.itemsize
    for i in range(_batch(b._shape[:-2])):
        fn(h, _UPPER if upper else _LOWER, n, nrhs, _ptr(fac) + i * n * n * isz, n,
           _ptr(x) + i * n * nrhs * isz, n, _ptr(info))
    return x


def potri(fac: Tensor, upper: bool) -> Tensor:
    """potri: ``A^{-1}`` from ``A``'s Cholesky factor; potri writes one triangle, the
    other is filled in as its conjugate transpose (column-major result)."""
    n = fac._shape[-1]
    inv = colmajor(fac)
    if not inv.numel():
        return inv
    h = _handle(_idx(fac))
    uplo = _UPPER if upper else _LOWER
    lwork = _fn(fac, "potri_buffer_size")(h, uplo, n, _ptr(inv), n)
    work, info = _work(fac, lwork), _int32((1,), fac)
    fn = _fn(fac, "potri")
    size = n * n * fac.dtype.itemsize
    for b in range(_batch(fac._shape[:-2])):
        fn(h, uplo, n, _ptr(inv) + b * size, n, _ptr(work), lwork, _ptr(info))
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        half = inv.triu(1) if upper else inv.tril(-1)
        full = (inv.triu() if upper else inv.tril()) + half.mT.conj()
        return colmajor(full)


def geqrf(a: Tensor) -> tuple[Tensor, Tensor]:
    """geqrf on each matrix: (R and the reflectors column-major, tau)."""
    m, n = a._shape[-2:]
    k = min(m, n)
    batch = a._shape[:-2]
    qr = colmajor(a)
    tau = Tensor._empty((*batch, k), a.dtype, a.device)
    if not qr.numel():
        return qr, tau
    h = _handle(_idx(a))
    lwork = _fn(a, "geqrf_buffer_size")(h, m, n, _ptr(qr), m)
    work, info = _work(a, lwork), _int32((1,), a)
    fn = _fn(a, "geqrf")
    isz = a.dtype.itemsize
    for b in range(_batch(batch)):
        fn(h, m, n, _ptr(qr) + b * m * n * isz, m, _ptr(tau) + b * k * isz, _ptr(work),
           lwork, _ptr(info))
    return qr, tau


def orgqr(v: Tensor, tau: Tensor, cols: int) -> Tensor:
    """orgqr/ungqr: the first ``cols`` columns of the product of the reflectors stored in
    ``v`` ``(..., m, >=k)`` and ``tau`` ``(..., k)``; column-major."""
    m = v._shape[-2]
    k = tau._shape[-1]
    batch = v._shape[:-2]
    shape = (*batch, m, cols)
    q = colmajor(v.narrow(-1, 0, cols) if v._shape[-1] >= cols else _padded(v, cols), shape)
    if not q.numel():
        return q
    tau = tau.resolve_conj().contiguous()
    h = _handle(_idx(v))
    lwork = _fn(v, "orgqr_buffer_size")(h, m, cols, k, _ptr(q), m, _ptr(tau))
    work, info = _work(v, lwork), _int32((1,), v)
    fn = _fn(v, "orgqr")
    isz = v.dtype.itemsize
    for b in range(_batch(batch)):
        fn(h, m, cols, k, _ptr(q) + b * m * cols * isz, m, _ptr(tau) + b * k * isz,
           _ptr(work), lwork, _ptr(info))
    return q


def _padded(v: Tensor, cols: int) -> Tensor:
    """``v`` with zero columns appended up to ``cols`` (orgqr overwrites them)."""
    out = Tensor._empty((*v._shape[:-1], cols), v.dtype, v.device)
    _tensor_ops.fill_(out, 0)
    _tensor_ops.copy_(out.narrow(-1, 0, v._shape[-1]), v)
    return out


def ormqr(v: Tensor, tau: Tensor, c: Tensor, left: bool, transpose: bool) -> Tensor:
    """ormqr/unmqr: ``op(Q) C`` (``C op(Q)`` when not ``left``), ``op`` the conjugate
    transpose when ``transpose``; batches already broadcast; column-major result."""
    m, n = c._shape[-2:]
    k = tau._shape[-1]
    out = colmajor(c)
    if not out.numel() or k == 0:
        return out
    v = colmajor(v)
    tau = tau.resolve_conj().contiguous()
    h = _handle(_idx(c))
    side = _LEFT if left else _RIGHT
    trans = _OP[("C" if c.dtype.is_complex else "T") if transpose else "N"]
    rows = v._shape[-2]
    lwork = _fn(c, "ormqr_buffer_size")(h, side, trans, m, n, k, _ptr(v), rows, _ptr(tau),
                                       _ptr(out), m)
    work, info = _work(c, lwork), _int32((1,), c)
    fn = _fn(c, "ormqr")
    isz = c.dtype.itemsize
    vsz = rows * v._shape[-1] * isz
    for b in range(_batch(c._shape[:-2])):
        fn(h, side, trans, m, n, k, _ptr(v) + b * vsz, rows, _ptr(tau) + b * k * isz,
           _ptr(out) + b * m * n * isz, m, _ptr(work), lwork, _ptr(info))
    return out


def trsm(a: Tensor, b: Tensor, upper: bool, unit: bool) -> Tensor:
    """cuBLAS trsm: ``X`` with ``A X = B`` for triangular ``A`` (batches already broadcast
    to ``b``'s); column-major result."""
    n, nrhs = b._shape[-2:]
    x = colmajor(b)
    if not x.numel():
        return x
    a = colmajor(a, (*b._shape[:-2], n, n))
    idx = _idx(b)
    cublas = _blas._lib()
    h = _blas.handle(idx, int(streams.current_stream(idx).cuda_stream))
    _driver.use_device(idx)
    alpha = np.array(1, dtype=b.dtype.np)
    fn = getattr(cublas, _PREFIX[b.dtype.name] + "trsm")
    isz = b.dtype.itemsize
    for i in range(_batch(b._shape[:-2])):
        fn(h, _LEFT, _UPPER if upper else _LOWER, _OP["N"], _UNIT if unit else _NON_UNIT,
           n, nrhs, alpha.ctypes.data, _ptr(a) + i * n * n * isz, n,
           _ptr(x) + i * n * nrhs * isz, n)
    return x


def ldl_factor(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """sytrf (lower, Bunch-Kaufman) on each symmetric matrix: (factor column-major with the
    upper triangle zeroed, LAPACK's int32 pivots, int32 infos)."""
    n = a._shape[-1]
    batch = a._shape[:-2]
    fac = colmajor(a)
    piv, info = _int32((*batch, n), a), _int32(batch, a)
    if not fac.numel():
        _tensor_ops.fill_(info, 0)
        return fac, piv, info
    h = _handle(_idx(a))
    lwork = _fn(a, "sytrf_buffer_size")(h, n, _ptr(fac), n)
    work = _work(a, lwork)
    fn = _fn(a, "sytrf")
    size = n * n * a.dtype.itemsize
    for b in range(_batch(batch)):
        fn(h, _LOWER, n, _ptr(fac) + b * size, n, _ptr(piv) + b * n * 4, _ptr(work), lwork,
           _ptr(info) + b * 4)
    return fac, piv, info


def ldl_solve(ld: Tensor, piv: Tensor, b: Tensor) -> Tensor:
    """sytrs (64-bit API) with ``ldl_factor``'s output, batches already broadcast to
    ``b``'s; column-major result. The pivots go in as int64, as the X API takes them."""
    n, nrhs = b._shape[-2:]
    x = colmajor(b)
    if not x.numel():
        return x
    ld = colmajor(ld, (*b._shape[:-2], n, n))
    piv = piv.long().expand(*b._shape[:-2], n).contiguous()
    h = _handle(_idx(b))
    dt = _blas._CUDA_TYPES[b.dtype.name]
    lib = _lib()
    dev_bytes, host_bytes = lib.xsytrs_buffer_size(h, _LOWER, n, nrhs, dt, _ptr(ld), n,
                                                   _ptr(piv), dt, _ptr(x), n)
    dev = Tensor._empty((max(int(dev_bytes), 1),), D.uint8, b.device)
    host = np.empty(max(int(host_bytes), 1), np.uint8)
    info = _int32((1,), b)
    isz = b.dtype.itemsize
    for i in range(_batch(b._shape[:-2])):
        lib.xsytrs(h, _LOWER, n, nrhs, dt, _ptr(ld) + i * n * n * isz, n,
                   _ptr(piv) + i * n * 8, dt, _ptr(x) + i * n * nrhs * isz, n, _ptr(dev),
                   int(dev_bytes), host.ctypes.data, int(host_bytes), _ptr(info))
    return x


# One thread per matrix replays getrf's row interchanges on the identity order. Pivots
# outside 1..m are skipped (torch's lu_unpack checks them separately).
_PERM_SOURCE = r"""
extern "C" __global__ void lu_permutation(const int* piv, long long* perm, long long batch,
                                          int k, int m) {
  long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  long long* p = perm + b * m;
  const int* v = piv + b * k;
  for (int i = 0; i < m; ++i) p[i] = i;
  for (int j = 0; j < k; ++j) {
    int q = v[j] - 1;
    if (q < 0 || q >= m) continue;
    long long t = p[j]; p[j] = p[q]; p[q] = t;
  }
}
"""


def lu_permutation(piv: Tensor, m: int) -> Tensor:
    """The int64 row order ``perm`` (``(P^T A)[i] = A[perm[i]]``) of 1-based int32 pivots
    ``(..., k)``, computed on the device by one NVRTC kernel."""
    k = piv._shape[-1]
    batch = _batch(piv._shape[:-1])
    perm = Tensor._empty((*piv._shape[:-1], m), D.int64, piv.device)
    if batch == 0 or m == 0:
        return perm
    piv = piv.to(D.int32).contiguous()
    idx = _idx(piv)
    fn = _nvrtc.get_function(_PERM_SOURCE, "lu_permutation", idx)
    block = 128
    grid = (batch + block - 1) // block
    _driver.launch(idx, fn, (grid, 1, 1), (block, 1, 1),
                   [ctypes.c_uint64(_ptr(piv)), ctypes.c_uint64(_ptr(perm)),
                    ctypes.c_longlong(batch), ctypes.c_int(k), ctypes.c_int(m)],
                   int(streams.current_stream(idx).cuda_stream))
    return perm
