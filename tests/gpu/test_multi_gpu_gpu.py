"""Two GPUs on the real driver: peer access, the copy paths between devices, driver
contexts, allocator events for streams of the other device, and autograd's device
threads. Skipped unless two CUDA devices are visible.

The conformance cases in ``conformance/cases/multi_gpu`` check the public behaviour on
refimpl and torch alike; these tests look at what only refimpl exposes (which copy path
ran, which context is current, which device an event lives on).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import refimpl
import refimpl.cuda as cuda  # noqa: PLR0402 - refimpl also exports a cuda() op

pytestmark = [
    pytest.mark.skipif(not cuda.is_available() or cuda.device_count() < 2,
                       reason="needs two CUDA GPUs"),
    pytest.mark.timeout(300),
]


@pytest.fixture(autouse=True)
def _restore_device():
    yield
    cuda.set_device(0)


def _values(t) -> np.ndarray:
    return t.cpu().numpy()


def test_peer_access_enabled_once_per_direction():
    from refimpl.cuda import _driver, _peer

    x = refimpl.arange(8.0, device="cuda:0")
    y = x.to("cuda:1")
    assert _peer._peer_access.get((0, 1)) == cuda.can_device_access_peer(0, 1)
    if _peer._peer_access[(0, 1)]:
        _driver.enable_peer_access(0, 1)  # a second time is not an error
    np.testing.assert_array_equal(_values(y), np.arange(8.0, dtype=np.float32))


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "transposed_dst", "cast",
                                    "broadcast"])
def test_copy_without_peer_access_goes_through_temporaries(monkeypatch, layout):
    from refimpl.cuda import _peer

    monkeypatch.setitem(_peer._peer_access, (1, 0), False)
    base = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    src = refimpl.tensor(base, device="cuda:1")
    if layout == "transposed":
        src, want = src.t(), base.T
    elif layout == "cast":
        want = base.astype(np.float64)
    elif layout == "broadcast":
        src, want = src[3], np.broadcast_to(base[3], (12, 10))
    else:
        want = base
    dst = refimpl.zeros(*want.shape, device="cuda:0",
                        dtype=refimpl.float64 if layout == "cast" else refimpl.float32)
    if layout == "transposed_dst":
        dst = refimpl.zeros(10, 12, device="cuda:0").t()
    dst.copy_(src)
    assert not dst.is_contiguous() or layout != "transposed_dst"
    np.testing.assert_array_equal(_values(dst), want)


def test_strided_copy_with_peer_access_runs_on_the_source_device(monkeypatch):
    from refimpl.cuda import _kernels, _peer

    if not cuda.can_device_access_peer(0, 1):
        pytest.skip("no peer access between the two GPUs")
    devices = []
    real = _kernels.copy

    def spy(*args, **kwargs):
        devices.append(kwargs.get("device"))
        return real(*args, **kwargs)

    monkeypatch.setattr(_kernels, "copy", spy)
    src = refimpl.arange(64.0, device="cuda:0").view(8, 8).t()
    dst = refimpl.empty(8, 8, device="cuda:1")
    dst.copy_(src)
    assert devices == [0]
    assert _peer._peer_access[(0, 1)] is True
    np.testing.assert_array_equal(_values(dst), np.arange(64.0, dtype=np.float32).reshape(8, 8).T)


def test_kernels_on_device_one_leave_device_zero_current():
    from refimpl.cuda import _driver

    x = refimpl.ones(1000, device="cuda:1")
    y = (x * 2 + 1).sum()
    assert cuda.current_device() == 0
    assert float(y.cpu()) == 3000.0
    # the driver's current context follows the device of the last call, while the
    # current device of torch's API stays where the user put it
    assert _driver._tls.device in (0, 1)
    z = refimpl.ones(3, device="cuda")
    assert str(z.device) == "cuda:0"


def test_allocator_event_for_a_stream_of_the_other_device():
    from refimpl.cuda import _allocator

    s1 = cuda.Stream(device=1)
    alloc0 = _allocator.get_device_allocator(0)
    with cuda.stream(s1):
        cuda._sleep(20_000_000)
    event = alloc0.source.record_event((1, s1.cuda_stream))
    assert isinstance(event, tuple) and event[0] == 1
    assert alloc0.source.event_done(event) is False
    alloc0.source.synchronize_event(event)
    assert alloc0.source.event_done(event) is True
    alloc0.source.release_event(event)
    assert alloc0.source.record_event((1, s1.cuda_stream)) == event  # reused from the pool


def test_record_stream_default_stream_of_the_other_device_is_ignored():
    # torch compares raw stream handles: device 1's legacy stream has the same handle (0)
    # as the block's own stream, so the use is not recorded
    x = refimpl.empty(1 << 18, device="cuda:0")
    block = x._storage._data.block
    x.record_stream(cuda.default_stream(1))
    assert block.stream_uses is None
    s1 = cuda.Stream(device=1)
    x.record_stream(s1)
    assert list(block.stream_uses) == [(1, s1.cuda_stream)]
    s1.synchronize()


@pytest.mark.parametrize("multithreading", [True, False])
def test_backward_runs_device_nodes_on_their_device_threads(multithreading):
    seen = []

    class Probe(refimpl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append((g.device.index, cuda.current_device(),
                         threading.current_thread() is main, threading.current_thread().name))
            return g

    main = threading.current_thread()
    x0 = refimpl.ones(4, device="cuda:0", requires_grad=True)
    x1 = refimpl.ones(4, device="cuda:1", requires_grad=True)
    with refimpl.autograd.set_multithreading_enabled(multithreading):
        loss = Probe.apply(x1).sum().to("cuda:0") + Probe.apply(x0).sum()
        loss.backward()
    assert sorted(s[:3] for s in seen) == [(0, 0, not multithreading),
                                           (1, 1, not multithreading)]
    if multithreading:
        assert sorted(s[3] for s in seen) == ["refimpl-autograd-cuda:0", "refimpl-autograd-cuda:1"]
    assert cuda.current_device() == 0
    np.testing.assert_array_equal(_values(x1.grad), np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(_values(x0.grad), np.ones(4, dtype=np.float32))


def test_reentrant_backward_on_a_device_thread_reaches_the_other_device():
    inner = []

    class Reentrant(refimpl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            with refimpl.enable_grad():
                for dev in ("cuda:1", "cuda:0", "cpu"):
                    p = refimpl.ones(3, device=dev, requires_grad=True)
                    (p * 3).sum().backward()
                    inner.append((dev, _values(p.grad).tolist()))
            return g

    x = refimpl.ones(2, device="cuda:0", requires_grad=True)
    Reentrant.apply(x).sum().backward()
    assert inner == [(d, [3.0, 3.0, 3.0]) for d in ("cuda:1", "cuda:0", "cpu")]
    np.testing.assert_array_equal(_values(x.grad), np.ones(2, dtype=np.float32))


def test_one_gib_peer_copy_is_exact():
    n = (1 << 30) // 4
    src = refimpl.arange(n, device="cuda:0", dtype=refimpl.int32)
    dst = src.to("cuda:1")
    back = dst.to("cuda:0")
    assert bool(refimpl.equal(back, src))
    tail = _values(dst[-5:])
    np.testing.assert_array_equal(tail, np.arange(n - 5, n, dtype=np.int32))
    del src, dst, back
