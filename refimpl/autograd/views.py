"""Views and in-place operations in autograd (spec: AUTOGRAD-VIEW-*).

Every view of a floating (or complex) tensor carries a ``ViewMeta``: how it was made
(``creation``) and the version of the shared storage when its ``grad_fn`` was last set
(``attr_version``). The rules, as torch has them:

* An in-place op on a view rewrites the *base's* history: the base's new grad_fn is a
  ``CopySlices`` node that wraps the op's own node; the view's ``grad_fn`` is then
  regenerated lazily as ``AsStridedBackward0`` of the base.
* Any in-place change of the storage (through the base or another view, even under
  ``no_grad``) bumps the shared version; the next read of a view's ``grad_fn``
  regenerates it from the base.
* Views made in no_grad or inference mode, by a function returning several views, or
  inside a custom Function may not be modified in place when that would be recorded:
  ``check_view_inplace`` raises torch's messages.

Gradients move between a view and its base with two linear maps defined here:
``gather`` (base values -> view values) and its adjoint ``scatter`` (view gradient ->
base gradient); both are differentiable, so double backward works through views.
"""

from __future__ import annotations

import numpy as np

from refimpl._state import STATE
from refimpl.autograd.graph import GraphNode, _display_name, gradient_edge, node_class

DEFAULT, IN_CUSTOM_FUNCTION, MULTI_OUTPUT_NODE, NO_GRAD_MODE, INFERENCE_MODE = range(5)


class ViewMeta:
    """How a view was created and which storage version its grad_fn reflects."""

    __slots__ = ("attr_version", "creation", "replay")

    def __init__(self, creation: int, attr_version: int) -> None:
        self.creation = creation
        self.attr_version = attr_version
        # with view replay on (_force_original_view_tracking): the view ops that make this
        # view from its base, as (op, args after input 0, kwargs, output index)
        self.replay = None


def new_view_meta(view) -> ViewMeta:
    """The meta of a view made just now (creation mode from the grad/inference mode)."""
    if STATE.inference_mode:
        creation = INFERENCE_MODE
    elif not STATE.grad_enabled:
        creation = NO_GRAD_MODE
    else:
        creation = DEFAULT
    return ViewMeta(creation, view._version_counter.version)


def geometry(t) -> tuple:
    """(shape, stride, storage offset) of a tensor."""
    return (t._shape, t._stride, t._offset)


# -- grad_fn of views ----------------------------------------------------------------------


def view_grad_fn(view):
    """``view.grad_fn``, regenerated from the base when the storage changed in place."""
    meta = view._view_meta
    fn = view._gfn
    base = view._base
    if fn is None and not base.requires_grad:
        return None
    version = view._version_counter.version
    if meta.attr_version == version:
        return fn
    check_view_rebase(view, indirect=True)
    if meta.replay:
        new_fn, output_nr = _replay(meta.replay, base)
    elif view.dtype is not base.dtype and base.dtype.is_complex \
            and view.dtype is base.dtype.to_real():
        # a real view of a complex base: strided over the base's real view (the geometry
        # counts reals), whose own node turns the gradient back into complex
        from refimpl.ops.views_dtype import view_as_real

        prev = STATE.grad_enabled
        STATE.grad_enabled = True
        try:
            new_fn, output_nr = AsStridedNode.make(view, view_as_real(base)), 0
        finally:
            STATE.grad_enabled = prev
    else:
        new_fn, output_nr = AsStridedNode.make(view, base), 0
    view._gfn = new_fn
    view._output_nr = output_nr
    meta.attr_version = version
    from refimpl.autograd.hooks import move_hooks_to_new_grad_fn

    move_hooks_to_new_grad_fn(view, fn, new_fn)
    return new_fn


def _replay(steps, base):
    """Redo the view ops from ``base`` (recorded) and return the last one's node."""
    prev = STATE.grad_enabled
    STATE.grad_enabled = True
    try:
        v = base
        for op, rest, kwargs, index in steps:
            out = op(v, *rest, **kwargs)
            v = out[index] if index is not None else out
    finally:
        STATE.grad_enabled = prev
    return v._gfn, v._output_nr


