"""``torch.nn.functional.multi_head_attention_forward``: the computation of
``nn.MultiheadAttention`` (spec: NNF-068).

Sequence-first layout ((L, N, E) queries, (S, N, E) keys and values, or unbatched (L, E)):
input projections (packed or separate), optional key/value biases and a zero attention
slot, boolean masks turned into -inf additive masks (True masks a position, the opposite
of ``scaled_dot_product_attention``'s boolean masks), scaled dot-product attention over
``num_heads`` heads, the output projection, and the attention weights (averaged over
heads by default) when asked. A composition of refimpl ops: every device, autograd to
any order.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops.nn_layers import dropout, linear, scaled_dot_product_attention


def _canonical(mask, like: Tensor):
    """A boolean mask as an additive float mask (-inf where True); float masks as given."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return like.new_zeros(tuple(mask.shape)).masked_fill(mask, float("-inf"))
    return mask


def _project(query, key, value, e: int, in_proj_weight, in_proj_bias,
             use_separate_proj_weight: bool, q_proj_weight, k_proj_weight, v_proj_weight):
    b = (None, None, None) if in_proj_bias is None else in_proj_bias.split(e)
    if use_separate_proj_weight:
        ws = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        ws = in_proj_weight.split(e)
    return tuple(linear(x, w, bb) for x, w, bb in zip((query, key, value), ws, b))


def _pad_last(mask, like: Tensor):
    from refimpl.ops.nn_shape import pad

    return None if mask is None else pad(mask, (0, 1))


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
        out_proj_weight: Tensor, out_proj_bias, training: bool = True,
        key_padding_mask=None, need_weights: bool = True, attn_mask=None,
        use_separate_proj_weight: bool = False, q_proj_weight=None, k_proj_weight=None,
        v_proj_weight=None, static_k=None, static_v=None, average_attn_weights: bool = True,
        is_causal: bool = False):
    """Multi-head attention as ``nn.MultiheadAttention`` computes it; returns
    ``(output, weights or None)`` (spec NNF-068)."""
    from refimpl.ops.factories import zeros
    from refimpl.ops.shape import cat

    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, e = query.shape
    if e != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {e}")
    head_dim = e // num_heads
    if head_dim * num_heads != e:
        raise AssertionError(f"embed_dim {e} not divisible by num_heads {num_heads}")
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    key_padding_mask = _canonical(key_padding_mask, query)
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical(attn_mask, query)
        is_causal = False
    q, k, v = _project(query, key, value, e, in_proj_weight, in_proj_bias,
                       use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight)
    if attn_mask is not None and attn_mask.dim() == 2:
        attn_mask = attn_mask.unsqueeze(0)
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _pad_last(attn_mask, q), _pad_last(key_padding_mask, q)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = static_k if static_k is not None else \
        k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = static_v if static_v is not None else \
        v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        slot = zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = cat([k, slot], 1), cat([v, slot], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask, q), _pad_last(key_padding_mask, q)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1) \
            .reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)).matmul(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = scores.softmax(-1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = weights.matmul(v).transpose(0, 1).reshape(tgt_len * bsz, e)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, e)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
            attn_mask.reshape(bsz, num_heads, -1, src_len)
    out = scaled_dot_product_attention(
        q.reshape(bsz, num_heads, tgt_len, head_dim), k.reshape(bsz, num_heads, src_len, head_dim),
        v.reshape(bsz, num_heads, src_len, head_dim), attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, e)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, e)
    return (out if batched else out.squeeze(1)), None


__all__: list = []
