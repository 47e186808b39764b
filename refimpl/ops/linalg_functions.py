"""Matrix functions (spec TENSOR-307): det, inverse, linalg_cross, cross.

Re-exported by ``refimpl.linalg``. ``det`` and ``inverse`` take float32/float64/complex
(batches of) square matrices through ``numpy.linalg``; a singular matrix given to
``inverse`` raises torch's ``LinAlgError`` (a RuntimeError) naming LU's first zero
pivot, found by a small partial-pivoting elimination of the failing batch element.

On CUDA, ``linalg_cross`` is built from strided views and the elementwise kernels;
``det`` and ``inverse`` factorise with cuSOLVER's getrf (and solve against the identity
with getrs), through ``refimpl.ops.linalg_det``.
"""

from __future__ import annotations

import numpy as np

from refimpl._autocast import composite
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import broadcast_shapes, np_result, sum_to, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.linalg import _CROSS, _conj, _h, _no_bool, _tn


class _LinAlgError(RuntimeError):
    """A singular matrix where an invertible one is needed (torch's ``LinAlgError``)."""


def _check_square(name: str, x: Tensor) -> None:
    if x.dim() < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if x._shape[-1] != x._shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{x._shape[-2]} by {x._shape[-1]} matrices")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_tn(x)}")
    if x.dtype.itemsize < 4:
        if name == "det":
            raise NotImplementedError(f'"lu_cpu" not implemented for \'{_tn(x)}\'')
        raise RuntimeError(f"linalg.{name}: Low precision dtypes not supported. Got {_tn(x)}")


def _square_meta(name: str):
    def meta(input) -> TensorSpec:
        _check_square(name, input)
        return TensorSpec(input._shape[:-2] if name == "det" else input._shape, input.dtype,
                          input.device)
    return meta


def _det_cpu(input) -> np.ndarray:
    _check_square("det", input)
    return np_result(np.linalg.det(input._np), input.dtype)


def _det_backward(ctx, grad):
    a, det = ctx.args[0], ctx.outputs[0]
    return ((grad * _conj(det)).unsqueeze(-1).unsqueeze(-1) * _h(inverse(a)),)


def _det_jvp(ctx, tangent):
    a, det = ctx.args[0], ctx.outputs[0]
    return det * (inverse(a) * tangent.transpose(-2, -1)).sum((-2, -1))


def _det_cuda(input) -> Tensor:
    from refimpl.ops.linalg_det import det_cuda

    return det_cuda(input)


def _inverse_cuda(input) -> Tensor:
    from refimpl.ops.linalg_det import inverse_cuda

    return inverse_cuda(input)


det = defop("det", meta=_square_meta("det"), cpu=_det_cpu, cuda=_det_cuda,
            backward=_det_backward,
            jvp=_det_jvp, node="LinalgDetBackward0", saves=("inputs", "outputs"))


def _zero_pivot(m: np.ndarray) -> int:
    """The 1-based index of LU's first zero pivot (with partial pivoting), 0 if none."""
    a = m.astype(np.complex128 if np.iscomplexobj(m) else np.float64)
    n = a.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return 0


def _inverse_cpu(input) -> np.ndarray:
    _check_square("inv", input)
    arr = input._np
    from refimpl.ops.linalg_factor import fortran

    try:
        return fortran(np.linalg.inv(arr), input.dtype)  # column-major, as LAPACK's
    except np.linalg.LinAlgError:
        flat = arr.reshape(-1, *arr.shape[-2:])
        for b, m in enumerate(flat):
            k = _zero_pivot(m)
            if k:
                where = f"(Batch element {b}): " if arr.ndim > 2 else ""
                raise _LinAlgError(
                    f"linalg.inv: {where}The diagonal element {k} is zero, the inversion could "
                    "not be completed because the input matrix is singular.") from None
        raise


def _inverse_backward(ctx, grad):
    inv_h = _h(ctx.outputs[0])
    return (-(inv_h.matmul(grad).matmul(inv_h)),)


def _inverse_jvp(ctx, tangent):
    inv = ctx.outputs[0]
    return -(inv.matmul(tangent).matmul(inv))


inverse = defop("inverse", meta=_square_meta("inv"), cpu=_inverse_cpu,
                cuda=_inverse_cuda,
                backward=_inverse_backward, jvp=_inverse_jvp, node="LinalgInvExBackward0",
                saves=("outputs",))


def _cross_check(input, other, dim) -> tuple:
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"expected scalar type {_tn(input)} but found {_tn(other)}")
    shape = broadcast_shapes(input._shape, other._shape)
    d = wrap_dim(dim, len(shape))
    if input._shape[d] != 3 or other._shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input._shape[d]} and {other._shape[d]}")
    return shape, d


def _cross_cpu(input, other, *, dim=-1) -> np.ndarray:
    _, d = _cross_check(input, other, dim)
    _no_bool("cross", input)
    return np_result(np.cross(to_np(input, input.dtype), to_np(other, input.dtype), axis=d),
                     input.dtype)


def _cross_cuda(input, other, *, dim=-1) -> Tensor:
    shape, d = _cross_check(input, other, dim)
    _no_bool("cross", input)
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.shape import cat

    a, b = input.expand(shape), other.expand(shape)
    with no_grad():
        # c_i = a_j * b_k - a_k * b_j for (i, j, k) the cyclic orders of (0, 1, 2)
        parts = [a.narrow(d, j, 1) * b.narrow(d, k, 1) - a.narrow(d, k, 1) * b.narrow(d, j, 1)
                 for j, k in ((1, 2), (2, 0), (0, 1))]
        return cat(parts, d)


def _cross_backward(ctx, grad):
    a, b = ctx.args[0], ctx.args[1]
    dim = ctx.kwargs.get("dim", -1)
    need = ctx.needs_input_grad
    return (sum_to(linalg_cross(_conj(b), grad, dim=dim), a.shape) if need[0] else None,
            sum_to(linalg_cross(grad, _conj(a), dim=dim), b.shape) if need[1] else None)


def _cross_jvp(ctx, ta, tb, *_):
    a, b = ctx.args[0], ctx.args[1]
    dim = ctx.kwargs.get("dim", -1)
    parts = [linalg_cross(ta, b, dim=dim) if ta is not None else None,
             linalg_cross(a, tb, dim=dim) if tb is not None else None]
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


linalg_cross = defop(
    "linalg_cross", meta=lambda input, other, *, dim=-1: TensorSpec(
        _cross_check(input, other, dim)[0], input.dtype, input.device),
    cpu=_cross_cpu, cuda=_cross_cuda, backward=_cross_backward, jvp=_cross_jvp,
    extra={"method": False, **_CROSS})


@composite("cross")
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The 3-vector cross product along ``dim``; without ``dim``, the first dim of size 3
    (deprecated in torch, with its warning)."""
    if dim is None:
        import warnings

        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either "
            "pass the dim explicitly or simply use torch.linalg.cross.\nThe default value of "
            "dim will change to agree with that of linalg.cross in a future release.",
            UserWarning, stacklevel=2)
        shape = broadcast_shapes(input._shape, other._shape)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


__all__ = ["cross", "det", "inverse", "linalg_cross"]
