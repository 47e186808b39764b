"""Identity, Linear, Bilinear (spec NN-100..): torch's shapes, init and reprs."""

from __future__ import annotations

import math

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn import init
from refimpl.nn.modules.module import Module
from refimpl.nn.parameter import Parameter


def _factory(device, dtype) -> dict:
    return {"device": device, "dtype": dtype}


def empty_param(*shape, device=None, dtype=None) -> Parameter:
    """An uninitialised Parameter of ``shape`` (layers fill it in reset_parameters)."""
    from refimpl.ops.factories import empty

    return Parameter(empty(*shape, device=device, dtype=dtype))


class Identity(Module):
    """Returns its input (extra constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        """``input`` itself."""
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``; weight (out, in) and bias ~ U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = empty_param(out_features, in_features, **_factory(device, dtype))
        if bias:
            self.bias = empty_param(out_features, **_factory(device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's default init: kaiming_uniform_(a=sqrt(5)) and a fan-in bound bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        """``F.linear(input, weight, bias)``."""
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y = x1^T A x2 + b``; weight (out, in1, in2)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = empty_param(out_features, in1_features, in2_features,
                                  **_factory(device, dtype))
        if bias:
            self.bias = empty_param(out_features, **_factory(device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """U(-1/sqrt(in1), 1/sqrt(in1)) for weight and bias."""
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        """``F.bilinear(input1, input2, weight, bias)``."""
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
