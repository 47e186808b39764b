"""Layers of ``torch.nn.functional`` that are not convolutions, poolings or
normalisations: ``linear``, ``bilinear``, the dropout family, ``embedding``,
``embedding_bag``, ``scaled_dot_product_attention`` (the math path), and the
distances ``cosine_similarity``, ``pairwise_distance``, ``normalize``
(spec: NNF-060..NNF-066).

All are compositions of refimpl ops, so they run on every device with autograd (to any
order) and forward mode. Dropout masks are drawn with refimpl's own generator on the
input's device (``bernoulli_``), so they follow ``manual_seed`` but are not torch's
bits.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.autograd.grad_mode import is_grad_enabled
from refimpl.ops.nn_attention_kernel import sdpa_fused
from refimpl.ops.nn_attention_kernel import use_fused as use_fused_sdpa
from refimpl.ops.nn_conv import _c_name
from refimpl.ops.nn_linear_kernel import linear as fused_linear
from refimpl.ops.nn_linear_kernel import use_fused


@composite("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` (spec NNF-060)."""
    if len(weight._shape) == 2 and input._shape and input._shape[-1] != weight._shape[1]:
        rows = input.numel() // max(input.shape[-1], 1) if input.dim() > 1 else 1
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x"
                           f"{input.shape[-1]} and {weight.shape[1]}x{weight.shape[0]})")
    if use_fused(input, weight, bias):
        return fused_linear(input, weight, bias)
    out = input.matmul(weight.t() if weight.dim() == 2 else weight)
    return out if bias is None else out + bias


@composite("bilinear")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y_k = x1 @ W_k @ x2 + b_k`` for weight (out, in1, in2) (spec NNF-060)."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} "
                           f"and {input2.dim()}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got "
                           f"{weight.dim()}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {weight.shape[2]}")
    # torch's decomposition (its _trilinear): two contractions, each one matrix product
    # (float16 rounds after each): over in1 with the weight, then over in2 with input2
    left = input1.unsqueeze(-2).unsqueeze(-2).matmul(weight).squeeze(-2)  # (..., out, in2)
    out = left.matmul(input2.unsqueeze(-1)).squeeze(-1)
    return out if bias is None else out + bias


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input: Tensor, shape, p: float) -> Tensor:
    from refimpl.ops.factories import empty

    return empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1.0 - p)


def _dropout(input: Tensor, p: float, training: bool, inplace: bool, shape) -> Tensor:
    _check_p(p)
    if not training or p == 0.0 and not inplace:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace else input * 0
    mask = _keep_mask(input, shape, p) / (1.0 - p)
    return input.mul_(mask) if inplace else input * mask


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``
    (identity when not ``training``) (spec NNF-061)."""
    return _dropout(input, p, training, inplace, input.shape)


def _feature_shape(input: Tensor, batched_dims: int, name: str) -> tuple:
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if input.dim() not in (batched_dims - 1, batched_dims):
        n = batched_dims - 2
        raise RuntimeError(f"{name}: Expected {n + 1}D or {n + 2}D input, but received a "
                           f"{input.dim()}D input. Note that {name} exists to provide channel-"
                           f"wise dropout on inputs with {n} spatial dimensions, a channel "
                           f"dimension, and an optional batch dimension (i.e. {n + 1}D or "
                           f"{n + 2}D inputs).")
    spatial = batched_dims - 2
    return tuple(input.shape[:input.dim() - spatial]) + (1,) * spatial


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Drop whole channels of (N, C, L) or (C, L) inputs (spec NNF-061)."""
    _check_p(p)
    return _dropout(input, p, training, inplace, _feature_shape(input, 3, "dropout1d"))


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Drop whole channels of (N, C, H, W) or (C, H, W) inputs (spec NNF-061)."""
    _check_p(p)
    return _dropout(input, p, training, inplace, _feature_shape(input, 4, "dropout2d"))


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Drop whole channels of (N, C, D, H, W) or (C, D, H, W) inputs (spec NNF-061)."""
    _check_p(p)
    return _dropout(input, p, training, inplace, _feature_shape(input, 5, "dropout3d"))


