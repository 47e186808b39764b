"""Copies and fills of CUDA tensors: the memory-movement kernels the tensor layer calls.

* device <- device: the strided copy kernel (``_kernels.copy``), any dtype pair,
  broadcasting through zero strides; overlapping source and destination go through
  a temporary. Between two devices: ``_peer`` (peer access, a memcpy or the copy kernel
  on the source device, ordered against both devices' current streams).
* device <- host and host <- device: ``cuMemcpy*Async`` on the current stream of the
  CUDA side. A blocking copy synchronizes that stream before returning (so
  ``current_stream().query()`` is True afterwards, as in torch); a non-blocking copy
  whose host side is pinned returns at once, and the pinned block records the stream
  so that the host allocator will not reuse it before the copy has run. A
  non-blocking copy from pageable memory is synchronous, as in torch.
* fill: ``_kernels.fill`` (memset for byte patterns).
"""

from __future__ import annotations

import numpy as np

from refimpl._tensor import Tensor, contiguous_strides
from refimpl.cuda import (
    _allocator,
    _driver,
    _host_allocator,
    _index,
    _kernels,
    _sync_debug,
    streams,
)


def _expanded_strides(src: Tensor, shape: tuple) -> list[int]:
    """src's strides broadcast to ``shape`` (zero stride on broadcast dimensions)."""
    lead = len(shape) - src.dim()
    out = [0] * lead
    for size, st, target in zip(src._shape, src._stride, shape[lead:]):
        out.append(0 if size == 1 and target != 1 else st)
    return out


def _ptr(t: Tensor) -> int:
    return t._storage._data.ptr


def _host_block(t: Tensor):
    return _host_allocator.block_of(t._storage._data) if t._storage._nbytes else None


def _device_index(t: Tensor) -> int:
    return t._storage._data.device_index


def copy_(dst: Tensor, src: Tensor, non_blocking: bool = False) -> None:
    """Copy ``src`` into ``dst`` (at least one of them on a CUDA device)."""
    if dst.numel() == 0:
        return
    dd, sd = dst.device.type, src.device.type
    if dd == "cuda" and sd == "cuda":
        _device_to_device(dst, src)
        return
    host = src if dd == "cuda" else dst
    if _capturing(_device_index(dst if dd == "cuda" else src)) and not _pinned(host):
        # a pageable host buffer cannot take part in a graph; the capture stays valid
        raise RuntimeError(
            "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the "
            "CPU tensor is pinned. Please use tensor.pin_memory() or allocate the tensor "
            "with pin_memory=True.")
    _sync_debug.check_copy(non_blocking)
    if dd == "cuda":
        _host_to_device(dst, src, non_blocking)
    else:
        _device_to_host(dst, src, non_blocking)
        # a synchronizing point: report an out-of-range index a kernel recorded
        _index.raise_pending()


def _pinned(t: Tensor) -> bool:
    return t._storage._nbytes > 0 and _host_block(t) is not None


def _capturing(index: int) -> bool:
    """Whether the current stream of device ``index`` is capturing a CUDA graph.

    The allocator knows whether any capture is under way; only then is the driver asked.
    """
    if not _allocator.get_device_allocator(index).graph_pools.captures:
        return False
    status, _ = _driver.stream_capture_info(index, streams.current_stream_handle(index))
    return status != _driver.CAPTURE_STATUS_NONE


def check_sync_allowed(t: Tensor) -> None:
    """``.item()``/``.tolist()`` synchronise with the stream, as torch's do: inside a graph
    capture that fails with the driver's error (and invalidates the capture), as in torch."""
    index = _device_index(t)
    if _capturing(index):
        streams.current_stream(index).synchronize()


def read_element(t: Tensor):
    """The first element of a CUDA tensor as a numpy scalar, after its stream's work is
    done (``item()``: one device-to-host copy and a stream synchronisation)."""
    check_sync_allowed(t)
    _sync_debug.check_copy(False)  # a blocking copy to the host, as copy_ checks it
    index = _device_index(t)
    stream = streams.current_stream_handle(index)
    host = np.empty(1, t.dtype.np)
    _driver.memcpy_dtoh_async(index, host.ctypes.data, _ptr(t) + t._offset * t.dtype.itemsize,
                              t.dtype.itemsize, stream)
    _driver.stream_synchronize(index, stream)
    _index.raise_pending()  # a synchronizing point: report an out-of-range index
    return host[0]


def _overlaps(a: Tensor, b: Tensor) -> bool:
    return a._storage is b._storage