def check_view_rebase(view, indirect: bool = False) -> None:
    """Raise torch's error when ``view`` may not have its history rewritten."""
    meta = view._view_meta
    creation = meta.creation
    if creation == DEFAULT:
        return
    grad_fn = view._gfn
    name = _display_name(grad_fn.name()) if grad_fn is not None else ""
    what = "its base or another view of its base has been" if indirect else "is being"
    if creation in (INFERENCE_MODE, NO_GRAD_MODE) or grad_fn is None:
        if grad_fn is not None:
            prefix = (f"Output {view._output_nr} of {name} is a view of a view which was "
                      "created in")
        else:
            prefix = "A view was created in"
        if creation == INFERENCE_MODE:
            msg = f"{prefix} inference mode and {what} modified inplace in normal mode."
        else:
            msg = f"{prefix} no_grad mode and {what} modified inplace with grad mode enabled."
    else:
        msg = f"Output {view._output_nr} of {name} is a view and {what} modified inplace."
    if creation == MULTI_OUTPUT_NODE:
        msg += (" This view is the output of a function that returns multiple views. Such "
                "functions do not allow the output views to be modified inplace. You should "
                "replace the inplace operation by an out-of-place one.")
    elif creation == NO_GRAD_MODE:
        msg += (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both "
                "inside the no_grad block (if you don't want the inplace to be tracked) or both "
                "outside (if you want the inplace to be tracked).")
    elif creation == INFERENCE_MODE:
        msg += (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both "
                "inside the inference_mode block (if you don't want the inplace to be tracked) "
                "or both outside (if you want the inplace to be tracked).")
    elif creation == IN_CUSTOM_FUNCTION:
        msg += (" This view was created inside a custom Function (or because an input was "
                "returned as-is) and the autograd logic to handle view+inplace would override "
                "the custom backward associated with the custom Function, leading to incorrect "
                "gradients. This behavior is forbidden. You can fix this by cloning the output "
                "of the custom Function.")
    raise RuntimeError(msg)


def check_inplace(tensor) -> None:
    """Errors for recording an in-place op on ``tensor`` (a leaf, or a view of a leaf)."""
    if tensor._view_meta is not None:
        check_view_rebase(tensor)
        if tensor.requires_grad and tensor._base.is_leaf:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )
    if tensor.requires_grad and tensor.is_leaf:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )


def rebase_history(tensor, node, output_nr: int = 0) -> None:
    """Make ``node`` the history of ``tensor`` after an in-place op (CopySlices for views)."""
    from refimpl.autograd.hooks import move_hooks_to_new_grad_fn

    if tensor._view_meta is not None:
        base = tensor._base
        old_base_fn = base._gfn
        copy_slices = CopySlices(base, tensor, node)
        base._gfn = copy_slices
        base._output_nr = 0
        if old_base_fn is not None:
            move_hooks_to_new_grad_fn(base, old_base_fn, copy_slices)
        # regenerate the view's grad_fn from the new base history (even if something
        # already read it since the storage changed)
        tensor._view_meta.attr_version = -1
        _ = tensor.grad_fn
        return
    old = tensor._gfn
    tensor._gfn = node
    tensor._output_nr = output_nr
    move_hooks_to_new_grad_fn(tensor, old, node)


# -- linear maps between a base and one of its views ---------------------------------------


def _positions(geom) -> np.ndarray:
    shape, stride, offset = geom
    pos = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, stride)):
        idx = np.arange(n, dtype=np.int64) * s
        pos = pos + idx.reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


def _storage_len(*positions) -> int:
    return max((int(p.max()) + 1 for p in positions if p.size), default=0)


def _gather_np(x: np.ndarray, src_geom, dst_geom) -> np.ndarray:
    ps, pd = _positions(src_geom), _positions(dst_geom)
    buf = np.zeros(_storage_len(ps, pd), dtype=x.dtype)
    buf[ps.reshape(-1)] = np.asarray(x).reshape(-1)
    return buf[pd.reshape(-1)].reshape(dst_geom[0])


