"""In-place view ops: a tensor changes its own metadata (spec: TENSOR-005, TENSOR-020, TENSOR-022).

``t_``, ``transpose_`` (``swapaxes_``/``swapdims_``), ``squeeze_``, ``unsqueeze_`` and
``as_strided_`` give ``self`` the metadata of the matching view op, keep its identity and
storage, and bump its version like any in-place op. They are declared with
``extra={"writes_input0": True, "inplace_view": True}``. Their backward formulas need
``self``'s metadata from *before* the call (torch saves the sizes), but ``ctx.args[0]``
is ``self`` as it is after it: the Python wrappers pass the old geometry as the private
keyword ``_input_geometry``, which the kernels ignore.

``resize_``/``resize_as_`` are plain methods (torch refuses them on tensors that require
grad, so autograd never sees them): contiguous strides for the new shape, the storage grown
when too small, and a version bump only when the shape changes.
"""

from __future__ import annotations

from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.slicing import as_strided_backward, as_strided_geometry
from refimpl.ops.views import (
    _squeeze_geometry,
    size_args,
    squeeze_dims,
    t_geometry,
    transpose_geometry,
    unsqueeze_geometry,
)

_INPLACE_VIEW = {"writes_input0": True, "inplace_view": True}


def _restrider(geometry):
    """A kernel that gives ``self`` the metadata ``geometry(self, ...)`` computes."""

    def kernel(self: Tensor, *args, _input_geometry=None, **kwargs) -> Tensor:
        if self._is_inference:
            from refimpl._dispatch import check_inplace_allowed

            check_inplace_allowed(self)
        spec = geometry(self, *args, **kwargs)
        self._set_metadata(spec.shape, spec.stride, spec.offset)
        self._version_counter.bump()
        return self

    return kernel


def _meta(geometry):
    def meta(self: Tensor, *args, _input_geometry=None, **kwargs) -> TensorSpec:
        return TensorSpec(geometry(self, *args, **kwargs).shape, self.dtype, self.device)

    return meta


def _inplace_view(name: str, geometry, node: str, backward, jvp=None):
    kernel = _restrider(geometry)
    return defop(name, meta=_meta(geometry), cpu=kernel, cuda=kernel, backward=backward,
                 jvp=jvp, node=node, saves=(), extra=dict(_INPLACE_VIEW))


t_ = _inplace_view("t_", lambda self: t_geometry(self, "t_"), "TBackward1",
                   lambda ctx, g: (g.t(),), lambda ctx, tg: None if tg is None else tg.t())
transpose_ = _inplace_view(
    "transpose_", transpose_geometry, "TransposeBackward1",
    lambda ctx, g: (g.transpose(ctx.args[1], ctx.args[2]),),
    lambda ctx, tg, *_: None if tg is None else tg.transpose(ctx.args[1], ctx.args[2]))


def swapaxes_(self: Tensor, axis0: int, axis1: int) -> Tensor:
    """In-place ``swapaxes``: alias of ``transpose_``."""
    return transpose_(self, axis0, axis1)


swapdims_ = swapaxes_


def _old_geometry(self: Tensor) -> tuple:
    return self._shape, self._stride, self._offset


def _squeeze_back(ctx, g):
    return (g.reshape(ctx.kwargs["_input_geometry"][0]),)


def _squeeze_jvp(ctx, tg, *_):
    return None if tg is None else tg.reshape(ctx.outputs[0].shape)


squeeze_all_ = _inplace_view(
    "squeeze_", lambda self: _squeeze_geometry(self, squeeze_dims(self, None)),
    "SqueezeBackward3", _squeeze_back, _squeeze_jvp)
squeeze_dim_ = _inplace_view(
    "_squeeze_dim_", lambda self, dim: _squeeze_geometry(self, squeeze_dims(self, dim)),
    "SqueezeBackward4", _squeeze_back, _squeeze_jvp)
squeeze_dims_ = _inplace_view(
    "_squeeze_dims_", lambda self, dim: _squeeze_geometry(self, squeeze_dims(self, dim)),
    "SqueezeBackward5", _squeeze_back, _squeeze_jvp)
for _op in (squeeze_all_, squeeze_dim_, squeeze_dims_):
    _op.extra["method"] = False


def squeeze_(self: Tensor, dim=None) -> Tensor:
    """In-place ``squeeze``: ``self`` loses its size-1 dims (all, one, or a tuple)."""
    old = _old_geometry(self)
    if dim is None:
        return squeeze_all_(self, _input_geometry=old)
    if isinstance(dim, int):
        return squeeze_dim_(self, dim, _input_geometry=old)
    return squeeze_dims_(self, tuple(dim), _input_geometry=old)


