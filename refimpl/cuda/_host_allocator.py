"""The caching host allocator: page-locked ("pinned") CPU memory (spec CUDAMEM-6xx).

Pinned memory lets the copy engine read or write host memory while the CPU goes on,
so a block may still be in use by a queued copy after its tensor died. Like torch's
CachingHostAllocator:

* requests are rounded up to a power of two and served from per-size free lists;
  a freed block is reused for the next request of its size (same address);
* every stream that used a block in an async copy gets an event recorded
  (``record_use``); a freed block becomes reusable only when those events have
  completed, which is checked on the next allocation;
* ``empty_cache`` returns every reusable cached block to the driver.

The algorithm runs over a *host source* (``alloc(nbytes) -> address``, ``free``,
``record_event(stream)``, ``event_done``, ``release_event``) so that it is testable
without a GPU; the real source is ``cuMemHostAlloc``/``cuMemFreeHost`` with driver
events.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import defaultdict

import numpy as np


def _round_up_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class HostBlock:
    """One pinned allocation: its address, size, and the events of streams using it."""

    __slots__ = ("address", "allocated", "events", "size", "streams")

    def __init__(self, address: int, size: int) -> None:
        self.address = address
        self.size = size
        self.allocated = True
        self.events: list = []
        self.streams: set[int] = set()


def empty_stats() -> dict:
    """Host allocator counters, all zero."""
    return {
        "num_host_alloc": 0, "num_host_free": 0,
        "allocations.current": 0, "allocations.peak": 0, "allocations.allocated": 0,
        "allocations.freed": 0,
        "allocated_bytes.current": 0, "allocated_bytes.peak": 0,
        "allocated_bytes.allocated": 0, "allocated_bytes.freed": 0,
        "reserved_bytes.current": 0, "reserved_bytes.peak": 0,
    }


class CachingHostAllocator:
    """Power-of-two pinned blocks, reused only after their recorded events complete."""

    def __init__(self, source) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._blocks: dict[int, HostBlock] = {}
        self._free: dict[int, list[HostBlock]] = defaultdict(list)
        self._pending: list[HostBlock] = []
        self.stats = empty_stats()

    def _bump(self, key: str, delta: int) -> None:
        s = self.stats
        s[f"{key}.current"] += delta
        s[f"{key}.peak"] = max(s[f"{key}.peak"], s[f"{key}.current"])

    def _process_pending(self) -> None:
        still = []
        for block in self._pending:
            if all(self.source.event_done(e) for e in block.events):
                for e in block.events:
                    self.source.release_event(e)
                block.events.clear()
                block.streams.clear()
                self._free[block.size].append(block)
            else:
                still.append(block)
        self._pending = still

    def allocate(self, nbytes: int) -> HostBlock | None:
        """A pinned block of at least ``nbytes`` (None for 0 bytes)."""
        if nbytes == 0:
            return None
        size = _round_up_pow2(nbytes)
        with self._lock:
            self._process_pending()
            free = self._free.get(size)
            if free:
                block = free.pop()
            else:
                block = HostBlock(self.source.alloc(size), size)
                self._blocks[block.address] = block
                self.stats["num_host_alloc"] += 1
                self._bump("reserved_bytes", size)
            block.allocated = True
            self.stats["allocations.allocated"] += 1
            self.stats["allocated_bytes.allocated"] += size
            self._bump("allocations", 1)
            self._bump("allocated_bytes", size)
            return block

    def record_use(self, block: HostBlock, stream: int) -> None:
        """Note that work queued on ``stream`` reads or writes ``block``."""
        with self._lock:
            block.streams.add(stream)

    def free(self, block: HostBlock) -> None:
        """Give the block back: reusable once the streams that used it are done with it."""
        with self._lock:
            block.allocated = False
            self.stats["allocations.freed"] += 1
            self.stats["allocated_bytes.freed"] += block.size
            self._bump("allocations", -1)
            self._bump("allocated_bytes", -block.size)
            if block.streams:
                block.events = [self.source.record_event(s) for s in block.streams]
                self._pending.append(block)
            else:
                self._free[block.size].append(block)

    def empty_cache(self) -> None:
        """Return every cached, reusable block to the driver."""
        with self._lock:
            self._process_pending()
            for size, blocks in self._free.items():
                for block in blocks:
                    self.source.free(block.address)
                    del self._blocks[block.address]
                    self.stats["num_host_free"] += 1
                    self._bump("reserved_bytes", -size)
                blocks.clear()

    def is_pinned_address(self, address: int) -> bool:
        """Whether ``address`` lies inside a block of this allocator."""
        with self._lock:
            for block in self._blocks.values():
                if block.address <= address < block.address + block.size:
                    return True
        return False


class DriverHostSource:
    """Pinned memory and events from the CUDA driver."""

    def alloc(self, nbytes: int) -> int:
        """``cuMemHostAlloc`` (portable)."""
        from refimpl.cuda import _driver

        return _driver.host_alloc(nbytes)

    def free(self, address: int) -> None:
        """``cuMemFreeHost``."""
        from refimpl.cuda import _driver

        _driver.host_free(address)

    def record_event(self, stream):
        """An event recorded on ``stream``: a ``(device, handle)`` pair, or a handle of
        the current device."""
        from refimpl.cuda import _device, _driver

        if isinstance(stream, tuple):
            dev, stream = stream
        else:
            dev = _device.current_device()
        event = _driver.event_create(dev, _driver.EVENT_DISABLE_TIMING)
        _driver.event_record(dev, event, stream)
        return (dev, event)

    def event_done(self, event) -> bool:
        """Whether the event completed."""
        from refimpl.cuda import _driver

        return _driver.event_query(*event)

    def release_event(self, event) -> None:
        """Destroy the event."""
        from refimpl.cuda import _driver

        _driver.event_destroy(*event)


_host_allocator: CachingHostAllocator | None = None


def host_allocator() -> CachingHostAllocator:
    """The process-wide pinned-memory allocator (made on first use)."""
    global _host_allocator
    if _host_allocator is None:
        from refimpl.cuda._lazy import _lazy_init

        _lazy_init()
        from refimpl.cuda._host_register import RegisteringHostSource

        _host_allocator = CachingHostAllocator(RegisteringHostSource())
    return _host_allocator


class _PinnedOwner:
    """Keeps a pinned block allocated while any numpy view of it is alive."""

    __slots__ = ("allocator", "block")

    def __init__(self, block: HostBlock, allocator: CachingHostAllocator) -> None:
        self.block = block
        self.allocator = allocator

    def __del__(self) -> None:
        # at interpreter shutdown the allocator may already be gone
        with contextlib.suppress(Exception):
            self.allocator.free(self.block)


def pinned_buffer(nbytes: int) -> np.ndarray:
    """A uint8 numpy array of ``nbytes`` over pinned memory (freed with its last view)."""
    alloc = host_allocator()
    block = alloc.allocate(nbytes)
    if block is None:
        return np.empty(0, np.uint8)
    raw = (ctypes.c_uint8 * nbytes).from_address(block.address)
    raw._pinned_owner = _PinnedOwner(block, alloc)  # lifetime tied to every view
    return np.frombuffer(raw, dtype=np.uint8)


def block_of(array: np.ndarray) -> HostBlock | None:
    """The pinned block behind a numpy buffer made by :func:`pinned_buffer`, if any."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    owner = getattr(base, "_pinned_owner", None)
    return owner.block if owner is not None else None


