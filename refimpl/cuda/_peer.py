"""Copies between two CUDA devices (spec: CUDADEV-204), ordered as torch orders them.

A copy from device S to device D runs on S's current stream (the *copy stream*):

1. Peer access: the first copy from S to D asks the driver whether S can reach D's
   memory (``cuDeviceCanAccessPeer``) and, if so, enables it for S's primary context
   (``cuCtxEnablePeerAccess``), once per process and ordered pair, as torch's
   ``maybe_enable_p2p_access`` does.
2. A two-way barrier: the copy stream first waits for the work queued so far on D's
   current stream (no one may still read or write the destination), and once the copy
   is queued D's current stream waits for the copy stream, so work queued on D after
   the copy sees its result. The host never blocks.
3. The bytes move with ``cuMemcpyPeerAsync`` when both sides are contiguous with the
   same dtype and shape; otherwise the strided copy kernel runs on S and writes D's
   memory through the peer mapping. Without peer access a strided or converting copy
   goes through contiguous temporaries: cast and lay out on S, memcpy, then scatter
   on D.
"""

from __future__ import annotations

import threading

from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, streams

_peer_access: dict[tuple[int, int], bool] = {}
_peer_lock = threading.Lock()


def peer_access(src: int, dst: int) -> bool:
    """Whether device ``src`` may access ``dst``'s memory; enables it on the first ask."""
    key = (src, dst)
    enabled = _peer_access.get(key)
    if enabled is None:
        with _peer_lock:
            enabled = _peer_access.get(key)
            if enabled is None:
                enabled = src != dst and _driver.can_access_peer(src, dst)
                if enabled:
                    _driver.enable_peer_access(src, dst)
                _peer_access[key] = enabled
    return enabled


class _EventPool:
    """Per device, driver events without timing, reused across barriers."""

    def __init__(self) -> None:
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def acquire(self, device: int) -> int:
        with self._lock:
            free = self._free.get(device)
            if free:
                return free.pop()
        return _driver.event_create(device, _driver.EVENT_DISABLE_TIMING)

    def release(self, device: int, event: int) -> None:
        with self._lock:
            self._free.setdefault(device, []).append(event)


_events = _EventPool()


def barrier(src_device: int, src_stream: int, dst_device: int, dst_stream: int) -> None:
    """Make future work on ``dst_stream`` wait for the work queued on ``src_stream``.

    The event is recorded on the source stream and waited on by the other device's
    stream; once the wait is queued the event may be recorded again (the wait keeps the
    record it saw), so it goes straight back to the pool.
    """
    event = _events.acquire(src_device)
    _driver.event_record(src_device, event, src_stream)
    _driver.stream_wait_event(dst_device, dst_stream, event)
    _events.release(src_device, event)


def _index(t: Tensor) -> int:
    return t._storage._data.device_index


def _address(t: Tensor) -> int:
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def _memcpy_eligible(dst: Tensor, src: Tensor) -> bool:
    return (dst.dtype is src.dtype and tuple(dst._shape) == tuple(src._shape)
            and dst.is_contiguous() and src.is_contiguous())


def copy(dst: Tensor, src: Tensor) -> None:
    """``dst[...] = src`` (broadcast, cast) where the two tensors live on different devices."""
    from refimpl.cuda import _tensor_ops

    dst_dev, src_dev = _index(dst), _index(src)
    p2p = peer_access(src_dev, dst_dev)
    eligible = _memcpy_eligible(dst, src)
    if not eligible and not p2p:
        src_contig = Tensor._empty(tuple(dst._shape), dst.dtype, src.device)
        _tensor_ops.copy_(src_contig, src)
        dst_contig = dst if dst.is_contiguous() else Tensor._empty(
            tuple(dst._shape), dst.dtype, dst.device)
        copy(dst_contig, src_contig)
        if dst_contig is not dst:
            _tensor_ops.copy_(dst, dst_contig)
        return
    copy_stream = streams.current_stream(src_dev).cuda_stream
    dst_stream = streams.current_stream(dst_dev).cuda_stream
    barrier(dst_dev, dst_stream, src_dev, copy_stream)
    if eligible:
        _driver.memcpy_peer_async(dst_dev, _address(dst), src_dev, _address(src),
                                  src.numel() * src.dtype.itemsize, copy_stream, src_dev)
    else:
        _kernels.copy(_address(dst), dst.dtype, list(dst._stride), _address(src), src.dtype,
                      _tensor_ops._expanded_strides(src, tuple(dst._shape)),
                      list(dst._shape), device=src_dev, stream=copy_stream)
    barrier(src_dev, copy_stream, dst_dev, dst_stream)
