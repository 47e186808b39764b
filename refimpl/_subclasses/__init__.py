"""Tensor subclasses with runtime semantics of their own (torch's ``torch._subclasses``).

``refimpl._subclasses.fake_tensor`` holds fake tensors: tensors with full metadata and no
data, computed by running only the meta function of each op (spec: ``spec/fake.md``).
"""

from __future__ import annotations

from refimpl._subclasses.fake_tensor import (
    FakeTensor,
    FakeTensorConverter,
    FakeTensorMode,
    UnsupportedFakeTensorException,
)

__all__ = ["FakeTensor", "FakeTensorConverter", "FakeTensorMode", "UnsupportedFakeTensorException"]
