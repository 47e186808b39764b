"""Matrix products (spec TENSOR-307): mm, bmm, mv, dot, vdot, addmm, addmv, baddbmm,
addbmm, matmul, outer, trace; re-exports einsum/tensordot/inner (``einsum``) and
det/inverse/cross (``linalg_functions``).

The CPU kernels call numpy (``np.matmul`` reaches BLAS for float and complex; integer
products use numpy's own loops, as torch's CPU also multiplies integers). The CUDA
kernels call cuBLAS (``refimpl.cuda._blas``): GEMM for mm/bmm/mv and the fused
``beta * input + alpha * product`` ops (input broadcast into the output, then the GEMM
accumulates onto it, as torch does), dot/dotc for dot/vdot; integer and bool products
raise torch's CUDA "not implemented" errors. Operands of
``mm``/``bmm``/``mv``/``dot`` must share a dtype (no promotion), with torch's messages.
``matmul`` is composite, as in torch: it routes to dot, mv, mm or bmm by the operands'
dims, folding batch dims into ``mm`` when the left operand is batched and the right one
is not, and broadcasting batch dims otherwise; on CUDA, where no graph is recorded, it is
one GEMM on strided views (``refimpl.cuda._matmul_direct``).
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops._helpers import broadcast_shapes, np_result, sum_to, to_np
from refimpl.ops._registry import TensorSpec, defop

_CPP_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int",
    "int32": "int", "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float32": "float", "float64": "double", "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def _tn(x) -> str:
    return D.type_name(x.dtype if isinstance(x, Tensor) else x)


def _shape_str(x: Tensor) -> str:
    return "x".join(str(s) for s in x._shape)


def _h(x: Tensor) -> Tensor:
    """The conjugate transpose of a matrix (of the last two dims)."""
    xt = x.transpose(-2, -1)
    return xt.conj() if x.dtype.is_complex else xt


def _conj(x: Tensor) -> Tensor:
    return x.conj() if x.dtype.is_complex else x


def _no_bool(kernel: str, x: Tensor) -> None:
    if x.dtype is D.bool_:
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


def _matmul_np(a: Tensor, b: Tensor, dtype: D.dtype) -> np.ndarray:
    """``a @ b`` in numpy (BLAS for floats); float16/bfloat16 go through float32."""
    return np_result(np.matmul(to_np(a, dtype), to_np(b, dtype)), dtype)


# -- CUDA: cuBLAS (refimpl.cuda._blas) ----------------------------------------------------

def _blas():
    from refimpl.cuda import _blas

    return _blas


def _cuda_check(kernel: str, x: Tensor) -> None:
    """torch's CUDA products run on cuBLAS: integer and bool dtypes are not implemented."""
    if not _blas().blas_dtype(x.dtype):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_tn(x)}\'')


def _cuda_out(shape: tuple, like: Tensor) -> Tensor:
    return Tensor._empty(shape, like.dtype, like._storage.device)


def _column(x: Tensor) -> Tensor:
    """A 1-D tensor seen as a one-column matrix (same storage, no copy)."""
    return Tensor._make(x._storage, (x._shape[0], 1), (x._stride[0], 1), x._offset, x.dtype)


def _fused_cuda(kernel: str, input: Tensor, a: Tensor, b: Tensor, shape: tuple, beta, alpha,
                out_shape: tuple | None = None) -> Tensor:
    """``beta * input + alpha * a @ b`` as cuBLAS does it: ``input`` is broadcast into the
    output first and the GEMM accumulates onto it (not read at all when beta == 0)."""
    _cuda_check(kernel, a)
    dt = a.dtype
    out = _cuda_out(out_shape or shape, a)
    beta, alpha = _scalar(beta, dt), _scalar(alpha, dt)
    if beta != 0 and out.numel():
        from refimpl.cuda import _tensor_ops

        _tensor_ops.copy_(out, input)
    view = out if out_shape is None else Tensor._make(out._storage, shape, (1, 1), 0, dt)
    _blas().gemm(view, a, b, alpha=alpha, beta=beta)
    return out


