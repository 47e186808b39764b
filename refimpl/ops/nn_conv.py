"""Convolutions of ``torch.nn.functional``: ``conv1d``, ``conv2d``, ``conv3d`` with stride,
padding (numbers, ``'same'``, ``'valid'``), dilation and groups (spec: NNF-030..NNF-033).

A convolution is im2col + a matrix product: the padded input's sliding windows (a view,
``nn_shape.windows``) are laid out as columns and multiplied by the flattened weight
with ``matmul`` (cuBLAS on CUDA, numpy on the CPU). Being a composition of refimpl ops,
it runs on every device and its gradients (of input, weight and bias, to any order) and
forward-mode tangents follow from those ops' rules. torch's argument checks and
messages come first, in torch's order.
"""

from __future__ import annotations

import warnings

from refimpl._tensor import Tensor
from refimpl.ops.nn_shape import pad, windows


def _expand(name: str, value, n: int) -> list:
    if isinstance(value, (tuple, list)):
        value = [int(v) for v in value]
        if len(value) == 1:
            return value * n
        if len(value) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={value}")
        return value
    return [int(value)] * n


def _same_padding(weight: Tensor, dilation: list, n: int) -> list:
    """(before, after) per spatial dim for ``padding='same'``: the total ``d*(k-1)``
    split with the extra element after, as torch does."""
    pads = []
    for i in range(n):
        total = dilation[i] * (weight.shape[2 + i] - 1)
        pads.append((total // 2, total - total // 2))
    if any(a != b for a, b in pads):
        warnings.warn("Using padding='same' with even kernel lengths and odd dilation may "
                      "require a zero-padded copy of the input be created", UserWarning,
                      stacklevel=4)
    return pads


def _check(input: Tensor, weight: Tensor, bias, stride, pads, dilation, groups, n) -> None:
    """torch's check_shape_forward, in its order."""
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(a < 0 or b < 0 for a, b in pads):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {dilation}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.dim() != input.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}"
                           f"-dimensional weight {list(weight.shape)}, but got {input.dim()}"
                           f"-dimensional input of size {list(input.shape)} instead")
    w = list(weight.shape)
    if w[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {w} instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{w}] instead")
    if input.shape[1] != w[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {w}, expected "
                           f"input{list(input.shape)} to have {w[1] * groups} channels, but got "
                           f"{input.shape[1]} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w[0]):
        raise RuntimeError(f"Given weight of size {w}, expected bias to be 1-dimensional with "
                           f"{w[0]} elements, but got bias of size {list(bias.shape)} instead")
    padded = [input.shape[2 + i] + pads[i][0] + pads[i][1] for i in range(n)]
    kernel = [dilation[i] * (w[2 + i] - 1) + 1 for i in range(n)]
    if any(k > p for k, p in zip(kernel, padded)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than "
            "actual input size")
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {input.dtype._legacy} but found "
                           f"{weight.dtype._legacy}")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({_c_name(input.dtype)}) and bias type "
                           f"({_c_name(bias.dtype)}) should be the same")


def _c_name(dtype) -> str:
    """The C++ type name torch prints for a dtype in its conv messages."""
    from refimpl.ops._pointwise import _C_NAMES

    return {"int64_t": "long int", "int": "int"}.get(_C_NAMES[dtype], _C_NAMES[dtype])


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding,
                dilation, groups: int, name: str) -> Tensor:
    """An N-d convolution (N from ``name``; the weight's dims must agree) of a batched or
    unbatched input."""
    nominal = int(name[-2])
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if input.dim() not in (nominal + 1, nominal + 2):
        raise RuntimeError(f"Expected {nominal + 1}D (unbatched) or {nominal + 2}D (batched) "
                           f"input to {name}, but got input of size: {list(input.shape)}")
    n = weight.dim() - 2
    batched = input.dim() == nominal + 2
    x = input if batched else input.unsqueeze(0)
    if isinstance(padding, str) and padding not in ("same", "valid"):
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    stride = _expand("stride", stride, n)
    dilation = _expand("dilation", dilation, n)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        pads = _same_padding(weight, dilation, n)
    elif padding == "valid":
        pads = [(0, 0)] * n
    else:
        pads = [(p, p) for p in _expand("padding", padding, n)]
    _check(x, weight, bias, stride, pads, dilation, groups, n)
    out = _im2col_matmul(x, weight, stride, pads, dilation, groups, n)
    if bias is not None:
        out = out + bias.reshape(-1, *([1] * n))
    return out if batched else out.squeeze(0)


def _im2col_matmul(x, weight, stride, pads, dilation, groups, n) -> Tensor:
    flat = [p for pair in reversed(pads) for p in pair]
    if any(flat):
        x = pad(x, flat)
    kernel = list(weight.shape[2:])
    win = windows(x, kernel, stride, dilation)  # (N, C, *out, *kernel)
    batch, out_sizes = x.shape[0], list(win.shape[2:2 + n])
    cg, og = weight.shape[1], weight.shape[0] // groups
    win = win.reshape(batch, groups, cg, *out_sizes, *kernel)
    # (N, G, *out, Cg, *kernel) -> columns (N, G, L, Cg*K)
    order = [0, 1, *range(3, 3 + n), 2, *range(3 + n, 3 + 2 * n)]
    cols = win.permute(*order).reshape(batch, groups, -1, cg * _prod(kernel))
    w = weight.reshape(groups, og, cg * _prod(kernel)).transpose(-1, -2)
    out = cols.matmul(w)  # (N, G, L, Og)
    return out.transpose(-1, -2).reshape(batch, groups * og, *out_sizes)


def _prod(xs) -> int:
    r = 1
    for v in xs:
        r *= v
    return r


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-d convolution over (N, C, L) or (C, L) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-d convolution over (N, C, H, W) or (C, H, W) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-d convolution over (N, C, D, H, W) or (C, D, H, W) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv3d")


__all__ = ["conv1d", "conv2d", "conv3d"]
