"""The Tensor: metadata (shape, stride, offset, dtype) over a Storage (spec: TENSOR-001..).

A tensor never owns bytes: it is a strided window onto an ``UntypedStorage``. Views
share the storage and the version counter and remember their ``_base``. Numeric
methods are bound from the op registry (``refimpl/ops``) when the package is
imported; autograd state and methods come from ``refimpl.autograd``'s mixin.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._device import CPU, device
from refimpl._state import STATE
from refimpl._storage import UntypedStorage, VersionCounter
from refimpl.autograd._tensor_autograd import TensorAutogradMixin


class Size(tuple):
    """A tensor's shape: a tuple of ints printed as ``torch.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"torch.Size([{', '.join(str(d) for d in self)}])"

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        return math.prod(self)

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


_STRIDES: dict[tuple, tuple] = {}
_new = object.__new__
_cuda_storage = None  # refimpl.cuda._tensor_memory.new_storage, bound on first use


def contiguous_strides(shape) -> tuple:
    """Row-major strides (in elements) for ``shape``; size-0/1 dims as torch computes."""
    cached = _STRIDES.get(shape)
    if cached is not None:
        return cached
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    result = tuple(reversed(strides))
    if len(_STRIDES) < 4096 and type(shape) is tuple:
        _STRIDES[shape] = result
    return result


