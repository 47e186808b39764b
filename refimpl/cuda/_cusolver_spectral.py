"""Spectral decompositions and least squares on cuSOLVER (dense API, ``cusolverDn``).

Reached through ``nvmath.bindings.cusolverDn`` (the ``nvmath-python`` package, the same
NVIDIA bindings as cuBLAS in ``_blas.py``), imported on first use. The 64-bit generic
API is used where cuSOLVER has it (``Xsyevd``, ``Xgesvd``, ``Xgeev``, ``Xgeqrf``); the
Householder product of least squares is the typed ``<t>ormqr``/``<t>unmqr`` and the
triangular solve is cuBLAS ``<t>trsm``.

Layout: tensors are row-major, cuSOLVER column-major. A working copy of ``A`` is made
column-major (``A.mT`` made dense), so results written by cuSOLVER in column-major
order come back as tensors with column-major strides, as torch's do. Batches run one
matrix after the other on the current stream. Each call's ``info`` is read back (a
synchronisation, as in torch, which checks ``info`` too) and a failure raises torch's
error.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _blas, _driver, streams
from refimpl.cuda._lazy import _lazy_init

# cudaDataType_t of each dtype (library_types.h)
_TYPES = {"float32": 0, "float64": 1, "complex64": 4, "complex128": 5}
_REAL = {"float32": D.float32, "float64": D.float64, "complex64": D.float32,
         "complex128": D.float64}
_COMPLEX = {"float32": D.complex64, "float64": D.complex128, "complex64": D.complex64,
            "complex128": D.complex128}

_solver = None


def _lib():
    """``nvmath.bindings.cusolverDn``, imported on first use with a clear error if missing."""
    global _solver
    if _solver is None:
        try:
            from nvmath.bindings import cusolverDn
        except ImportError as exc:
            raise RuntimeError(
                "refimpl computes CUDA matrix decompositions with cuSOLVER through the "
                f"'nvmath-python' package, which could not be imported ({exc}); install it "
                "with `pip install nvmath-python`") from exc
        _solver = cusolverDn
    return _solver


# -- cuSOLVER handles (one per thread and device, bound to the current stream) -----------

class _Handles(threading.local):
    """This thread's cuSOLVER handles and 64-bit API params (device -> (handle, params))
    and the stream each handle is bound to."""

    def __init__(self) -> None:
        self.handles: dict[int, tuple[int, int]] = {}
        self.bound: dict[int, int] = {}


_handles = _Handles()


def handle(device: int) -> tuple[int, int]:
    """``(handle, params)`` of this thread for ``device``, bound to its current stream."""
    _lazy_init()
    lib = _lib()
    stream = int(streams.current_stream(device).cuda_stream)
    entry = _handles.handles.get(device)
    if entry is None:
        _driver.use_device(device)
        entry = _handles.handles[device] = (lib.create(), lib.create_params())
    if _handles.bound.get(device) != stream:
        lib.set_stream(entry[0], stream)
        _handles.bound[device] = stream
    return entry


def _workspace(device: int, nbytes: int) -> Tensor:
    """Device scratch from the caching allocator (on the current stream)."""
    from refimpl._device import device as _dev

    return Tensor._empty((max(int(nbytes), 1),), D.uint8, _dev("cuda", device))


# -- operands ----------------------------------------------------------------------------

def _ptr(t: Tensor) -> int:
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def _index(t: Tensor) -> int:
    return t._storage._data.device_index


def _batch(shape: tuple) -> int:
    return math.prod(shape[:-2])


def _column_major(A: Tensor) -> Tensor:
    """A dense copy of ``A`` whose memory is each matrix in column-major order."""
    return _blas.dense_copy(A.mT)


def _as_columns(buf: Tensor, shape: tuple) -> Tensor:
    """``buf``'s memory (column-major matrices) as a tensor of ``shape``."""
    rows, cols = shape[-2], shape[-1]
    strides = [0] * len(shape)
    strides[-2], strides[-1] = 1, rows
    step = rows * cols
    for i in range(len(shape) - 3, -1, -1):
        strides[i] = step
        step *= shape[i]
    return Tensor._make(buf._storage, tuple(shape), tuple(strides), buf._offset, buf.dtype)


