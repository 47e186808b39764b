"""Losses of ``torch.nn.functional`` (spec: NNF-070..NNF-079): ``nll_loss``,
``cross_entropy`` (class indices or probabilities, class weights, ``ignore_index``,
``label_smoothing``), ``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy`` (with logits), ``kl_div``, ``margin_ranking_loss``,
``hinge_embedding_loss``, ``soft_margin_loss``, ``multilabel_soft_margin_loss``,
``cosine_embedding_loss``, ``triplet_margin_loss``, ``poisson_nll_loss``,
``gaussian_nll_loss``.

Each is a composition of refimpl ops (so every device, autograd to any order and
forward mode come from those ops' rules), with torch's argument checks and messages
and its legacy ``size_average``/``reduce`` arguments.
"""

from __future__ import annotations

import math
import warnings

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops.elementwise_binary import where
from refimpl.ops.nn_loss_kernel import nll_loss_fused, use_fused
from refimpl.ops.nn_shape import has_data


def _reduction(size_average, reduce, reduction: str) -> str:
    """torch's legacy ``size_average``/``reduce`` pair mapped to a reduction name."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='mean' instead." if size_average is not False and
                  reduce is not False else
                  "size_average and reduce args will be deprecated, please use "
                  f"reduction='{_legacy_name(size_average, reduce)}' instead.",
                  UserWarning, stacklevel=3)
    return _legacy_name(size_average, reduce)


def _legacy_name(size_average, reduce) -> str:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _not_differentiable(fn: str, arg: str, t) -> None:
    """torch's error for an argument its derivative formulas do not cover."""
    if t is None or not t.requires_grad:
        return
    from refimpl.autograd.grad_mode import is_grad_enabled

    if is_grad_enabled():
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument "
                           f"'{arg}'. This input cannot have requires_grad True.")


def _class_dim(input: Tensor) -> int:
    return 0 if input.dim() == 1 else 1


def _check_class_target(input: Tensor, target: Tensor) -> None:
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{target.dtype._legacy}")
    if input.dim() >= 2:
        if input.shape[0] != target.shape[0] if target.dim() else True:
            raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                             f"batch_size ({target.shape[0] if target.dim() else 0}).")
        want = [input.shape[0], *input.shape[2:]]
        if list(target.shape) != want:
            raise RuntimeError(f"Expected target size {want}, got {list(target.shape)}")


@composite("nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean") -> Tensor:
    """Negative log likelihood of the target classes (``input`` holds log-probabilities,
    classes along dim 1, or dim 0 for an unbatched input); 'mean' divides by the summed
    weights of the samples not ignored (spec NNF-070)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_class_target(input, target)
    _not_differentiable("nll_loss_forward", "weight", weight)
    _check_weight(input, weight)
    if target.dtype is not D.int64:  # (long() of an int64 tensor is the tensor itself)
        target = target.long()
    if use_fused(input, target, weight):
        return nll_loss_fused(input, target, weight, reduction, ignore_index)[0]
    _check_bounds(input, target, ignore_index)
    return _nll_ops(input, target, weight, ignore_index, reduction)[0]


def _check_weight(input: Tensor, weight, prefix: str = "") -> None:
    """torch's check that class weights give one weight per class: a 1-d weight of the
    class count for 1-d/2-d inputs (its message names both), as many elements for the
    n-d loss (a shorter message)."""
    if weight is None:
        return
    classes = input.shape[_class_dim(input)]
    if input.dim() <= 2 or prefix:
        if weight.dim() != 1 or weight.numel() != classes:
            raise RuntimeError(
                f"{prefix}weight tensor should be defined either for all {classes} classes or "
                f"no classes but got weight tensor of shape: {list(weight.shape)}")
    elif weight.numel() != classes:
        raise RuntimeError("weight tensor should be defined either for all or no classes")


def _check_bounds(input: Tensor, target: Tensor, ignore_index: int) -> None:
    """torch's IndexError for a target class out of range (and not ignored)."""
    classes = input.shape[_class_dim(input)]
    keep = target != ignore_index
    if target.numel() and has_data(target) and bool(((target < 0).logical_or(target >= classes))
                               .logical_and(keep).any()):
        bad = target.masked_select(keep.logical_and((target < 0).logical_or(target >= classes)))
        raise IndexError(f"Target {int(bad[0])} is out of bounds.")


