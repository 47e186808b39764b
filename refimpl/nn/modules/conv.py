"""Conv1d/2d/3d and ConvTranspose1d/2d/3d (spec NN-110..): torch's argument checks,
default init (kaiming_uniform_ with a=sqrt(5)) and reprs; the math is F.conv*."""

from __future__ import annotations

import math

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn import init
from refimpl.nn.modules.linear import empty_param
from refimpl.nn.modules.module import Module

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """What every convolution shares: arguments, parameters, init, repr."""

    _dims = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 output_padding=0, device=None, dtype=None) -> None:
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = empty_param(*shape, device=device, dtype=dtype)
        if bias:
            self.bias = empty_param(out_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """kaiming_uniform_(a=sqrt(5)) weight, U(-1/sqrt(fan_in), ...) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._dims
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * n:
            s += ", padding={padding}"
        if self.dilation != (1,) * n:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * n:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, 0, device, dtype)

    def _pad_amounts(self) -> list[int]:
        """F.pad's amounts (last dim first) for the non-zeros padding modes."""
        if self.padding == "valid":
            return [0, 0] * self._dims
        if self.padding == "same":
            pad = []
            for k, d in zip(reversed(self.kernel_size), reversed(self.dilation), strict=True):
                total = d * (k - 1)
                pad += [total // 2, total - total // 2]
            return pad
        return [p for p in reversed(self.padding) for _ in range(2)]

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = getattr(F, f"conv{self._dims}d")
        if self.padding_mode != "zeros":
            return conv(F.pad(input, self._pad_amounts(), mode=self.padding_mode), weight, bias,
                        self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        """The convolution of ``input`` with the weight (F.conv1d/2d/3d)."""
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L) inputs."""

    _dims = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W) inputs."""

    _dims = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C, D, H, W) inputs."""

    _dims = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device, dtype)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        """The transposed convolution (F.conv_transpose1d/2d/3d)."""
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        name = f"conv_transpose{self._dims}d"
        conv = getattr(F, name, None)
        if conv is None:
            raise NotImplementedError(f"{type(self).__name__} needs refimpl.nn.functional."
                                      f"{name}, which refimpl does not implement yet")
        return conv(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                    self.groups, self.dilation)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        n = self._dims
        size = list(output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {n + 2} elements (got {len(output_size)})")
        out = []
        for d in range(n):
            in_size = input.size(d - n)
            smallest = ((in_size - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= size[d] <= largest:
                raise ValueError(f"requested an output size of {size}, but valid sizes range "
                                 f"from {smallest} to {largest} (for an input of "
                                 f"{list(input.shape[-n:])})")
            out.append(size[d] - smallest)
        return tuple(out)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution."""

    _dims = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution."""

    _dims = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution."""

    _dims = 3