# Host ranges page-locked with cudaHostRegister (address -> nbytes).
_registered: dict[int, int] = {}


def is_pinned_address(address: int) -> bool:
    """Whether a host address lies in pinned memory: the host allocator's or registered."""
    if any(start <= address < start + n for start, n in _registered.items()):
        return True
    return _host_allocator is not None and _host_allocator.is_pinned_address(address)


class _CudaRuntime:
    """The slice of the CUDA runtime API that torch.cuda.cudart() exposes to tests."""

    def cudaHostRegister(self, ptr: int, size: int, flags: int) -> int:
        """Page-lock ``size`` bytes at ``ptr``; returns 0 (cudaSuccess) or the error code."""
        from refimpl.cuda import _driver
        from refimpl.cuda._lazy import _lazy_init

        _lazy_init()
        try:
            _driver.host_register(ptr, size, flags)
        except _driver.CudaDriverError as exc:
            return exc.code
        _registered[ptr] = size
        return 0

    def cudaHostUnregister(self, ptr: int) -> int:
        """Undo ``cudaHostRegister``; returns 0 or the error code."""
        from refimpl.cuda import _driver

        try:
            _driver.host_unregister(ptr)
        except _driver.CudaDriverError as exc:
            return exc.code
        _registered.pop(ptr, None)
        return 0


def cudart() -> _CudaRuntime:
    """The CUDA runtime shim (``cudaHostRegister``/``cudaHostUnregister``)."""
    return _CudaRuntime()


def host_memory_stats() -> dict:
    """Counters of the pinned-memory allocator (zeros before first use)."""
    return empty_stats() if _host_allocator is None else dict(_host_allocator.stats)