# -- mm, bmm, mv, dot, vdot ------------------------------------------------------------

def _check_mm(a: Tensor, b: Tensor) -> None:
    if a.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if b.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a._shape[1] != b._shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(a)} and "
                           f"{_shape_str(b)})")
    if a.dtype is not b.dtype:
        raise RuntimeError("expected m1 and m2 to have the same dtype, but got: "
                           f"{_CPP_NAMES[a.dtype.name]} != {_CPP_NAMES[b.dtype.name]}")


def _mm_meta(input, mat2) -> TensorSpec:
    _check_mm(input, mat2)
    return TensorSpec((input._shape[0], mat2._shape[1]), input.dtype, input.device)


def _mm_cpu(input, mat2) -> np.ndarray:
    _check_mm(input, mat2)
    _no_bool("addmm_impl_cpu_", input)
    return _matmul_np(input, mat2, input.dtype)


def _mm_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    need = ctx.needs_input_grad
    return (grad.mm(_h(b)) if need[0] else None, _h(a).mm(grad) if need[1] else None)


def _bilinear_jvp(op_name: str):
    """jvp of a product that is linear in each operand: op(ta, b) + op(a, tb)."""
    def jvp(ctx, ta, tb, *_):
        a, b = ctx.args[0], ctx.args[1]
        op = globals()[op_name]
        parts = [op(ta, b) if ta is not None else None, op(a, tb) if tb is not None else None]
        parts = [p for p in parts if p is not None]
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]
    return jvp


def _mm_cuda(input, mat2) -> Tensor:
    _check_mm(input, mat2)
    _cuda_check("addmm_cuda", input)
    return _blas().gemm(_cuda_out((input._shape[0], mat2._shape[1]), input), input, mat2)


mm = defop("mm", meta=_mm_meta, cpu=_mm_cpu, cuda=_mm_cuda, backward=_mm_backward,
           jvp=_bilinear_jvp("mm"), extra={"device_check": ("mm", ("self", "mat2"))})


def _check_bmm(a: Tensor, b: Tensor) -> None:
    if a.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    want = [a._shape[0], a._shape[2]]
    if list(b._shape[:2]) != want:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: "
                           f"{want} but got: {list(b._shape[:2])}.")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {_tn(a)} but found {_tn(b)}")


def _bmm_meta(input, mat2) -> TensorSpec:
    _check_bmm(input, mat2)
    return TensorSpec((*input._shape[:2], mat2._shape[2]), input.dtype, input.device)


def _bmm_cpu(input, mat2) -> np.ndarray:
    _check_bmm(input, mat2)
    _no_bool("bmm", input)
    return _matmul_np(input, mat2, input.dtype)


def _bmm_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    need = ctx.needs_input_grad
    return (grad.bmm(_h(b)) if need[0] else None, _h(a).bmm(grad) if need[1] else None)


def _bmm_cuda(input, mat2) -> Tensor:
    _check_bmm(input, mat2)
    _cuda_check("baddbmm_cuda", input)  # torch's bmm runs baddbmm's kernel
    out = _cuda_out((*input._shape[:2], mat2._shape[2]), input)
    return _blas().gemm(out, input, mat2)


bmm = defop("bmm", meta=_bmm_meta, cpu=_bmm_cpu, cuda=_bmm_cuda, backward=_bmm_backward,
            jvp=_bilinear_jvp("bmm"), extra={"device_check": ("bmm", ("self", "mat2"))})


def _check_mv(self_dtype, mat: Tensor, vec: Tensor, self_shape=None) -> None:
    if mat.dim() != 2 or vec.dim() != 1:
        n_self = 1 if self_shape is None else len(self_shape)
        raise RuntimeError("vector + matrix @ vector expected, got "
                           f"{n_self}, {mat.dim()}, {vec.dim()}")
    rows = mat._shape[0]
    got = (rows,) if self_shape is None else self_shape
    if mat._shape[1] != vec._shape[0] or (got != (rows,) and got not in ((1,), ())):
        raise RuntimeError(f"size mismatch, got input ({', '.join(map(str, got))}), mat "
                           f"({_shape_str(mat)}), vec ({vec._shape[0]})")
    if not (self_dtype is mat.dtype is vec.dtype):
        raise RuntimeError("addmv input tensors must have the same dtype, but got "
                           f"{_tn(self_dtype)}, {_tn(mat)}, and {_tn(vec)}")


