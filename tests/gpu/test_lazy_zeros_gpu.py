"""A dead argument's stand-in in backward allocates only when a kernel reads it.

``refimpl.autograd._record`` stands in for a weakly held argument that died before
backward with zeros of its metadata; on CUDA their one element comes from
``_tensor_memory.lazy_zeros``, taken from the caching allocator (and cleared) on the
first read of its address. Skipped without a GPU.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import refimpl as t
from refimpl.autograd._record import _zeros

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


def _allocations() -> int:
    return t.cuda.memory_stats().get("allocation.all.allocated", 0)


def test_metadata_reads_allocate_nothing_and_values_read_zero():
    dev = t.device("cuda", 0)
    t.cuda.synchronize()
    before = _allocations()
    z = _zeros(((3, 4), t.float32, dev))
    assert z.shape == (3, 4) and z.dtype == t.float32 and z.device == dev
    assert z.stride() == (0, 0)
    assert _allocations() == before  # nothing read its values yet
    np.testing.assert_array_equal((z + 1).cpu().numpy(), np.ones((3, 4), np.float32))
    assert _allocations() >= before + 1  # the read took a block
    np.testing.assert_array_equal(z.cpu().numpy(), np.zeros((3, 4), np.float32))


def test_materialized_block_goes_back_to_the_allocator():
    dev = t.device("cuda", 0)
    z = _zeros(((5,), t.float64, dev))
    z.sum().item()
    t.cuda.synchronize()
    held = t.cuda.memory_allocated()
    del z
    gc.collect()
    assert t.cuda.memory_allocated() < held


def test_backward_through_a_dead_view_reads_only_its_shape(monkeypatch):
    from refimpl.cuda import _tensor_memory

    x = t.randn(4, 5, device="cuda", requires_grad=True)
    h = (x * 2).view(20)
    y = h.view(2, 10)  # y's node holds h weakly; h dies, y keeps only the base alive
    del h
    gc.collect()

    def read(self):
        raise AssertionError("a dead argument's values were read")

    made = []
    real = _tensor_memory.lazy_zeros
    monkeypatch.setattr(_tensor_memory.LazyZeros, "ptr", property(read))
    monkeypatch.setattr(_tensor_memory, "lazy_zeros", lambda *a: made.append(a) or real(*a))
    (y * t.arange(20.0, device="cuda").view(2, 10)).sum().backward()
    assert made  # the dead view was stood in for
    want = 2 * np.arange(20.0, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose(x.grad.cpu().numpy(), want)