def _scatter_np(g: np.ndarray, src_geom, dst_geom) -> np.ndarray:
    """Adjoint of ``_gather_np``: values in ``dst_geom`` summed back into ``src_geom``."""
    ps, pd = _positions(src_geom), _positions(dst_geom)
    buf = np.zeros(_storage_len(ps, pd), dtype=g.dtype)
    np.add.at(buf, pd.reshape(-1), np.asarray(g).reshape(-1))
    return buf[ps.reshape(-1)].reshape(src_geom[0])


def _linear_map(x, src_geom, dst_geom, forward: bool, name: str):
    """``gather`` (forward=True) or ``scatter`` of ``x``, recorded for autograd."""
    from refimpl._tensor import Tensor
    from refimpl.ops._helpers import compute_np_dtype

    if x.device.type == "cpu":
        arr = x._np.astype(compute_np_dtype(x.dtype), copy=False)
        out_np = _gather_np(arr, src_geom, dst_geom) if forward else _scatter_np(arr, src_geom,
                                                                                 dst_geom)
        out = Tensor._from_array(np.ascontiguousarray(out_np).astype(x.dtype.np, copy=False),
                                 x.dtype)
    else:
        out = _linear_map_on_device(x, src_geom, dst_geom, forward)
    if STATE.grad_enabled and x.requires_grad:
        cls = node_class(name, _LinearMapNode)
        node = cls(src_geom, dst_geom, not forward, name, (gradient_edge(x),),
                   ((out._shape, out.dtype, out.device),))
        out._gfn = node
    return out


def _linear_map_on_device(x, src_geom, dst_geom, forward: bool):
    """The same maps with device ops (index_put / index_add on a flat buffer), so a
    CUDA gradient never leaves the device."""
    from refimpl._tensor import Tensor
    from refimpl.autograd.grad_mode import no_grad
    from refimpl.ops.factories import zeros

    ps, pd = _positions(src_geom), _positions(dst_geom)
    with no_grad():
        dev = x.device
        src_pos = Tensor._from_array(ps.reshape(-1)).to(dev)
        dst_pos = Tensor._from_array(pd.reshape(-1)).to(dev)
        buf = zeros(_storage_len(ps, pd), dtype=x.dtype, device=dev)
        flat = x.detach().reshape(-1)
        if forward:
            buf[src_pos] = flat
            return buf[dst_pos].reshape(dst_geom[0])
        buf.index_add_(0, dst_pos, flat)
        return buf[src_pos].reshape(src_geom[0])


def gather(x, src_geom, dst_geom, name: str = "AsStridedBackward0"):
    """The values of ``x`` (laid out as ``src_geom``) seen through ``dst_geom``."""
    return _linear_map(x, src_geom, dst_geom, True, name)


def scatter(g, src_geom, dst_geom, name: str = "AsStridedBackward0"):
    """A gradient for ``src_geom`` from a gradient ``g`` of the view ``dst_geom``."""
    return _linear_map(g, src_geom, dst_geom, False, name)


class _LinearMapNode(GraphNode):
    """Backward of gather/scatter: the other map (both are linear)."""

    __slots__ = ("_dst", "_forward", "_nm", "_src")
    _builtin = True

    def __init__(self, src, dst, forward: bool, name: str, edges, in_meta) -> None:
        self._init_node(edges, in_meta)
        self._src, self._dst, self._forward, self._nm = src, dst, forward, name

    def name(self) -> str:
        return self._nm

    def _apply(self, grads: list) -> list:
        g = grads[0]
        if g is None:
            return [None]
        return [_linear_map(g, self._src, self._dst, self._forward, self._nm)]


class AsStridedNode(GraphNode):
    """``AsStridedBackward0``: the grad_fn of a view regenerated from its base."""

    __slots__ = ("_base_geom", "_view_geom")
    _builtin = True

    @classmethod
    def make(cls, view, base) -> AsStridedNode:
        node = _AS_STRIDED_CLASS.__new__(_AS_STRIDED_CLASS)
        edge = gradient_edge(base)
        node._init_node((edge,), ((view._shape, view.dtype, view.device),))
        node._base_geom = geometry(base)
        node._view_geom = geometry(view)
        return node

    def _apply(self, grads: list) -> list:
        g = grads[0]
        if g is None:
            return [None]
        return [scatter(g, self._base_geom, self._view_geom, "AsStridedBackwardBackward0")]


