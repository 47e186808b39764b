"""Memory formats (torch's ``torch.memory_format``) and the layout of op outputs.

``contiguous_format`` is row-major; ``channels_last`` lays a 4-d NCHW tensor out as NHWC
(strides ``(H*W*C, 1, W*C, C)``); ``preserve_format`` keeps the input's layout where an
op takes one. Spec: TENSOR-011.

Outputs follow their inputs' layout, as torch's TensorIterator lays them out
(TENSOR-014):

* an elementwise op's output takes the dim order of its inputs (:func:`pointwise_strides`):
  dims are sorted from fastest to slowest by the inputs' strides, the first input whose
  strides tell two dims apart deciding, broadcast (stride-0) dims telling nothing, equal
  strides ordered by size; the output is dense in that order. Inputs that are all
  row-major, all channels-last, or all dense with the same strides give exactly that;
* ``preserve_format`` (``clone``, ``*_like``, ``to``): a dense, non-overlapping input's
  strides are kept as they are; any other input gets the format it suggests
  (:func:`suggest_format`: channels-last when its strides are, else row-major).
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


def format_strides(shape, fmt: memory_format) -> tuple:
    """Dense strides of ``shape`` in ``fmt`` (row-major for contiguous/preserve)."""
    if fmt is not channels_last and fmt is not channels_last_3d:
        from refimpl._tensor import contiguous_strides

        return contiguous_strides(tuple(shape))
    strides = [0] * len(shape)
    acc = 1
    for d in _order(fmt, len(shape)):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def is_non_overlapping_and_dense(shape, stride) -> bool:
    """Whether the elements fill a block of memory exactly, in some dim order."""
    if len(shape) == 1:
        return shape[0] < 2 or stride[0] == 1
    expected = 1
    for d in sorted(range(len(shape)), key=lambda d: stride[d]):
        if shape[d] < 2:  # size-0 and size-1 dims place nothing
            continue
        if stride[d] != expected:
            return False
        expected *= shape[d]
    return True


def suggest_format(shape, stride) -> memory_format:
    """The format a tensor's strides suggest (torch's ``suggest_memory_format``)."""
    if len(shape) == 4 and _strides_like(shape, stride, channels_last):
        return channels_last
    if len(shape) == 5 and _strides_like(shape, stride, channels_last_3d):
        return channels_last_3d
    return contiguous_format


def _strides_like(shape, stride, fmt: memory_format) -> bool:
    # torch's is_channels_last_strides_*: dims C, W, H(, D), N in increasing stride order,
    # a channel stride of 0 (an expanded tensor) does not qualify
    order = _order(fmt, len(shape))
    if stride[1] == 0:
        return False
    minimum = 0
    for d in order:
        if shape[d] == 0:
            return False
        if stride[d] < minimum:
            return False
        if d == 0 and minimum == stride[1]:
            return False
        minimum = stride[d] * (max(1, shape[d]))
    return True


def preserve_strides(shape, stride) -> tuple:
    """The strides ``preserve_format`` gives a copy of a tensor with ``(shape, stride)``:
    its own when dense, else dense strides in its dim order (torch's
    ``infer_dense_strides``)."""
    if is_non_overlapping_and_dense(shape, stride):
        return tuple(stride)
    return _dense_in_order(tuple(shape), [list(stride)])


def resolve_format(fmt, shape, stride) -> tuple:
    """Output strides for a ``memory_format=`` argument (None means preserve)."""
    if fmt is None or fmt is preserve_format:
        return preserve_strides(shape, stride)
    return format_strides(shape, fmt)


def pointwise_strides(shape, operands) -> tuple | None:
    """Strides of an elementwise op's output of ``shape`` from its tensor ``operands``
    (TensorIterator's rule, see the module docstring); None when row-major."""
    ndim = len(shape)
    if ndim < 2:
        return None
    ops = [t for t in operands if t._shape]
    if not ops:
        return None
    if all(t._shape == shape for t in ops):
        first = ops[0]._stride
        if all(t.is_contiguous() for t in ops):
            return None
        if ndim == 4 and all(is_contiguous_in(t._shape, t._stride, channels_last) for t in ops):
            return format_strides(shape, channels_last)
        if all(t._stride == first for t in ops) and is_non_overlapping_and_dense(shape, first):
            return first
    strides = []
    for t in ops:
        lead = ndim - len(t._shape)
        full = [0] * lead
        for i, (n, st) in enumerate(zip(t._shape, t._stride)):
            full.append(0 if n == 1 and shape[lead + i] != 1 else st)
        strides.append(full)
    out = _dense_in_order(shape, strides)
    from refimpl._tensor import contiguous_strides

    return None if out == contiguous_strides(shape) else out


def _dense_in_order(shape: tuple, strides: list) -> tuple:
    """Dense strides of ``shape`` in the dim order the operands' ``strides`` give:
    TensorIterator's stable insertion sort, fastest dim first; the first operand that
    tells two dims apart decides, stride-0 dims tell nothing, equal strides put the
    smaller dim first."""
    ndim = len(shape)

    def should_swap(d0: int, d1: int) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest first
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    out = [0] * ndim
    acc = 1
    for d in perm:
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def _tensors(args, kwargs) -> list:
    global _TENSORS_IN
    if _TENSORS_IN is None:
        from refimpl._dispatch import tensors_in as _TENSORS_IN
    return _TENSORS_IN(args, kwargs)


_TENSORS_IN = None  # refimpl._dispatch.tensors_in, bound on first use (it imports this module)


def pointwise_layout(shape, args: tuple, kwargs: dict) -> tuple | None:
    """The ``layout`` rule of elementwise ops: :func:`pointwise_strides` of the tensor
    arguments, skipped (None) at once when they are all row-major. ``shape`` is the
    output's (None: the inputs' broadcast shape)."""
    tensors = _tensors(args, kwargs)
    for t in tensors:
        if len(t._shape) > 1 and not t.is_contiguous():
            break
    else:
        return None
    key = (None if shape is None else tuple(shape), *[(t._shape, t._stride) for t in tensors])
    strides = _POINTWISE_STRIDES.get(key, _MISSING)
    if strides is _MISSING:  # a function of the shapes and strides only: kept per layout
        if shape is None:
            from refimpl.ops._helpers import broadcast_shapes

            shape = broadcast_shapes(*(t._shape for t in tensors))
        strides = pointwise_strides(tuple(shape), tensors)
        if len(_POINTWISE_STRIDES) >= 1024:
            _POINTWISE_STRIDES.clear()
        _POINTWISE_STRIDES[key] = strides
    return strides


# (output shape or None, (shape, strides) of each tensor operand) -> pointwise_layout's
# answer for operands not all row-major (a training step repeats the same few layouts)
_POINTWISE_STRIDES: dict = {}
_MISSING = object()


def preserve_layout(shape, args: tuple, kwargs: dict) -> tuple | None:
    """The ``layout`` rule of ops that copy input 0 with a ``memory_format`` argument
    (``clone``, ``_to_copy``): :func:`resolve_format`; None when row-major."""
    x = args[0]
    strides = resolve_format(kwargs.get("memory_format"), x._shape, x._stride)
    from refimpl._tensor import contiguous_strides

    return None if strides == contiguous_strides(tuple(x._shape)) else strides


def relaid(t, strides):
    """``t``'s fresh storage viewed with other dense ``strides`` (no copy): for factories,
    whose values do not depend on the layout. ``t`` itself when nothing changes."""
    if strides is None or tuple(strides) == t._stride:
        return t
    return type(t)._make(t._storage, t._shape, tuple(strides), 0, t.dtype)


def factory_strides(shape, fmt) -> tuple | None:
    """Strides for a constructor's ``memory_format=`` (torch's errors for bad ones)."""
    if fmt is None or fmt is contiguous_format:
        return None
    if fmt is preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    return format_strides(shape, fmt)


def like_strides(x, fmt) -> tuple | None:
    """Strides of a ``*_like(x, memory_format=fmt)`` result (None: row-major)."""
    return resolve_format(fmt, x._shape, x._stride)


__all__ = ["channels_last", "channels_last_3d", "contiguous_format", "memory_format",
           "preserve_format"]
