"""Tensor properties that are views: ``T``, ``mT``, ``H``, ``mH``, ``real``, ``imag``
(spec: TENSOR-005).

They live apart from ``views.py`` because a Tensor property and the ``refimpl.real``
function cannot share one module-level name. ``H`` and ``mH`` of a complex tensor are
``conj()`` of the transposed view: views with the conjugate bit (TENSOR-025).
"""

from __future__ import annotations

import warnings

from refimpl._tensor import Tensor
from refimpl.ops import views, views_dtype

_warned: set = set()


def _warn_once(key: str, message: str) -> None:
    # torch emits these with TORCH_WARN_ONCE: once per process
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, UserWarning, stacklevel=3)


def _numpy_t(self: Tensor) -> Tensor:
    n = self.dim()
    if n not in (0, 2):
        _warn_once("T", (
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` "
            "to reverse the dimensions of a tensor."))
    if n == 0:
        _warn_once("T0", "Tensor.T is deprecated on 0-D tensors. This function is the "
                         "identity in these cases.")
    return views.permute(self, list(range(n - 1, -1, -1)))


def _matrix_t(self: Tensor) -> Tensor:
    if self.dim() < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return views.transpose(self, -2, -1)


def _conj(t: Tensor) -> Tensor:
    return t.conj() if t.dtype.is_complex else t


def _hermitian(self: Tensor) -> Tensor:
    if self.dim() != 2:
        extra = " For batches of matrices, consider using tensor.mH" if self.dim() > 2 else ""
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.dim()}-D tensor.{extra}")
    return _conj(views.transpose(self, 0, 1))


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (``mH``)."""
    if input.dim() < 2:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {input.dim()}-D tensor.")
    return _conj(views.transpose(input, -2, -1))


def _set_real(self: Tensor, value) -> None:
    views_dtype.real(self).copy_(value)


def _set_imag(self: Tensor, value) -> None:
    views_dtype.imag(self).copy_(value)


T = property(_numpy_t, doc="The dims reversed (a permute view); meant for 2-D tensors.")
mT = property(_matrix_t, doc="The last two dims transposed (a view).")
H = property(_hermitian, doc="The conjugate transpose of a 2-D tensor.")
mH = property(adjoint, doc="The conjugate transpose of the last two dims.")
real = property(views_dtype.real, _set_real, doc="The real part (a view); assignable.")
imag = property(views_dtype.imag, _set_imag, doc="The imaginary part of a complex tensor (a view).")

__all__ = ["adjoint"]
TENSOR_METHODS = ("T", "mT", "H", "mH", "real", "imag", "adjoint")
