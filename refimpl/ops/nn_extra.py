"""The rest of ``torch.nn.functional``'s breadth: ``multi_margin_loss``,
``multilabel_margin_loss``, ``triplet_margin_with_distance_loss``,
``linear_cross_entropy``, ``pdist``, ``ctc_loss``, ``channel_shuffle``,
``max_unpool1d/2d/3d`` (spec: NNF-077, NNF-078, NNF-067, NNF-069, NNF-045).

Compositions of refimpl ops like the rest of the functional layer (every device,
autograd to any order); index tables come from shapes alone, on the host.
"""

from __future__ import annotations

import numpy as np

from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops.elementwise_binary import where
from refimpl.ops.nn_loss import _check_reduction, _reduce, _reduction
from refimpl.ops.nn_shape import _index, has_data


@composite("multi_margin_loss")
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j])^p / C``,
    scaled by ``weight[y]`` (spec NNF-077)."""
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    if input.dim() > 2 or (input.dim() == 2 and input.shape[1] == 0) or \
            (input.dim() < 2 and input.numel() == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    _check_reduction(reduction)
    x = input if input.dim() == 2 else input.reshape(1, -1)
    if target.dim() > 1 or target.numel() != x.shape[0]:
        raise RuntimeError("multi_margin_loss: target tensor should be 1-D with size equal to "
                           "the number of input samples (batch size). Expected target size "
                           f"[{x.shape[0]}], but got {list(target.shape)}. Input has shape "
                           f"{list(input.shape)}.")
    classes = x.shape[1]
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got "
                           f"{list(weight.shape)}")
    if target.dtype.name != "int64":
        raise RuntimeError(f"expected scalar type Long but found {target.dtype._legacy}")
    y = target.reshape(-1)
    if has_data(y) and y.numel() and bool(((y < 0).logical_or(y >= classes)).any()):
        raise RuntimeError("target out of range")
    picked = x.gather(1, y.unsqueeze(1))
    terms = (margin - picked + x).clamp_min(0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight.index_select(0, y).unsqueeze(1)
    own = _index(np.arange(classes), x).unsqueeze(0) == y.unsqueeze(1)
    loss = where(own, 0, terms).sum(1) / classes
    if input.dim() < 2 and reduction == "none":
        loss = loss.reshape(target.shape) if target.dim() else loss.reshape(())
    return _reduce(loss, reduction)


@composite("multilabel_margin_loss")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``target`` lists class indices, ended by the first -1;
    ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C``
    (spec NNF-077)."""
    reduction = _reduction(size_average, reduce, reduction)
    if input.dim() > 2 or input.numel() == 0 and (input.dim() < 2 or input.shape[1] == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    if target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of "
                           f"size: {list(input.shape)}")
    _check_reduction(reduction)
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = target.reshape(x.shape)
    classes = x.shape[1]
    # the labels of a row are its entries before its first -1
    valid = (y >= 0).long().cumprod(1).bool()
    safe = where(valid, y, 0)
    onehot = (safe.unsqueeze(2) == _index(np.arange(classes), x)).logical_and(
        valid.unsqueeze(2))
    is_target = onehot.any(1)  # (N, C)
    picked = x.gather(1, safe)  # (N, C): x at each listed label
    hinge = (1 - (picked.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0)  # (N, labels, C)
    mask = valid.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1))
    loss = where(mask, hinge, 0).sum((1, 2)) / classes
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with any distance (default
    ``pairwise_distance``) (spec NNF-078)."""
    from refimpl.ops.nn_layers import pairwise_distance

    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    _check_reduction(reduction)
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


@composite("pdist")
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distances between every pair of rows (i < j) of a 2-d input, in row-major
    order of the pairs (spec NNF-067)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    a = input.index_select(0, _index(i, input))
    b = input.index_select(0, _index(j, input))
    return (a - b).norm(p, 1)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels of ``groups`` groups: (N, g*k, ...) -> channel order
    ``0, k, 2k, ..., 1, k+1, ...`` (spec NNF-024)."""
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    lead, rest = input.shape[0], list(input.shape[2:])
    x = input.reshape(lead, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(lead, c, *rest)


def _max_unpool(input: Tensor, indices: Tensor, n: int, kernel_size, stride, padding,
                output_size) -> Tensor:
    def tup(v):
        return list(v) if isinstance(v, (list, tuple)) else [v] * n
    k = tup(kernel_size)
    s = k if stride is None else tup(stride)
    p = tup(padding)
    spatial = list(input.shape[-n:])
    if output_size is None:
        out = [(size - 1) * ss - 2 * pp + kk for size, ss, pp, kk in zip(spatial, s, p, k)]
    else:
        out = [int(v) for v in list(output_size)[-n:]]
    if indices.shape != input.shape:
        shown = list(input.shape) + [1] * (n == 1)
        got = list(indices.shape) + [1] * (n == 1)
        raise RuntimeError("Expected shape of indices to be same as that of the input tensor "
                           f"({shown}) but got indices tensor with shape: {got}")
    lead = list(input.shape[:-n])
    volume = int(np.prod(out))
    flat_idx = indices.reshape(*lead, -1)
    if has_data(flat_idx) and flat_idx.numel() and bool(
            ((flat_idx < 0).logical_or(flat_idx >= volume)).any()):
        bad = int(flat_idx.masked_select((flat_idx < 0).logical_or(flat_idx >= volume))[0])
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{'x'.join(map(str, out))})")
    base = input.new_zeros((*lead, volume))
    return base.scatter(-1, flat_idx, input.reshape(*lead, -1)).reshape(*lead, *out)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool1d``: values placed at their indices, zeros
    elsewhere (spec NNF-045)."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


