"""Devices (spec: TENSOR-020 and following).

``device("cuda:1")``, ``device("cuda", 1)`` and ``device("cpu")`` as in torch; device
strings are parsed strictly and errors carry torch's messages.
"""

from __future__ import annotations

import re

_KNOWN_TYPES = (
    "cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, "
    "vulkan, mps, meta, hpu, mtia, privateuseone"
)
_SUPPORTED = ("cpu", "cuda", "meta")
_DEVICE_RE = re.compile(r"^([a-zA-Z_]+)(?::(0|[1-9][0-9]*))?$")


class device:
    """A device: a type (``cpu``, ``cuda``, ``meta``) and an optional index."""

    __slots__ = ("index", "type")

    def __new__(cls, type_or_str, index: int | None = None):
        if isinstance(type_or_str, device):
            if index is not None:
                raise TypeError("device(): a device object does not take an index")
            return type_or_str
        self = object.__new__(cls)
        if isinstance(type_or_str, int) and not isinstance(type_or_str, bool):
            if type_or_str < 0:
                raise RuntimeError("Device index must not be negative")
            self.type, self.index = "cuda", type_or_str
            return self
        if not isinstance(type_or_str, str):
            raise TypeError(
                f"device() received an invalid combination of arguments - got "
                f"({type(type_or_str).__name__})"
            )
        text = type_or_str
        if not text:
            raise RuntimeError("Device string must not be empty")
        m = _DEVICE_RE.match(text)
        if m is None:
            raise RuntimeError(f"Invalid device string: '{text}'")
        if m.group(1) not in _KNOWN_TYPES.split(", "):
            raise RuntimeError(
                f"Expected one of {_KNOWN_TYPES} device type at start of device string: "
                f"{m.group(1)}"
            )
        kind, idx = m.group(1), m.group(2)
        if idx is not None and index is not None:
            raise RuntimeError(
                f"type (string) must not include an index because index was passed "
                f"explicitly: {text}"
            )
        if idx is not None:
            index = int(idx)
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type, self.index = kind, index
        return self

    def __eq__(self, other) -> bool:
        if other is self:
            return True  # (tensors of one device mostly share its object)
        return isinstance(other, device) and self.type == other.type and \
            self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self) -> device:  # noqa: PYI034 (device is final)
        """``with device(...):`` makes it the default device of factories in the block."""
        _ENTERED.append(DEFAULT)
        set_default_device(self)
        return self

    def __exit__(self, *exc) -> None:
        global DEFAULT
        DEFAULT = _ENTERED.pop()


CPU = device("cpu")

# The device factories use when none is given (torch.set_default_device); read as a plain
# module attribute on the factory path.
DEFAULT = CPU
_ENTERED: list[device] = []  # the defaults that enclosing ``with device(...)`` blocks replaced


def set_default_device(d) -> None:
    """Make factories without a ``device`` argument create tensors on ``d`` (None: cpu)."""
    global DEFAULT
    DEFAULT = CPU if d is None else resolve(as_device(d))


def get_default_device() -> device:
    """The device factories use when none is given."""
    return DEFAULT


# Parsed device strings and concrete CUDA devices, so hot paths never re-parse.
_PARSED: dict[str, device] = {}
_CUDA: dict[int, device] = {}
_cuda_module = None


def as_device(d) -> device:
    """Normalise a device argument (device, str, int, None -> cpu)."""
    if d is None:
        return CPU
    if isinstance(d, device):
        return d
    if isinstance(d, str):
        parsed = _PARSED.get(d)
        if parsed is None:
            parsed = device(d)
            if len(_PARSED) < 256:
                _PARSED[d] = parsed
        return parsed
    if hasattr(d, "type") and hasattr(d, "index") and not isinstance(d, int):
        return device(d.type, d.index)  # another library's device object
    return device(d)


def cuda_device(index: int) -> device:
    """The (shared) ``cuda:index`` device object."""
    d = _CUDA.get(index)
    if d is None:
        d = _CUDA[index] = device("cuda", index)
    return d


def resolve(d) -> device:
    """A concrete device: ``cuda`` without an index becomes the current CUDA device."""
    global _cuda_module
    if type(d) is device and (d.index is not None or d.type == "cpu"):
        return d
    d = as_device(d)
    if d.type == "cuda" and d.index is None:
        if _cuda_module is None:
            import refimpl.cuda as _cuda_module
        if not _cuda_module.is_initialized():
            # before initialisation the current device is 0 (initialising selects it):
            # naming the device must not initialise CUDA (fake CUDA tensors, FAKE-100);
            # allocating on it will
            return cuda_device(0)
        return cuda_device(_cuda_module.current_device())
    if d.type not in _SUPPORTED:
        raise NotImplementedError(f"refimpl does not implement the '{d.type}' device")
    return d
