"""Memory formats (torch's ``torch.memory_format``): how a tensor's dims are laid out.

``contiguous_format`` is row-major; ``channels_last`` lays a 4-d NCHW tensor out as NHWC
(strides ``(H*W*C, 1, W*C, C)``); ``preserve_format`` keeps the input's layout where an
op takes one. Spec: TENSOR-011.
"""

from __future__ import annotations


class memory_format:
    """One memory format; prints as ``torch.channels_last``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
_FORMATS = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d,
                                preserve_format)}


def _by_name(name: str) -> memory_format:
    return _FORMATS[name]


def _order(fmt: memory_format, ndim: int):
    """Dims from innermost to outermost for a channels-last format of rank ``ndim``."""
    if fmt is channels_last:
        if ndim != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        return (1, 3, 2, 0)
    if fmt is channels_last_3d:
        if ndim != 5:
            raise RuntimeError("required rank 5 tensor to use channels_last_3d format")
        return (1, 4, 3, 2, 0)
    raise ValueError(f"no dim order for {fmt}")


def is_contiguous_in(shape, stride, fmt: memory_format) -> bool:
    """Whether ``(shape, stride)`` is dense in ``fmt`` (size-1 dims may have any stride)."""
    try:
        order = _order(fmt, len(shape))
    except RuntimeError:
        return False
    expected = 1
    for d in order:
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def to_format(t, fmt: memory_format):
    """``t`` laid out densely in a channels-last format (``t`` itself when it already is)."""
    order = _order(fmt, t.dim())
    if is_contiguous_in(t._shape, t._stride, fmt):
        return t
    perm = tuple(reversed(order))           # outermost first: N, H, W, C for channels_last
    inverse = tuple(perm.index(d) for d in range(t.dim()))
    return t.permute(perm).contiguous().permute(inverse)


__all__ = ["channels_last", "channels_last_3d", "contiguous_format", "memory_format",
           "preserve_format"]