def _device_to_device(dst: Tensor, src: Tensor) -> None:
    if _device_index(dst) != _device_index(src):
        from refimpl.cuda import _peer

        _peer.copy(dst, src)
        return
    if _overlaps(dst, src):
        tmp = Tensor._empty(src._shape, src.dtype, src.device)
        _device_to_device(tmp, src)
        src = tmp
    index = _device_index(dst)
    _kernels.copy(_ptr(dst), dst.dtype, list(dst._stride), _ptr(src), src.dtype,
                  _expanded_strides(src, dst._shape), list(dst._shape),
                  dst_offset=dst._offset, src_offset=src._offset, device=index,
                  stream=streams.current_stream_handle(index))


def _host_to_device(dst: Tensor, src: Tensor, non_blocking: bool) -> None:
    index = _device_index(dst)
    stream = streams.current_stream_handle(index)
    if not src.is_contiguous():
        # pageable staging copy; the host reads the source now, so nothing may be pending
        src = Tensor._from_array(np.ascontiguousarray(src._np), src.dtype)
    block = _host_block(src)
    # The host bytes go over unchanged (the source may be a pinned buffer that a queued
    # copy has not filled yet); dtype conversion and broadcasting happen on the device.
    same = src.dtype is dst.dtype and src._shape == dst._shape and dst.is_contiguous()
    staged = dst if same else Tensor._empty(src._shape, src.dtype, dst.device)
    target = _ptr(staged) + staged._offset * staged.dtype.itemsize
    nbytes = src.numel() * src.dtype.itemsize
    source = src._storage.data_ptr() + src._offset * src.dtype.itemsize
    _driver.memcpy_htod_async(index, target, source, nbytes, stream)
    if not same:
        _device_to_device(dst, staged)
    if non_blocking and block is not None:
        _host_allocator.host_allocator().record_use(block, (index, stream))
    else:
        _driver.stream_synchronize(index, stream)


def _device_to_host(dst: Tensor, src: Tensor, non_blocking: bool) -> None:
    index = _device_index(src)
    stream = streams.current_stream_handle(index)
    staged = src
    if not (src.dtype is dst.dtype and src._shape == dst._shape and src.is_contiguous()):
        staged = Tensor._empty(dst._shape, dst.dtype, src.device)
        _device_to_device(staged, src)
    nbytes = staged.numel() * staged.dtype.itemsize
    source = _ptr(staged) + staged._offset * staged.dtype.itemsize
    block = _host_block(dst)
    if dst.is_contiguous():
        host = dst._np
        _driver.memcpy_dtoh_async(index, host.ctypes.data, source, nbytes, stream)
        if non_blocking and block is not None:
            _host_allocator.host_allocator().record_use(block, (index, stream))
            return
        _driver.stream_synchronize(index, stream)
        return
    host = np.empty(dst._shape, dst.dtype.np)
    _driver.memcpy_dtoh_async(index, host.ctypes.data, source, nbytes, stream)
    _driver.stream_synchronize(index, stream)
    np.copyto(dst._np, host)


def fill_(t: Tensor, value) -> None:
    """Fill a CUDA tensor with ``value`` on its device's current stream."""
    if t.numel() == 0:
        return
    index = _device_index(t)
    _kernels.fill(_ptr(t), t.dtype, list(t._shape), list(t._stride), value, offset=t._offset,
                  device=index, stream=streams.current_stream_handle(index))


def empty_pinned(shape, dtype) -> Tensor:
    """A contiguous CPU tensor over pinned memory."""
    from refimpl._storage import UntypedStorage

    shape = tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = _host_allocator.pinned_buffer(nbytes)
    storage = UntypedStorage(nbytes, _data=buf)
    return Tensor._make(storage, shape, contiguous_strides(shape), 0, dtype)


def pin_memory(t: Tensor) -> Tensor:
    """A pinned copy of a CPU tensor (contiguous; values preserved)."""
    if t.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{t.device}' memory: only dense CPU tensors can be "
                           "pinned")
    out = empty_pinned(t._shape, t.dtype)
    if t.numel():
        np.copyto(out._np, t._np)
    return out


def is_pinned(t: Tensor) -> bool:
    """Whether the CPU tensor's memory is pinned (host allocator or cudaHostRegister)."""
    if t.device.type != "cpu" or not t._storage._nbytes:
        return False
    if _host_allocator.block_of(t._storage._data) is not None:
        return True
    return _host_allocator.is_pinned_address(t.data_ptr())