def _mv_meta(input, vec) -> TensorSpec:
    _check_mv(vec.dtype, input, vec)
    return TensorSpec((input._shape[0],), input.dtype, input.device)


def _mv_cpu(input, vec) -> np.ndarray:
    _check_mv(vec.dtype, input, vec)
    _no_bool("addmv_impl_cpu", input)
    return _matmul_np(input, vec, input.dtype)


def _mv_backward(ctx, grad):
    mat, vec = ctx.args[0], ctx.args[1]
    need = ctx.needs_input_grad
    return (grad.unsqueeze(1) * _conj(vec).unsqueeze(0) if need[0] else None,
            _h(mat).mv(grad) if need[1] else None)


# each operand's gradient reads only the other operand
_CROSS = {"save_needs": {0: (1,), 1: (0,)}}
_FUSED = {"save_needs": {1: (2,), 2: (1,)}}
def _mv_cuda(input, vec) -> Tensor:
    _check_mv(vec.dtype, input, vec)
    _cuda_check("addmv_impl_cuda", input)
    rows = input._shape[0]
    out = _cuda_out((rows,), input)
    view = Tensor._make(out._storage, (rows, 1), (1, 1), 0, out.dtype)
    _blas().gemm(view, input, _column(vec))
    return out


mv = defop("mv", meta=_mv_meta, cpu=_mv_cpu, cuda=_mv_cuda, backward=_mv_backward,
           jvp=_bilinear_jvp("mv"), extra=_CROSS)


def _check_dot(a: Tensor, b: Tensor) -> None:
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError("dot : expected both vectors to have same dtype, but found "
                           f"{_tn(a)} and {_tn(b)}")
    if a._shape != b._shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a._shape[0]}] and src [{b._shape[0]}] "
            "to have the same number of elements, but got "
            f"{a._shape[0]} and {b._shape[0]} elements respectively")


def _dot_meta(input, other) -> TensorSpec:
    _check_dot(input, other)
    return TensorSpec((), input.dtype, input.device)


def _dot_cpu(conj_first: bool):
    def kernel(input, other) -> np.ndarray:
        _check_dot(input, other)
        _no_bool("dot", input)
        a = to_np(input, input.dtype)
        return np_result(np.vdot(a, to_np(other, input.dtype)) if conj_first else
                         np.dot(a, to_np(other, input.dtype)), input.dtype)
    return kernel


def _dot_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    return grad * _conj(b), grad * _conj(a)


def _vdot_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    return _conj(grad) * b, grad * a


def _dot_cuda(conj_first: bool):
    def kernel(input, other) -> Tensor:
        _check_dot(input, other)
        _cuda_check("dot", input)  # torch names vdot's kernel "dot" too
        return _blas().dot(_cuda_out((), input), input, other, conj_x=conj_first)
    return kernel


dot = defop("dot", meta=_dot_meta, cpu=_dot_cpu(False), cuda=_dot_cuda(False),
            backward=_dot_backward, jvp=_bilinear_jvp("dot"), extra=_CROSS)
vdot = defop("vdot", meta=_dot_meta, cpu=_dot_cpu(True), cuda=_dot_cuda(True),
             backward=_vdot_backward, jvp=_bilinear_jvp("vdot"), extra=_CROSS)


# -- addmm, addmv, baddbmm, addbmm -------------------------------------------------------

def _scalar(value, dtype: D.dtype):
    """A Python scalar (alpha, beta) converted as torch converts it to ``dtype``."""
    return int(value) if dtype.category <= 1 else value


