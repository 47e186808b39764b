"""Saved variables: tensors a node keeps for its backward (spec: AUTOGRAD-SAVED-*).

A ``SavedVariable`` remembers the version of the tensor when it was saved; unpacking
it later checks the version again, which is how autograd detects that a tensor needed
for backward was modified in place. When saved-tensor hooks are active the tensor is
stored packed and unpacked through the hooks.

An *output* of the node is not stored as itself (that would make a reference cycle
output -> grad_fn -> output): the saved variable keeps an alias that shares storage and
version counter, and unpacking rebuilds a tensor whose ``grad_fn`` is the node.
"""

from __future__ import annotations

import weakref

from refimpl._state import FW

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class SavedTensor:
    """A tensor saved for backward, as Python sees it (``grad_fn._raw_saved_*``)."""

    __slots__ = ()

    def __init__(self, *args, **kwargs) -> None:
        raise RuntimeError("Trying to create a SavedTensor object from Python is forbidden.")


_GRADIENT_EDGE = None  # refimpl.autograd.graph.gradient_edge, bound on first use
_HOOKS = None  # refimpl.autograd.graph_hooks.HOOKS, bound on first use
# Set for good once any saved tensor is packed by hooks: unpacking it runs user code, so
# the engine stops running device nodes on the task's thread (_device_threads)
HOOKED = False


def _bind() -> tuple:
    """(gradient_edge, HOOKS), imported once (both modules import this one)."""
    global _GRADIENT_EDGE, _HOOKS
    from refimpl.autograd.graph import gradient_edge
    from refimpl.autograd.graph_hooks import HOOKS

    _GRADIENT_EDGE, _HOOKS = gradient_edge, HOOKS
    return _GRADIENT_EDGE, _HOOKS


