"""Parameters to one flat vector and back."""

from __future__ import annotations

from collections.abc import Iterable

from refimpl._tensor import Tensor


def _check_same_device(param: Tensor, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-D tensor."""
    from refimpl.ops.shape import cat

    device = None
    vec = []
    for p in parameters:
        device = _check_same_device(p, device)
        vec.append(p.view(-1))
    return cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' data."""
    if not isinstance(vec, Tensor):
        from refimpl.nn.modules.module import typename

        raise TypeError(f"expected torch.Tensor, but got: {typename(vec)}")
    device = None
    pointer = 0
    for p in parameters:
        device = _check_same_device(p, device)
        n = p.numel()
        p.data = vec[pointer:pointer + n].view_as(p).data
        pointer += n
