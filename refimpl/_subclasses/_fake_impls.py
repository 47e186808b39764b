"""What the fake mode knows about ops beyond their meta functions (spec: FAKE-102, FAKE-103).

Three things, each a small table or rule:

- how to name an op the way torch prints it (``aten.select.int``), for messages and for
  the exceptions whose ``str`` is the op name;
- which ops have a data-dependent output shape, or compute a Python value from data;
- the output device of an op on fake tensors: torch's common-device rule (a CPU zero-dim
  tensor joins any other device; two other devices raise) and the ops torch exempts.
"""

from __future__ import annotations

from refimpl._device import CPU, as_device, cuda_device, device

META = device("meta")

# torch's overload names for refimpl's ops, where they are not ".default"; ops whose
# refimpl name already carries an overload (``sum.dim_IntList``) keep it.
_OVERLOADS = {
    **dict.fromkeys(
        ("add", "sub", "mul", "div", "add_", "sub_", "mul_", "div_", "eq", "ne", "lt", "le",
         "gt", "ge", "index", "repeat_interleave", "slice", "bitwise_and", "bitwise_or",
         "bitwise_xor", "remainder", "fmod", "atan2", "maximum", "minimum", "where"),
        "Tensor"),
    "select": "int",
    "transpose": "int",
    "unsqueeze": "default",
    "pow": "Tensor_Tensor",
    "split": "Tensor",
    "unbind": "int",
}
# refimpl-private op names and the aten op torch runs for them
_TORCH_NAMES = {
    "_to_device": "aten._to_copy.default",
    "_view_dtype": "aten.view.dtype",
    "empty": "aten.empty.memory_format",
    "lift_fresh": "aten.lift_fresh.default",
    "item": "aten._local_scalar_dense.default",
}


def torch_name(op) -> str:
    """The name torch prints for ``op`` (an OpDef or a refimpl op name)."""
    name = op if isinstance(op, str) else op.name
    if name in _TORCH_NAMES:
        return _TORCH_NAMES[name]
    if "::" in name:  # a user op: namespace::name
        return name.replace("::", ".") + ".default"
    if "." in name:
        return f"aten.{name}"
    return f"aten.{name}.{_OVERLOADS.get(name, 'default')}"


# Ops whose output shape depends on the values of their inputs (torch's
# ``dynamic_output_shape`` tag): without a shape environment they cannot run on fakes.
DYNAMIC_OUTPUT_SHAPE = frozenset(
    {"nonzero", "masked_select", "_unique2", "unique_consecutive", "unique_dim",
     "repeat_interleave", "argwhere"})
# The phrases refimpl's meta functions use when the shape depends on data.
_DYNAMIC_PHRASES = ("data-dependent output shape", "output shape depends on the data")


def is_dynamic_shape_error(exc: BaseException) -> bool:
    """Whether a meta function refused because its output shape depends on data."""
    text = str(exc)
    return any(p in text for p in _DYNAMIC_PHRASES)


def normalize_device(dev) -> device:
    """A fake tensor's device: ``cuda`` without an index becomes the current device.

    The current device is read only when CUDA is already initialised; otherwise it is
    ``cuda:0`` (what initialisation would select), so making fake CUDA tensors never
    initialises CUDA or needs a driver (FAKE-100, FAKE-101).
    """
    if dev is None:
        return CPU
    d = as_device(dev)
    if d.type == "cuda" and d.index is None:
        from refimpl.cuda import _lazy

        if _lazy.is_initialized():
            from refimpl.cuda import current_device

            return cuda_device(current_device())
        return cuda_device(0)
    return d


class FakeTensorDeviceMismatchError(RuntimeError):
    """Two inputs of an op on fake tensors live on different devices (torch's type)."""

    def __init__(self, func, common_device: device, other: device) -> None:
        self.func = func
        self.common_device = common_device
        self.device = other
        super().__init__(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{common_device} and {other}!"
        )


# Ops whose output follows ``self`` whatever device their other tensors are on.
SELF_DEVICE_OPS = frozenset({"copy_", "slice_scatter"})
# Indexing ops: index tensors may stay on the CPU while self is elsewhere (only self and
# the values take part in the common-device rule).
INDEX_OPS = frozenset({"index", "index_put", "index_put_"})


def _check_index_put_values(name: str, self, values) -> None:
    """torch's fake index_put rule: values on self's device, or a one-element 0-dim value."""
    self_dev = self._storage.fake_device
    values_dev = getattr(values._storage, "fake_device", values._storage.device)
    if values_dev != self_dev and not (values.dim() == 0 and values.numel() == 1):
        raise RuntimeError(
            f"Mismatching aten.{name}.default device between self ({self_dev}) and values "
            f"({values_dev})")


def common_device(op, args: tuple, kwargs: dict, fakes_only: list) -> device:
    """The device of an op's output on fake tensors (torch's ``_find_common_device``).

    ``fakes_only`` are the FakeTensors among the inputs in argument order; a CPU
    zero-dim tensor gives way to any other device; other mismatches raise
    ``FakeTensorDeviceMismatchError``. Ops taking only Python numbers run on the CPU.
    """
    name = op.name
    if name in SELF_DEVICE_OPS and args:
        return args[0]._storage.fake_device
    if name in ("index_put", "index_put_") and len(args) > 2:
        _check_index_put_values(name, args[0], args[2])
    tensors = fakes_only
    if name in INDEX_OPS and args:
        indices = args[1] if len(args) > 1 else ()
        if isinstance(indices, (list, tuple)):
            skip = {id(i) for i in indices if i is not None}
        else:  # a tensor passed where torch takes Tensor?[]: its rows are the indices
            skip = {id(indices)}
        tensors = [t for t in fakes_only if id(t) not in skip]
    common = None
    common_zero_dim = False
    for t in tensors:
        d = t._storage.fake_device
        zero_dim = d.type == "cpu" and not t._shape
        if common is None:
            common, common_zero_dim = d, zero_dim
            continue
        if d == common:
            if common_zero_dim:
                common_zero_dim = zero_dim
            continue
        if zero_dim:
            continue
        if common_zero_dim:
            common, common_zero_dim = d, zero_dim
            continue
        raise FakeTensorDeviceMismatchError(op, common, d)
    return CPU if common is None else common