class SavedVariable(SavedTensor):
    """One tensor saved for backward: the tensor (or its packed form) and its version."""

    __slots__ = (
        "_counter",
        "_data",
        "_freed",
        "_fw_source",
        "_is_output",
        "_node_fn",
        "_output_nr",
        "_packed",
        "_requires_grad",
        "_unpack",
        "_version",
    )

    def __init__(self, tensor, is_output: bool = False, output_nr: int = 0,
                 hooks=None) -> None:
        if tensor is None:
            self._data = self._packed = self._unpack = self._counter = self._fw_source = None
            self._freed = self._is_output = False
            return
        if tensor._is_inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors "
                "created in inference mode in computation tracked by autograd. To work around "
                "this, you can make a clone to get a normal tensor and use it in autograd, or "
                "use `torch.no_grad()` instead of `torch.inference_mode()`."
            )
        counter = self._counter = tensor._version_counter
        self._version = counter.version
        self._output_nr = output_nr
        self._is_output = is_output
        self._freed = False
        # requires_grad without the property calls when the tensor is not a view (every
        # recorded op saves a few tensors): a leaf flag or a graph node
        rg = self._requires_grad = (tensor._rg or tensor._gfn is not None
                                    if tensor._view_meta is None else tensor.requires_grad)
        # under forward AD the unpacked value carries the original's tangent (forward over
        # reverse differentiates backward formulas that read saved values)
        self._fw_source = weakref.ref(tensor) if FW.active else None
        # where the original's gradient flows, to give an unpacked copy the same identity
        self._node_fn = None
        if rg and not is_output:
            fn = tensor._gfn if tensor._view_meta is None else None
            # gradient_edge(tensor), written out for a non-view with a graph node
            self._node_fn = ((fn, tensor._output_nr) if fn is not None
                             else (_GRADIENT_EDGE or _bind()[0])(tensor))
        if hooks is None:
            stack = (_HOOKS or _bind()[1]).stack
            if stack:
                hooks = stack[-1]
        if hooks is not None:
            self._pack_with(tensor, hooks)
            return
        self._packed = None
        self._unpack = None
        self._data = _alias(tensor) if is_output else tensor

    def _pack_with(self, tensor, hooks) -> None:
        global HOOKED
        HOOKED = True
        pack, unpack = hooks
        version = self._counter.version
        self._data = None
        self._packed = pack(tensor)
        if self._counter.version != version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook can not be modified by in-place operations as this can "
                "lead to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook."
            )
        self._unpack = unpack

    def register_hooks(self, *hooks) -> None:
        """Pack the saved tensor now with ``pack`` and restore it with ``unpack``
        (``grad_fn._raw_saved_*.register_hooks(pack, unpack)``)."""
        if len(hooks) != 2 or not all(callable(h) for h in hooks):
            raise TypeError(
                "register_hooks(): incompatible function arguments. The following argument "
                "types are supported:\n    1. (self, pack_hook: Callable, unpack_hook: Callable)"
            )
        pack, unpack = hooks
        if self._counter is None:
            raise RuntimeError(
                "None is forbidden: hooks cannot be registered on a saved None (not a tensor)."
            )
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        if self._unpack is not None:
            raise RuntimeError(
                "SavedTensor.register_hooks() can only be called once per saved tensor: "
                "hooks have already been set."
            )
        tensor = self._data
        self._pack_with(tensor, (pack, unpack))

    def release(self) -> None:
        """Drop the saved data (the graph is freed)."""
        self._freed = True
        self._data = None
        self._packed = None

    def unpack(self, node=None):
        """The saved tensor, after checking it was not modified in place since saved."""
        data = self._data
        if (data is not None and not self._is_output and self._counter.version == self._version
                and not FW.active
                and (not self._requires_grad or data._rg or data._gfn is not None)):
            # the common case, decided without the calls below: a saved input (not freed,
            # not packed by hooks) at its saved version, its history intact
            return data
        data = self._unpack_values(node)
        if FW.active and data is not None and data._fw_grads is None:
            # the saved alias of an output holds the output's tangent (forward_ad attaches
            # it); a saved input is the input itself, or reached through a weak reference
            source = self._data
            if source is None or source is data:
                source = self._fw_source() if self._fw_source is not None else None
            if source is not None and source is not data:
                from refimpl.autograd.forward_ad import attach, tangent_of

                tangent = tangent_of(source)
                if tangent is not None:
                    attach(data, tangent)
        return data

    def _unpack_values(self, node=None):
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        if self._counter is None:
            return None
        if self._unpack is not None:
            data = self._unpack(self._packed)
            from refimpl._tensor import Tensor

            if not isinstance(data, Tensor):
                raise TypeError(
                    "Output of saved tensor unpack_hook expected to be a Tensor but got result "
                    f"of type {type(data).__name__}"
                )
            # like torch, the unpacked value takes the saved tensor's place in the graph,
            # whatever history the hook's result has
            if self._is_output and node is not None and self._requires_grad:
                return _with_history(data, node, self._output_nr)
            if self._node_fn is not None:
                return _with_edge(data, self._node_fn)
            return _alias(data)
        self._check_version(node)
        data = self._data
        if self._is_output and node is not None and self._requires_grad:
            return _with_history(data, node, self._output_nr)
        if self._requires_grad and not self._is_output and not (
                data._rg or data._gfn is not None if data._view_meta is None
                else data.requires_grad):
            raise RuntimeError(
                "Trying to use a saved tensor that has been detached in-place, i.e. with "
                ".detach_().This is not supported, please use out-of-place `.detach()` instead"
            )
        return data

    def _check_version(self, node) -> None:
        current = self._counter.version
        if current == self._version:
            return
        from refimpl.autograd import _flags
        from refimpl.autograd.graph import _display_name

        data = self._data
        shape = ", ".join(str(d) for d in data._shape)
        msg = ("one of the variables needed for gradient computation has been modified by an "
               f"inplace operation: [{type_string(data)} [{shape}]]")
        grad_fn = node if self._is_output else data.grad_fn
        if grad_fn is not None:
            out_nr = self._output_nr if self._is_output else data._output_nr
            msg += f", which is output {out_nr} of {_display_name(grad_fn.name())},"
        msg += f" is at version {current}; expected version {self._version} instead."
        if _flags.anomaly_enabled:
            msg += (" Hint: the backtrace further above shows the operation that failed to "
                    "compute its gradient. The variable in question was changed in there or "
                    "anywhere later. Good luck!")
        else:
            msg += (" Hint: enable anomaly detection to find the operation that failed to "
                    "compute its gradient, with torch.autograd.set_detect_anomaly(True, "
                    "check_nan=False).")
        raise RuntimeError(msg)


def type_string(tensor) -> str:
    """torch's legacy type name: ``torch.FloatTensor``, ``torch.cuda.DoubleTensor``."""
    names = {
        "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
        "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
        "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
    }
    kind = names.get(tensor.dtype.name, tensor.dtype.name)
    prefix = "torch.cuda." if tensor.device.type == "cuda" else "torch."
    return f"{prefix}{kind}Tensor"


def _alias(tensor):
    """A tensor sharing storage, geometry and version counter, without autograd state."""
    t = (_TENSOR or _tensor_cls())._make(tensor._storage, tensor._shape, tensor._stride,
                                         tensor._offset, tensor.dtype,
                                         tensor._version_counter)
    t._is_inference = tensor._is_inference
    return t


_TENSOR = None  # refimpl._tensor.Tensor, bound on first use (it imports this package)


def _tensor_cls():
    global _TENSOR
    from refimpl._tensor import Tensor

    _TENSOR = Tensor
    return Tensor


def _with_edge(data, edge):
    """An alias of ``data`` whose gradient flows where the saved original's did."""
    from refimpl.autograd.graph import AccumulateGrad

    t = _alias(data)
    node, output_nr = edge
    if isinstance(node, AccumulateGrad):
        t._rg = True
        t._grad_acc = weakref.ref(node)
    else:
        t._gfn = node
        t._output_nr = output_nr
    return t


def _with_history(data, node, output_nr: int):
    """An alias of ``data`` whose grad_fn is ``node`` (an unpacked saved output)."""
    t = _alias(data)
    t._gfn = node
    t._output_nr = output_nr
    return t
