"""Two devices without a GPU: the driver calls refimpl makes for a copy between devices,
for allocator events of a stream of the other device and for pinned-memory events, on a
simulated driver that records every call with the device it targets.

The real thing runs in ``tests/gpu/test_multi_gpu_gpu.py`` and the ``multi_gpu``
conformance cases on a machine with two GPUs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from refimpl import _dtype as D
from refimpl.cuda import _device_source, _driver, _host_allocator, _peer, _tensor_memory


class FakeDriver:
    """Records (call, device, ...) tuples; events and streams are plain ints."""

    def __init__(self, monkeypatch, peer: bool = True) -> None:
        self.calls: list[tuple] = []
        self.next_event = 100
        self.peer = peer
        self.done: set[int] = set()
        for name in ("can_access_peer", "enable_peer_access", "event_create", "event_record",
                     "stream_wait_event", "memcpy_peer_async", "event_query",
                     "event_synchronize", "event_destroy"):
            monkeypatch.setattr(_driver, name, getattr(self, name))

    def can_access_peer(self, a, b):
        self.calls.append(("can_access_peer", a, b))
        return self.peer

    def enable_peer_access(self, a, b):
        self.calls.append(("enable_peer_access", a, b))

    def event_create(self, device, flags):
        self.next_event += 1
        self.calls.append(("event_create", device, self.next_event))
        return self.next_event

    def event_record(self, device, event, stream):
        self.calls.append(("event_record", device, event, stream))

    def stream_wait_event(self, device, stream, event):
        self.calls.append(("stream_wait_event", device, stream, event))

    def memcpy_peer_async(self, dst_dev, dst, src_dev, src, nbytes, stream, stream_dev):
        self.calls.append(("memcpy_peer_async", dst_dev, dst, src_dev, src, nbytes, stream,
                           stream_dev))

    def event_query(self, device, event):
        self.calls.append(("event_query", device, event))
        return event in self.done

    def event_synchronize(self, device, event):
        self.calls.append(("event_synchronize", device, event))
        self.done.add(event)

    def event_destroy(self, device, event):
        self.calls.append(("event_destroy", device, event))


class FakeStreams:
    """``streams.current_stream(i)``: device i's current stream is handle 1000 + i."""

    @staticmethod
    def current_stream(index):
        return SimpleNamespace(cuda_stream=1000 + index)


def fake_tensor(device: int, ptr: int, shape=(4, 4), stride=(4, 1), offset: int = 0):
    data = SimpleNamespace(device_index=device, ptr=ptr)
    t = SimpleNamespace(_storage=SimpleNamespace(_data=data), _offset=offset, dtype=D.float32,
                        _shape=shape, _stride=stride)
    t.is_contiguous = lambda: stride == (shape[1], 1)
    t.numel = lambda: shape[0] * shape[1]
    t.dim = lambda: len(shape)
    return t


@pytest.fixture
def driver(monkeypatch):
    monkeypatch.setattr(_peer, "streams", FakeStreams)
    monkeypatch.setattr(_peer, "_peer_access", {})
    monkeypatch.setattr(_peer, "_events", _peer._EventPool())
    return FakeDriver(monkeypatch)


def test_contiguous_copy_is_a_peer_memcpy_between_two_barriers(driver):
    dst, src = fake_tensor(1, 0x1000), fake_tensor(0, 0x2000, offset=2)
    _peer.copy(dst, src)
    names = [c[0] for c in driver.calls]
    assert names == ["can_access_peer", "enable_peer_access",
                     "event_create", "event_record", "stream_wait_event",
                     "memcpy_peer_async",
                     "event_create", "event_record", "stream_wait_event"]
    calls = driver.calls
    assert calls[0] == ("can_access_peer", 0, 1) and calls[1] == ("enable_peer_access", 0, 1)
    # the copy stream (device 0's current) waits for device 1's current stream...
    assert calls[3][1:] == (1, calls[2][2], 1001) and calls[4][1:] == (0, 1000, calls[2][2])
    # ...the bytes move on the copy stream...
    assert calls[5] == ("memcpy_peer_async", 1, 0x1000, 0, 0x2000 + 8, 64, 1000, 0)
    # ...and device 1's current stream waits for the copy
    assert calls[7][1:] == (0, calls[6][2], 1000) and calls[8][1:] == (1, 1001, calls[6][2])


