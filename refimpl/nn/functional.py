"""Functional neural-network ops (torch's ``torch.nn.functional``), composed of refimpl ops.

Each function is written in refimpl ops, so autograd, fake tensors and every device come
for free: a fake ``cross_entropy`` runs the meta functions of the ops it is made of.
"""

from __future__ import annotations

from refimpl._autocast import composite
from refimpl._tensor import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0)."""
    return input.relu_() if inplace else input.relu()


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """log(softmax(input)) along ``dim``, computed stably as ``x - logsumexp(x)``."""
    x = input if dtype is None else input.to(dtype)
    return x - x.logsumexp(dim, keepdim=True)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``."""
    return log_softmax(input, dim, dtype=dtype).exp()


def _class_dim(input: Tensor) -> int:
    return 0 if input.dim() == 1 else 1


def _pick(logp: Tensor, target: Tensor, dim: int) -> Tensor:
    """``logp`` at the target class of every sample (ignored samples read class 0)."""
    return logp.gather(dim, target.unsqueeze(dim)).squeeze(dim)


def _class_weights(weight: Tensor | None, target: Tensor, like: Tensor) -> Tensor:
    if weight is None:
        return target.new_ones(target.shape, dtype=like.dtype)
    return weight[target.flatten()].reshape(target.shape)


@composite("nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of the target classes (``input`` holds log-probabilities)."""
    dim = _class_dim(input)
    keep = target != ignore_index
    safe = target.where(keep, target.new_zeros(()))
    w = _class_weights(weight, safe, input) * keep.to(input.dtype)
    losses = -_pick(input, safe, dim) * w
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / w.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


@composite("cross_entropy_loss")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits ``input`` (N, C, ...) against class indices ``target``,
    with optional class weights and label smoothing (torch's definition)."""
    dim = _class_dim(input)
    logp = log_softmax(input, dim)
    loss = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing <= 0.0:
        return loss
    classes = input.shape[dim]
    keep = (target != ignore_index).to(input.dtype)
    if weight is not None:
        shape = [1] * input.dim()
        shape[dim] = classes
        smooth = -(logp * weight.reshape(shape)).sum(dim) * keep
    else:
        smooth = -logp.sum(dim) * keep
    if reduction == "mean":
        if weight is not None:
            safe = target.where(target != ignore_index, target.new_zeros(()))
            smooth = smooth.sum() / (_class_weights(weight, safe, input) * keep).sum()
        else:
            smooth = smooth.sum() / keep.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise over every dim but the channels (dim 1): batch statistics when
    ``training`` (updating the running ones), else the running statistics."""
    dims = [d for d in range(input.dim()) if d != 1]
    shape = [1] * input.dim()
    shape[1] = input.shape[1]
    if training:
        mean = input.mean(dims)
        var = input.var(dims, correction=0)
        if running_mean is not None:
            n = input.numel() // input.shape[1]
            with _no_grad():
                running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
                running_var.mul_(1 - momentum).add_(
                    var.detach() * (momentum * n / max(n - 1, 1)))
    else:
        mean, var = running_mean, running_var
    out = (input - mean.reshape(shape)) / (var.reshape(shape) + eps).sqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _no_grad():
    from refimpl.autograd.grad_mode import no_grad

    return no_grad()


__all__ = ["batch_norm", "cross_entropy", "log_softmax", "nll_loss", "relu", "softmax"]