unsqueeze_ = _inplace_view(
    "unsqueeze_", unsqueeze_geometry, "UnsqueezeBackward1",
    lambda ctx, g: (g.squeeze(wrap_dim(ctx.args[1], g.dim())),),
    lambda ctx, tg, *_: None if tg is None else tg.unsqueeze(ctx.args[1]))


def _as_strided_back(ctx, g):
    off = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("storage_offset")
    geom = ctx.kwargs["_input_geometry"]
    return (as_strided_backward(g, geom, tuple(ctx.args[1]), tuple(ctx.args[2]),
                                geom[2] if off is None else off),)


def _as_strided_jvp(ctx, tg, *_):
    if tg is None:
        return None
    off = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("storage_offset")
    return tg.as_strided(tuple(ctx.args[1]), tuple(ctx.args[2]),
                         ctx.kwargs["_input_geometry"][2] if off is None else off)


as_strided_op_ = _inplace_view("as_strided_", as_strided_geometry, "AsStridedBackward1",
                               _as_strided_back, _as_strided_jvp)
as_strided_op_.extra["method"] = False


def as_strided_(self: Tensor, size, stride, storage_offset=None) -> Tensor:
    """In-place ``as_strided``: ``self`` gets exactly this metadata over its storage."""
    return as_strided_op_(self, size, stride, storage_offset,
                          _input_geometry=_old_geometry(self))


def _storage_bytes(shape, stride, offset: int, itemsize: int) -> int:
    if 0 in shape:
        return 0
    return (offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))) * itemsize


def resize_(self: Tensor, *sizes, memory_format=None) -> Tensor:
    """Give ``self`` the shape ``sizes`` with contiguous strides, growing the storage when
    it is too small; bumps the version only when the shape changes (TENSOR-022)."""
    if self._is_inference:
        from refimpl._dispatch import check_inplace_allowed

        check_inplace_allowed(self)
    from refimpl._state import STATE

    # the check belongs to the autograd layer, which inference mode skips
    if self.requires_grad and not STATE.inference_mode:
        raise RuntimeError("cannot resize variables that require grad")
    shape = size_args(sizes, "resize_", "size")
    if any(s < 0 for s in shape):
        raise RuntimeError("numel: integer multiplication overflow")
    stride = contiguous_strides(shape)
    if memory_format is not None:
        from refimpl._memory_format import format_strides, preserve_format

        if memory_format is preserve_format:
            raise RuntimeError("Unsupported memory formatPreserve")
        stride = format_strides(shape, memory_format)
    if shape == self._shape:
        if memory_format is not None and stride != self._stride:
            self._set_metadata(shape, stride, self._offset)  # restrided: no new version
        return self
    need = _storage_bytes(shape, stride, self._offset, self.dtype.itemsize)
    if need > self._storage.nbytes():
        self._storage.resize_(need)
    self._set_metadata(shape, stride, self._offset)
    self._version_counter.bump()
    return self


def resize_as_(self: Tensor, the_template: Tensor, memory_format=None) -> Tensor:
    """``self.resize_(the_template.shape)`` (the template's device is ignored); with
    ``preserve_format``, laid out in the format the template's strides suggest."""
    from refimpl._memory_format import preserve_format, suggest_format

    if memory_format is preserve_format:
        memory_format = suggest_format(the_template._shape, the_template._stride)
    return resize_(self, the_template.shape, memory_format=memory_format)


def set_(self: Tensor, source=None, storage_offset: int = 0, size=None,
         stride=None) -> Tensor:
    """Make self a view of ``source`` (a tensor or a storage), or empty with no argument.

    The tensor keeps its identity and dtype; its data, shape and strides change, its
    version is bumped, and a leaf gets a fresh gradient accumulator (the graph edges
    recorded before still reach the old one).
    """
    from refimpl._storage import UntypedStorage
    from refimpl._tensor import contiguous_strides

    if source is None:
        storage, shape, strides, offset = UntypedStorage(0, device=self.device), (0,), (1,), 0
    elif isinstance(source, Tensor):
        if source.dtype is not self.dtype:
            raise RuntimeError(
                f"Could not set tensor of type {source.dtype.np.name} to a tensor of type "
                f"{self.dtype.np.name}"
            )
        storage, shape = source._storage, source._shape
        strides, offset = source._stride, source._offset
    elif isinstance(source, UntypedStorage):
        storage, offset = source, int(storage_offset)
        shape = (source.nbytes() // self.dtype.itemsize,) if size is None else tuple(size)
        strides = contiguous_strides(shape) if stride is None else tuple(stride)
    else:
        raise TypeError(f"set_(): argument 'source' must be Tensor or Storage, not "
                        f"{type(source).__name__}")
    self._storage = storage
    self._set_metadata(shape, strides, offset)
    self._version_counter.bump()
    self._grad_acc = None
    return self


__all__: list = []
TENSOR_METHODS = (
    "swapaxes_", "swapdims_", "squeeze_", "as_strided_", "resize_", "resize_as_", "set_",
)
