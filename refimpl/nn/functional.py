"""``torch.nn.functional`` for refimpl (spec: spec/nn_functional.md, NNF-*).

The namespace gathers the functional layer from the op modules it is defined in:
pointwise activations that are ops of their own (``refimpl.ops.activation``,
``refimpl.ops.nn_activation``: one ``defop`` each with CPU and CUDA kernels, backward
and jvp), and the structured functions composed of refimpl ops (``nn_conv``,
``nn_pool``, ``nn_norm``, ``nn_layers``, ``nn_loss``, ``nn_shape``), which therefore
run on every device, under fake tensors, and through autograd to any order. The short
activations defined here are compositions too.
"""

from __future__ import annotations

import warnings

from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops import activation as _act
from refimpl.ops import nn_activation as _nna
from refimpl.ops.elementwise_binary import where
from refimpl.ops.nn_attention import multi_head_attention_forward
from refimpl.ops.nn_conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from refimpl.ops.nn_extra import (
    channel_shuffle,
    ctc_loss,
    linear_cross_entropy,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
    multi_margin_loss,
    multilabel_margin_loss,
    pdist,
    triplet_margin_with_distance_loss,
)
from refimpl.ops.nn_layers import (
    alpha_dropout,
    bilinear,
    cosine_similarity,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    embedding,
    embedding_bag,
    feature_alpha_dropout,
    linear,
    normalize,
    pairwise_distance,
    scaled_dot_product_attention,
)
from refimpl.ops.nn_loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from refimpl.ops.nn_norm import (
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    rms_norm,
)
from refimpl.ops.nn_pool import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from refimpl.ops.nn_sample import affine_grid, grid_sample, interpolate
from refimpl.ops.nn_shape import fold, one_hot, pad, pixel_shuffle, pixel_unshuffle, unfold

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _not_for(name: str, input: Tensor) -> None:
    """torch's error for a composed activation on an integer or bool input."""
    if input.dtype.category < 2:
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{input.dtype._legacy}'")


# -- activations (spec NNF-010..NNF-013) -----------------------------------------------------------

def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0)."""
    return _act.relu_(input) if inplace else _act.relu(input)


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return _act.relu_(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, else ``input``."""
    return (_act.threshold_ if inplace else _act.threshold)(input, threshold, value)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``input`` clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return (_act.hardtanh_ if inplace else _act.hardtanh)(input, min_val, max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``hardtanh(input, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    return (_nna.elu_ if inplace else _nna.elu)(input, alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(input, alpha)`` with the self-normalising constants."""
    return (_nna.elu_ if inplace else _nna.elu)(input, _SELU_ALPHA, _SELU_SCALE)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    return (_nna.elu_ if inplace else _nna.elu)(input, alpha, 1.0, 1.0 / alpha)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input``."""
    return (_nna.leaky_relu_ if inplace else _nna.leaky_relu)(input, negative_slope)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomised leaky relu; outside training the slope is ``(lower + upper) / 2``."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if training:
        from refimpl.ops.factories import empty

        slope = empty(input.shape, dtype=input.dtype, device=input.device).uniform_(lower, upper)
        out = where(input >= 0, input, input * slope)
        return input.copy_(out) if inplace else out
    return leaky_relu(input, (lower + upper) / 2, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return (_nna.hardsigmoid_ if inplace else _nna.hardsigmoid)(input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return (_nna.hardswish_ if inplace else _nna.hardswish)(input)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 where ``|input| <= lambd``, else ``input``."""
    return _nna.hardshrink(input, lambd)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``."""
    return _nna.softshrink(input, lambd)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` (``approximate='tanh'``: the tanh approximation)."""
    return _act.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return (_act.silu_ if inplace else _act.silu)(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold``."""
    return _act.softplus(input, beta, threshold)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return (_nna.mish_ if inplace else _nna.mish)(input)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))`` in the overflow-safe form ``min(x, 0) - log1p(exp(-|x|))``."""
    _not_for("log_sigmoid", input)
    return input.clamp_max(0) - (-input.abs()).exp().log1p()


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` for the two halves ``a, b`` of ``input`` along ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.dim()
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    a, b = input.split(size // 2, d)
    return a * b.sigmoid()


@composite("prelu")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``input`` where positive, else ``weight * input`` (one weight or one per channel,
    dim 1)."""
    if input.dim() == 0 and weight.numel() != 1:
        raise RuntimeError("Not allow zero-dim input tensor.")
    if weight.dim() > 1:
        raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {weight.numel()} and channel size = "
                           f"{channels}.")
    w = weight
    if weight.numel() != 1 and input.dim() >= 2:
        w = weight.reshape(-1, *([1] * (input.dim() - 2)))
    elif weight.dim() and input.dim() < weight.dim():
        w = weight.reshape(())
    return where(input > 0, input, input * w)


# -- resampling (spec NNF-080) ------------------------------------------------------------------

def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of ``interpolate`` (warns as torch does)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate "
                  "instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(mode='nearest')``."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use "
                  "nn.functional.interpolate instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(mode='bilinear', align_corners=True)``."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use "
                  "nn.functional.interpolate instead.", UserWarning, stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- softmax family (spec NNF-014) ------------------------------------------------------------------

def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed in ``dtype`` when given."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    return input.softmax(dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed stably."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    return input.log_softmax(dim, dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim())
    x = input if dtype is None else input.to(dtype)
    return (-x).softmax(dim)


__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "affine_grid",
    "alpha_dropout",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "channel_shuffle",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "ctc_loss",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "embedding",
    "embedding_bag",
    "feature_alpha_dropout",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "grid_sample",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "linear_cross_entropy",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "mish",
    "mse_loss",
    "multi_head_attention_forward",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pdist",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "rms_norm",
    "rrelu",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]

# fractional max pooling (refimpl/ops/nn_aten.py)
from refimpl.ops.nn_aten import fractional_max_pool2d, fractional_max_pool3d

__all__ += ["fractional_max_pool2d", "fractional_max_pool3d"]