def _nll_ops(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str):
    """The loss (reduced as asked) and the per-sample weights, in refimpl ops."""
    keep = target != ignore_index
    safe = target.where(keep, 0)
    dim = _class_dim(input)
    picked = input.gather(dim, safe.unsqueeze(dim)).squeeze(dim)
    w = keep.to(input.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.flatten()).reshape(safe.shape)
    losses = -picked * w
    if reduction == "none":
        return losses, w
    if reduction == "sum":
        return losses.sum(), w
    return losses.sum() / w.sum(), w


def _class_shape(input: Tensor, dim: int) -> list:
    shape = [1] * input.dim()
    shape[dim] = input.shape[dim]
    return shape


@composite("cross_entropy_loss")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits ``input`` (classes along dim 1, or dim 0 unbatched) against
    class indices (integer ``target``) or class probabilities (floating ``target`` of the
    input's shape), with class weights, ``ignore_index`` and ``label_smoothing``
    (spec NNF-071)."""
    reduction = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    dim = _class_dim(input)
    classes = input.shape[dim]
    if target.dtype.category == 2 and target.shape == input.shape:
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
        _check_reduction(reduction)
        _check_weight(input, weight, "cross_entropy: ")
        logp = input.log_softmax(dim)
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        terms = logp * target
        if weight is not None:
            terms = terms * weight.reshape(_class_shape(input, dim))
        # torch sums every term at once for "mean" and "sum" (one rounding in float16)
        if reduction == "mean":
            return -terms.sum() / (input.numel() // max(classes, 1)) if input.numel() \
                else -terms.sum() / 0.0
        if reduction == "sum":
            return -terms.sum()
        return -terms.sum(dim)
    logp = input.log_softmax(dim)
    loss = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing <= 0.0:
        return loss
    keep = (target != ignore_index).to(input.dtype)
    terms = logp if weight is None else logp * weight.reshape(_class_shape(input, dim))
    smooth = -terms.sum(dim) * keep
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / keep.sum()
        else:
            safe = target.where(target != ignore_index, 0)
            wsum = (weight.index_select(0, safe.flatten()).reshape(safe.shape) * keep).sum()
            smooth = smooth.sum() / wsum
    elif reduction == "sum":
        smooth = smooth.sum()
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


def _warn_size(input: Tensor, target: Tensor, stacklevel: int = 4) -> None:
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input "
                      f"size ({input.shape}). This will likely lead to incorrect results due "
                      "to broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=stacklevel)


def _pointwise_loss(fn, input, target, size_average, reduce, reduction) -> Tensor:
    _warn_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _reduce(fn(input - target), reduction)


@composite("mse_loss")
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Squared error (spec NNF-072)."""
    def sq(d):
        return d * d if weight is None else d * d * weight
    return _pointwise_loss(sq, input, target, size_average, reduce, reduction)


@composite("l1_loss")
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Absolute error (spec NNF-072)."""
    def ab(d):
        return d.abs() if weight is None else d.abs() * weight
    return _pointwise_loss(ab, input, target, size_average, reduce, reduction)


@composite("smooth_l1_loss")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (spec NNF-072)."""
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, size_average, reduce, reduction)

    def smooth(d):
        a = d.abs()
        return where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    return _pointwise_loss(smooth, input, target, size_average, reduce, reduction)