class Tensor(TensorAutogradMixin):
    """A multi-dimensional, strided view of a storage, with torch's API."""

    # (__dict__ and __weakref__ come from the autograd mixin, which has no slots)
    __slots__ = (
        "_base",
        "_np_cache",
        "_offset",
        "_shape",
        "_storage",
        "_stride",
        "_version_counter",
        "dtype",
    )
    # Math-view bits (refimpl._math_views): set on lazily conjugated / negated views.
    _conj_bit = False
    _neg_bit = False

    # -- construction -------------------------------------------------------------------

    def __new__(cls, *args, device=None):
        """The legacy constructor: ``Tensor()``, ``Tensor(2, 3)`` (uninitialised),
        ``Tensor([1, 2])`` (data) in the default dtype, or ``Tensor(t)`` (``t`` itself)."""
        return _legacy_new(D.get_default_dtype(), CPU if device is None else device, args,
                           device is not None)

    def new(self, *args, device=None) -> Tensor:
        """The legacy constructor with this tensor's dtype and (by default) device."""
        return _legacy_new(self.dtype, self.device if device is None else device, args,
                           device is not None)

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor converted to ``other``'s dtype and device (self when they match)."""
        return self.to(dtype=other.dtype, device=other.device)

    def storage(self):
        """The storage as a (deprecated) ``TypedStorage`` of this tensor's dtype."""
        from refimpl.storage import TypedStorage, _warn_typed_storage

        _warn_typed_storage()
        return TypedStorage._wrap(self._storage, self.dtype)

    @classmethod
    def _make(cls, storage: UntypedStorage, shape, stride, offset: int, dtype: D.dtype,
              version_counter: VersionCounter | None = None, base: Tensor | None = None):
        """Build a tensor over ``storage`` without copying (internal).

        A storage of a subclass (a fake storage) makes the tensor class it belongs to, so
        every view and alias of a fake tensor is a fake tensor too.
        """
        t = object.__new__(cls if storage.__class__ is UntypedStorage else storage._tensor_cls)
        t._storage = storage
        t._shape = tuple(shape)
        t._stride = tuple(stride)
        t._offset = offset
        t.dtype = dtype
        t._version_counter = version_counter if version_counter is not None else VersionCounter()
        t._base = base
        t._np_cache = None
        if base is not None:
            t._init_autograd()
        if STATE.inference_mode:
            t._is_inference = True  # made in inference mode (views copy their source's flag)
        return t

    @classmethod
    def _empty(cls, shape, dtype: D.dtype, dev: device = CPU) -> Tensor:
        """A fresh contiguous tensor (uninitialised contents on cuda, zeros on cpu)."""
        if dtype is D.complex32:
            raise NotImplementedError("refimpl does not implement complex32 tensors")
        if type(shape) is not tuple:
            shape = tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if dev.type == "cuda" and dev.index is not None:
            global _cuda_storage
            if _cuda_storage is None:
                from refimpl.cuda._tensor_memory import new_storage as _cuda_storage
            storage = _cuda_storage(nbytes, dev)  # the allocation fast path
        else:
            storage = UntypedStorage(nbytes, device=dev)
        # _make written out (fresh tensors are made on every op): no base, a new counter
        t = _new(cls)
        t._storage = storage
        t._shape = shape
        t._stride = _STRIDES.get(shape) or contiguous_strides(shape)
        t._offset = 0
        t.dtype = dtype
        counter = t._version_counter = _new(VersionCounter)  # VersionCounter(0), no call
        counter.version = 0
        t._base = None
        t._np_cache = None
        if STATE.inference_mode:
            t._is_inference = True  # made in inference mode
        return t

    @classmethod
    def _from_array(cls, array, dtype: D.dtype | None = None) -> Tensor:
        """Wrap a numpy result as a fresh CPU tensor (copies only if it must)."""
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        if dtype is None:
            dtype = D.from_numpy_dtype(array.dtype)
        elif array.dtype != dtype.np:
            array = array.astype(dtype.np)
        flags = array.flags
        if not flags.c_contiguous or not flags.writeable:
            array = np.array(array, order="C", copy=True)
        storage = UntypedStorage._wrap_numpy(array)
        t = cls._make(storage, array.shape, contiguous_strides(array.shape), 0, dtype)
        t._np_cache = array
        return t

    # -- metadata -----------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        """The size of each dimension."""
        return Size(self._shape)

    def size(self, dim: int | None = None):
        """The shape, or the size of one dimension."""
        if dim is None:
            return Size(self._shape)
        return self._shape[_wrap_dim(dim, len(self._shape))]

    def stride(self, dim: int | None = None):
        """Strides in elements, or the stride of one dimension."""
        if dim is None:
            return self._stride
        return self._stride[_wrap_dim(dim, len(self._shape))]

    def storage_offset(self) -> int:
        """Offset of element 0 into the storage, in elements."""
        return self._offset

    def dim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    ndimension = dim

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements."""
        return math.prod(self._shape)

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes spanned by the elements (numel * itemsize)."""
        return self.numel() * self.dtype.itemsize

    @property
    def device(self) -> device:
        """The device the storage lives on."""
        return self._storage.device

    @property
    def is_cuda(self) -> bool:
        """True on a CUDA device."""
        return self._storage.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """True on the CPU."""
        return self._storage.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        """True on the meta device (metadata only)."""
        return self._storage.device.type == "meta"

    @property
    def layout(self) -> str:
        """Always strided in refimpl."""
        return "torch.strided"

    def is_floating_point(self) -> bool:
        """True for floating dtypes."""
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        """True for complex dtypes."""
        return self.dtype.is_complex

    @property
    def is_sparse(self) -> bool:
        """Sparse layouts are not part of refimpl."""
        return False

    @property
    def is_quantized(self) -> bool:
        """Quantized tensors are not part of refimpl."""
        return False

    def get_device(self) -> int:
        """The CUDA device index, or -1 on the CPU."""
        return self.device.index if self.is_cuda else -1

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are laid out row-major without gaps (size-1 dims ignored),
        or densely in ``memory_format`` (``channels_last``) when one is given."""
        if memory_format is not None and memory_format.name not in (
                "contiguous_format", "preserve_format"):
            from refimpl._memory_format import is_contiguous_in

            return is_contiguous_in(self._shape, self._stride, memory_format)
        if self._stride == _STRIDES.get(self._shape):
            return True  # the usual case, without the loop: the strides a fresh tensor gets
        expected = 1
        for size, st in zip(reversed(self._shape), reversed(self._stride)):
            if size == 1:
                continue
            if size == 0:
                return True
            if st != expected:
                return False
            expected *= size
        return True

    def untyped_storage(self) -> UntypedStorage:
        """The storage under this tensor (shared by all its views)."""
        return self._storage

    def data_ptr(self) -> int:
        """Address of element 0."""
        base = self._storage.data_ptr()
        return base + self._offset * self.dtype.itemsize if base else 0

    @property
    def _version(self) -> int:
        """How many in-place modifications this tensor's data has seen."""
        if self._is_inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._version_counter.version

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (its ``_base``)."""
        return self._base is not None

    def is_set_to(self, other: Tensor) -> bool:
        """Same storage, offset, shape and strides."""
        return (self._storage is other._storage and self._offset == other._offset
                and self._shape == other._shape and self._stride == other._stride)

    # -- numpy access (cpu) ------------------------------------------------------------

    @property
    def _np(self) -> np.ndarray:
        """A numpy view of this tensor's elements (cpu only; writes go to the storage)."""
        arr = self._np_cache
        if arr is None:
            dev = self._storage.device
            if dev.type != "cpu":
                raise RuntimeError(f"refimpl internal: numpy view of a {dev} tensor")
            npdt = self.dtype.np
            item = npdt.itemsize
            if not self._storage._nbytes or 0 in self._shape:
                arr = np.empty(self._shape, npdt)
            else:
                arr = np.ndarray(self._shape, npdt, self._storage._data, self._offset * item,
                                 tuple(s * item for s in self._stride))
            self._np_cache = arr
        return arr

    def _set_metadata(self, shape, stride, offset) -> None:
        """Change this tensor's view in place (as_strided_, transpose_, resize_ ...)."""
        self._shape, self._stride, self._offset = tuple(shape), tuple(stride), offset
        self._np_cache = None

    # -- Python protocol ---------------------------------------------------------------

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        n = self.numel()
        if n == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if n > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def _scalar_check(self, kind: str) -> None:
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )

    def __float__(self) -> float:
        self._scalar_check("float")
        return float(self.item().real if self.dtype.is_complex else self.item())

    def __int__(self) -> int:
        self._scalar_check("int")
        return int(self.item())

    def __complex__(self) -> complex:
        self._scalar_check("complex")
        return complex(self.item())

    def __index__(self) -> int:
        if self.dtype.category != 1 and self.dtype is not D.bool_ or self.numel() != 1:
            raise TypeError(
                "only integer tensors of a single element can be converted to an index"
            )
        return int(self.item())

    def __format__(self, spec: str) -> str:
        if self.dim() == 0 and spec:
            return format(self.item(), spec)
        return object.__format__(self, spec) if spec else str(self)

    def __repr__(self) -> str:
        from refimpl._dispatch import MODE_STACK
        from refimpl._repr import tensor_repr

        if not MODE_STACK:
            return tensor_repr(self)
        # printing reads the data: python modes (a fake mode) must not see it, as in torch
        saved = MODE_STACK[:]
        del MODE_STACK[:]
        try:
            return tensor_repr(self)
        finally:
            MODE_STACK[:] = saved + MODE_STACK

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a "
                "module, this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001"
            )
        if id(self) in memo:
            return memo[id(self)]
        new = self.detach().clone()
        new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = self.grad.clone()
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        from refimpl.ops.interop import tensor_reduce

        return tensor_reduce(self)


