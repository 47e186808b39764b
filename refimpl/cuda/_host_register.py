"""The host allocator's ``cudaHostRegister`` path (allocator settings
``pinned_use_cuda_host_register`` and ``pinned_num_register_threads``).

By default pinned blocks come from ``cuMemHostAlloc``. With
``pinned_use_cuda_host_register:True`` a block is instead ordinary page-aligned host memory
(an anonymous ``mmap``) whose pages are first touched by ``pinned_num_register_threads``
threads, each faulting in its own share of the pages, and then page-locked with one
``cuMemHostRegister`` (portable, as torch's ``cudaHostRegister`` path); freeing unregisters
and unmaps it. The settings are read at each new allocation, as torch's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import threading

import numpy as np

from refimpl.cuda._host_allocator import DriverHostSource

_PAGE = mmap.PAGESIZE
_REGISTER_PORTABLE = 0x1  # CU_MEMHOSTREGISTER_PORTABLE


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _touch_pages(address: int, nbytes: int, threads: int) -> None:
    """Fault in every page of ``[address, address + nbytes)``, split over ``threads``."""
    pages = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
    share = -(-(nbytes // _PAGE) // threads) * _PAGE

    def touch(start: int) -> None:
        pages[start:start + share:_PAGE] = 0

    workers = [threading.Thread(target=touch, args=(s,)) for s in range(0, nbytes, share)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


class RegisteringHostSource(DriverHostSource):
    """``DriverHostSource`` that follows the pinned-memory allocator settings."""

    def __init__(self) -> None:
        self._mapped: dict[int, int] = {}
        self._libc = None

    def alloc(self, nbytes: int) -> int:
        """A pinned block: ``cuMemHostAlloc``, or mapped, touched and registered pages."""
        from refimpl.cuda._allocator_config import get_config

        cfg = get_config()
        if not cfg.pinned_use_cuda_host_register:
            return super().alloc(nbytes)
        from refimpl.cuda import _driver

        if self._libc is None:
            self._libc = _libc()
        size = -(-nbytes // _PAGE) * _PAGE
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        address = self._libc.mmap(None, size, prot, flags, -1, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise RuntimeError(f"CUDA out of memory: could not map {size} bytes of host memory")
        try:
            _touch_pages(address, size, max(1, int(cfg.pinned_num_register_threads)))
            _driver.host_register(address, size, _REGISTER_PORTABLE)
        except BaseException:
            self._libc.munmap(address, size)
            raise
        self._mapped[address] = size
        return address

    def free(self, address: int) -> None:
        """Unregister and unmap a registered block; ``cuMemFreeHost`` the others."""
        size = self._mapped.pop(address, None)
        if size is None:
            super().free(address)
            return
        from refimpl.cuda import _driver

        _driver.host_unregister(address)
        self._libc.munmap(address, size)

    def registered(self, address: int) -> bool:
        """Whether ``address`` starts a block made by the register path."""
        return address in self._mapped
