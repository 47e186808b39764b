"""Checkpoints of private pools (torch's _cuda_getCheckpointState/_cuda_setCheckpointPoolState)
on a simulated device: the pool's segments come back block for block, the statistics
stay consistent, and storages find their blocks by address afterwards.
"""

from __future__ import annotations

import pytest

from refimpl._device import cuda_device
from refimpl._storage import UntypedStorage
from refimpl.cuda import _allocator
from refimpl.cuda._allocator import AddressSpaceSource, CachingAllocator
from refimpl.cuda._allocator_checkpoint import checkpoint_state, set_checkpoint_state
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._allocator_pools import new_pool_id
from refimpl.cuda._tensor_memory import DeviceAllocation, set_checkpoint_pool_state

CAPTURE = 7
FIELDS = ("address", "total_size", "allocated_size", "active_size", "segment_type",
          "segment_pool_id")


def make() -> CachingAllocator:
    return CachingAllocator(AddressSpaceSource(1 << 40), 0, parse_allocator_settings(""))


def captured(alloc: CachingAllocator, sizes: list[int], keep: list[int], pool=None):
    """Allocate ``sizes`` into a private pool (as a capture would); keep the ``keep``-th."""
    pid = pool or new_pool_id(False)
    alloc.begin_allocate_to_pool(pid, lambda s: s == CAPTURE)
    blocks = [alloc.malloc(size, CAPTURE) for size in sizes]
    for i, block in enumerate(blocks):
        if i not in keep:
            alloc.free(block)
    alloc.end_allocate_to_pool(pid)
    return pid, [blocks[i] for i in keep]


def layout(alloc: CachingAllocator, pid) -> list[tuple]:
    return [(tuple(s[f] for f in FIELDS), [(b["size"], b["state"]) for b in s["blocks"]])
            for s in alloc.segments() if s["segment_pool_id"] == pid]


def live(alloc: CachingAllocator, pid) -> int:
    return sum(b["state"] == "active_allocated" for s in alloc.segments()
               if s["segment_pool_id"] == pid for b in s["blocks"])


@pytest.mark.parametrize("keep", [[0, 1, 2], [5], [5, 8], [5, 6]])
def test_restore_gives_back_the_same_segments(keep):
    alloc = make()
    pid, kept = captured(alloc, [512] * 11 if keep[0] == 5 else [2 << 20, 1 << 20, 512], keep)
    before = layout(alloc, pid)
    addresses = sorted(b.address for b in kept)
    state = checkpoint_state(alloc, pid)
    freed, created = set_checkpoint_state(alloc, state)
    assert sorted(freed) == addresses
    assert sorted(b.address for b in created) == addresses
    assert layout(alloc, pid) == before
    alloc.check_invariants()
    # the old block objects (their storages live) free the restored blocks by address
    for block in kept:
        alloc.free(block)
    assert live(alloc, pid) == 0
    alloc.check_invariants()
    with pytest.raises(RuntimeError, match="double free"):
        alloc.free(kept[0])


def test_restore_frees_blocks_allocated_after_the_checkpoint():
    alloc = make()
    pid, kept = captured(alloc, [512], [0])
    before = layout(alloc, pid)
    state = checkpoint_state(alloc, pid)
    _, later = captured(alloc, [512], [0], pool=pid)
    addresses = [kept[0].address, later[0].address]
    freed, created = set_checkpoint_state(alloc, state)
    assert sorted(freed) == sorted(addresses)
    assert [b.address for b in created] == addresses[:1]
    assert layout(alloc, pid) == before
    alloc.check_invariants()


def test_dead_outputs_come_back_allocated():
    alloc = make()
    pid, kept = captured(alloc, [512, 512], [0, 1])
    state = checkpoint_state(alloc, pid)
    addresses = [b.address for b in kept]
    for block in kept:
        alloc.free(block)
    freed, created = set_checkpoint_state(alloc, state)
    assert freed == [] and sorted(b.address for b in created) == addresses
    assert live(alloc, pid) == 2
    alloc.raw_delete(addresses[0])
    assert live(alloc, pid) == 1
    alloc.raw_delete(addresses[1])
    assert live(alloc, pid) == 0
    alloc.check_invariants()


def test_unknown_and_freeable_pools_are_errors():
    alloc = make()
    with pytest.raises(RuntimeError, match="^Could not find pool of id$"):
        checkpoint_state(alloc, (123, 0))
    pid, _kept = captured(alloc, [512], [0])
    alloc.release_pool(pid)
    with pytest.raises(RuntimeError, match="^Not expected to checkpoint freeable graph$"):
        checkpoint_state(alloc, pid)


def storage_of(alloc: CachingAllocator, block) -> UntypedStorage:
    allocation = object.__new__(DeviceAllocation)
    allocation.block, allocation._allocator, allocation.ptr = block, alloc, block.address
    allocation.nbytes, allocation.device_index = block.size, 0
    storage = object.__new__(UntypedStorage)
    storage.device, storage._nbytes, storage._resizable = cuda_device(0), block.size, True
    storage._data = allocation
    return storage


def unowned(address: int, nbytes: int) -> UntypedStorage:
    allocation = object.__new__(DeviceAllocation)
    allocation.block = allocation._allocator = None
    allocation.ptr, allocation.nbytes, allocation.device_index = address, nbytes, 0
    storage = object.__new__(UntypedStorage)
    storage.device, storage._nbytes, storage._resizable = cuda_device(0), nbytes, False
    storage._data = allocation
    return storage


def test_storages_stale_and_given_deleters(monkeypatch: pytest.MonkeyPatch):
    alloc = make()
    monkeypatch.setattr(_allocator, "_allocators", {0: alloc})
    pid, kept = captured(alloc, [512, 512, 512], [0, 1, 2])
    state = checkpoint_state(alloc, pid)
    _, later = captured(alloc, [512], [0], pool=pid)
    stale = storage_of(alloc, later[0])
    third = kept[2].address
    rebuilt = [unowned(b.address, b.size) for b in kept[:2]]
    for block in kept[:2]:
        alloc.free(block)  # two outputs died; their memory was rebuilt from pointers
    set_checkpoint_pool_state(0, state, [stale], rebuilt)
    assert live(alloc, pid) == 3
    del stale
    assert live(alloc, pid) == 3  # the stale storage's death frees nothing
    del rebuilt[0]
    assert live(alloc, pid) == 2
    del rebuilt[0]
    assert live(alloc, pid) == 1
    alloc.raw_delete(third)  # a restored block no storage took: freed by address
    assert live(alloc, pid) == 0
    alloc.check_invariants()


def test_a_freed_live_storage_must_be_named_stale(monkeypatch: pytest.MonkeyPatch):
    alloc = make()
    monkeypatch.setattr(_allocator, "_allocators", {0: alloc})
    pid, _ = captured(alloc, [512], [0])
    state = checkpoint_state(alloc, pid)
    captured(alloc, [512], [0], pool=pid)
    # as in torch, the pool is restored before the storages are checked
    with pytest.raises(RuntimeError, match="^Any stale tensors which are being manually freed"):
        set_checkpoint_pool_state(0, state, [], [])
    assert live(alloc, pid) == 1
