"""Device memory of CUDA tensors: storages take blocks from the caching allocator.

A CUDA ``UntypedStorage`` holds a ``DeviceAllocation``: one block of the device's
caching allocator, allocated on the current stream of that device and given back to
the allocator (not to the driver) when the storage is garbage-collected. This is
what makes ``memory_allocated()`` move with tensor lifetimes exactly as in torch.
"""

from __future__ import annotations

from refimpl._device import cuda_device
from refimpl._storage import UntypedStorage
from refimpl.cuda import _allocator, _device, _lazy, streams
from refimpl.cuda._allocator_core import _ONE_EXABYTE
from refimpl.cuda._lazy import _lazy_init

# the allocator registry (device index -> CachingAllocator), read without its lock
_allocators = _allocator._allocators


class DeviceAllocation:
    """One caching-allocator block owned by a storage; freed when the storage dies."""

    __slots__ = ("__weakref__", "_allocator", "block", "device_index", "nbytes", "ptr")

    def __init__(self, nbytes: int, device_index: int) -> None:
        if not _lazy._initialized:
            _lazy_init()
        self.nbytes = nbytes
        self.device_index = device_index
        if nbytes:
            stream = streams.current_stream_handle(device_index)
            alloc = _allocators.get(device_index) or _allocator.get_device_allocator(device_index)
            # allocate() applies torch's 1 EB guard before the allocator proper
            block = self.block = alloc.allocate(nbytes, stream)
            self._allocator = alloc
            self.ptr = block.address
        else:
            self._allocator = self.block = None
            self.ptr = 0

    def release(self) -> None:
        """Return the block to the allocator (idempotent)."""
        block, self.block = self.block, None
        if block is not None and self._allocator is not None:
            self._allocator.free(block)

    def __del__(self) -> None:
        # release(), written out: this runs for every CUDA storage that dies. At
        # interpreter shutdown the allocator or the driver may already be gone, and a
        # finalizer must not raise (try/except: suppress() would build an object).
        try:
            block = self.block
        except AttributeError:  # the allocation itself failed (out of memory)
            return
        if block is not None:
            self.block = None
            try:
                self._allocator.free(block)
            except Exception:  # noqa: BLE001, S110
                pass


_new = object.__new__
_stream_tls = streams._tls  # this thread's current streams (see current_stream_handle)


def new_storage(nbytes: int, dev) -> UntypedStorage:
    """A fresh ``UntypedStorage`` of ``nbytes`` on ``dev`` (an indexed cuda device).

    ``DeviceAllocation(nbytes, index)`` and the storage's construction written out in
    one function: this runs for every CUDA tensor made (``empty`` and every op's
    output). An allocation that fails leaves an object without a block, which its
    finalizer skips.
    """
    if not _lazy._initialized:
        _lazy_init()
    index = dev.index
    alloc = _allocators.get(index)
    if alloc is None:
        _device._check_ordinal(index)
        alloc = _allocator.get_device_allocator(index)
    allocation = _new(DeviceAllocation)
    if nbytes:
        # streams.current_stream_handle(index), written out
        table = _stream_tls.streams
        current = table.get(index) if table else None
        stream = 0 if current is None else current.cuda_stream
        # allocate() applies torch's 1 EB guard; below it, malloc() is what it calls
        block = allocation.block = (alloc.malloc(nbytes, stream) if nbytes < _ONE_EXABYTE
                                    else alloc.allocate(nbytes, stream))
        allocation.ptr = block.address
    else:
        allocation.block = None
        allocation.ptr = 0
    allocation._allocator = alloc
    allocation.nbytes = nbytes
    allocation.device_index = index
    storage = _new(UntypedStorage)
    storage.device = dev
    storage._nbytes = nbytes
    storage._resizable = True
    storage._data = allocation
    return storage


class LazyZeros(DeviceAllocation):
    """Zeroed device memory whose block is taken from the allocator (and cleared on the
    current stream) only when something first reads its address.

    The autograd graph stands in for an argument that died before backward with zeros of
    its metadata (``refimpl.autograd._record``); most formulas read only its shape, so
    until a kernel needs its values it costs no allocation and no launch.
    """

    __slots__ = ()

    @property
    def ptr(self) -> int:
        block = self.block
        if block is None:
            index = self.device_index
            stream = streams.current_stream_handle(index)
            block = self.block = self._allocator.malloc(self.nbytes, stream)
            from refimpl.cuda import _driver

            _driver.memset_async(index, block.address, 0, self.nbytes, 1, stream)
        return block.address


def lazy_zeros(nbytes: int, dev) -> UntypedStorage:
    """A storage of ``nbytes`` zero bytes on ``dev`` (indexed) allocated on first use."""
    if not _lazy._initialized:
        _lazy_init()
    index = dev.index
    alloc = _allocators.get(index) or _allocator.get_device_allocator(index)
    allocation = _new(LazyZeros)
    allocation.block = None
    allocation._allocator = alloc
    allocation.nbytes = nbytes
    allocation.device_index = index
    return _fixed_storage(allocation, dev)


