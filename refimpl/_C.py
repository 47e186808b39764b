# ruff: noqa: N999 - torch._C's module name
"""The private ``torch._C`` hooks that PyTorch's own tests call, where refimpl has them.

Forward-mode AD's switches (``_set_fwd_grad_enabled``/``_is_fwd_grad_enabled``) keep
their state in ``refimpl._state``; this module only names them as torch does.

Only what the seed tests use is here, under torch's names, so that a case written
against ``torch._C`` runs unchanged on refimpl. They steer the caching allocator's
private pools (spec: GRAPH-107, CUDAMEM-501) from outside a graph capture:

* ``_cuda_beginAllocateCurrentStreamToPool(device, pool)`` routes the allocations of
  the current stream into ``pool``; ``..._CurrentThreadToPool`` those of the calling
  thread (torch 2.11's newer hook). ``_cuda_endAllocateToPool`` (older name:
  ``_cuda_endAllocateCurrentStreamToPool``) stops routing; ``_cuda_releasePool``
  drops one use of the pool, as a graph's ``reset()`` does.
* ``_cuda_checkPoolLiveAllocations(device, pool, ptrs)`` is True exactly when the
  pool's live blocks are the given data pointers.

* ``_cuda_getCheckpointState(device, pool)`` checkpoints a pool's block layout and
  ``_cuda_setCheckpointPoolState(device, state, stale, add_deleters)`` sets the pool
  back to it (``refimpl.cuda._allocator_checkpoint``); storages are named by their
  ``_cdata``. ``_construct_storage_from_data_pointer`` makes a storage over memory it
  does not own, and ``_cuda_cudaCachingAllocator_raw_delete`` frees a block by address.
"""

from __future__ import annotations

__all__ = [
    "_construct_storage_from_data_pointer",
    "_cuda_beginAllocateCurrentStreamToPool",
    "_cuda_beginAllocateCurrentThreadToPool",
    "_cuda_checkPoolLiveAllocations",
    "_cuda_cudaCachingAllocator_raw_delete",
    "_cuda_endAllocateCurrentStreamToPool",
    "_cuda_endAllocateToPool",
    "_cuda_getCheckpointState",
    "_cuda_isCurrentStreamCapturing",
    "_cuda_releasePool",
    "_cuda_setCheckpointPoolState",
    "_is_fwd_grad_enabled",
    "_set_fwd_grad_enabled",
]


def _allocator(device: int):
    from refimpl.cuda import _allocator, _lazy

    _lazy._lazy_init()
    return _allocator.get_device_allocator(int(device))


def _cuda_isCurrentStreamCapturing() -> bool:
    """Whether the current stream is capturing a CUDA graph."""
    from refimpl.cuda.graphs import is_current_stream_capturing

    return is_current_stream_capturing()


def _cuda_beginAllocateCurrentStreamToPool(device: int, mempool_id: tuple) -> None:
    """Route the current stream's allocations on ``device`` into ``mempool_id``."""
    from refimpl.cuda import streams

    stream = streams.current_stream(int(device)).cuda_stream
    _allocator(device).begin_allocate_to_pool(tuple(mempool_id), lambda s: s == stream)


def _cuda_beginAllocateCurrentThreadToPool(device: int, mempool_id: tuple) -> None:
    """Route the calling thread's allocations on ``device`` into ``mempool_id``."""
    from refimpl.cuda._allocator_pools import ThreadFilter

    _allocator(device).begin_allocate_to_pool(tuple(mempool_id), ThreadFilter())


def _cuda_endAllocateToPool(device: int, mempool_id: tuple) -> None:
    """Stop routing allocations into ``mempool_id``."""
    _allocator(device).end_allocate_to_pool(tuple(mempool_id))


_cuda_endAllocateCurrentStreamToPool = _cuda_endAllocateToPool


def _cuda_releasePool(device: int, mempool_id: tuple) -> None:
    """Drop one use of ``mempool_id``; unused pools are freed by ``empty_cache()``."""
    _allocator(device).release_pool(tuple(mempool_id))


