"""Custom autograd Functions (spec: AUTOGRAD-FUNCTION-*).

``class F(Function)`` with static ``forward`` and ``backward``; ``F.apply(*args)``:

1. ``ctx`` is the backward node itself (an instance of ``F._backward_cls``, named
   ``FBackward``); ``ctx.needs_input_grad`` has one bool per argument.
2. ``forward`` runs with grad mode off, either as ``forward(ctx, *args)`` or as
   ``forward(*args)`` followed by ``setup_context(ctx, inputs, output)``.
3. Tensor outputs get ``ctx`` as grad_fn (unless marked non-differentiable or not of
   a differentiable dtype); an input returned as-is comes back as a view of itself;
   inputs given to ``ctx.mark_dirty`` have their history rewritten (in place).
4. Tensors given to ``ctx.save_for_backward`` become saved variables
   (version-checked, freed after backward unless the graph is retained).

In backward, ``backward(ctx, *grads)`` receives one gradient per output (zeros for
outputs that got none, unless ``ctx.set_materialize_grads(False)``) and returns one
per argument of forward (None for non-tensor arguments).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import warnings

from refimpl._state import FW, STATE
from refimpl.autograd import views
from refimpl.autograd._streams import node_stream
from refimpl.autograd.graph import GraphNode, gradient_edge
from refimpl.autograd.saved import ERR_BACKWARD_TWICE, SavedVariable

_FUNCTION_IDS = itertools.count()


class FunctionCtx:
    """The methods ``forward`` / ``setup_context`` call on ``ctx``."""

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors (or None) for backward; read them back as ``ctx.saved_tensors``."""
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        """Keep tensors for the forward-mode rule ``jvp``."""
        self.saved_for_forward = tensors

    def mark_dirty(self, *args) -> None:
        """Declare inputs that forward modified in place (they must be returned)."""
        self.dirty_tensors = args

    def mark_shared_storage(self, *pairs) -> None:
        """Removed legacy API."""
        warnings.warn("mark_shared_storage is deprecated. Tensors with shared storages are "
                      "automatically tracked. Note that calls to `set_()` are not tracked",
                      stacklevel=2)

    def mark_non_differentiable(self, *args) -> None:
        """Declare outputs that never require grad (their gradient is zeros or None)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward sees zeros (True, default) or None for missing gradients."""
        self.materialize_grads = bool(value)


class BackwardCFunction(GraphNode, FunctionCtx):
    """The node (and ctx) of one call of a custom Function."""

    _forward_cls = None

    def _setup(self) -> None:
        self.to_save = None
        self.non_differentiable = None
        self.dirty_tensors = None
        self.materialize_grads = True
        self._materialize_non_diff_grads = True
        self._saved = None
        self._freed = False
        self._out_info = ()
        self._is_tensor_input = ()
        self.saved_for_forward = None
        self._in_jvp = False

    def name(self) -> str:
        return type(self).__name__

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, version-checked (inside ``jvp``:
        those given to ``save_for_forward``)."""
        if self._in_jvp:
            return tuple(self.saved_for_forward or ())
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        if self._saved is None:
            return tuple(self.to_save) if self.to_save else ()
        return tuple(s.unpack(self) if isinstance(s, SavedVariable) else s for s in self._saved)

    @property
    def saved_variables(self) -> tuple:
        """Deprecated alias of ``saved_tensors``."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning,
                      stacklevel=2)
        return self.saved_tensors

    @property
    def _raw_saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        return tuple(self._saved or ())

    def _get_user_fn(self):
        cls = self._forward_cls
        if cls.backward is not Function.backward and cls.vjp is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
                "You should only implement one of them."
            )
        return cls.vjp if cls.vjp is not Function.vjp else cls.backward

    def apply(self, *grads):
        """Run the user's backward on ``grads``."""
        return self._get_user_fn()(self, *grads)

    def _apply(self, grads: list) -> list:
        from refimpl.ops.factories import zeros

        ins = []
        for g, info in zip(grads, self._out_info):
            if g is None and info is not None and self.materialize_grads:
                shape, dtype, device, diff = info
                if diff or self._materialize_non_diff_grads:
                    g = zeros(shape, dtype=dtype, device=device)
            ins.append(g)
        res = self._get_user_fn()(self, *ins)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._is_tensor_input)
        if len(res) != n:
            if len(res) > n and all(r is None for r in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients "
                    f"(expected {n}, got {len(res)})"
                )
        out = []
        for i, (g, is_tensor) in enumerate(zip(res, self._is_tensor_input)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at "
                        f"position {i + 1}, but the corresponding forward input was not a "
                        "Variable"
                    )
                continue
            out.append(g)
        return out

    def _release(self) -> None:
        if self._saved:
            for s in self._saved:
                if isinstance(s, SavedVariable):
                    s.release()
        self._freed = True