def test_peer_access_is_asked_once_per_direction_and_events_are_reused(driver):
    _peer.copy(fake_tensor(1, 0x1000), fake_tensor(0, 0x2000))
    driver.calls.clear()
    _peer.copy(fake_tensor(1, 0x1000), fake_tensor(0, 0x2000))
    names = [c[0] for c in driver.calls]
    assert "can_access_peer" not in names and "event_create" not in names
    driver.calls.clear()
    _peer.copy(fake_tensor(0, 0x1000), fake_tensor(1, 0x2000))
    assert driver.calls[0] == ("can_access_peer", 1, 0)


def test_strided_copy_with_peer_access_runs_the_kernel_on_the_source_device(driver, monkeypatch):
    launched = []
    monkeypatch.setattr(_peer._kernels, "copy", lambda *a, **k: launched.append((a, k)))
    dst = fake_tensor(1, 0x1000)
    src = fake_tensor(0, 0x2000, stride=(1, 4))  # a transposed view
    _peer.copy(dst, src)
    (args, kwargs), = launched
    assert kwargs == {"device": 0, "stream": 1000}
    assert args[0] == 0x1000 and args[3] == 0x2000 and args[4] == D.float32
    assert list(args[5]) == [1, 4] and list(args[6]) == [4, 4]
    assert "memcpy_peer_async" not in [c[0] for c in driver.calls]


def test_peer_access_unavailable_is_never_enabled(driver):
    driver.peer = False
    assert _peer.peer_access(0, 1) is False
    assert [c[0] for c in driver.calls] == ["can_access_peer"]
    assert _peer.peer_access(0, 0) is False  # a device and itself: no driver call
    assert len(driver.calls) == 1


def test_allocator_events_for_a_stream_of_another_device(driver):
    source = _device_source.DeviceSegmentSource(0)
    own = source.record_event(7)
    other = source.record_event((1, 8))
    assert own == 101 and other == (1, 102)
    assert driver.calls[:4] == [("event_create", 0, 101), ("event_record", 0, 101, 7),
                                ("event_create", 1, 102), ("event_record", 1, 102, 8)]
    assert source.event_done(other) is False
    source.synchronize_event(other)
    assert source.event_done(other) is True
    assert driver.calls[-2] == ("event_synchronize", 1, 102)
    source.release_event(other)
    source.release_event(own)
    driver.calls.clear()
    # each device's events are reused on that device only
    assert source.record_event((1, 9)) == (1, 102)
    assert source.record_event(9) == 101
    assert [c[0] for c in driver.calls] == ["event_record", "event_record"]


def test_record_stream_keys_a_stream_of_another_device_with_its_device():
    recorded = []
    block = SimpleNamespace(stream=0)
    alloc = SimpleNamespace(block=block, device_index=0,
                            _allocator=SimpleNamespace(record_stream=lambda b, s: recorded.append(s)))
    storage = SimpleNamespace(_data=alloc)
    stream = SimpleNamespace
    _tensor_memory.record_stream(storage, stream(cuda_stream=55, device_index=0))
    _tensor_memory.record_stream(storage, stream(cuda_stream=55, device_index=1))
    # torch compares raw handles: device 1's legacy stream (0) is the block's own
    _tensor_memory.record_stream(storage, stream(cuda_stream=0, device_index=1))
    assert recorded == [55, (1, 55), 0]


def test_pinned_memory_event_on_the_device_of_the_copy(driver):
    source = _host_allocator.DriverHostSource()
    event = source.record_event((1, 77))
    assert event == (1, 101)
    assert driver.calls == [("event_create", 1, 101), ("event_record", 1, 101, 77)]
    assert source.event_done(event) is False


def _on(device):
    return SimpleNamespace(_storage=SimpleNamespace(device=device), dim=lambda: 2)


_SAME = "Expected all tensors to be on the same device, but "
_WRAPPER = " (when checking argument in method wrapper_CUDA_{})"


@pytest.mark.parametrize(("name", "order", "message"), [
    ("add", (0, 1), _SAME + "found at least two devices, cuda:0 and cuda:1!"),
    ("mm", (0, 1), _SAME + "got mat2 is on cuda:1, different from other tensors on cuda:0"
     + _WRAPPER.format("mm")),
    ("cat", (1, 1, 0), _SAME + "got tensors is on cuda:0, different from other tensors on cuda:1"
     + _WRAPPER.format("cat")),
    ("addmm", (0, 0, 1), _SAME + "got mat2 is on cuda:1, different from other tensors on cuda:0"
     + _WRAPPER.format("addmm")),
])
def test_two_device_messages_name_the_argument_where_torch_does(name, order, message):
    from refimpl._device import device
    from refimpl._dispatch import common_device
    from refimpl.ops import _registry

    tensors = [_on(device("cuda", i)) for i in order]
    with pytest.raises(RuntimeError) as info:
        common_device(_registry.get(name), tensors)
    assert str(info.value) == message
