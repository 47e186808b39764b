"""The legacy typed tensor classes: ``refimpl.FloatTensor``, ``refimpl.cuda.HalfTensor``...

They are not subclasses of ``Tensor``: each is a (dtype, device type) pair that

* constructs tensors: ``FloatTensor(2, 3)`` (a size, uninitialised as in torch; refimpl
  hands out zeros on the CPU), ``FloatTensor([1, 2])`` (data), ``FloatTensor()`` (empty),
  ``FloatTensor(other)`` (an alias of a tensor of exactly that type);
* answers ``isinstance``: ``isinstance(refimpl.ones(1), refimpl.FloatTensor)`` is True
  for every float32 CPU tensor, whatever class built it;
* names the type that ``Tensor.type()`` prints (``torch.FloatTensor``,
  ``torch.cuda.FloatTensor``).
"""

from __future__ import annotations

import builtins

from refimpl import _dtype as D
from refimpl._device import as_device
from refimpl._tensor import Size, Tensor

# The scalar types torch has legacy classes for (complex ones have none).
_LEGACY = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")


class _TensorType(type):
    """Metaclass of the typed classes: construction and ``isinstance`` by (dtype, device)."""

    dtype: D.dtype
    is_cuda: bool

    def __instancecheck__(cls, obj) -> builtins.bool:
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and (obj.device.type == "cuda") == cls.is_cuda)

    def __repr__(cls) -> str:
        return f"<class '{_torch_name(cls)}'>"

    def __call__(cls, *args, device=None) -> Tensor:
        home = "cuda" if cls.is_cuda else "cpu"
        dev = as_device(device) if device is not None else as_device(home)
        if dev.type != home:
            raise RuntimeError(
                f"legacy constructor expects device type: {home} but device type: "
                f"{dev.type} was passed"
            )
        import refimpl

        if not args:
            return refimpl.empty(0, dtype=cls.dtype, device=dev)
        if all(type(a) is builtins.int for a in args) or (
                len(args) == 1 and isinstance(args[0], Size)):
            size = tuple(args[0]) if isinstance(args[0], Size) else args
            return refimpl.empty(size, dtype=cls.dtype, device=dev)
        if len(args) == 1 and isinstance(args[0], Tensor):
            other = args[0]
            if not isinstance(other, cls):
                raise TypeError(
                    f"expected {_options(cls.dtype, dev)} (got "
                    f"{_options(other.dtype, other.device)})"
                )
            return other.detach()
        if len(args) == 1:
            return refimpl.tensor(args[0], dtype=cls.dtype, device=dev)
        raise TypeError(
            f"new() received an invalid combination of arguments - got "
            f"({', '.join(type(a).__name__ for a in args)}), but expected one of: (*, "
            "torch.device device = None), (Tensor other), (tuple of ints size, *, "
            "torch.device device = None), (object data, *, torch.device device = None)"
        )


# The C++ names torch prints for scalar types inside TensorOptions(...).
_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>"}


def _options(dtype: D.dtype, dev) -> str:
    """torch's ``TensorOptions(...)`` text for a legacy constructor's type mismatch."""
    where = dev.type if dev.type != "cuda" else str(dev)
    return (f"TensorOptions(dtype={_C_NAMES[dtype.name]}, device={where}, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def _torch_name(cls) -> str:
    return ("torch.cuda." if cls.is_cuda else "torch.") + cls.__name__


def make_types(cuda: builtins.bool) -> dict[str, _TensorType]:
    """The ten typed classes for the CPU (``cuda=False``) or for CUDA, by name."""
    by_legacy = {d._legacy: d for d in D.DTYPES.values()}
    module = "refimpl.cuda" if cuda else "refimpl"
    out = {}
    for legacy in _LEGACY:
        name = f"{legacy}Tensor"
        dtype = by_legacy[legacy]
        doc = (f"Legacy type of {dtype} tensors on "
               f"{'CUDA devices' if cuda else 'the CPU'}: constructs them and matches them "
               "with isinstance.")
        out[name] = _TensorType(name, (), {"dtype": dtype, "is_cuda": cuda, "is_sparse": False,
                                           "__module__": module, "__doc__": doc})
    return out