class FunctionMeta(type):
    """Gives every Function subclass its backward node class ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs) -> None:
        backward_cls = type(name + "Backward", (BackwardCFunction,),
                            {"_forward_cls": cls, "_name": name + "Backward"})
        backward_cls._autograd_function_id = next(_FUNCTION_IDS)
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class of custom autograd operations: subclass it with static ``forward`` and
    ``backward`` (see the module docstring) and call ``apply``."""

    generate_vmap_rule = False

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions are "
            "all static, so you should invoke them on the class itself. Instantiating an "
            "autograd function will raise an error in a future version of PyTorch.",
            DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args, **kwargs):
        """The computation: ``forward(ctx, *args)`` or ``forward(*args)`` + setup_context."""
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save what backward needs, when forward does not take ``ctx``."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """One gradient per input of forward, from one per output."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        """The forward-mode rule."""
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @staticmethod
    def vmap(info, in_dims, *args):
        """Batching rule (not supported by refimpl)."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap staticmethod "
            "or set generate_vmap_rule=True."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and record the call in the graph."""
        if not isinstance(inspect.getattr_static(cls, "forward"), (staticmethod, classmethod)):
            raise RuntimeError(  # noqa: TRY004 (torch raises RuntimeError)
                "Legacy autograd function with non-static forward method is deprecated. Please "
                "use new-style autograd function with static forward method. (Example: "
                "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
            )
        setup = cls.setup_context is not Function.setup_context
        if setup:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        return _apply(cls, setup, args, kwargs)


class InplaceFunction(Function):
    """Legacy base for Functions with an ``inplace`` flag."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


def _is_tensor(x) -> bool:
    from refimpl._tensor import Tensor

    return isinstance(x, Tensor)


def _apply(cls, setup: bool, args: tuple, kwargs: dict):
    ctx = cls._backward_cls.__new__(cls._backward_cls)
    ctx._setup()
    is_tensor_input = tuple(_is_tensor(a) for a in args)
    ctx._is_tensor_input = is_tensor_input
    ctx.needs_input_grad = tuple(_is_tensor(a) and a.requires_grad for a in args)
    executable = STATE.grad_enabled and any(ctx.needs_input_grad)
    tensor_inputs = [a for a in args if _is_tensor(a)]
    edges = tuple(gradient_edge(a) if executable and a.requires_grad else None
                  for a in tensor_inputs)
    ctx._init_node(edges, ())
    prev = STATE.grad_enabled
    prev_fw = STATE.fw_grad_enabled
    # forward sees plain values: neither mode records inside it (jvp gives the tangents)
    STATE.grad_enabled = False
    STATE.fw_grad_enabled = False
    try:
        if setup:
            raw = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, raw)
        else:
            raw = cls.forward(ctx, *args, **kwargs)
    finally:
        STATE.grad_enabled = prev
        STATE.fw_grad_enabled = prev_fw
    wrapped = _wrap_outputs(ctx, raw, tensor_inputs, executable)
    if FW.active and prev_fw:
        from refimpl.autograd._function_jvp import function_jvp

        raw_outs = list(raw) if isinstance(raw, tuple) else [raw]
        function_jvp(cls, ctx, args, list(wrapped) if isinstance(raw, tuple) else [wrapped],
                     raw_outs)
    return wrapped


