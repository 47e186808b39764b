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

Pool checkpoints (``_cuda_getCheckpointState``/``_cuda_setCheckpointPoolState``) are
not implemented: they raise NotImplementedError.
"""

from __future__ import annotations

import threading

__all__ = [
    "_cuda_beginAllocateCurrentStreamToPool",
    "_cuda_beginAllocateCurrentThreadToPool",
    "_cuda_checkPoolLiveAllocations",
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
    thread = threading.get_ident()
    _allocator(device).begin_allocate_to_pool(
        tuple(mempool_id), lambda s: threading.get_ident() == thread)


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
    """Pool checkpoints are not implemented by refimpl."""
    raise NotImplementedError(
        "refimpl does not implement caching-allocator pool checkpoints "
        "(_cuda_getCheckpointState)")


def _cuda_setCheckpointPoolState(device: int, state, stale_storages, storages_to_add_deleters_to):
    """Pool checkpoints are not implemented by refimpl."""
    raise NotImplementedError(
        "refimpl does not implement caching-allocator pool checkpoints "
        "(_cuda_setCheckpointPoolState)")


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