def _expand_check(input: Tensor, shape: tuple) -> None:
    """torch's error when ``input`` cannot be expanded to ``shape`` (addmm's ``self``)."""
    ishape = input._shape
    if len(ishape) > len(shape):
        raise RuntimeError(
            f"expand(torch.{D.legacy_type_name(input.dtype)}{{{list(ishape)}}}, size={list(shape)}): "
            f"the number of sizes provided ({len(shape)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({len(ishape)})")
    for k in range(1, len(ishape) + 1):
        if ishape[-k] not in (1, shape[-k]):
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[-k]}) must match the existing size "
                f"({ishape[-k]}) at non-singleton dimension {len(shape) - k}.  Target sizes: "
                f"{list(shape)}.  Tensor sizes: {list(ishape)}")


def _addmm_check(input, mat1, mat2) -> tuple:
    if mat1.dim() != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {mat1.dim()}-D tensor")
    if mat2.dim() != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {mat2.dim()}-D tensor")
    if input.dtype is not mat2.dtype:
        raise RuntimeError("self and mat2 must have the same dtype, but got "
                           f"{_tn(input)} and {_tn(mat2)}")
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError("mat1 and mat2 must have the same dtype, but got "
                           f"{_tn(mat1)} and {_tn(mat2)}")
    if mat1._shape[1] != mat2._shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(mat1)} and "
                           f"{_shape_str(mat2)})")
    shape = (mat1._shape[0], mat2._shape[1])
    _expand_check(input, shape)
    return shape


def _fused(product: np.ndarray, input: Tensor, dtype: D.dtype, beta, alpha) -> np.ndarray:
    """``beta * input + alpha * product``; beta == 0 ignores input (NaN included)."""
    beta, alpha = _scalar(beta, dtype), _scalar(alpha, dtype)
    with np.errstate(all="ignore"):
        out = product if alpha == 1 else product * alpha
        if beta != 0:
            inp = to_np(input, dtype)
            out = out + (inp if beta == 1 else inp * beta)
        return np_result(np.broadcast_to(out, product.shape), dtype)


def _addmm_meta(input, mat1, mat2, *, beta=1, alpha=1) -> TensorSpec:
    return TensorSpec(_addmm_check(input, mat1, mat2), mat1.dtype, mat1.device)


def _addmm_cpu(input, mat1, mat2, *, beta=1, alpha=1) -> np.ndarray:
    _addmm_check(input, mat1, mat2)
    _no_bool("addmm_impl_cpu_", mat1)
    dt = mat1.dtype
    prod = np.matmul(to_np(mat1, dt), to_np(mat2, dt))
    return _fused(prod, input, dt, beta, alpha)


def _times(g: Tensor, s) -> Tensor:
    if isinstance(s, complex):
        s = s.conjugate()
    return g if s == 1 else g * s


def _addmm_backward(ctx, grad):
    input, m1, m2 = ctx.args[:3]
    beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
    need = ctx.needs_input_grad
    return (sum_to(_times(grad, beta), input.shape) if need[0] else None,
            _times(grad.mm(_h(m2)), alpha) if need[1] else None,
            _times(_h(m1).mm(grad), alpha) if need[2] else None)


def _fused_jvp(product_name: str):
    def jvp(ctx, t_in, t1, t2, *_):
        _, m1, m2 = ctx.args[:3]
        beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
        prod = globals()[product_name]
        out = None
        for part in (t1 is not None and prod(t1, m2), t2 is not None and prod(m1, t2)):
            if part is not False:
                part = part * alpha if alpha != 1 else part
                out = part if out is None else out + part
        if t_in is not None and beta != 0:
            out = t_in * beta if out is None else out + t_in * beta
        return out.expand(ctx.outputs[0].shape) if out is not None else None
    return jvp


