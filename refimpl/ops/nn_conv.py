"""Convolutions of ``torch.nn.functional``: ``conv1d``, ``conv2d``, ``conv3d`` with stride,
padding (numbers, ``'same'``, ``'valid'``), dilation and groups (spec: NNF-030..NNF-033).

A convolution is im2col + a matrix product: the padded input's sliding windows are laid
out as columns and multiplied by the flattened weight. Floating inputs on the CPU and
CUDA take one op, ``_conv_im2col`` (``nn_conv_kernel``: numpy on the CPU; on CUDA an
im2col NVRTC kernel and one cuBLAS GEMM, ``refimpl.cuda._conv_kernels``), whose backward
is one op too. Other cases (and double backward) compose refimpl ops: the windows as a
view (``nn_shape.windows``) and ``matmul``, so their gradients (to any order) and
forward-mode tangents follow from those ops' rules. torch's argument checks and messages
come first, in torch's order.
"""

from __future__ import annotations

import warnings

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import PLAIN, Tensor
from refimpl.ops._helpers import int_key
from refimpl.ops.nn_conv_kernel import conv_im2col, use_fused
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


@composite("convolution")
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding,
                dilation, groups: int, name: str) -> Tensor:
    """An N-d convolution (N from ``name``; the weight's dims must agree) of a batched or
    unbatched input."""
    key = _geometry_key(input, weight, bias, stride, padding, dilation, groups, name)
    geometry = _CHECKED.get(key) if key is not None else None
    if geometry is not None:  # these arguments' metadata passed every check before
        n, batched, stride, pads, dilation = geometry
        stride, pads, dilation = list(stride), list(pads), list(dilation)
        x = input if batched else input.unsqueeze(0)
    else:
        n, batched, x, stride, pads, dilation = _checked_geometry(
            input, weight, bias, stride, padding, dilation, groups, name)
        if key is not None:
            if len(_CHECKED) >= 256:
                _CHECKED.clear()
            _CHECKED[key] = (n, batched, tuple(stride), tuple(pads), tuple(dilation))
    if use_fused(x, weight, bias):
        out = conv_im2col(x, weight, bias, stride, pads, dilation, groups)
        return out if batched else out.squeeze(0)
    if x.is_cuda and x.dtype in (D.float16, D.bfloat16) and groups > 1 and \
            weight._shape[1] == 1:
        # torch's depthwise kernel accumulates in float32, bias included, and rounds once
        out = _im2col_matmul(x.float(), weight.float(), stride, pads, dilation, groups, n)
        if bias is not None:
            out = out + bias.float().reshape(-1, *([1] * n))
        out = out.to(x.dtype)
        return out if batched else out.squeeze(0)
    out = _im2col_matmul(x, weight, stride, pads, dilation, groups, n)
    if bias is not None:
        out = out + bias.reshape(-1, *([1] * n))
    return out if batched else out.squeeze(0)


# (metadata of the arguments) -> (n, batched, stride, pads, dilation) of a convolution
# whose checks passed: the checks read shapes, dtypes and the geometry arguments only,
# so a repeated call (every training step) skips them. String paddings are not kept
# ('same' may warn on each call).
_CHECKED: dict = {}


def _geometry_key(input, weight, bias, stride, padding, dilation, groups, name):
    """The memo key of a call's checked metadata, or None when it has none (a string
    padding, a tensor subclass other than ``nn.Parameter``, or a geometry argument that
    is not ints)."""
    if type(padding) is str or type(input) not in PLAIN or type(weight) not in PLAIN:
        return None
    geometry = int_key((stride, padding, dilation, groups))
    if geometry is None:
        return None
    return (name, input._shape, input.dtype, weight._shape, weight.dtype,
            None if bias is None else (bias._shape, bias.dtype), *geometry)


def _checked_geometry(input, weight, bias, stride, padding, dilation, groups, name):
    """torch's argument checks of a convolution, in its order; (n, batched, the batched
    input, stride, pads, dilation)."""
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
    return n, batched, x, stride, pads, dilation


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


@composite("conv1d")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-d convolution over (N, C, L) or (C, L) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv1d")


@composite("conv2d")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-d convolution over (N, C, H, W) or (C, H, W) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv2d")


@composite("conv3d")
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-d convolution over (N, C, D, H, W) or (C, D, H, W) inputs (spec NNF-030)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, "conv3d")


_AXES = {1: ["width"], 2: ["height", "width"], 3: ["depth", "height", "width"]}