def _cuda_checkPoolLiveAllocations(device: int, mempool_id: tuple, expected_live) -> bool:
    """Whether the pool's live allocations are exactly the data pointers given."""
    live = _allocator(device).pool_live_allocations(tuple(mempool_id))
    return live == {int(p) for p in expected_live}


def _cuda_getCheckpointState(device: int, mempool_id: tuple):
    """A checkpoint of private pool ``mempool_id``: every segment's blocks as they are now."""
    from refimpl.cuda._allocator_checkpoint import checkpoint_state

    return checkpoint_state(_allocator(device), tuple(mempool_id))


def _cuda_setCheckpointPoolState(device: int, state, stale_storages_ptr,
                                 storages_to_add_deleters_to_ptr=()) -> None:
    """Set the checkpoint's pool back to it; storages are given by their ``_cdata``.

    The stale storages' blocks are freed for good (their deaths then free nothing); a
    storage to add a deleter to becomes the owner of the restored block at its address.
    """
    from refimpl._storage import storage_from_cdata
    from refimpl.cuda._tensor_memory import set_checkpoint_pool_state

    _allocator(device)
    set_checkpoint_pool_state(
        int(device), state, [storage_from_cdata(p) for p in stale_storages_ptr],
        [storage_from_cdata(p) for p in storages_to_add_deleters_to_ptr])


def _construct_storage_from_data_pointer(data_ptr: int, device, nbytes: int):
    """A storage over ``nbytes`` of CUDA memory at ``data_ptr`` that it does not own."""
    from refimpl._device import as_device
    from refimpl.cuda._tensor_memory import storage_from_pointer

    return storage_from_pointer(data_ptr, as_device(device), nbytes)


def _cuda_cudaCachingAllocator_raw_delete(ptr: int) -> None:
    """Free the caching-allocator block at address ``ptr`` (whatever device holds it)."""
    from refimpl.cuda.memory import caching_allocator_delete

    caching_allocator_delete(int(ptr))


def _set_fwd_grad_enabled(enabled: bool) -> None:
    """Turn tangent propagation on or off for this thread (FWDAD-004)."""
    from refimpl.autograd.forward_ad import _set_fwd_grad_enabled_global

    _set_fwd_grad_enabled_global(enabled)


def _is_fwd_grad_enabled() -> bool:
    """Whether tangent propagation is on for this thread."""
    from refimpl._state import STATE

    return STATE.fw_grad_enabled


def _set_conj(tensor, conj: bool) -> None:
    """Set or clear a tensor's conjugate bit in place (its memory is not touched)."""
    from refimpl._math_views import set_bits

    set_bits(tensor, bool(conj), tensor._neg_bit)


def _set_neg(tensor, neg: bool) -> None:
    """Set or clear a tensor's negative bit in place (its memory is not touched)."""
    from refimpl._math_views import set_bits

    set_bits(tensor, tensor._conj_bit, bool(neg))


__all__ += ["_set_conj", "_set_neg"]


def _stash_obj_in_tls(key: str, obj) -> None:
    """Keep ``obj`` in this thread's state under ``key``; the autograd engine's device
    threads see the same object while they run this thread's backward."""
    from refimpl._state import STATE

    STATE.stash[key] = obj


def _is_key_in_tls(key: str) -> bool:
    """Whether this thread's state holds an object stashed under ``key``."""
    from refimpl._state import STATE

    return key in STATE.stash


def _get_obj_in_tls(key: str):
    """The object stashed under ``key`` in this thread's state (torch's error if none)."""
    from refimpl._state import STATE

    if key not in STATE.stash:
        raise RuntimeError(
            "Expected py_objects.obj_dict_.count(key) to be true, but got false.  (Could this "
            "error message be improved?  If so, please report an enhancement request to "
            "PyTorch.)")
    return STATE.stash[key]


__all__ += ["_get_obj_in_tls", "_is_key_in_tls", "_stash_obj_in_tls"]

# torch._C._nn and torch._C._linalg: the aten-named functions the autocast lists call
from refimpl.ops.amp_list_aliases import _linalg, _nn  # noqa: F401