_SELU_ALPHA_SCALED = 1.7580993408473766  # selu's alpha * scale: the saturation value


def _alpha(input: Tensor, p: float, training: bool, shape) -> Tensor:
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0
    mask = _keep_mask(input, shape, p)
    a = 1.0 / math.sqrt((_SELU_ALPHA_SCALED ** 2 * p + 1) * (1 - p))
    b = (mask - 1) * (_SELU_ALPHA_SCALED * a) + _SELU_ALPHA_SCALED * a * p
    return input * (mask * a) + b


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps selu's mean and variance: dropped elements take selu's
    saturation value, then an affine map restores the statistics (spec NNF-061)."""
    return _alpha(input, p, training, input.shape)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """``alpha_dropout`` dropping whole channels (spec NNF-061)."""
    return _alpha(input, p, training, tuple(input.shape[:2]) + (1,) * (input.dim() - 2))


def _check_indices(input: Tensor, fn: str = "embedding", position: int = 1) -> None:
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #{position} 'indices' to have one of "
                           "the following scalar types: Long, Int; but got "
                           f"torch.{input.dtype._legacy}Tensor instead (while checking "
                           f"arguments for {fn})")


def _padding_idx(padding_idx, num: int):
    if padding_idx is None:
        return None
    if padding_idx > 0:
        if padding_idx >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
    elif padding_idx < 0:
        if padding_idx < -num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx += num
    return padding_idx


def _renorm_rows(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """torch's embedding_renorm_: rows used by ``input`` whose norm exceeds ``max_norm``
    are scaled in place (no autograd history)."""
    from refimpl.autograd.grad_mode import no_grad

    with no_grad():
        rows = input.flatten().unique()
        picked = weight.index_select(0, rows)
        norms = picked.norm(norm_type, dim=1, keepdim=True)
        scale = (max_norm / (norms + 1e-7)).where(norms > max_norm, 1.0)
        weight.index_copy_(0, rows, picked * scale)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at the indices ``input``; the ``padding_idx`` row gets no
    gradient; ``scale_grad_by_freq`` divides each row's gradient by the index's count;
    ``max_norm`` renormalises the used rows in place first (spec NNF-062)."""
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    padding_idx = _padding_idx(padding_idx, weight.shape[0])
    if max_norm is not None:
        _check_indices(input, "embedding_renorm_", 2)
    _check_indices(input)
    if sparse and weight.requires_grad and is_grad_enabled():
        # the output is dense either way; only the gradient of weight is a sparse tensor
        raise NotImplementedError("refimpl has no sparse tensors: embedding(sparse=True) with "
                                  "a weight that requires grad (its gradient is sparse)")
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    out = weight.index_select(0, input.reshape(-1)).reshape(*input.shape, weight.shape[-1])
    if scale_grad_by_freq:
        out = _scale_grad(out, input)
    if padding_idx is not None:
        out = out.where((input != padding_idx).unsqueeze(-1), out.detach())
    return out


