"""Seed-port CUDA paths checked without a GPU: the host allocator's cudaHostRegister path
(the driver's register calls recorded) and the multinomial assert kernel's NVRTC compile."""

from __future__ import annotations

import ctypes
import mmap
import threading

import pytest

from refimpl.cuda import _driver, _host_register, memory


@pytest.fixture
def driver(monkeypatch):
    calls: list = []
    monkeypatch.setattr(_driver, "host_register",
                        lambda a, n, f=0: calls.append(("register", a, n, f)))
    monkeypatch.setattr(_driver, "host_unregister", lambda a: calls.append(("unregister", a)))
    monkeypatch.setattr(_driver, "host_alloc", lambda n, portable=True: 4096 * 1000 + n)
    monkeypatch.setattr(_driver, "host_free", lambda a: calls.append(("host_free", a)))
    yield calls
    memory.set_allocator_settings(
        "pinned_use_cuda_host_register:False,pinned_num_register_threads:1")


def test_default_path_is_host_alloc(driver):
    source = _host_register.RegisteringHostSource()
    address = source.alloc(1 << 20)
    assert address == 4096 * 1000 + (1 << 20)
    assert not source.registered(address)
    source.free(address)
    assert driver == [("host_free", address)]


@pytest.mark.parametrize("threads", [1, 8])
def test_register_path_maps_touches_and_registers(driver, monkeypatch, threads):
    memory.set_allocator_settings(
        f"pinned_use_cuda_host_register:True,pinned_num_register_threads:{threads}")
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    source = _host_register.RegisteringHostSource()
    nbytes = (1 << 21) + 5
    address = source.alloc(nbytes)
    size = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
    assert address % mmap.PAGESIZE == 0 and source.registered(address)
    assert driver == [("register", address, size, 1)]
    assert len(started) == threads
    view = (ctypes.c_uint8 * size).from_address(address)
    view[0], view[size - 1] = 7, 9  # the mapping is writable end to end
    assert (view[0], view[size - 1]) == (7, 9)
    source.free(address)
    assert driver[-1] == ("unregister", address)
    assert not source.registered(address)


def test_multinomial_assert_kernel_compiles(nvrtc_compile):
    from refimpl.cuda import _multinomial_assert

    assert nvrtc_compile(_multinomial_assert._SOURCE, "check.cu")
