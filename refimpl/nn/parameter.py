"""``nn.Parameter`` and ``nn.Buffer``: the tensors a Module registers (spec NN-010..).

A Parameter is a Tensor subclass that shares its data's storage and version counter (no
copy) and is a leaf that requires grad by default; a Module assigning one to an
attribute registers it. Ops on a Parameter return plain tensors, as in torch; ``detach``
and ``.data`` do too. A Buffer marks a tensor a Module registers as a buffer.
"""

from __future__ import annotations

from refimpl._tensor import PLAIN, Tensor


def _alias(data: Tensor, cls: type) -> Tensor:
    """A tensor of class ``cls`` over ``data``'s storage, metadata and version counter."""
    t = cls._make(data._storage, data._shape, data._stride, data._offset, data.dtype,
                  data._version_counter)
    t._is_inference = data._is_inference
    return t


class _ParameterMeta(type(Tensor)):
    # a tensor flagged ``_is_param`` (a fake tensor made from a Parameter) counts as one
    def __instancecheck__(cls, instance) -> bool:
        if cls is Parameter and isinstance(instance, Tensor) and getattr(instance, "_is_param",
                                                                        False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A tensor that is a module parameter: ``Parameter(data=None, requires_grad=True)``.

    Over a fake tensor's data the result is a fake tensor flagged ``_is_param``, which
    ``isinstance(x, Parameter)`` accepts (as torch's parameter metaclass does)."""

    _is_param = True

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from refimpl.ops.factories import empty

            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter.__new__ expects a Tensor for 'data', got {type(data).__name__}")
        p = _alias(data.detach(), cls)
        if not isinstance(p, cls):
            p._is_param = True  # a fake tensor's storage made its own tensor class
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ takes no arguments)

    def detach(self) -> Tensor:
        """A plain tensor sharing the storage and version counter, cut from the graph."""
        return _alias(self, Tensor)

    @property
    def data(self) -> Tensor:
        """The values as a plain tensor with its own version counter and no history."""
        from refimpl._storage import VersionCounter

        t = _alias(self, Tensor)
        t._version_counter = VersionCounter()
        return t

    @data.setter
    def data(self, value: Tensor) -> None:
        Tensor.data.fset(self, value)

    def __deepcopy__(self, memo) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            result.grad = self.grad.clone()
        memo[id(self)] = result
        return result

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return _rebuild_parameter, (self.detach(), self.requires_grad)


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


PLAIN.add(Parameter)  # ops treat a Parameter as the plain tensor it is


class _BufferMeta(type(Tensor)):
    # a Buffer is a plain tensor flagged ``_is_buffer``: isinstance answers by the flag
    def __instancecheck__(cls, instance) -> bool:
        if cls is Buffer:
            return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """Marks a tensor to be registered as a buffer when assigned to a Module:
    ``Buffer(data=None, *, persistent=True)`` returns a detached plain tensor."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            from refimpl.ops.factories import empty

            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


def is_lazy(param) -> bool:
    """refimpl has no lazy (uninitialised) parameters: always False."""
    return False
