"""Matrix products on cuBLAS: handles, workspaces, math modes, GEMM and dot products.

cuBLAS is reached through ``nvmath.bindings.cublas`` (the ``nvmath-python`` package).
Those bindings are NVIDIA's own and kept in step with each CUDA release; they are a
thin, one-call-per-function layer over the C API (integers for handles and device
addresses, no objects of their own), and they load ``libcublas`` directly, so nothing
beyond the cuBLAS libraries is needed: no CUDA runtime wrapper, no second memory
manager. They are imported only when the first CUDA product runs, so CPU-only
installs never load them.

Conventions (the same as torch's CUDA backend):

* One cuBLAS handle per (thread, device), created on first use on the device's
  primary context and bound to the current stream before each call (creating a
  handle is not allowed while a stream captures a CUDA graph, binding one is); one
  workspace per (thread, device, stream), taken from refimpl's caching allocator on
  that stream, so a workspace first needed inside a capture comes from the graph's
  private pool (size from
  ``CUBLAS_WORKSPACE_CONFIG``, torch's format ``:SIZE_KiB:COUNT[:SIZE_KiB:COUNT...]``,
  default ``:4096:8`` on compute capability 9.0 and newer, ``:4096:2:16:8`` before).
* Math modes, set on the handle for every call: float32 and complex64 products use
  TF32 tensor cores exactly when ``refimpl.backends.cuda.matmul.allow_tf32`` is True;
  float16 / bfloat16 products accumulate in float32 and forbid reduced-precision
  reductions when ``allow_fp16_reduced_precision_reduction`` /
  ``allow_bf16_reduced_precision_reduction`` is False.
* Tensors are row-major; cuBLAS is column-major. ``C = A @ B`` is computed as
  ``C^T = B^T A^T``. A matrix whose rows or columns are dense (a transposed view
  included) goes in as it is, with the transpose flag; only strides no BLAS call
  accepts (both strides > 1, overlapping or zero strides) cost a contiguous copy.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _device, _driver, _tensor_ops, streams
from refimpl.cuda._lazy import _lazy_init

_INT_MAX = 2**31 - 1

# cudaDataType_t values (library_types.h): the ABI constants every CUDA library shares.
_CUDA_TYPES = {"float16": 2, "bfloat16": 14, "float32": 0, "float64": 1, "complex64": 4,
               "complex128": 5}
# The scalar type of alpha/beta (the compute type's) for each operand dtype.
_SCALAR_NP = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32,
              "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}
_BLAS_DTYPES = frozenset(_CUDA_TYPES)

_cublas = None


def _lib():
    """``nvmath.bindings.cublas``, imported on first use with a clear error if missing."""
    global _cublas
    if _cublas is None:
        try:
            from nvmath.bindings import cublas
        except ImportError as exc:
            raise RuntimeError(
                "refimpl computes CUDA matrix products with cuBLAS through the "
                "'nvmath-python' package, which could not be imported "
                f"({exc}); install it with `pip install nvmath-python`") from exc
        _cublas = cublas
    return _cublas


def blas_dtype(dtype: D.dtype) -> bool:
    """Whether cuBLAS multiplies tensors of ``dtype`` (floating and complex types)."""
    return dtype.name in _BLAS_DTYPES


# -- handles and workspaces --------------------------------------------------------------

class _Handles(threading.local):
    """This thread's handles (device -> handle), the stream each is bound to, and the
    workspaces ((device, stream) -> workspace tensor or None)."""

    def __init__(self) -> None:
        self.handles: dict[int, int] = {}
        self.bound: dict[int, int] = {}
        self.workspaces: dict[tuple[int, int], Tensor | None] = {}


_handles = _Handles()


def workspace_size(device: int) -> int:
    """Bytes of cuBLAS workspace per handle (``CUBLAS_WORKSPACE_CONFIG`` as torch reads it)."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if config is None:
        major = _driver.device_attribute(device, "COMPUTE_CAPABILITY_MAJOR")
        config = ":4096:8" if major >= 9 else ":4096:2:16:8"
    parts = [p for p in config.split(":") if p]
    try:
        pairs = [(int(parts[i]), int(parts[i + 1])) for i in range(0, len(parts) - 1, 2)]
    except ValueError:
        pairs = []
    return sum(size * 1024 * count for size, count in pairs)