def _named(name: str, cls: type) -> type:
    return type(name, (cls,), {"__slots__": (), "_name": name})


_AS_STRIDED_CLASS = _named("AsStridedBackward0", AsStridedNode)


class CopySlicesNode(GraphNode):
    """The base's grad_fn after an in-place op on one of its views.

    As torch computes it: the incoming gradient is copied into a buffer laid out like
    the base; the region of the view is handed to the in-place op's own node, whose
    result for ``self`` is copied back into that region (these are recorded ops, so
    double backward works); the op's other gradients flow to its other inputs."""

    __slots__ = ("_base_geom", "_fn", "_view_dtype", "_view_geom")

    def _apply(self, grads: list) -> list:
        from refimpl.autograd.engine import call_node

        g = grads[0]
        n = len(self._next)
        if g is None:
            return [None] * n
        fn = self._fn
        if fn is None:
            from refimpl.autograd.saved import ERR_BACKWARD_TWICE

            raise RuntimeError(ERR_BACKWARD_TWICE)
        shape, stride, offset = self._view_geom
        if self._view_dtype is None:
            result = _buffer_like(g, self._base_geom, self._view_geom)
            result.copy_(g)
            grad_slice = _strided_view(result, shape, stride, offset - self._base_geom[2])
        else:
            # a view that reinterprets a complex base as reals (view_as_real, .real, .imag):
            # its geometry counts reals, so it is taken on the buffer's real view
            from refimpl.ops.views_dtype import view_as_real

            result = _buffer_like(g, self._base_geom, ((), (), 0))
            result.copy_(g)
            grad_slice = _strided_view(view_as_real(result), shape, stride,
                                       offset - 2 * self._base_geom[2])
        res = call_node(fn, [grad_slice.clone()])
        out = [None] * n
        if res[0] is not None:
            grad_slice.copy_(res[0])
            out[0] = result
        for i in range(1, min(n, len(res))):
            out[i] = res[i]
        return out

    def _release(self) -> None:
        self._fn = None


def _strided_view(base, shape, stride, offset):
    """``base.as_strided(shape, stride, offset)`` whose grad_fn (AsStridedBackward0) keeps
    only geometry, so writing into the view later does not invalidate it."""
    from refimpl._tensor import Tensor

    view = Tensor._make(base._storage, shape, stride, offset, base.dtype,
                        base._version_counter, base)
    if STATE.grad_enabled and base.requires_grad:
        view._gfn = AsStridedNode.make(view, base)
        view._output_nr = 0
    return view


def _buffer_like(g, base_geom, view_geom):
    """A fresh tensor with the base's sizes and strides (storage offset 0), on g's device
    and dtype, large enough for the view's region too."""
    from refimpl._storage import UntypedStorage
    from refimpl._tensor import Tensor

    shape, stride, boff = base_geom
    vshape, vstride, voff = view_geom
    extent = 1 + sum((n - 1) * st for n, st in zip(shape, stride) if n > 0)
    vext = (voff - boff) + 1 + sum((n - 1) * st for n, st in zip(vshape, vstride) if n > 0)
    numel = max(extent, vext, 0)
    storage = UntypedStorage(numel * g.dtype.itemsize, device=g.device)
    return Tensor._make(storage, shape, stride, 0, g.dtype)


_COPY_SLICES_CLASS = _named("CopySlices", CopySlicesNode)


def CopySlices(base, view, fn) -> CopySlicesNode:
    """The CopySlices node for in-place op node ``fn`` applied to ``view`` of ``base``."""
    node = _COPY_SLICES_CLASS.__new__(_COPY_SLICES_CLASS)
    edges = (gradient_edge(base),) + tuple(fn._next[1:])
    node._init_node(edges, ((base._shape, base.dtype, base.device),))
    node._fn = fn
    node._base_geom = geometry(base)
    node._view_geom = geometry(view)
    node._view_dtype = None
    if view.dtype is not base.dtype:
        if not (base.dtype.is_complex and view.dtype is base.dtype.to_real()):
            raise NotImplementedError(
                f"refimpl: in-place op on a {view.dtype} view of a {base.dtype} base")
        node._view_dtype = view.dtype
    return node