@composite("huber_loss")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (spec NNF-072)."""
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")

    def huber(d):
        a = d.abs()
        r = where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
        return r if weight is None else r * weight
    return _pointwise_loss(huber, input, target, None, None, reduction)


@composite("binary_cross_entropy")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``-(t log x + (1 - t) log(1 - x))`` with each log clamped at -100 (spec NNF-073)."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the "
                         f"input size ({input.shape}) is deprecated. Please ensure they have "
                         "the same size.")
    _check_reduction(reduction)
    _not_differentiable("binary_cross_entropy", "weight", weight)
    if input.numel() and has_data(input) and bool(((input < 0).logical_or(input > 1)).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = -(target * input.log().clamp_min(-100)
             + (1 - target) * (1 - input).log().clamp_min(-100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@composite("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` in the overflow-safe form, with
    ``pos_weight`` scaling the positive term (spec NNF-073)."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    _check_reduction(reduction)
    softplus_neg = (-input.abs()).exp().log1p() + (-input).clamp_min(0)
    if pos_weight is not None:
        loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@composite("kl_div")
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Pointwise ``target * (log target - input)`` (``input`` holds log-probabilities);
    'batchmean' divides the sum by the batch size (spec NNF-074)."""
    reduction = _reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                      "the support size.'batchmean' divides only by the batch size, and "
                      "aligns with the KL div math definition.'mean' will be changed to "
                      "behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    return _reduce(loss, reduction)


@composite("margin_ranking_loss")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)`` (spec NNF-075)."""
    reduction = _reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {input1.shape}, input2: "
                           f"{input2.shape}, target: {target.shape} ")
    _check_reduction(reduction)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@composite("hinge_embedding_loss")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1
    (spec NNF-075)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    # torch's composite subtracts the input from the margin wrapped as a tensor of the
    # input's dtype: a float16/bfloat16 input rounds the margin first (on CUDA too)
    if input.dtype in (D.float16, D.bfloat16):
        margin = input.new_full((), margin)
    margin_part = where(target != 1, (margin - input).clamp_min(0), 0)
    self_part = where(target != -1, input, 0)
    return _reduce(margin_part + self_part, reduction)


@composite("soft_margin_loss")
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))`` (spec NNF-075)."""
    reduction = _reduction(size_average, reduce, reduction)
    _not_differentiable("soft_margin_loss", "target", target)
    _check_reduction(reduction)
    return _reduce((-input * target).exp().log1p(), reduction)


def _log_sigmoid(x: Tensor) -> Tensor:
    return x.clamp_max(0) - (-x.abs()).exp().log1p()


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """Binary cross entropy with logits per class, averaged over the classes
    (spec NNF-075)."""
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * _log_sigmoid(input) + (1 - target) * _log_sigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.dim() - 1) / input.shape[-1]
    return _reduce(loss, reduction)


@composite("cosine_embedding_loss")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos`` where target is 1, ``max(0, cos - margin)`` where it is -1
    (spec NNF-075)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    dim = input1.dim() - 1
    eps = 1e-12
    prod = (input1 * input2).sum(dim)
    mag = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cos = prod / mag.sqrt()
    loss = where(target == 1, 1 - cos, 0) + where(target == -1, (cos - margin).clamp_min(0), 0)
    return _reduce(loss, reduction)


@composite("triplet_margin_loss")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with
    ``pairwise_distance``; ``swap`` takes the smaller of the two negative distances
    (spec NNF-075)."""
    from refimpl.ops.nn_layers import pairwise_distance

    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    _check_reduction(reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    # torch's order, ``(margin + d_pos) - d_neg``: float16 rounds after each step
    return _reduce((d_pos + margin - d_neg).clamp_min(0), reduction)


@composite("poisson_nll_loss")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True,
                     full: bool = False, size_average=None, eps: float = 1e-8,
                     reduce=None, reduction: str = "mean") -> Tensor:
    """Poisson negative log likelihood; ``full`` adds Stirling's term where target > 1
    (spec NNF-076)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + (2 * math.pi * target).log() * 0.5
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``0.5 (log var + (input - target)^2 / var)`` with ``var`` clamped to ``eps``
    (without gradient through the clamp) (spec NNF-076)."""
    if not isinstance(var, Tensor):
        var = input.new_full((), float(var))
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    var = var + (var.clamp_min(eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


__all__: list = []
