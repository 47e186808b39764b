"""Padding, resampling and rearranging modules, and distances (spec NN-190): thin
wrappers of F with torch's arguments and reprs."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn.modules.module import Module


def _pad_tuple(padding, dims: int) -> tuple:
    return tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * dims)


class _PadNd(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _pad_tuple(padding, self._dims)

    def forward(self, input: Tensor) -> Tensor:
        """``F.pad`` with this module's mode."""
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        """``F.pad(input, padding, 'constant', value)``."""
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


def _pad_class(name: str, base: type, dims: int, mode: str, doc: str) -> type:
    return type(name, (base,), {"_dims": dims, "_mode": mode, "__doc__": doc,
                                "__module__": __name__, "__qualname__": name})


ConstantPad1d = _pad_class("ConstantPad1d", _ConstantPadNd, 1, "constant",
                           "Pad the last dim with a constant.")
ConstantPad2d = _pad_class("ConstantPad2d", _ConstantPadNd, 2, "constant",
                           "Pad the last 2 dims with a constant.")
ConstantPad3d = _pad_class("ConstantPad3d", _ConstantPadNd, 3, "constant",
                           "Pad the last 3 dims with a constant.")
ReflectionPad1d = _pad_class("ReflectionPad1d", _PadNd, 1, "reflect",
                             "Pad the last dim by reflection.")
ReflectionPad2d = _pad_class("ReflectionPad2d", _PadNd, 2, "reflect",
                             "Pad the last 2 dims by reflection.")
ReflectionPad3d = _pad_class("ReflectionPad3d", _PadNd, 3, "reflect",
                             "Pad the last 3 dims by reflection.")
ReplicationPad1d = _pad_class("ReplicationPad1d", _PadNd, 1, "replicate",
                              "Pad the last dim by replicating the edge.")
ReplicationPad2d = _pad_class("ReplicationPad2d", _PadNd, 2, "replicate",
                              "Pad the last 2 dims by replicating the edge.")
ReplicationPad3d = _pad_class("ReplicationPad3d", _PadNd, 3, "replicate",
                              "Pad the last 3 dims by replicating the edge.")
CircularPad1d = _pad_class("CircularPad1d", _PadNd, 1, "circular",
                           "Pad the last dim circularly.")
CircularPad2d = _pad_class("CircularPad2d", _PadNd, 2, "circular",
                           "Pad the last 2 dims circularly.")
CircularPad3d = _pad_class("CircularPad3d", _PadNd, 3, "circular",
                           "Pad the last 3 dims circularly.")


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


ZeroPad1d = _pad_class("ZeroPad1d", _ZeroPadNd, 1, "constant", "Pad the last dim with zeros.")
ZeroPad2d = _pad_class("ZeroPad2d", _ZeroPadNd, 2, "constant",
                       "Pad the last 2 dims with zeros.")
ZeroPad3d = _pad_class("ZeroPad3d", _ZeroPadNd, 3, "constant",
                       "Pad the last 3 dims with zeros.")


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """``F.pixel_shuffle``."""
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        """``F.pixel_unshuffle``."""
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of ``groups`` groups."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        """``F.channel_shuffle``."""
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Upsample(Module):
    """Resample to ``size`` or by ``scale_factor`` (``F.interpolate``)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, int) else (
            tuple(float(f) for f in scale_factor) if isinstance(scale_factor, tuple)
            else scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        """``F.interpolate``."""
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = ("scale_factor=" + repr(self.scale_factor) if self.scale_factor is not None
                else "size=" + repr(self.size))
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour 2-D upsampling."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear 2-D upsampling with aligned corners."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class Fold(Module):
    """Combine sliding local blocks into a tensor (``F.fold``)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """``F.fold``."""
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, "
                "padding={padding}, stride={stride}".format(**self.__dict__))


class Unfold(Module):
    """Extract sliding local blocks (``F.unfold``)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        """``F.unfold``."""
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


class CosineSimilarity(Module):
    """Cosine similarity along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """``F.cosine_similarity``."""
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """p-norm distance between rows."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """``F.pairwise_distance``."""
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
