"""The autograd half of Tensor: requires_grad, grad, grad_fn, hooks, backward.

``Tensor`` inherits this mixin, so everything autograd keeps on a tensor is defined
in one place, next to the engine that reads it:

* ``_gfn``/``_output_nr``: where the tensor's gradient flows (``grad_fn`` property);
* ``_rg``: the flag ``requires_grad_`` sets on leaves (non-leaves require grad through
  ``grad_fn``; views also through their base); ``_requires_grad`` combines the flag and
  the base, which is what the dispatcher's fast path reads;
* ``_grad_acc``: a weak reference to the leaf's AccumulateGrad node;
* ``_bw_hooks``: the tensor's ``register_hook`` dict (``_backward_hooks``);
* ``_view_meta``: for views of float tensors, how the view was made (see views.py).
"""

from __future__ import annotations

import warnings

_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information."
)

_TYPEMETA_NAMES = {
    "float32": "float", "float64": "double", "float16": "c10::Half",
    "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int", "int16": "short int",
    "int8": "signed char", "uint8": "unsigned char", "bool": "bool",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}
_SCALAR_TYPE_NAMES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
    "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


_VIEWS = None  # refimpl.autograd.views, bound on first use (it imports the tensor class)


def _views():
    global _VIEWS
    from refimpl.autograd import views as _VIEWS

    return _VIEWS


_ENGINE = None  # refimpl.autograd.engine, bound on the first backward() (it imports us)


def _engine():
    global _ENGINE
    from refimpl.autograd import engine as _ENGINE

    return _ENGINE