def _legacy_new(dtype: D.dtype, dev, args: tuple, explicit_device: bool) -> Tensor:
    """``Tensor(...)``/``x.new(...)``: sizes, a sequence of data, a tensor, or nothing."""
    from refimpl.ops.factories import empty, tensor

    if len(args) == 1 and isinstance(args[0], Tensor):
        src = args[0]
        if src.dtype is not dtype:
            raise TypeError(f"expected {D.legacy_type_name(dtype)} (got "
                            f"{D.legacy_type_name(src.dtype)})")
        return src
    if len(args) == 1 and not isinstance(args[0], (int, Size)) and hasattr(args[0], "__len__"):
        return tensor(args[0], dtype=dtype, device=dev if explicit_device else
                      (None if dev == CPU else dev))
    sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
    if not sizes:
        sizes = (0,)
    return empty(*sizes, dtype=dtype, device=dev)


def _wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim, with torch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim + n if dim < 0 else dim


wrap_dim = _wrap_dim

# The tensor classes the dispatcher's and kernels' fast paths take as plain tensors
# (``type(x) in PLAIN``, as quick as ``type(x) is Tensor``). nn.Parameter adds itself: it
# only marks a module's tensors and changes nothing an op computes or returns. Other
# subclasses (fake tensors, user subclasses) take the general paths.
PLAIN: set = {Tensor}