def handle(device: int | None = None, stream: int | None = None) -> int:
    """This thread's cuBLAS handle for ``device``, bound to ``stream`` (current ones by
    default) with that stream's workspace."""
    _lazy_init()
    idx = _device._tls_device() if device is None else int(device)
    if stream is None:
        stream = streams.current_stream_handle(idx)
    stream = int(stream)
    tls = _handles
    h = tls.handles.get(idx)
    if h is None:
        _driver.use_device(idx)
        h = tls.handles[idx] = _lib().create()
    if tls.bound.get(idx) != stream:
        cublas = _lib()
        cublas.set_stream(h, stream)
        key = (idx, stream)
        if key not in tls.workspaces:
            nbytes = workspace_size(idx)
            ws = None
            if nbytes:
                from refimpl._device import device as _dev

                ws = Tensor._empty((nbytes,), D.uint8, _dev("cuda", idx))
            tls.workspaces[key] = ws
        ws = tls.workspaces[key]
        if ws is not None:
            cublas.set_workspace(h, ws._storage._data.ptr, ws.numel())
        tls.bound[idx] = stream
    return h


def version() -> int:
    """The loaded cuBLAS library's version (``cublasGetVersion``: major*10000+minor*100+patch)."""
    return int(_lib().get_version(handle()))


def current_blas_handle() -> int:
    """The cuBLAS handle (a ``cublasHandle_t`` address) of the current device and stream."""
    return handle()


def _set_math_mode(cublas, h: int, dtype: D.dtype) -> None:
    global _MATMUL_FLAGS
    matmul = _MATMUL_FLAGS
    if matmul is None:
        from refimpl.backends import cuda as flags

        matmul = _MATMUL_FLAGS = flags.matmul
    math = _MATH or _math(cublas)
    mode = math[0]
    name = dtype.name
    if name in ("float32", "complex64") and matmul.allow_tf32:
        mode = math[1]
    elif (name == "float16" and not matmul.allow_fp16_reduced_precision_reduction) or (
            name == "bfloat16" and not matmul.allow_bf16_reduced_precision_reduction):
        mode = math[2]
    if _math_modes.get(h) != mode:  # the handle keeps its mode: set it when it changes
        cublas.set_math_mode(h, mode)
        _math_modes[h] = mode


_MATMUL_FLAGS = None  # refimpl.backends.cuda.matmul, bound on first use
_MATH: tuple = ()  # (default, TF32, default without reduced-precision reductions) as ints
_OPS: dict = {}  # "N"/"T" -> cuBLAS operation as an int


def _math(cublas) -> tuple:
    global _MATH
    m = cublas.Math
    _MATH = (int(m.DEFAULT_MATH), int(m.TF32_TENSOR_OP_MATH),
             int(m.DEFAULT_MATH | m.DISALLOW_REDUCED_PRECISION_REDUCTION))
    return _MATH


def _ops(cublas) -> dict:
    _OPS.update(N=int(cublas.Operation.N), T=int(cublas.Operation.T))
    return _OPS


_math_modes: dict[int, int] = {}  # cuBLAS handle -> the math mode last set on it


def _compute_type(cublas, dtype: D.dtype) -> int:
    if dtype.name in ("float64", "complex128"):
        return int(cublas.ComputeType.COMPUTE_64F)
    return int(cublas.ComputeType.COMPUTE_32F)


# -- operands ----------------------------------------------------------------------------

def _ptr(t: Tensor) -> int:
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def dense_copy(t: Tensor) -> Tensor:
    """A contiguous copy of a CUDA tensor (raw: no autograd, no version bump on ``t``)."""
    out = Tensor._empty(t._shape, t.dtype, t.device)
    _tensor_ops.copy_(out, t)
    return out


def _layout(rows: int, cols: int, srow: int, scol: int) -> tuple[str, int] | None:
    """('N', ld) for dense rows, ('T', ld) for dense columns, None when BLAS cannot read it.

    A size-1 dimension's stride is free, so it is chosen to make the matrix legal.
    """
    if scol == 1 or cols == 1:
        ld = srow if rows > 1 else max(1, cols)
        if ld >= max(1, cols) and (scol == 1 or cols == 1):
            return "N", ld
    if srow == 1 or rows == 1:
        ld = scol if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            return "T", ld
    return None


def _matrix(t: Tensor) -> tuple[Tensor, str, int, int]:
    """(tensor, op, ld, batch stride) of a matrix or a batch of matrices for cuBLAS."""
    rows, cols = t._shape[-2], t._shape[-1]
    srow, scol = t._stride[-2], t._stride[-1]
    lay = _layout(rows, cols, srow, scol)
    batch_stride = t._stride[0] if t.dim() == 3 else 0
    if t.dim() == 3 and t._shape[0] > 1 and batch_stride < 0:
        lay = None
    if lay is None:
        t = dense_copy(t)
        lay = ("N", max(1, cols))
        batch_stride = rows * cols
    return t, lay[0], lay[1], batch_stride


def _scalars(dtype: D.dtype, alpha, beta) -> tuple[np.ndarray, np.ndarray]:
    kind = _SCALAR_NP[dtype.name]
    if alpha == 1 and beta == 0 and type(alpha) is int and type(beta) is int:
        pair = _UNIT_SCALARS.get(kind)
        if pair is None:  # read-only: cuBLAS reads host scalars during the call only
            pair = _UNIT_SCALARS[kind] = (_frozen(np.array(1, dtype=kind)),
                                          _frozen(np.array(0, dtype=kind)))
        return pair
    return np.array(alpha, dtype=kind), np.array(beta, dtype=kind)