def _scale_grad(out: Tensor, input: Tensor) -> Tensor:
    """``out`` unchanged in value, its gradient divided by how often each index occurs in
    ``input`` (``out - out.detach()`` is exactly zero, so the value is exact)."""
    flat = input.reshape(-1)
    counts = (flat.unsqueeze(1) == flat.unsqueeze(0)).sum(1).reshape(*input.shape, 1)
    return out.detach() + (out - out.detach()) / counts.to(out.dtype)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embedding rows: a 2-D ``input`` holds one bag
    per row; a 1-D ``input`` is cut into bags at ``offsets`` (spec NNF-062)."""
    from refimpl.ops.factories import tensor, zeros

    _check_indices(input, "embedding_bag")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences. However, "
                             f"found offsets of type {type(offsets)}")
        n, length = input.shape
        bounds = [(i * length, (i + 1) * length) for i in range(n)]
        flat = input.reshape(-1)
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    else:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = [int(v) for v in offsets.tolist()]
        ends = starts[1:] + [input.numel()]
        if include_last_offset:
            starts, ends = starts[:-1], ends[:-1]
        bounds = list(zip(starts, ends))
        flat, psw = input, per_sample_weights
    pad = _padding_idx(padding_idx, weight.shape[0])
    rows = embedding(flat, weight, None, max_norm, norm_type)
    reduced = weight.dtype in (D.float16, D.bfloat16)
    if reduced:  # torch accumulates each bag (weighted rows included) in float32
        rows = rows.float()
    if psw is not None:
        rows = rows * (psw.float() if reduced else psw).unsqueeze(-1)
    keep = [i for i in range(flat.numel())] if pad is None else \
        [i for i, v in enumerate(flat.tolist()) if v != pad]
    out = []
    for a, b in bounds:
        idx = [i for i in keep if a <= i < b]
        if not idx:
            out.append(zeros(weight.shape[-1], dtype=weight.dtype, device=weight.device))
            continue
        bag = rows.index_select(0, tensor(idx, device=weight.device))
        bag = bag.sum(0) if mode == "sum" else bag.mean(0) if mode == "mean" else bag.amax(0)
        out.append(bag.to(weight.dtype))
    from refimpl.ops.shape import stack

    return stack(out) if out else zeros((0, weight.shape[-1]), dtype=weight.dtype,
                                        device=weight.device)


@composite("scaled_dot_product_attention")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` (torch's math path): a boolean mask keeps
    True positions, a float mask is added, ``is_causal`` keeps the lower triangle; rows
    with every position masked give zeros; ``enable_gqa`` repeats key/value heads to the
    query's (spec NNF-063)."""
    from refimpl.ops.factories import ones

    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_c_name(query.dtype)} key.dtype: {_c_name(key.dtype)} "
                           f"and value.dtype: {_c_name(value.dtype)} instead.")
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in ")
        key = key.repeat_interleave(hq // hk, -3)
        value = value.repeat_interleave(hq // hv, -3)
    if query.dtype in (D.float16, D.bfloat16):  # accumulated in float32, rounded once
        return scaled_dot_product_attention(
            query.float(), key.float(), value.float(),
            attn_mask.float() if attn_mask is not None and attn_mask.dtype.category == 2
            else attn_mask, dropout_p, is_causal, scale, enable_gqa).to(query.dtype)
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if dropout_p == 0.0 and use_fused_sdpa(query, key, value, attn_mask):
        return sdpa_fused(query, key, value, attn_mask, scale, is_causal)[0]
    scores = query.matmul(key.transpose(-2, -1)) * scale
    if is_causal:
        attn_mask = ones((length, source), dtype=D.bool_, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype is D.bool_:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    masked_rows = (scores == float("-inf")).all(-1, keepdim=True)
    weights = weights.masked_fill(masked_rows, 0.0)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return weights.matmul(value)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim`` (spec NNF-064)."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is not None:
        from refimpl.ops.division import div

        return div(input, denom, out=out)
    return input / denom


@composite("cosine_similarity")
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``(x1 / ||x1||) . (x2 / ||x2||)`` along ``dim`` after broadcasting, each norm
    clamped to at least ``eps`` (spec NNF-065)."""
    from refimpl.ops.broadcast import broadcast_tensors

    a, b = broadcast_tensors(x1, x2)
    na, nb = (_clamped_norm(v, dim, eps) for v in (a, b))
    return ((a / na) * (b / nb)).sum(dim)


def _clamped_norm(x: Tensor, dim: int, eps: float) -> Tensor:
    """``||x||`` along ``dim`` with its value clamped to ``eps`` but the gradient of the
    unclamped norm (torch clamps in place under no_grad)."""
    n = x.norm(2, dim, keepdim=True)
    return n + (n.clamp_min(eps) - n).detach()


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (spec NNF-066)."""
    dim = max(x1.dim(), x2.dim()) - 1
    if dim < 0:
        return (x1 - x2 + eps).abs()
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


__all__: list = []
