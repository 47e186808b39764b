"""Pooling modules (spec NN-150..): Max/Avg pools, adaptive pools, LPPool; the math is F's."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn.modules.module import Module


class _MaxPoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        """``F.max_pool{1,2,3}d``."""
        pool = getattr(F, f"max_pool{self._dims}d")
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                    ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling."""

    _dims = 1


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling."""

    _dims = 2


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling."""

    _dims = 3


class _AvgPoolNd(Module):
    _dims = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        if self._dims > 1:
            self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        """``F.avg_pool{1,2,3}d``."""
        pool = getattr(F, f"avg_pool{self._dims}d")
        if self._dims == 1:
            return pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                        self.count_include_pad)
        return pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                    self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        if self._dims == 1:
            return (f"kernel_size={_one(self.kernel_size)}, stride={_one(self.stride)}, "
                    f"padding={_one(self.padding)}")
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _one(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(_AvgPoolNd):
    """1-D average pooling."""

    _dims = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(_one(kernel_size), _one(stride if stride is not None else kernel_size),
                         _one(padding), ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling."""

    _dims = 2


class AvgPool3d(_AvgPoolNd):
    """3-D average pooling."""

    _dims = 3


class _AdaptiveAvgPool(Module):
    _fn = "adaptive_avg_pool2d"

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        """``F.adaptive_avg_pool{1,2,3}d``."""
        return getattr(F, self._fn)(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveMaxPool(_AdaptiveAvgPool):
    _fn = "adaptive_max_pool2d"

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input: Tensor):
        """``F.adaptive_max_pool{1,2,3}d``."""
        return getattr(F, self._fn)(input, self.output_size, self.return_indices)


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    """1-D adaptive average pooling."""

    _fn = "adaptive_avg_pool1d"


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    """2-D adaptive average pooling."""

    _fn = "adaptive_avg_pool2d"


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    """3-D adaptive average pooling."""

    _fn = "adaptive_avg_pool3d"


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """1-D adaptive max pooling."""

    _fn = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """2-D adaptive max pooling."""

    _fn = "adaptive_max_pool2d"


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """3-D adaptive max pooling."""

    _fn = "adaptive_max_pool3d"


class LPPool2d(Module):
    """Power-average pooling: (sum x^p)^(1/p) over each window."""

    _dims = 2

    def __init__(self, norm_type: float, kernel_size, stride=None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        """``F.lp_pool{1,2}d``."""
        fn = getattr(F, f"lp_pool{self._dims}d")
        return fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return ("norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, "
                "ceil_mode={ceil_mode}".format(**self.__dict__))


class LPPool1d(LPPool2d):
    """1-D power-average pooling."""

    _dims = 1