def _addmm_cuda(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor:
    shape = _addmm_check(input, mat1, mat2)
    return _fused_cuda("addmm_cuda", input, mat1, mat2, shape, beta, alpha)


addmm = defop("addmm", meta=_addmm_meta, cpu=_addmm_cpu, cuda=_addmm_cuda,
              backward=_addmm_backward, jvp=_fused_jvp("mm"),
              extra={**_FUSED, "device_check": ("addmm", ("self", "mat1", "mat2"))})


def _addmv_meta(input, mat, vec, *, beta=1, alpha=1) -> TensorSpec:
    _check_mv(input.dtype, mat, vec, input._shape)
    return TensorSpec((mat._shape[0],), mat.dtype, mat.device)


def _addmv_cpu(input, mat, vec, *, beta=1, alpha=1) -> np.ndarray:
    _check_mv(input.dtype, mat, vec, input._shape)
    _no_bool("addmv_impl_cpu", mat)
    return _fused(np.matmul(to_np(mat, mat.dtype), to_np(vec, mat.dtype)), input, mat.dtype,
                  beta, alpha)


def _addmv_backward(ctx, grad):
    input, mat, vec = ctx.args[:3]
    beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
    need = ctx.needs_input_grad
    return (sum_to(_times(grad, beta), input.shape) if need[0] else None,
            _times(grad.unsqueeze(1) * _conj(vec).unsqueeze(0), alpha) if need[1] else None,
            _times(_h(mat).mv(grad), alpha) if need[2] else None)


def _addmv_cuda(input, mat, vec, *, beta=1, alpha=1) -> Tensor:
    _check_mv(input.dtype, mat, vec, input._shape)
    rows = mat._shape[0]
    return _fused_cuda("addmv_impl_cuda", input, mat, _column(vec), (rows, 1), beta, alpha,
                       out_shape=(rows,))


addmv = defop("addmv", meta=_addmv_meta, cpu=_addmv_cpu, cuda=_addmv_cuda,
              backward=_addmv_backward, jvp=_fused_jvp("mv"), extra=_FUSED)


def _baddbmm_check(input, b1, b2) -> tuple:
    _check_bmm(b1, b2)
    if input.dtype is not b1.dtype:
        raise RuntimeError(f"expected scalar type {_tn(b1)} but found {_tn(input)}")
    shape = (*b1._shape[:2], b2._shape[2])
    _expand_check(input, shape)
    return shape


def _baddbmm_meta(input, batch1, batch2, *, beta=1, alpha=1) -> TensorSpec:
    return TensorSpec(_baddbmm_check(input, batch1, batch2), batch1.dtype, batch1.device)


def _baddbmm_cpu(input, batch1, batch2, *, beta=1, alpha=1) -> np.ndarray:
    _baddbmm_check(input, batch1, batch2)
    _no_bool("baddbmm", batch1)
    dt = batch1.dtype
    return _fused(np.matmul(to_np(batch1, dt), to_np(batch2, dt)), input, dt, beta, alpha)


def _baddbmm_backward(ctx, grad):
    input, b1, b2 = ctx.args[:3]
    beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
    need = ctx.needs_input_grad
    return (sum_to(_times(grad, beta), input.shape) if need[0] else None,
            _times(grad.bmm(_h(b2)), alpha) if need[1] else None,
            _times(_h(b1).bmm(grad), alpha) if need[2] else None)


def _baddbmm_cuda(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor:
    shape = _baddbmm_check(input, batch1, batch2)
    return _fused_cuda("baddbmm_cuda", input, batch1, batch2, shape, beta, alpha)


baddbmm = defop("baddbmm", meta=_baddbmm_meta, cpu=_baddbmm_cpu, cuda=_baddbmm_cuda,
                backward=_baddbmm_backward, jvp=_fused_jvp("bmm"), extra=_FUSED)


@composite("addbmm")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]`` (composite: bmm, sum, add)."""
    _check_bmm(batch1, batch2)
    shape = (batch1._shape[1], batch2._shape[2])
    _expand_check(input, shape)
    if batch1._shape[0] == 0:
        acc = input.expand(shape)
        return acc * 0 if beta == 0 else (acc.clone() if beta == 1 else acc * beta)
    # torch accumulates one addmm per batch (beta on the first only), on every device: the
    # same roundings
    acc = input
    for b in range(batch1._shape[0]):
        acc = addmm(acc, batch1[b], batch2[b], beta=beta if b == 0 else 1, alpha=alpha)
    return acc


# -- matmul ------------------------------------------------------------------------------

@composite("matmul")
def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The matrix product with numpy's broadcasting rules (TENSOR-307): 1-D operands are
    promoted to a row (left) or a column (right) that is removed afterwards; batch dims
    broadcast. Operands must share a dtype."""
    da, db = input.dim(), other.dim()
    if da == 0 or db == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{da}D and {db}D")
    if da <= 2 and db <= 2 and not (da == 1 and db == 2):
        op = {(1, 1): dot, (2, 1): mv, (2, 2): mm}[(da, db)]
        return op(input, other) if out is None else op(input, other, out=out)
    result = _matmul_composite(input, other, da, db)
    if out is not None:
        from refimpl._dispatch import _write_out

        _write_out(out, result.detach(), "matmul")
        return out
    return result


def _matmul_composite(a: Tensor, b: Tensor, da: int, db: int) -> Tensor:
    if a._storage.device.type == "cuda":  # without a graph to record: one GEMM
        from refimpl.cuda._matmul_direct import matmul_direct

        direct = matmul_direct(a, b, da, db)
        if direct is not None:
            return direct
    if da == 1 and db == 2:
        return a.unsqueeze(0).mm(b).squeeze(0)
    if da >= 3 and db <= 2:
        # fold the batch dims of the left operand into the rows of one mm/mv
        rows = a.reshape(math.prod(a._shape[:-1]), a._shape[-1])
        folded = rows.mv(b) if db == 1 else rows.mm(b)
        return folded.reshape(*a._shape[:-1], *b._shape[1:])
    n = a._shape[-2] if da > 1 else 1
    m = b._shape[-1] if db > 1 else 1
    a3 = a if da > 1 else a.unsqueeze(0)
    b3 = b if db > 1 else b.unsqueeze(-1)
    batch = broadcast_shapes(a3._shape[:-2], b3._shape[:-2])
    nb = 1
    for s in batch:
        nb *= s
    a3 = a3.expand(*batch, *a3._shape[-2:]).reshape(nb, n, a3._shape[-1])
    b3 = b3.expand(*batch, *b3._shape[-2:]).reshape(nb, b3._shape[-2], m)
    shape = (*batch, *((n,) if da > 1 else ()), *((m,) if db > 1 else ()))
    return a3.bmm(b3).reshape(shape)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors (with type promotion; composite, ``mul``)."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v.dim() != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.dim()}-D")
    return input.reshape(-1, 1) * vec2