@composite("max_unpool2d")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool2d`` (spec NNF-045)."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


@composite("max_unpool3d")
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of ``max_pool3d`` (spec NNF-045)."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)


__all__: list = []


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options=None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``; a
    ``linear_weight`` of shape (C, d_1, ..., d_K, in) gives K-dimensional logits. torch's
    chunking ``options`` change only how the same value is computed, so they are accepted
    and not needed (spec NNF-071)."""
    from refimpl.ops.nn_loss import cross_entropy

    if input.dim() not in (1, 2):
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError("expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    features = linear_weight.shape[-1]
    if input.shape[-1] != features:
        raise RuntimeError("expected equal input and linear_weight last dimensions "
                           f"(in_features), got {input.shape[-1]} and {features}, respectively")
    if ignore_index is not None and target.dtype.category == 2:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    out_shape = list(linear_weight.shape[:-1])
    if len(out_shape) > 1 and input.dim() == 1:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, (N, "
                           f"{features}), got unbatched input with shape {tuple(input.shape)}")
    if linear_bias is not None and list(linear_bias.shape) != out_shape:
        raise RuntimeError(f"expected linear_bias shape {tuple(out_shape)}, got "
                           f"{tuple(linear_bias.shape)}")
    flat = linear_weight.reshape(-1, features)
    logits = input.matmul(flat.t()).reshape(*input.shape[:-1], *out_shape)
    if linear_bias is not None:
        logits = logits + linear_bias
    return cross_entropy(logits, target, weight, None,
                         -100 if ignore_index is None else ignore_index, None, reduction,
                         label_smoothing)


_FLOOR = -1e30  # "log 0" of unreachable CTC states: finite, so gradients stay free of NaN


def _lengths(x) -> list:
    return [int(v) for v in (x.tolist() if isinstance(x, Tensor) else x)]


@composite("ctc_loss.IntList")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: ``-log`` of the total probability of
    every alignment of each target (blank-separated, repeats collapsed) with its input,
    by the forward (alpha) recursion in log space; 'mean' divides each loss by its target
    length first. Impossible alignments give inf (0 with ``zero_infinity``)
    (spec NNF-069)."""
    from refimpl.ops.reduction import logsumexp
    from refimpl.ops.shape import cat, stack

    _check_reduction(reduction)
    batched = log_probs.dim() == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, n, _ = lp.shape
    il, tl = _lengths(input_lengths), _lengths(target_lengths)
    flat = _lengths(targets.reshape(-1))
    if targets.dim() == 2:  # one padded row per sample; else all targets concatenated
        width = targets.shape[-1]
        labels = [flat[i * width:i * width + tl[i]] for i in range(n)]
    else:
        starts = np.cumsum([0, *tl])
        labels = [flat[starts[i]:starts[i] + tl[i]] for i in range(n)]
    ext_len = 2 * max(tl, default=0) + 1
    ext = np.full((n, ext_len), blank, dtype=np.int64)
    skip = np.zeros((n, ext_len), dtype=bool)
    for i, lab in enumerate(labels):
        ext[i, 1:2 * len(lab) + 1:2] = lab
        for s in range(3, 2 * len(lab) + 1, 2):
            skip[i, s] = ext[i, s] != ext[i, s - 2]
    emit = lp.gather(2, _index(ext, lp).unsqueeze(0).expand(steps, n, ext_len))
    skip_t = _index(skip.astype(np.int64), lp) != 0
    start = np.full((n, ext_len), False)
    start[:, 0] = True
    start[:, 1] = np.array(tl) > 0
    alpha = where(_index(start.astype(np.int64), lp) != 0, emit[0], _FLOOR)
    alphas = [alpha]
    for step in range(1, steps):
        one = alpha.new_full((n, 1), _FLOOR)
        shifted1 = cat([one, alpha.narrow(1, 0, ext_len - 1)], 1)
        shifted2 = cat([one, one, alpha.narrow(1, 0, ext_len - 2)], 1) if ext_len > 2 else \
            alpha.new_full((n, ext_len), _FLOOR)
        shifted2 = where(skip_t, shifted2, _FLOOR)
        alpha = logsumexp(stack([alpha, shifted1, shifted2]), 0) + emit[step]
        alphas.append(alpha)
    path = stack(alphas)  # (T, N, L')
    last = path.gather(0, _index([[max(v - 1, 0)] * ext_len for v in il], lp).reshape(
        1, n, ext_len)).squeeze(0)
    ends = _index([[2 * v, max(2 * v - 1, 0)] for v in tl], lp)
    pair = last.gather(1, ends)
    only_blank = _index([[v == 0] for v in tl], lp) != 0
    pair = where(only_blank.logical_and(_index([[False, True]] * n, lp) != 0), _FLOOR, pair)
    loss = -logsumexp(pair, 1)
    # torch's gradient with respect to log_probs is the one through a log_softmax folded
    # into it (exp(log_probs) minus the alignment posteriors, not the posteriors alone);
    # an added term of value exactly 0 with gradient exp(log_probs) over each sample's
    # steps gives the same
    steps_mask = (_index(np.arange(steps), lp).unsqueeze(1) < _index(il, lp)).unsqueeze(2)
    probs = lp.exp()
    loss = loss + where(steps_mask, probs - probs.detach(), 0).sum((0, 2))
    impossible = (loss > -_FLOOR / 10).detach()
    loss = where(impossible, 0.0 if zero_infinity else float("inf"), loss)
    if not batched and reduction == "none":
        loss = loss.squeeze(0)
    if reduction == "mean":
        return (loss / _index([max(v, 1) for v in tl], lp).to(loss.dtype)).mean()
    return _reduce(loss, reduction)