def allocate(nbytes: int, device) -> DeviceAllocation:
    """A fresh device allocation of ``nbytes`` on ``device`` (a refimpl device)."""
    index = device.index if device.index is not None else _device.current_device()
    if index not in _allocators:
        _device._check_ordinal(index)
    return DeviceAllocation(nbytes, index)


def resize(old: DeviceAllocation, old_nbytes: int, nbytes: int, device) -> DeviceAllocation:
    """A new allocation of ``nbytes`` holding the common prefix of ``old``."""
    from refimpl.cuda import _driver

    new = allocate(nbytes, device)
    n = min(old_nbytes, nbytes)
    if n:
        stream = streams.current_stream(new.device_index).cuda_stream
        _driver.memcpy_dtod_async(new.device_index, new.ptr, old.ptr, n, stream)
    return new


def record_stream(storage, stream) -> None:
    """Mark the storage's block as in use on ``stream`` (see ``Tensor.record_stream``)."""
    alloc: DeviceAllocation = storage._data
    block = alloc.block
    if block is not None:
        # a stream of another device is kept with its device, so that the event marking
        # the end of its use is made there (its handle alone may also name a stream of
        # this device); the block's own stream handle is ignored, as torch compares handles
        key = stream.cuda_stream
        if stream.device_index != alloc.device_index and key != block.stream:
            key = (stream.device_index, key)
        alloc._allocator.record_stream(block, key)


def storage_from_pointer(data_ptr: int, dev, nbytes: int) -> UntypedStorage:
    """A storage over ``nbytes`` of device memory at ``data_ptr`` that it does not own
    (torch's ``_construct_storage_from_data_pointer``): its death frees nothing, until a
    checkpoint restore gives it a block (:func:`set_checkpoint_pool_state`)."""
    if not _lazy._initialized:
        _lazy_init()
    allocation = _new(DeviceAllocation)
    allocation.block = allocation._allocator = None
    allocation.ptr = int(data_ptr)
    allocation.nbytes = int(nbytes)
    allocation.device_index = dev.index if dev.index is not None else _device.current_device()
    return _fixed_storage(allocation, cuda_device(allocation.device_index))


def _fixed_storage(allocation: DeviceAllocation, dev) -> UntypedStorage:
    """A storage that cannot be resized over ``allocation`` (``new_storage`` writes the
    same steps out for its resizable storages: it runs for every tensor made)."""
    storage = _new(UntypedStorage)
    storage.device = dev
    storage._nbytes = allocation.nbytes
    storage._resizable = False
    storage._data = allocation
    return storage


def set_checkpoint_pool_state(device_index: int, state, stale_storages: list,
                              storages_to_add_deleters_to: list) -> None:
    """Set a private pool back to a checkpoint and hand its blocks to storages.

    torch's ``_cuda_setCheckpointPoolState`` (see ``_allocator_checkpoint``): the
    ``stale_storages`` are live storages whose blocks the restore frees for good, and
    their deaths must then free nothing; each storage of ``storages_to_add_deleters_to``
    whose address the restore allocates becomes the owner of that block (its death
    frees it). A restored block no storage takes stays allocated until freed by address.
    """
    from refimpl.cuda._allocator_checkpoint import set_checkpoint_state

    alloc = _allocator.get_device_allocator(device_index)
    stale = list({id(s): s for s in stale_storages}.values())
    freed, created = set_checkpoint_state(alloc, state)
    created_at = {block.address for block in created}
    definitely_freed = sum(1 for address in freed if address not in created_at)
    if len(stale) < definitely_freed:
        raise RuntimeError(
            "Any stale tensors which are being manually freed must be passed to set checkpoint")
    freed_set = set(freed)
    for storage in stale:
        allocation = storage._data
        if allocation.ptr not in freed_set:
            raise RuntimeError(
                "Expected allocated_pointer != definitely_stale_pointers.end() to be true, "
                "but got false.  (Could this error message be improved?  If so, please "
                "report an enhancement request to PyTorch.)")
        if allocation._allocator is not alloc:
            raise RuntimeError("Unexpected deleter function on storage, could not swap function")
        if allocation.block is not None:
            alloc._restored.pop(allocation.block, None)
        allocation.block = allocation._allocator = None
    owners = {s._data.ptr: s for s in storages_to_add_deleters_to}
    for block in created:
        storage = owners.get(block.address)
        if storage is not None:
            allocation = storage._data
            if allocation._allocator is not None:
                raise RuntimeError(" Not expecting deleter function")
            allocation.block = block
            allocation._allocator = alloc