ger = outer

# -- trace ---------------------------------------------------------------------------------

def _trace_dtype(x: Tensor) -> D.dtype:
    if x.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.dim()}")
    return D.int64 if x.dtype.category <= 1 else x.dtype


def _trace_cpu(input) -> np.ndarray:
    out = _trace_dtype(input)
    _no_bool("trace", input)
    return np_result(np.trace(to_np(input, out)), out)


def _eye_mask(x: Tensor) -> Tensor:
    import refimpl

    rows = refimpl.arange(x._shape[-2], device=x.device).unsqueeze(1)
    return rows == refimpl.arange(x._shape[-1], device=x.device).unsqueeze(0)


def _trace_cuda(input) -> Tensor:
    _trace_dtype(input)  # torch's CUDA trace takes bool too (summed as int64)
    # the diagonal as a strided view, summed by the reduction kernels (int -> int64 as sum)
    return input.diagonal().sum()


trace = defop("trace", meta=lambda input: TensorSpec((), _trace_dtype(input), input.device),
              cpu=_trace_cpu, cuda=_trace_cuda, backward=lambda ctx, g: (g * _eye_mask(ctx.args[0]),),
              jvp=lambda ctx, t: trace(t), extra={"save_needs": {}})


from refimpl.ops.einsum import einsum, inner, tensordot
from refimpl.ops.linalg_functions import cross, det, inverse, linalg_cross

__all__ = ["addbmm", "addmm", "addmv", "baddbmm", "bmm", "cross", "det", "dot", "einsum", "ger",
           "inner", "inverse", "linalg_cross", "matmul", "mm", "mv", "outer", "tensordot", "trace",
           "vdot"]
TENSOR_METHODS = ("matmul", "outer", "ger", "addbmm", "inner", "cross")