def _wrap_outputs(ctx, raw, tensor_inputs: list, executable: bool):
    is_tuple = isinstance(raw, tuple)
    outs = list(raw) if is_tuple else [raw]
    dirty = {id(t) for t in (ctx.dirty_tensors or ())}
    non_diff = {id(t) for t in (ctx.non_differentiable or ())}
    input_ids = {id(t) for t in tensor_inputs}
    n_tensor_outs = sum(1 for o in outs if _is_tensor(o))
    if dirty:
        out_ids = {id(o) for o in outs}
        if not dirty <= out_ids:
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned as "
                "output. The inputs that are modified inplace must all be outputs of the "
                "Function."
            )
        for t in ctx.dirty_tensors:
            t._version_counter.bump()
    node = ctx if executable else None
    infos = []
    wrapped_cache: dict = {}
    for i, var in enumerate(outs):
        if not _is_tensor(var):
            infos.append(None)
            continue
        key = id(var)
        if key in wrapped_cache:
            outs[i] = wrapped_cache[key][0]
            infos.append(wrapped_cache[key][1])
            continue
        is_input = key in input_ids
        is_modified = key in dirty
        diff = (node is not None and key not in non_diff and var.dtype.category >= 2)
        new = _set_history(node, var, i, is_input, is_modified, diff, n_tensor_outs)
        if not (is_input and is_modified) and new._view_meta is not None:
            new._view_meta.creation = (views.MULTI_OUTPUT_NODE if node is not None
                                       and n_tensor_outs > 1 else views.IN_CUSTOM_FUNCTION)
        info = (new._shape, new.dtype, new.device, diff)
        wrapped_cache[key] = (new, info)
        outs[i] = new
        infos.append(info)
    ctx._out_info = tuple(infos)
    ctx._in_meta = tuple((o._shape, o.dtype, o.device) if _is_tensor(o) else ((), None, None)
                         for o in outs)
    ctx._stream = node_stream(ctx._in_meta)
    if node is not None:
        _save_variables(ctx)
    return tuple(outs) if is_tuple else outs[0]


def _view_of_self(var):
    """An alias of ``var`` that is a view of it (an input returned as-is)."""
    from refimpl._tensor import Tensor

    base = var._base if var._base is not None else var
    prev = STATE.grad_enabled
    STATE.grad_enabled = False
    try:
        t = Tensor._make(var._storage, var._shape, var._stride, var._offset, var.dtype,
                         var._version_counter, base)
    finally:
        STATE.grad_enabled = prev
    t._is_inference = var._is_inference
    if t._view_meta is not None and var._view_meta is not None:
        t._view_meta.creation = var._view_meta.creation
    return t


def _set_history(node, var, output_nr: int, is_input: bool, is_modified: bool, diff: bool,
                 n_tensor_outs: int):
    if not diff:
        if not var.requires_grad:
            if is_input and not is_modified:
                return _view_of_self(var)
            return var
        if is_input:
            return var.detach()
        if var._base is None:
            var.detach_()
        return var
    if is_modified:
        if var.is_leaf and var.requires_grad:
            raise RuntimeError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
        if var._view_meta is not None and n_tensor_outs > 1:
            raise RuntimeError(
                "If your Function modifies inplace an input that is a view of another Tensor, "
                "your Function cannot return more than one Tensor. This is not supported by the "
                "current autograd engine. You should either make sure the input is not a view "
                "(using .clone() for example) or make your Function only return one Tensor "
                "(potentially splitting it into two Functions: one doing the inplace that "
                "returns that view and another more general one that returns everything you "
                "need)."
            )
        views.rebase_history(var, node, output_nr)
        return var
    if is_input:
        var = _view_of_self(var)
    var._gfn = node
    var._output_nr = output_nr
    if var._view_meta is not None:
        var._view_meta.attr_version = var._version_counter.version
    return var


def _save_variables(ctx) -> None:
    to_save = ctx.to_save
    if not to_save:
        ctx._saved = ()
        return
    saved = []
    for i, t in enumerate(to_save):
        if t is None:
            saved.append(SavedVariable(None))
        elif _is_tensor(t):
            is_output = t._gfn is ctx
            saved.append(SavedVariable(t, is_output=is_output,
                                       output_nr=t._output_nr if is_output else 0))
        else:
            raise TypeError(
                f"save_for_backward can only save variables, but argument {i} is of type "
                f"{type(t).__name__}"
            )
    ctx._saved = tuple(saved)
    ctx.to_save = None


def once_differentiable(fn):
    """Decorate ``backward``: it runs without recording, and differentiating its result
    again raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            STATE.grad_enabled = prev
        if not STATE.grad_enabled:
            return outputs
        if not any(_is_tensor(a) and a.requires_grad for a in args):
            return outputs
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        from refimpl.autograd._functions import DelayedError

        err = DelayedError(
            b"trying to differentiate twice a function that was marked with "
            b"@once_differentiable", len(outs))

        def fake_requires_grad(v):
            if v is not None:
                v = v.detach()
                v.requires_grad = True
            return v

        return err(*[fake_requires_grad(v) for v in outs])

    return wrapper
