"""Shape-level pieces of ``torch.nn.functional``: ``pad``, ``one_hot``, ``pixel_shuffle``,
``pixel_unshuffle``, ``unfold``/``fold`` (im2col/col2im) and the sliding-window view the
convolutions and poolings are built on (spec: NNF-020..NNF-024).

Every function here is a composition of refimpl ops (cat, narrow, index_select, the
``Tensor.unfold`` window view, reshape, permute), each of which has its meta function,
CPU and CUDA kernels, backward and jvp rules: so these functions run on every device,
under fake tensors and through first and second order autograd with no rule of their
own. Index tables (reflect/replicate/circular padding) are computed on the host from
shapes alone and moved to the input's device.
"""

from __future__ import annotations

import functools

import numpy as np

from refimpl._tensor import Tensor
from refimpl.ops.shape import cat


def _index(values, like: Tensor) -> Tensor:
    """An int64 index tensor on ``like``'s device (from shapes only, never data)."""
    from refimpl.ops.factories import tensor

    return tensor(np.asarray(values, dtype=np.int64), device=like.device)


def has_data(x: Tensor) -> bool:
    """Whether ``x`` holds values a kernel-side check may read (not a meta or fake
    tensor: torch makes such checks in its kernels, which fake tensors never run)."""
    return x._storage.device.type != "meta"


def _pad_pairs(pad, ndim: int) -> list:
    """``[(dim, before, after), ...]`` from torch's last-dim-first ``pad`` sequence."""
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {ndim}")
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _constant_pad(input: Tensor, pairs: list, value: float) -> Tensor:
    if input.is_cuda and _untracked(input) and input.is_contiguous() and pairs and \
            all(before >= 0 and after >= 0 for _, before, after in pairs):
        return _fill_and_copy(input, pairs, value)
    out = input
    for dim, before, after in pairs:
        size = out.shape[dim]
        if before < 0 or after < 0:
            start, length = max(-before, 0), size - max(-before, 0) - max(-after, 0)
            if length < 0:
                raise RuntimeError("narrow(): length must be non-negative.")
            out = out.narrow(dim, start, length)
        parts = []
        for n in (before, after):
            shape = list(out.shape)
            shape[dim] = max(n, 0)
            parts.append(out.new_full(shape, value))
        if before > 0 or after > 0:
            out = cat([parts[0], out, parts[1]], dim)
    return out if out is not input else input.clone()


def _untracked(input: Tensor) -> bool:
    """Whether no autograd (backward or forward mode) watches ``input``'s ops now."""
    from refimpl._state import FW, STATE

    return not FW.active and not (STATE.grad_enabled and input.requires_grad)


def _fill_and_copy(input: Tensor, pairs: list, value: float) -> Tensor:
    """Non-negative constant padding as one fill of the padded shape and one copy of
    ``input`` into its interior (the CUDA path outside autograd: two kernels, not the
    fills and concatenations per dim)."""
    shape = list(input.shape)
    for dim, before, after in pairs:
        shape[dim] += before + after
    out = input.new_full(shape, value)
    inner = out
    for dim, before, _ in pairs:
        inner = inner.narrow(dim, before, input.shape[dim])
    inner.copy_(input)
    return out


_NON_CONSTANT_HELP = (
    "Supported combinations for non-constant padding:\n"
    "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
    "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
    "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _source_index(mode: str, size: int, before: int, after: int) -> np.ndarray:
    j = np.arange(-before, size + after)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j > size - 1, 2 * (size - 1) - j, j)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    return np.mod(j, size)