class TensorAutogradMixin:
    """Autograd state and methods of a tensor."""

    # Autograd state with its defaults as class attributes: a fresh tensor pays nothing
    # for it, and only tensors that take part in autograd get instance values.
    _rg = False               # requires_grad flag of a leaf
    _grad = None              # accumulated gradient
    _gfn = None               # grad_fn
    _output_nr = 0            # which output of _gfn this tensor is
    _bw_hooks = None          # register_hook dict
    _retains_grad = False
    _post_acc_hooks = None
    _fw_grads = None          # forward-AD tangent at the current level (forward_ad.py)
    _fw_nondiff = False       # a make_dual/unpack_dual alias: never derives a tangent
    _is_inference = False
    _grad_acc = None          # weak reference to the leaf's AccumulateGrad node
    _view_meta = None         # how a differentiable view was made (views.py)

    def _init_autograd(self) -> None:
        """Per-tensor set-up at creation: only differentiable views need any."""
        if self._base is not None and self.dtype.category >= 2:
            self._view_meta = (_VIEWS or _views()).new_view_meta(self)

    # -- requires_grad -----------------------------------------------------------------

    @property
    def _requires_grad(self) -> bool:
        # a view of a float tensor requires grad when its base does (torch's
        # DifferentiableViewMeta), even without a grad_fn of its own
        if self._view_meta is None:
            return self._rg
        return self._rg or self._base.requires_grad

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value) -> None:
        if not isinstance(value, bool):
            raise RuntimeError("requires_grad must be a bool")  # noqa: TRY004 (torch's type)
        if value and self.grad_fn is None and self.dtype.category < 2:
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients"
            )
        self.requires_grad_(value)

    @requires_grad.deleter
    def requires_grad(self) -> None:
        raise RuntimeError("requires_grad must be a bool")

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` of a leaf in place; returns self."""
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want "
                    "to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach()."
                )
            return self
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and self._is_inference:
            from refimpl._state import STATE

            if not STATE.inference_mode:
                raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                                   "InferenceMode is not allowed.")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a differentiable op."""
        return self.grad_fn is None

    # -- grad_fn -----------------------------------------------------------------------

    @property
    def grad_fn(self):
        """The node that produced this tensor (None for leaves)."""
        if self._view_meta is None:
            return self._gfn
        return (_VIEWS or _views()).view_grad_fn(self)

    @property
    def _grad_fn(self):
        return self.grad_fn

    @_grad_fn.deleter
    def _grad_fn(self) -> None:
        raise RuntimeError("Deletion of _grad_fn not allowed. Detach tensor instead!")

    @property
    def output_nr(self) -> int:
        """Which output of ``grad_fn`` this tensor is."""
        return self._output_nr

    # -- grad --------------------------------------------------------------------------

    @property
    def grad(self):
        """The accumulated gradient of a leaf (or of a tensor that retains grad)."""
        if self._grad is None and not self._retains_grad and self.grad_fn is not None:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is None:  # (zero_grad(set_to_none=True) on every parameter)
            self._grad = None
            return
        from refimpl._tensor import Tensor

        if not isinstance(value, Tensor):
            raise TypeError(
                "assigned grad expected to be a Tensor or None but got grad of type "
                f"{type(value).__name__}"
            )
        if value is self:
            raise RuntimeError("can't assign Variable as its own grad")
        if value.dtype is not self.dtype:
            raise RuntimeError(
                f"attempting to assign a gradient with dtype "
                f"'{_TYPEMETA_NAMES.get(value.dtype.name, value.dtype.name)}' to a tensor with "
                f"grad_dtype '{_SCALAR_TYPE_NAMES.get(self.dtype.name, self.dtype.name)}'. The "
                "gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). "
                "You can set the tensor's grad_dtype attribute with a specific dtype, or None to "
                "allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor "
                "and its gradient may break downstream systems that assume they match."
            )
        if value.device != self.device:
            # torch writes each device index (an int8) as a character, and the message
            # ends at the first NUL byte (index 0) when it reaches Python
            message = (
                f"attempting to assign a gradient located on device with index "
                f"'{chr(value.device.index % 256)}' to a tensor located on device with index "
                f"'{chr(self.device.index % 256)}'. Please ensure that the gradient and the "
                "tensor are on the same device"
            )
            raise RuntimeError(message.split("\x00", 1)[0])
        if value._shape != self._shape:
            raise RuntimeError(
                f"attempting to assign a gradient of size '{list(value._shape)}' to a tensor of "
                f"size '{list(self._shape)}'. Please ensure that the gradient and the tensor are "
                "the same size"
            )
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        """Whether a non-leaf keeps its gradient after backward."""
        return self._retains_grad

    def retain_grad(self) -> None:
        """Keep this non-leaf's gradient in ``.grad`` after backward (no-op on leaves)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        from refimpl.autograd.hooks import add_retains_grad_hook

        add_retains_grad_hook(self)

    # -- hooks -------------------------------------------------------------------------

    @property
    def _backward_hooks(self):
        return self._bw_hooks

    @_backward_hooks.setter
    def _backward_hooks(self, value) -> None:
        self._bw_hooks = value
        if value is not None and self.grad_fn is not None:
            self.grad_fn._register_hook_dict(self)

    @_backward_hooks.deleter
    def _backward_hooks(self) -> None:
        raise RuntimeError("Deletion of _backwards_hooks not allowed!")

    def register_hook(self, hook):
        """``hook(grad)`` runs when this tensor's gradient is computed; it may return a
        replacement. Returns a handle whose ``remove()`` unregisters it."""
        from refimpl.autograd.hooks import register_tensor_hook

        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs after a leaf's ``.grad`` was accumulated."""
        from refimpl.autograd.hooks import register_post_accumulate_hook

        return register_post_accumulate_hook(self, hook)

    # -- detach, data ------------------------------------------------------------------

    def detach(self):
        """A new tensor sharing storage and version counter, cut from the graph."""
        t = type(self)._make(self._storage, self._shape, self._stride, self._offset, self.dtype,
                             self._version_counter)
        t._is_inference = self._is_inference
        if self._conj_bit or self._neg_bit:  # an alias keeps the math-view bits
            t._conj_bit, t._neg_bit = self._conj_bit, self._neg_bit
        return t

    def detach_(self):
        """Cut this tensor from the graph in place (not allowed on views)."""
        if self._view_meta is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
            )
        self._gfn = None
        self._rg = False
        self._output_nr = 0
        self._retains_grad = False
        return self

    @property
    def data(self):
        """An alias of the values with no autograd history and its own version counter."""
        from refimpl._storage import VersionCounter

        t = type(self)._make(self._storage, self._shape, self._stride, self._offset, self.dtype,
                             VersionCounter())
        t._is_inference = self._is_inference
        if self._conj_bit or self._neg_bit:
            t._conj_bit, t._neg_bit = self._conj_bit, self._neg_bit
        return t

    @data.setter
    def data(self, value) -> None:
        from refimpl._tensor import Tensor

        if not isinstance(value, Tensor):
            raise TypeError(
                f"Variable data has to be a tensor, but got {type(value).__name__}"
            )
        if value.device.type != self.device.type:
            raise RuntimeError(
                "Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` "
                "have incompatible tensor type."
            )
        if self._rg and not (value.dtype.is_floating_point or value.dtype.is_complex):
            raise RuntimeError(
                "data set to a tensor that requires gradients must be floating point or complex "
                "dtype"
            )
        self._storage = value._storage
        self.dtype = value.dtype
        self._set_metadata(value._shape, value._stride, value._offset)
        acc = self._grad_acc() if self._grad_acc is not None else None
        if acc is not None and (acc._in_meta[0][0] != value._shape
                                or acc._in_meta[0][1] is not value.dtype):
            self._grad_acc = None

    @data.deleter
    def data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    @property
    def volatile(self) -> bool:
        """Removed legacy flag: always False (warns)."""
        warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                      stacklevel=2)
        return False

    @property
    def is_inference(self):
        """Whether this tensor was made in inference mode."""
        return lambda: self._is_inference

    # -- backward ----------------------------------------------------------------------

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaves) into the leaves' ``.grad``."""
        engine = _ENGINE or _engine()
        if create_graph:
            engine.warn_backward_create_graph()
        engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

