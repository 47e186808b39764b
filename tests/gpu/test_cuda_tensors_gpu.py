"""CUDA tensors on a real GPU: allocation through the caching allocator, copies, pinned
memory, stream ordering (spec CUDAMEM-*, STREAM-*). Skipped where no GPU is present."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

import refimpl as t

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


def test_tensor_lifetime_moves_memory_allocated():
    gc.collect()  # garbage of earlier tests must not be freed between the two readings
    t.cuda.empty_cache()
    before = t.cuda.memory_allocated()
    x = t.ones(2, device="cuda")
    assert x.is_cuda and x.device == t.device("cuda:0")
    assert t.cuda.memory_allocated() - before == 512  # 8 bytes round up to 512
    del x
    gc.collect()
    assert t.cuda.memory_allocated() == before
    assert t.cuda.memory_reserved() >= 2 << 20  # the small-pool segment stays cached


@pytest.mark.parametrize("name", DTYPES)
def test_round_trip_every_dtype(name):
    dt = getattr(t, name)
    src = t.tensor(np.arange(-6, 6).reshape(3, 4) % 5, dtype=dt)
    back = src.cuda().cpu()
    assert back.dtype is dt and back.tolist() == src.tolist()


def test_strided_and_converting_copies():
    x = t.arange(12, dtype=t.float32).view(3, 4)
    d = x.cuda()
    assert d.t().contiguous().cpu().tolist() == x.t().contiguous().tolist()
    assert d.t().cpu().tolist() == x.t().tolist()
    y = t.zeros(4, 3, dtype=t.int64, device="cuda")
    y.copy_(d.t())
    assert y.cpu().tolist() == x.t().to(t.int64).tolist()
    z = t.zeros(3, 4, device="cuda")
    z.copy_(t.tensor([1.0, 2.0, 3.0, 4.0]))  # broadcast from the host
    assert z.cpu().tolist() == [[1.0, 2.0, 3.0, 4.0]] * 3


def test_fill_and_zero():
    x = t.empty(5, dtype=t.float16, device="cuda")
    x.fill_(2.5)
    assert x.cpu().tolist() == [2.5] * 5
    x.zero_()
    assert x.cpu().tolist() == [0.0] * 5
    full = t.full((2, 2), 7, device="cuda")
    assert full.dtype is t.int64 and full.cpu().tolist() == [[7, 7], [7, 7]]


@pytest.mark.parametrize("name", DTYPES)
def test_zeros_and_ones_every_dtype(name):
    # no mode or profiler: the factories call the fill kernel without dispatch
    dt = getattr(t, name)
    for factory, value in ((t.zeros, 0), (t.ones, 1)):
        x = factory(2, 3, dtype=dt, device="cuda")
        assert x.dtype is dt and x.shape == (2, 3) and x._version == 0
        assert x.cpu().tolist() == [[value] * 3] * 2  # (1 == True == 1+0j)
    y = t.ones(2, 3, 4, 5, device="cuda", memory_format=t.channels_last, requires_grad=True)
    assert y.stride() == (60, 1, 15, 3) and y.requires_grad and y.is_leaf
    assert t.zeros(0, 3, device="cuda").shape == (0, 3)


def test_zeros_and_ones_under_a_dispatch_mode_are_seen():
    from refimpl.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        x = t.ones(3, device="cuda")
    assert x.cpu().tolist() == [1.0] * 3
    assert seen, "a dispatch mode must see the ops of ones()"


def test_blocking_copy_to_cpu_synchronizes():
    x = t.ones(1 << 20, device="cuda")
    t.cuda._sleep(int(50 * t.cuda.get_cycles_per_ms()))
    y = x.to("cpu")
    assert t.cuda.current_stream().query()
    assert not y.is_pinned()


def test_non_blocking_copy_to_cpu_is_pinned_and_async():
    x = t.ones(1 << 20, device="cuda")
    t.cuda._sleep(int(50 * t.cuda.get_cycles_per_ms()))
    y = x.to("cpu", non_blocking=True)
    assert not t.cuda.current_stream().query()
    assert y.is_pinned()
    t.cuda.synchronize()
    assert float(y.sum()) == float(1 << 20) if hasattr(y, "sum") else True


def test_pinned_memory_cache_reuses_and_guards_blocks():
    x = t.ones(1000).pin_memory()
    assert x.is_pinned() and x[1:].is_pinned() if hasattr(x, "__getitem__") else x.is_pinned()
    ptr = x.data_ptr()
    del x
    gc.collect()
    y = t.ones(1000).pin_memory()
    assert y.data_ptr() == ptr  # the freed block came back
    gpu = t.zeros(1000, device="cuda")
    # the copy waits behind a sleep that must outlast the frees and the collection below:
    # in a long test session a full collection takes tens of milliseconds, and cycles per
    # ms measured at an idle clock shorten the sleep at the boost clock (one such run saw
    # the block come back early with a 200 ms sleep)
    start = time.perf_counter()
    t.cuda._sleep(int(2000 * t.cuda.get_cycles_per_ms()))
    gpu.copy_(y, non_blocking=True)
    del y
    gc.collect()
    z = t.ones(1000).pin_memory()
    waited = time.perf_counter() - start
    assert z.data_ptr() != ptr or waited > 0.5  # still in use by the queued copy
    t.cuda.synchronize()


def test_record_stream_defers_reuse():
    s = t.cuda.Stream()
    x = t.empty(1 << 18, device="cuda")
    ptr = x.data_ptr()
    with t.cuda.stream(s):
        t.cuda._sleep(int(200 * t.cuda.get_cycles_per_ms()))
    x.record_stream(s)
    del x
    gc.collect()
    y = t.empty(1 << 18, device="cuda")
    assert y.data_ptr() != ptr
    s.synchronize()


def test_ops_without_cuda_kernels_raise():
    from refimpl.ops._registry import OpDef

    # an op declared without a CUDA kernel (not registered): no silent CPU fallback
    op = OpDef("cpu_only_op", meta=lambda x: None, cpu=lambda x: x._np.copy())
    x = t.ones(2, device="cuda")
    with pytest.raises(NotImplementedError, match="no CUDA kernel for 'cpu_only_op'"):
        op(x)


def test_complex_from_real_and_imaginary_parts_on_the_device():
    re = t.tensor([[1.0, -2.0], [3.5, 0.0]], device="cuda")
    im = t.tensor([0.5, -1.0], device="cuda")  # broadcast along rows
    z = t.complex(re, im)
    assert z.device.type == "cuda" and z.dtype is t.complex64
    expected = np.array([[1 + 0.5j, -2 - 1j], [3.5 + 0.5j, 0 - 1j]], dtype=np.complex64)
    np.testing.assert_array_equal(z.cpu().numpy(), expected)
