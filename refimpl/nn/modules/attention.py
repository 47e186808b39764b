"""MultiheadAttention (spec NN-170..): torch's parameters (packed ``in_proj_weight`` or
separate q/k/v weights), masks and head-averaged weights, in the (L, N, E) layout unless
``batch_first``. The math is the explicit softmax(q k^T / sqrt(d) + mask) v."""

from __future__ import annotations

import math

from refimpl._tensor import Tensor
from refimpl.nn import functional as F
from refimpl.nn import init
from refimpl.nn.modules.linear import Linear, empty_param
from refimpl.nn.modules.module import Module


class NonDynamicallyQuantizableLinear(Linear):
    """The output projection of MultiheadAttention (a Linear, named as torch names it)."""


def _float_mask(mask: Tensor | None, like: Tensor) -> Tensor | None:
    """A boolean mask (True = masked out) as an additive float mask; float ones as is."""
    if mask is None or mask.dtype.is_floating_point:
        return mask
    from refimpl.ops.factories import zeros

    return zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill(
        mask, float("-inf"))


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` dims each."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        fk = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty_param(3 * embed_dim, embed_dim, **fk)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = empty_param(embed_dim, embed_dim, **fk)
            self.k_proj_weight = empty_param(embed_dim, self.kdim, **fk)
            self.v_proj_weight = empty_param(embed_dim, self.vdim, **fk)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty_param(3 * embed_dim, **fk)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = empty_param(1, 1, embed_dim, **fk)
            self.bias_v = empty_param(1, 1, embed_dim, **fk)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor, same: bool):
        e = self.embed_dim
        b = self.in_proj_bias
        if same and self._qkv_same_embed_dim:
            # self-attention: one projection with the packed weight, split in three
            return F.linear(query, self.in_proj_weight, b).chunk(3, -1)
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _attend_batch_first(self, query: Tensor, key: Tensor, value: Tensor,
                            same: bool) -> Tensor:
        """Unmasked attention without weights: the projections on the (N, L, E) layout,
        the heads as views, one scaled_dot_product_attention, the output projection."""
        if not self.batch_first:
            query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        bsz, tgt_len, _ = query.shape
        heads, hd = self.num_heads, self.head_dim
        if same and self._qkv_same_embed_dim:
            # the packed projection's (N, L, 3, heads, hd) view, heads moved ahead of L
            packed = F.linear(query, self.in_proj_weight, self.in_proj_bias)
            q, k, v = packed.reshape(bsz, tgt_len, 3, heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            q, k, v = self._project(query, key, value, same)
            q, k, v = (x.reshape(bsz, x.shape[1], heads, hd).transpose(1, 2) for x in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        out = out.transpose(1, 2).reshape(bsz * tgt_len, self.embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        out = out.reshape(bsz, tgt_len, self.embed_dim)
        return out if self.batch_first else out.transpose(1, 0)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False):
        """(attention output, attention weights or None)."""
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask`"
                               " to create this mask.")
        batched = query.dim() == 3
        same = query is key and key is value
        if (not need_weights and batched and attn_mask is None and key_padding_mask is None
                and self.bias_k is None and not self.add_zero_attn
                and not (self.training and self.dropout > 0.0)):
            return self._attend_batch_first(query, key, value, same), None
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        tgt_len, bsz, _ = query.shape
        heads, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value, same)
        attn_mask = _float_mask(attn_mask, q)
        if attn_mask is not None and attn_mask.dim() == 2:
            attn_mask = attn_mask.unsqueeze(0)
        if self.bias_k is not None:
            k = _cat(k, self.bias_k.repeat(1, bsz, 1))
            v = _cat(v, self.bias_v.repeat(1, bsz, 1))
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        q = q.reshape(tgt_len, bsz * heads, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * heads, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * heads, hd).transpose(0, 1)
        if self.add_zero_attn:
            from refimpl.ops.factories import zeros

            k = _cat(k, zeros((bsz * heads, 1, hd), dtype=k.dtype, device=k.device), dim=1)
            v = _cat(v, zeros((bsz * heads, 1, hd), dtype=v.dtype, device=v.device), dim=1)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        src_len = k.shape[1]
        if key_padding_mask is not None:
            kpm = _float_mask(key_padding_mask, q).reshape(bsz, 1, 1, src_len)
            kpm = kpm.expand(-1, heads, -1, -1).reshape(bsz * heads, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        if not need_weights and not (self.training and self.dropout > 0.0):
            # as torch's multi_head_attention_forward: one scaled_dot_product_attention
            if attn_mask is not None:
                attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
                    attn_mask.reshape(bsz, heads, -1, src_len)
            out = F.scaled_dot_product_attention(
                q.reshape(bsz, heads, tgt_len, hd), k.reshape(bsz, heads, src_len, hd),
                v.reshape(bsz, heads, src_len, hd), attn_mask)
            out = out.permute(2, 0, 1, 3).reshape(tgt_len * bsz, self.embed_dim)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            out = out.reshape(tgt_len, bsz, self.embed_dim)
            if self.batch_first and batched:
                out = out.transpose(1, 0)
            return (out if batched else out.squeeze(1)), None
        scores = (q * math.sqrt(1.0 / hd)).bmm(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, p=self.dropout)
        out = weights.bmm(v).transpose(0, 1).contiguous().reshape(tgt_len * bsz, self.embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        out = out.reshape(tgt_len, bsz, self.embed_dim)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        weights = weights.reshape(bsz, heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            weights = weights.squeeze(0)
        return out, weights


def _cat(a: Tensor, b: Tensor, dim: int = 0) -> Tensor:
    from refimpl.ops.shape import cat

    return cat([a, b], dim)


def _pad_last(mask: Tensor | None) -> Tensor | None:
    """One more (unmasked) key column at the end of a mask."""
    if mask is None:
        return None
    from refimpl.ops.factories import zeros

    pad = zeros((*mask.shape[:-1], 1), dtype=mask.dtype, device=mask.device)
    return _cat(mask, pad, dim=-1)