def _check_transposed(x: Tensor, weight: Tensor, bias, stride, pads, out_pad, dilation,
                      groups: int, n: int) -> None:
    """torch's checks of a transposed convolution, in its order."""
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in pads):
        raise RuntimeError("negative padding is not supported")
    if any(o < 0 for o in out_pad):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {dilation}")
    if any(o >= s and o >= d for o, s, d in zip(out_pad, stride, dilation)):
        axes = _AXES.get(n, [str(i) for i in range(n)])
        parts = [f"output_padding_{a}: {o}" for a, o in zip(axes, out_pad)]
        parts += [f"stride_{a}: {s}" for a, s in zip(axes, stride)]
        parts += [f"dilation_{a}: {d}" for a, d in zip(axes, dilation)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           f"but got {' '.join(parts)}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    w = list(weight.shape)
    if weight.dim() != x.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}"
                           f"-dimensional weight {w}, but got {x.dim()}-dimensional input of "
                           f"size {list(x.shape)} instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{w}] instead")
    if x.shape[1] != w[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected input"
                           f"{list(x.shape)} to have {w[0]} channels, but got {x.shape[1]} "
                           "channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w[1] * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected bias to be "
                           f"1-dimensional with {w[1] * groups} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    if x.dtype is not weight.dtype:
        raise RuntimeError(f"expected scalar type {x.dtype._legacy} but found "
                           f"{weight.dtype._legacy}")


def conv_transpose(input: Tensor, weight: Tensor, bias, stride, padding, output_padding,
                   groups: int, dilation, name: str) -> Tensor:
    """An N-d transposed convolution (the gradient of ``convolution`` with respect to its
    input): each input element scatters ``weight`` into the output, written as a matrix
    product into columns and a ``col2im`` sum (spec NNF-033)."""
    from refimpl.ops.nn_shape import col2im

    nominal = int(name[-2])
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if input.dim() not in (nominal + 1, nominal + 2):
        raise RuntimeError(f"Expected {nominal + 1}D (unbatched) or {nominal + 2}D (batched) "
                           f"input to {name}, but got input of size: {list(input.shape)}")
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    n = weight.dim() - 2
    batched = input.dim() == nominal + 2
    x = input if batched else input.unsqueeze(0)
    stride, dilation = _expand("stride", stride, n), _expand("dilation", dilation, n)
    pads = _expand("padding", padding, n)
    out_pad = _expand("output_padding", output_padding, n)
    _check_transposed(x, weight, bias, stride, pads, out_pad, dilation, groups, n)
    batch, cin, spatial = x.shape[0], x.shape[1], list(x.shape[2:])
    kernel = list(weight.shape[2:])
    cout_g = weight.shape[1]
    out_sizes = [(size - 1) * s - 2 * p + d * (k - 1) + o + 1 for size, s, p, d, k, o in
                 zip(spatial, stride, pads, dilation, kernel, out_pad)]
    cols_per = cout_g * _prod(kernel)
    w = weight.reshape(groups, cin // groups, cols_per).transpose(-1, -2)
    xg = x.reshape(batch, groups, cin // groups, _prod(spatial))
    reduced = x.is_cuda and x.dtype in (D.float16, D.bfloat16)
    if reduced:  # as cuDNN: accumulated in float32, rounded once (then the bias is added)
        w, xg = w.float(), xg.float()
    cols = w.matmul(xg).reshape(batch, groups * cols_per, _prod(spatial))
    if reduced and any(o >= s for o, s in zip(out_pad, stride)):
        # an output padding as large as the stride is not cuDNN's: torch's slow transposed
        # convolution keeps its GEMM's columns in the input's type before col2im sums them
        cols = cols.to(x.dtype).float()
    out = col2im(cols, out_sizes, spatial, kernel, dilation, pads, stride)
    if reduced:
        out = out.to(x.dtype)
    if bias is not None:
        out = out + bias.reshape(-1, *([1] * n))
    return out if batched else out.squeeze(0)


@composite("conv_transpose1d")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-d transposed convolution ("deconvolution") of (N, C, L) or (C, L) (spec NNF-033)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                          dilation, "conv_transpose1d")


@composite("conv_transpose2d.input")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-d transposed convolution of (N, C, H, W) or (C, H, W) (spec NNF-033)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                          dilation, "conv_transpose2d")


@composite("conv_transpose3d.input")
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-d transposed convolution of (N, C, D, H, W) or (C, D, H, W) (spec NNF-033)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                          dilation, "conv_transpose3d")


__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]