_UNIT_SCALARS: dict = {}  # numpy scalar type -> (1, 0) as read-only host scalars


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# -- GEMM ----------------------------------------------------------------------------------

def gemm(out: Tensor, a: Tensor, b: Tensor, *, alpha=1, beta=0) -> Tensor:
    """``out = alpha * a @ b + beta * out`` for matrices (2-D) or batches (3-D).

    ``out`` must be a contiguous CUDA tensor of the product's shape (with ``beta == 0``
    its contents are never read, NaN included); ``a`` and ``b`` share its dtype and
    device and have any strides. Batches of ``a`` and ``b`` may broadcast (batch
    stride 0).
    """
    batched = out.dim() == 3
    m, n = out._shape[-2], out._shape[-1]
    k = a._shape[-1]
    if out.numel() == 0:
        return out
    idx = out._storage._data.device_index
    stream = streams.current_stream_handle(idx)
    cublas = _cublas or _lib()
    tls = _handles
    h = tls.handles.get(idx)
    if h is None or tls.bound.get(idx) != stream:  # else: bound to this stream already
        h = handle(idx, stream)
    if k == 0:
        # no products to sum: cuBLAS scales C by beta (beta == 0 writes zeros); the
        # empty operands are replaced by legal dummies
        if beta == 0:
            _tensor_ops.fill_(out, 0)
            return out
        ta = tb = cublas.Operation.N
        a, lda, sa, b, ldb, sb = out, 1, 0, out, max(1, n), 0
    else:
        a, op_a, lda, sa = _matrix(a)
        b, op_b, ldb, sb = _matrix(b)
        ops = _OPS or _ops(cublas)
        ta, tb = ops[op_a], ops[op_b]
    al, be = _scalars(out.dtype, alpha, beta)
    dt = _CUDA_TYPES[out.dtype.name]
    compute = _compute_type(cublas, out.dtype)
    algo = -1  # CUBLAS_GEMM_DEFAULT
    _driver.use_device(idx)
    _set_math_mode(cublas, h, out.dtype)
    big = max(m, n, k, lda, ldb) > _INT_MAX
    # column-major C^T (n x m, ldc n) = op(B)^T-view (n x k) @ op(A)^T-view (k x m)
    if batched:
        batch = out._shape[0]
        fn = cublas.gemm_strided_batched_ex_64 if big else cublas.gemm_strided_batched_ex
        fn(h, tb, ta, n, m, k, al.ctypes.data, _ptr(b), dt, ldb, sb, _ptr(a), dt,
           lda, sa, be.ctypes.data, _ptr(out), dt, n, m * n, batch, compute, algo)
    else:
        fn = cublas.gemm_ex_64 if big else cublas.gemm_ex
        fn(h, tb, ta, n, m, k, al.ctypes.data, _ptr(b), dt, ldb, _ptr(a), dt, lda,
           be.ctypes.data, _ptr(out), dt, n, compute, algo)
    return out


def dot(out: Tensor, x: Tensor, y: Tensor, *, conj_x: bool = False) -> Tensor:
    """``out[()] = sum(x * y)`` (``conj(x)`` when ``conj_x``) for 1-D tensors, on device.

    The result is written straight into the 0-dim CUDA tensor ``out`` (device pointer
    mode), accumulated in float32 for float16/bfloat16 as torch does.
    """
    idx = out._storage._data.device_index
    n = x._shape[0]
    if n == 0:
        _tensor_ops.fill_(out, 0)
        return out
    stream = streams.current_stream_handle(idx)
    cublas = _lib()
    h = handle(idx, stream)
    xs, ys = x._stride[0], y._stride[0]
    if xs <= 0 and n > 1:
        x, xs = dense_copy(x), 1
    if ys <= 0 and n > 1:
        y, ys = dense_copy(y), 1
    dt = _CUDA_TYPES[out.dtype.name]
    execution = _CUDA_TYPES["float32"] if out.dtype.itemsize <= 2 else dt
    _driver.use_device(idx)
    _set_math_mode(cublas, h, out.dtype)
    cublas.set_pointer_mode(h, int(cublas.PointerMode.DEVICE))
    try:
        fn = cublas.dotc_ex if conj_x and out.dtype.is_complex else cublas.dot_ex
        fn(h, n, _ptr(x), dt, max(xs, 1), _ptr(y), dt, max(ys, 1), _ptr(out), dt, execution)
    finally:
        cublas.set_pointer_mode(h, int(cublas.PointerMode.HOST))
    return out
