"""torch's top-level aliases of nn.functional ops, with its aten signatures (integer
``reduction``, ``cudnn_enable`` flags), and the ``torch._C._nn`` / ``torch._C._linalg``
namespaces the autocast lists call (spec AUTOCAST-020). Each alias calls the
nn.functional composite, which carries the op's autocast policy; ``rms_norm`` is one op
here, as in torch."""

from __future__ import annotations

import types

from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops import amp_list_ops as _ops
from refimpl.ops.amp_list_ops import _F

# torch's integer reduction enum; its Python bindings default to 0 ("none")
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(value) -> str:
    return value if isinstance(value, str) else _REDUCTIONS[value]


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``torch.prelu``."""
    return _F().prelu(input, weight)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """``torch.conv1d``."""
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """``torch.conv2d``."""
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """``torch.conv3d``."""
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """``torch.conv_transpose1d``."""
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """``torch.conv_transpose2d``."""
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1) -> Tensor:
    """``torch.conv_transpose3d``."""
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups,
                                 dilation)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5,
               cudnn_enable=True) -> Tensor:
    """``torch.layer_norm``."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


@composite("rms_norm")
def rms_norm(input, normalized_shape, weight=None, eps=None) -> Tensor:
    """``torch.rms_norm``: one op, on no autocast list (it computes in float32 inside and
    returns its input's dtype, as torch 2.11's CUDA autocast gives)."""
    return _F().rms_norm(input, normalized_shape, weight, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5,
               cudnn_enabled=True) -> Tensor:
    """``torch.group_norm``."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8) -> Tensor:
    """``torch.cosine_similarity``."""
    return _F().cosine_similarity(x1, x2, dim, eps)


def pdist(input, p=2) -> Tensor:
    """``torch.pdist``."""
    return _F().pdist(input, p)


def bilinear(input1, input2, weight, bias=None) -> Tensor:
    """``torch.bilinear``."""
    return _F().bilinear(input1, input2, weight, bias)


def grid_sampler(input, grid, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """``torch.grid_sampler``: ``grid_sample`` with torch's integer modes."""
    mode = ("bilinear", "nearest", "bicubic")[interpolation_mode]
    padding = ("zeros", "border", "reflection")[padding_mode]
    return _F().grid_sample(input, grid, mode, padding, align_corners)


def poisson_nll_loss(input, target, log_input, full, eps, reduction) -> Tensor:
    """``torch.poisson_nll_loss``."""
    return _F().poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                 reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0) -> Tensor:
    """``torch.cosine_embedding_loss``."""
    return _F().cosine_embedding_loss(input1, input2, target, margin=margin,
                                      reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0) -> Tensor:
    """``torch.hinge_embedding_loss``."""
    return _F().hinge_embedding_loss(input, target, margin=margin,
                                     reduction=_reduction(reduction))


def kl_div(input, target, reduction=0, *, log_target=False) -> Tensor:
    """``torch.kl_div``."""
    return _F().kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0) -> Tensor:
    """``torch.margin_ranking_loss``."""
    return _F().margin_ranking_loss(input1, input2, target, margin=margin,
                                    reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=0) -> Tensor:
    """``torch.triplet_margin_loss``."""
    return _F().triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps,
                                    swap=swap, reduction=_reduction(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0) -> Tensor:
    """``torch.binary_cross_entropy_with_logits``."""
    return _F().binary_cross_entropy_with_logits(input, target, weight,
                                                 reduction=_reduction(reduction),
                                                 pos_weight=pos_weight)


# -- torch._C._nn and torch._C._linalg (the names the autocast lists call) ------------------

def _loss(name: str):
    def call(input, target, reduction=0, **kwargs):
        return getattr(_F(), name)(input, target, reduction=_reduction(reduction), **kwargs)

    call.__name__ = name
    call.__doc__ = f"``torch._C._nn.{name}``: ``F.{name}`` with an integer reduction."
    return call


def _nn_nll_loss(input, target, weight=None, reduction=0, ignore_index=-100) -> Tensor:
    return _F().nll_loss(input, target, weight, ignore_index=ignore_index,
                         reduction=_reduction(reduction))


def _nn_multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction=0) -> Tensor:
    return _F().multi_margin_loss(input, target, p=p, margin=margin, weight=weight,
                                  reduction=_reduction(reduction))


def _nn_binary_cross_entropy(input, target, weight=None, reduction=0) -> Tensor:
    return _F().binary_cross_entropy(input, target, weight, reduction=_reduction(reduction))


_nn = types.SimpleNamespace(
    linear=lambda input, weight, bias=None: _F().linear(input, weight, bias),
    softplus=lambda input, beta=1, threshold=20: _F().softplus(input, beta, threshold),
    nll_loss=_nn_nll_loss, nll_loss2d=_nn_nll_loss,
    l1_loss=_loss("l1_loss"), mse_loss=_loss("mse_loss"),
    smooth_l1_loss=lambda input, target, reduction=0, beta=1.0: _F().smooth_l1_loss(
        input, target, reduction=_reduction(reduction), beta=beta),
    multilabel_margin_loss=_loss("multilabel_margin_loss"),
    soft_margin_loss=_loss("soft_margin_loss"), multi_margin_loss=_nn_multi_margin_loss,
    binary_cross_entropy=_nn_binary_cross_entropy,
    upsample_nearest1d=_ops.upsample_nearest1d, upsample_nearest2d=_ops.upsample_nearest2d,
    upsample_nearest3d=_ops.upsample_nearest3d, upsample_linear1d=_ops.upsample_linear1d,
    upsample_bilinear2d=_ops.upsample_bilinear2d,
    upsample_trilinear3d=_ops.upsample_trilinear3d,
    upsample_bicubic2d=_ops.upsample_bicubic2d,
    _upsample_nearest_exact1d=_ops._upsample_nearest_exact1d,
    _upsample_nearest_exact2d=_ops._upsample_nearest_exact2d,
    _upsample_nearest_exact3d=_ops._upsample_nearest_exact3d)
_linalg = types.SimpleNamespace(linalg_vecdot=_ops.linalg_vecdot,
                                linalg_multi_dot=_ops.linalg_multi_dot)

__all__ = [
    "bilinear", "binary_cross_entropy_with_logits", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cosine_embedding_loss",
    "cosine_similarity", "grid_sampler", "group_norm", "hinge_embedding_loss", "kl_div",
    "layer_norm", "margin_ranking_loss", "pdist", "poisson_nll_loss", "prelu", "rms_norm",
    "triplet_margin_loss",
]