def _check_non_constant(input: Tensor, mode: str, pairs: list) -> None:
    ndim, n = input.dim(), len(pairs)
    if n > 3 or ndim not in (n + 1, n + 2):
        raise NotImplementedError(f"Padding size {2 * n} is not supported for {ndim}D input "
                                  f"tensor.\n{_NON_CONSTANT_HELP}")
    shape = list(input.shape)
    if any(s == 0 for s in shape[ndim - n:]) or (ndim == n + 2 and shape[1] == 0):
        dims = {1: "2D or 3D", 2: "3D or 4D", 3: "4D or 5D"}[n]
        raise RuntimeError(f"Expected {dims} (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: {shape}")
    for dim, before, after in pairs:
        size = shape[dim]
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(f"Argument #{2 * n + 2}: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({before}, "
                               f"{after}) at dimension {dim} of input {shape}")
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims of ``input``; ``pad`` lists (before, after)
    from the last dim backwards. Modes: ``constant`` (``value``, default 0; negative
    amounts crop), ``reflect``, ``replicate``, ``circular`` (spec NNF-020)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pairs = _pad_pairs(pad, input.dim())
    if mode == "constant":
        return _constant_pad(input, pairs, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    _check_non_constant(input, mode, pairs)
    out = input
    for dim, before, after in pairs:
        if mode == "circular" and min(before, after) < 0:  # wraps the cropped part
            lo, hi = max(-before, 0), out.shape[dim] - max(-after, 0)
            out = out.narrow(dim, lo, hi - lo)
            before, after = max(before, 0), max(after, 0)
        idx = _source_index(mode, out.shape[dim], before, after)
        out = out.index_select(dim, _index(idx, out))
    return out


def windows(x: Tensor, kernel, stride, dilation, first: int = 2) -> Tensor:
    """The sliding windows of ``x`` over dims ``first..`` as a view: shape
    ``(*x.shape[:first], *out_sizes, *kernel)`` (dilated kernels take every
    ``dilation``-th element of a window ``dilation * (k - 1) + 1`` wide)."""
    n = len(kernel)
    for i in range(n):
        span = dilation[i] * (kernel[i] - 1) + 1
        x = x.unfold(first + i, span, stride[i])
    if any(d != 1 for d in dilation):
        x = x[(Ellipsis, *(slice(None, None, d) for d in dilation))]
    return x


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding along a new last dim (spec NNF-021)."""
    from refimpl import _dtype as D

    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
    else:
        if bool((tensor < 0).any()):
            raise RuntimeError("Class values must be non-negative.")
        top = int(tensor.max())
        if num_classes == -1:
            num_classes = top + 1
        elif top >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    classes = _index(np.arange(num_classes), tensor)
    return (tensor.unsqueeze(-1) == classes).to(D.int64)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r) (spec NNF-022)."""
    r = upscale_factor
    if input.dim() < 3:
        raise RuntimeError("pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of ``pixel_shuffle``."""
    r = downscale_factor
    if input.dim() < 3:
        raise RuntimeError("pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        which, size = ("height", h) if h % r else ("width", w)
        axis = -2 if which == "height" else -1
        raise RuntimeError(f"pixel_unshuffle expects {which} to be divisible by "
                           f"downscale_factor, but input.size({axis})={size} is not divisible "
                           f"by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _pair(v, n: int = 2) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), every sliding block as a column
    (spec NNF-023)."""
    k, d, p, s = (_pair(v) for v in (kernel_size, dilation, padding, stride))
    if input.dim() not in (3, 4):
        raise NotImplementedError("Input Error: Only 3D or 4D input Tensors are supported "
                                  f"(got {input.dim()}D)")
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    x = pad(x, (p[1], p[1], p[0], p[0]))
    n, c = x.shape[:2]
    win = windows(x, k, s, d)  # (N, C, oh, ow, kh, kw)
    cols = win.permute(0, 1, 4, 5, 2, 3).reshape(n, c * k[0] * k[1],
                                                 win.shape[2] * win.shape[3])
    return cols if batched else cols.squeeze(0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0,
         stride=1) -> Tensor:
    """col2im: sums the columns of ``unfold`` back into an (N, C, H, W) image (overlaps
    add up), an ``index_add`` into the padded image followed by a crop (spec NNF-023)."""
    o, k, d, p, s = (_pair(v) for v in (output_size, kernel_size, dilation, padding, stride))
    if input.dim() not in (2, 3):
        raise NotImplementedError("Input Error: Only unbatched (2D) or batched (3D) input "
                                  f"Tensors are supported (got {input.dim()}D)")
    batched = input.dim() == 3
    cols = input if batched else input.unsqueeze(0)
    hp, wp = o[0] + 2 * p[0], o[1] + 2 * p[1]
    oh, ow = ((size - (dd * (kk - 1) + 1)) // ss + 1 for size, dd, kk, ss in
              zip((hp, wp), d, k, s))
    per = k[0] * k[1]
    if cols.shape[1] % per:
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={cols.shape[1]} "
                           f"and kernel_size=({k[0]}, {k[1]})")
    if oh * ow != cols.shape[2]:
        raise RuntimeError(f"Given output_size=({o[0]}, {o[1]}), kernel_size=({k[0]}, "
                           f"{k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"stride=({s[0]}, {s[1]}), expected size of input's dimension 2 "
                           f"to match the calculated number of sliding blocks {oh} * {ow} = "
                           f"{oh * ow}, but got input.size(2)={cols.shape[2]}.")
    img = col2im(cols, o, (oh, ow), k, d, p, s)
    return img if batched else img.squeeze(0)


@functools.lru_cache(maxsize=64)
def _col2im_dest(c: int, kernel: tuple, blocks: tuple, stride: tuple, dilation: tuple,
                 padded: tuple) -> np.ndarray:
    """The flat destination in the padded (C, *padded) image of every column entry
    (computed from shapes alone, once per geometry; read-only)."""
    n_dims = len(kernel)
    grids = np.ix_(np.arange(c), *[np.arange(k) for k in kernel],
                   *[np.arange(b) for b in blocks])
    pos = [grids[1 + n_dims + i] * stride[i] + grids[1 + i] * dilation[i]
           for i in range(n_dims)]
    shape = np.broadcast(*grids).shape
    dest = np.ravel_multi_index([np.broadcast_to(grids[0], shape),
                                 *[np.broadcast_to(q, shape) for q in pos]],
                                [c, *padded]).reshape(-1)
    dest.flags.writeable = False
    return dest


def col2im(cols: Tensor, out_sizes, blocks, kernel, dilation, padding, stride) -> Tensor:
    """Sum the columns (N, C*prod(kernel), prod(blocks)) of an N-d sliding-block layout
    into an (N, C, *out_sizes) image: an ``index_add`` of host-computed destinations into
    the padded image, then a crop of the padding."""
    padded = [max(o + 2 * p, (b - 1) * s + d * (k - 1) + 1) for o, b, k, d, p, s in
              zip(out_sizes, blocks, kernel, dilation, padding, stride)]
    per = int(np.prod(kernel))
    c = cols.shape[1] // per
    dest = _col2im_dest(c, tuple(int(k) for k in kernel), tuple(int(b) for b in blocks),
                        tuple(int(s) for s in stride), tuple(int(d) for d in dilation),
                        tuple(padded))
    n = cols.shape[0]
    img = cols.new_zeros((n, c * int(np.prod(padded)))).index_add(
        1, _index(dest, cols), cols.reshape(n, -1))
    img = img.reshape(n, c, *padded)
    crop = tuple(slice(p, p + o) for p, o in zip(padding, out_sizes))
    return img[(slice(None), slice(None), *crop)]


__all__: list = []
