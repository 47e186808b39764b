"""Runtime assertions on tensor values: ``_assert_async`` (torch's name).

On the CPU the check runs at once. On a CUDA device it is queued on the current stream
as a device-side assertion (``refimpl.cuda._device_assert``): the host never waits, and
a zero value stops the GPU with ``device-side assert triggered`` at the next
synchronization, as torch's does. The element-count checks need no data and raise at
once on every device.
"""

from __future__ import annotations

from refimpl._tensor import Tensor

__all__ = ["_assert_async"]


def _assert_async(input: Tensor, assert_msg: str | None = None) -> None:
    """Assert that the one-element ``input`` is non-zero (asynchronously on CUDA)."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    if input.device.type == "cuda":
        from refimpl.cuda import _device_assert, streams

        dt = input.dtype
        device = input._storage._data.device_index
        _device_assert.assert_nonzero(
            input._storage._data.ptr + input._offset * dt.itemsize, dt.itemsize,
            complex_=dt.is_complex, floating=dt.is_floating_point or dt.is_complex,
            device=device, stream=streams.current_stream(device).cuda_stream)
        return
    if not bool(input.item()):
        raise RuntimeError(assert_msg or "Expected Tensor with single nonzero value, but got zero")