def _empty(shape: tuple, dtype: D.dtype, device: int) -> Tensor:
    from refimpl._device import device as _dev

    return Tensor._empty(tuple(shape), dtype, _dev("cuda", device))


def _infos(info: Tensor) -> np.ndarray:
    return info.cpu()._np.reshape(-1)


def _conj(t: Tensor) -> Tensor:
    return t.conj_physical() if t.dtype.is_complex else t


def _raw(fn):
    """Run ``fn`` without recording autograd (the kernels build results from ops too)."""
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        return fn()


# -- eigh: Xsyevd --------------------------------------------------------------------------

def eigh(A: Tensor, uplo: str, compute_v: bool) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and, when ``compute_v``, eigenvectors of Hermitian
    matrices read from the ``uplo`` triangle."""
    return _raw(lambda: _eigh(A, uplo, compute_v))


def _eigh(A: Tensor, uplo: str, compute_v: bool) -> tuple[Tensor, Tensor]:
    lib = _lib()
    from nvmath.bindings import cublas, cusolver

    dev, name = _index(A), A.dtype.name
    n, batch = A._shape[-1], _batch(A._shape)
    values = _empty(A._shape[:-1], _REAL[name], dev)
    vectors_shape = A._shape if compute_v else (0,)
    if A.numel() == 0:
        return values, _empty(vectors_shape, A.dtype, dev)
    buf = _column_major(A)
    info = _empty((batch,), D.int32, dev)
    h, params = handle(dev)
    jobz = int(cusolver.EigMode.VECTOR if compute_v else cusolver.EigMode.NOVECTOR)
    fill = int(cublas.FillMode.LOWER if uplo == "L" else cublas.FillMode.UPPER)
    dt, rt = _TYPES[name], _TYPES[_REAL[name].name]
    dev_bytes, host_bytes = lib.xsyevd_buffer_size(h, params, jobz, fill, n, dt, _ptr(buf), n,
                                                   rt, _ptr(values), dt)
    work, host = _workspace(dev, dev_bytes), np.empty(max(host_bytes, 1), np.uint8)
    _driver.use_device(dev)
    isz, rsz = A.dtype.itemsize, values.dtype.itemsize
    for b in range(batch):
        lib.xsyevd(h, params, jobz, fill, n, dt, _ptr(buf) + b * n * n * isz, n, rt,
                   _ptr(values) + b * n * rsz, dt, _ptr(work), dev_bytes, host.ctypes.data,
                   host_bytes, _ptr(info) + 4 * b)
    for b, code in enumerate(_infos(info)):
        if code > 0:
            where = f"(Batch element {b}): " if A.dim() > 2 else ""
            raise _linalg_error(
                f"linalg.eigh: {where}The algorithm failed to converge because the input "
                f"matrix is ill-conditioned or has too many repeated eigenvalues (error code: "
                f"{code}).")
    vectors = _as_columns(buf, A._shape) if compute_v else _empty((0,), A.dtype, dev)
    return values, vectors


def _linalg_error(message: str) -> RuntimeError:
    from refimpl.ops.linalg_spectral import _LinAlgError

    return _LinAlgError(message)


# -- svd: Xgesvd ---------------------------------------------------------------------------

def svd(A: Tensor, full_matrices: bool, compute_uv: bool, driver: str | None
        ) -> tuple[Tensor, Tensor, Tensor]:
    """``(U, S, Vh)`` of ``A`` with cuSOLVER's ``gesvd`` (QR iteration); ``driver`` names
    another cuSOLVER algorithm, which refimpl does not bind."""
    if driver not in (None, "gesvd"):
        raise NotImplementedError(
            f"refimpl computes CUDA SVDs with cuSOLVER's gesvd only; driver={driver!r} "
            "(cusolverDn" + driver.capitalize() + ") is not bound")
    return _raw(lambda: _svd(A, full_matrices, compute_uv))


def _svd(A: Tensor, full_matrices: bool, compute_uv: bool) -> tuple[Tensor, Tensor, Tensor]:
    lib = _lib()
    dev, name = _index(A), A.dtype.name
    *lead, m, n = A._shape
    k, batch = min(m, n), _batch(A._shape)
    wide = m < n
    # cuSOLVER's gesvd needs rows >= columns: a wide A is decomposed as A^H
    rows, cols = (n, m) if wide else (m, n)
    job = ord("A") if full_matrices else ord("S")
    if not compute_uv:
        job = ord("N")
    ku = rows if full_matrices else k
    kv = cols if full_matrices else k
    S = _empty((*lead, k), _REAL[name], dev)
    if A.numel() == 0:
        return _empty_svd(A, S, full_matrices, compute_uv)
    buf = _conj(A).contiguous().clone() if wide else _column_major(A)
    U = _empty((batch, ku, rows) if compute_uv else (1,), A.dtype, dev)
    VT = _empty((batch, cols, kv) if compute_uv else (1,), A.dtype, dev)
    info = _empty((batch,), D.int32, dev)
    h, params = handle(dev)
    dt, rt = _TYPES[name], _TYPES[_REAL[name].name]
    ldu, ldvt = rows, (kv if compute_uv else 1)
    dev_bytes, host_bytes = lib.xgesvd_buffer_size(
        h, params, job, job, rows, cols, dt, _ptr(buf), rows, rt, _ptr(S), dt, _ptr(U), ldu,
        dt, _ptr(VT), ldvt, dt)
    work, host = _workspace(dev, dev_bytes), np.empty(max(host_bytes, 1), np.uint8)
    _driver.use_device(dev)
    isz, rsz = A.dtype.itemsize, S.dtype.itemsize
    u_step, v_step = (ku * rows, cols * kv) if compute_uv else (0, 0)
    for b in range(batch):
        lib.xgesvd(h, params, job, job, rows, cols, dt, _ptr(buf) + b * m * n * isz, rows, rt,
                   _ptr(S) + b * k * rsz, dt, _ptr(U) + b * u_step * isz, ldu, dt,
                   _ptr(VT) + b * v_step * isz, ldvt, dt, _ptr(work), dev_bytes,
                   host.ctypes.data, host_bytes, _ptr(info) + 4 * b)
    for b, code in enumerate(_infos(info)):
        if code > 0:
            where = f"(Batch element {b}): " if A.dim() > 2 else ""
            raise _linalg_error(
                f"linalg.svd: {where}The algorithm failed to converge because the input matrix "
                "is ill-conditioned or has too many repeated singular values (error code: "
                f"{code}).")
    if not compute_uv:
        return _empty((0,), A.dtype, dev), S, _empty((0,), A.dtype, dev)
    # U (rows x ku) and VT (kv x cols) are column-major: read row-major they are U^T, VT^T
    if wide:
        # A = B^H with B = U_B S VT_B: U_A = VT_B^H, Vh_A = U_B^H
        u = _conj(VT.reshape(*lead, cols, kv)).contiguous()
        v = _conj(U.reshape(*lead, ku, rows)).contiguous()
        return u, S, v
    return _as_columns(U, (*lead, m, ku)), S, _as_columns(VT, (*lead, kv, n))


def _empty_svd(A: Tensor, S: Tensor, full_matrices: bool, compute_uv: bool) -> tuple:
    """The SVD of an empty batch or of matrices with no rows or columns: the square
    factors of ``full_matrices`` are identities."""
    from refimpl.ops.factories import eye

    dev = _index(A)
    *lead, m, n = A._shape
    k = min(m, n)
    if not compute_uv:
        return _empty((0,), A.dtype, dev), S, _empty((0,), A.dtype, dev)
    if not full_matrices:
        return _empty((*lead, m, k), A.dtype, dev), S, _empty((*lead, k, n), A.dtype, dev)
    return (eye(m, dtype=A.dtype, device=A.device).expand(*lead, m, m).contiguous(), S,
            eye(n, dtype=A.dtype, device=A.device).expand(*lead, n, n).contiguous())


# -- eig: Xgeev ----------------------------------------------------------------------------

def eig(A: Tensor, compute_v: bool) -> tuple[Tensor, Tensor]:
    """Complex eigenvalues and (unit-norm) right eigenvectors of square matrices; real
    input is decomposed as complex."""
    lib = _lib()
    if not hasattr(lib, "xgeev"):
        raise NotImplementedError("refimpl's CUDA linalg.eig needs cuSOLVER's cusolverDnXgeev "
                                  "(CUDA 12.6 or newer), which this cuSOLVER lacks")
    return _raw(lambda: _eig(A, compute_v))


def _eig(A: Tensor, compute_v: bool) -> tuple[Tensor, Tensor]:
    lib = _lib()
    from nvmath.bindings import cusolver

    dev = _index(A)
    cdtype = _COMPLEX[A.dtype.name]
    n, batch = A._shape[-1], _batch(A._shape)
    W = _empty(A._shape[:-1], cdtype, dev)
    if A.numel() == 0:
        return W, _empty(A._shape if compute_v else (0,), cdtype, dev)
    buf = _column_major(A.to(cdtype))
    VR = _empty((batch, n, n) if compute_v else (1,), cdtype, dev)
    info = _empty((batch,), D.int32, dev)
    h, params = handle(dev)
    dt = _TYPES[cdtype.name]
    novec = int(cusolver.EigMode.NOVECTOR)
    jobvr = int(cusolver.EigMode.VECTOR) if compute_v else novec
    ldvr = n if compute_v else 1
    dev_bytes, host_bytes = lib.xgeev_buffer_size(h, params, novec, jobvr, n, dt, _ptr(buf), n,
                                                  dt, _ptr(W), dt, 0, 1, dt, _ptr(VR), ldvr, dt)
    work, host = _workspace(dev, dev_bytes), np.empty(max(host_bytes, 1), np.uint8)
    _driver.use_device(dev)
    isz = cdtype.itemsize
    step = n * n if compute_v else 0
    for b in range(batch):
        lib.xgeev(h, params, novec, jobvr, n, dt, _ptr(buf) + b * n * n * isz, n, dt,
                  _ptr(W) + b * n * isz, dt, 0, 1, dt, _ptr(VR) + b * step * isz, ldvr, dt,
                  _ptr(work), dev_bytes, host.ctypes.data, host_bytes, _ptr(info) + 4 * b)
    for b, code in enumerate(_infos(info)):
        if code > 0:
            where = f"(Batch element {b}): " if A.dim() > 2 else ""
            raise _linalg_error(f"linalg.eig: {where}The algorithm failed to converge because "
                                f"the input matrix is ill-conditioned or has too many repeated "
                                f"eigenvalues (error code: {code}).")
    vectors = _as_columns(VR, A._shape) if compute_v else _empty((0,), cdtype, dev)
    return W, vectors


# -- least squares ('gels'): Xgeqrf, <t>ormqr / <t>unmqr, cuBLAS <t>trsm --------------------

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_SCALAR = {"float32": np.float32, "float64": np.float64, "complex64": np.complex64,
           "complex128": np.complex128}


def gels(A: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
    """The least-squares solution of ``A X = B`` for full-rank ``A`` (QR; the
    minimum-norm solution through a QR of ``A^H`` when ``A`` is wide) and the raw
    residual rows ``(Q^H B)[n:]`` of a tall ``A``. ``A`` and ``B`` share their batch."""
    return _raw(lambda: _gels(A, B))


def _gels(A: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
    lib = _lib()
    from nvmath.bindings import cublas

    dev, name = _index(A), A.dtype.name
    *lead, m, n = A._shape
    nrhs, batch = B._shape[-1], _batch(A._shape)
    wide = m < n
    rows, cols = (n, m) if wide else (m, n)
    k = cols
    qr = _conj(A).contiguous().clone() if wide else _column_major(A)
    # right-hand sides, column-major, padded to `rows` rows (zeros below B when wide)
    rhs = _empty((batch, nrhs, rows), A.dtype, dev)
    rhs.fill_(0)
    rhs.narrow(-1, 0, m).copy_(B.reshape(batch, m, nrhs).mT)
    tau = _empty((batch, max(k, 1)), A.dtype, dev)
    info = _empty((batch,), D.int32, dev)
    h, params = handle(dev)
    dt, isz = _TYPES[name], A.dtype.itemsize
    dev_bytes, host_bytes = lib.xgeqrf_buffer_size(h, params, rows, cols, dt, _ptr(qr), rows, dt,
                                                   _ptr(tau), dt)
    work, host = _workspace(dev, dev_bytes), np.empty(max(host_bytes, 1), np.uint8)
    p = _PREFIX[name]
    mqr = getattr(lib, f"{p}ormqr" if p in "sd" else f"{p}unmqr")
    mqr_size = getattr(lib, f"{p}ormqr_buffer_size" if p in "sd" else f"{p}unmqr_buffer_size")
    trsm = getattr(_blas._lib(), f"{p}trsm")
    adjoint = int(cublas.Operation.C if A.dtype.is_complex else cublas.Operation.T)
    left, upper = int(cublas.SideMode.LEFT), int(cublas.FillMode.UPPER)
    plain, non_unit = int(cublas.Operation.N), int(cublas.DiagType.NON_UNIT)
    one = np.array(1, dtype=_SCALAR[name])
    lwork = mqr_size(h, left, plain if wide else adjoint, rows, nrhs, k, _ptr(qr), rows,
                     _ptr(tau), _ptr(rhs), rows)
    mwork = _workspace(dev, max(lwork, 1) * isz)
    bh = _blas.handle(dev)
    _driver.use_device(dev)
    for b in range(batch):
        a_p, t_p = _ptr(qr) + b * rows * cols * isz, _ptr(tau) + b * max(k, 1) * isz
        c_p, i_p = _ptr(rhs) + b * rows * nrhs * isz, _ptr(info) + 4 * b
        lib.xgeqrf(h, params, rows, cols, dt, a_p, rows, dt, t_p, dt, _ptr(work), dev_bytes,
                   host.ctypes.data, host_bytes, i_p)
        if wide:
            # A^H = QR: solve R^H y = B, then X = Q y
            trsm(bh, left, upper, adjoint, non_unit, cols, nrhs, one.ctypes.data, a_p, rows,
                 c_p, rows)
            mqr(h, left, plain, rows, nrhs, k, a_p, rows, t_p, c_p, rows, _ptr(mwork), lwork,
                i_p)
        else:
            # A = QR: C = Q^H B, then solve R X = C[:n]
            mqr(h, left, adjoint, rows, nrhs, k, a_p, rows, t_p, c_p, rows, _ptr(mwork), lwork,
                i_p)
            trsm(bh, left, upper, plain, non_unit, cols, nrhs, one.ctypes.data, a_p, rows,
                 c_p, rows)
    if (_infos(info) < 0).any():
        raise RuntimeError("torch.linalg.lstsq: cuSOLVER reported an invalid argument")
    solved = rhs.mT.reshape(*lead, rows, nrhs)
    solution = solved.narrow(-2, 0, n).contiguous()
    residual_rows = solved.narrow(-2, n, rows - n) if not wide else solved.narrow(-2, 0, 0)
    return solution, residual_rows
