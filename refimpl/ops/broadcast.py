"""Broadcasting helpers that return views (spec: TENSOR-300, TENSOR-005):
``broadcast_tensors``, ``atleast_1d``/``2d``/``3d`` and ``meshgrid``.

They are compositions of ``expand``/``reshape``/``unsqueeze``, so their results are views
with the autograd nodes torch gives them (ExpandBackward0, ViewBackward0, ...); an input
that already has the wanted shape is returned as it is.
"""

from __future__ import annotations

import warnings

from refimpl._tensor import Tensor
from refimpl.ops._helpers import broadcast_shapes
from refimpl.ops.views import reshape, unsqueeze


def _varargs(tensors) -> list:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def broadcast_tensors(*tensors) -> tuple:
    """Every input expanded to the common broadcast shape (inputs already of that shape are
    returned as they are)."""
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(x).__name__}")
    shape = broadcast_shapes(*(x._shape for x in tensors))
    return tuple(x if x._shape == shape else x.expand(shape) for x in tensors)


def _atleast(fn: str, one):
    def wrapper(*tensors):
        single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
        items = _varargs(tensors)
        for x in items:
            if not isinstance(x, Tensor):
                raise TypeError(f"{fn}() received an invalid combination of arguments - got "
                                f"({type(x).__name__}), but expected one of:\n * (Tensor input)"
                                "\n * (tuple of Tensors tensors)\n")
        out = tuple(one(x) for x in items)
        return out[0] if single else out

    wrapper.__name__ = fn
    return wrapper


def _one_1d(x: Tensor) -> Tensor:
    return reshape(x, 1) if x.dim() == 0 else x


def _one_2d(x: Tensor) -> Tensor:
    if x.dim() == 0:
        return reshape(x, (1, 1))
    return unsqueeze(x, 0) if x.dim() == 1 else x


def _one_3d(x: Tensor) -> Tensor:
    if x.dim() == 0:
        return reshape(x, (1, 1, 1))
    if x.dim() == 1:
        return unsqueeze(unsqueeze(x, 0), -1)
    return unsqueeze(x, -1) if x.dim() == 2 else x


atleast_1d = _atleast("atleast_1d", _one_1d)
atleast_1d.__doc__ = "Inputs with at least 1 dim (0-D tensors become shape [1])."
atleast_2d = _atleast("atleast_2d", _one_2d)
atleast_2d.__doc__ = "Inputs with at least 2 dims (leading size-1 dims added)."
atleast_3d = _atleast("atleast_3d", _one_3d)
atleast_3d.__doc__ = "Inputs with at least 3 dims (1-D ``[n]`` becomes ``[1, n, 1]``)."


_warned: list = []


def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids from 0-D/1-D inputs, as expanded views ("ij" or "xy" indexing)."""
    tensors = _varargs(tensors)
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        if not _warned:  # torch warns once per process (TORCH_WARN_ONCE)
            _warned.append(True)
            warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                          "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f"received: {indexing}")
    for x in tensors:
        if x.dim() > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {x}")
    if any(x.dtype != tensors[0].dtype for x in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    order = list(tensors)
    swap = indexing == "xy" and len(order) >= 2
    if swap:
        order[0], order[1] = order[1], order[0]
    shape = tuple(x.numel() for x in order)
    grids = []
    for i, x in enumerate(order):
        view_shape = [1] * len(order)
        view_shape[i] = -1
        grids.append(x.view(view_shape).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "meshgrid"]
