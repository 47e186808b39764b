"""Streams in backward: torch's "streaming backwards" rules (spec: STREAM-300..303).

CUDA work is queued on streams, and backward must order it the way the forward pass
did. The engine (``engine.py``) asks this module four things:

* ``node_stream(in_meta)``: the stream a node runs its backward on. A node remembers
  the stream that was current, on the device of its first CUDA forward output, when it
  was created (STREAM-300). CPU-only nodes have none.
* ``on_stream(stream)``: a context that makes that stream current while the node, its
  hooks and the accumulation of its gradients run.
* ``sync_producer(grad, producer, consumer)``: before a node consumes a gradient made on
  another stream of the same device, the consumer stream waits for the producer (an
  event recorded on one, waited on by the other). A gradient from a node without a
  stream (a CPU node that made a CUDA tensor) is ordered after the device's default
  stream, as torch does. The root gradients count as made on the caller's current
  stream (STREAM-302).
* ``sync_leaves(leaf_streams)``: once every node ran, the caller's current stream of
  each device waits for the streams that produced leaf (or captured) gradients, so
  ``.grad`` is usable on the ambient stream and final callbacks see finished gradients
  (STREAM-301, STREAM-303).

Nothing here runs for a graph that never touched a CUDA tensor.
"""

from __future__ import annotations

import contextlib

_STREAMS = None


def _streams():
    """refimpl.cuda.streams, imported on first use (CPU-only programs never import it)."""
    global _STREAMS
    if _STREAMS is None:
        from refimpl.cuda import streams

        _STREAMS = streams
    return _STREAMS


# The default stream of each device as one shared Stream object: nodes are made on
# every recorded op, and most record the default stream (a Stream holds no state of its
# own beyond its handle and device, so one object per device serves them all).
_DEFAULT: dict = {}


def node_stream(in_meta: tuple):
    """The current stream of the device of the first CUDA entry of ``in_meta``, or None.

    Without an initialised CUDA there are no CUDA tensors, only fake ones (which must
    never initialise it), and no stream.
    """
    for meta in in_meta:
        dev = meta[2] if meta and len(meta) > 2 else None  # non-tensor outputs: no device
        if dev is not None and dev.type == "cuda":
            idx = dev.index
            streams = _streams()
            table = streams._tls.streams  # this thread's current streams, if any was set
            current = table.get(idx) if table else None
            if current is not None:
                return current
            default = _DEFAULT.get(idx)
            if default is None or idx is None:
                from refimpl.cuda import _lazy

                if not _lazy.is_initialized():
                    return None
                default = streams.current_stream(idx)
                if idx is not None and default.cuda_stream == 0:
                    _DEFAULT[idx] = default
            return default
    return None


def root_stream(grads: list):
    """The caller's current stream on the device of the first CUDA root gradient."""
    for g in grads:
        dev = getattr(g, "device", None)
        if dev is not None and dev.type == "cuda":
            # as a node's stream (the shared default Stream when no other is current);
            # fake CUDA gradients, with CUDA not initialised, have none
            return node_stream(((None, None, dev),))
    return None


_DEVICE = None  # refimpl.cuda._device, bound on first use


def is_current(stream) -> bool:
    """Whether ``stream`` is this thread's current stream, on the current device (asked
    for every CUDA node backward runs)."""
    global _DEVICE
    if _DEVICE is None:
        from refimpl.cuda import _device as _DEVICE
    idx = stream.device_index
    return _DEVICE._tls_device() == idx and \
        (_STREAMS or _streams()).current_stream_handle(idx) == stream.cuda_stream


def on_stream(stream):
    """Make ``stream`` current (and its device) for the duration; None: nothing."""
    if stream is None:
        return contextlib.nullcontext()
    streams = _streams()
    # The common case: the node's stream already is this thread's current stream, on the
    # current device. A StreamContext would then select the same device, install an
    # equal stream and restore the previous one on exit: nothing observable changes, so
    # skip its bookkeeping (two current_stream look-ups, device guards) per node.
    from refimpl.cuda import _device

    idx = stream.device_index
    if _device._tls_device() == idx and streams.current_stream_handle(idx) == stream.cuda_stream:
        return contextlib.nullcontext()
    return streams.StreamContext(stream)


def sync_producer(grad, producer, consumer) -> None:
    """Order the ``consumer`` stream after the work that produced ``grad``."""
    if consumer is None or grad is None:
        return
    dev = grad.device
    if dev.type != "cuda" or dev.index != consumer.device_index:
        return
    if producer is None or producer.device_index != consumer.device_index:
        producer = _streams().default_stream(consumer.device_index)
    if producer != consumer:
        consumer.wait_stream(producer)


def sync_leaves(leaf_streams: set) -> None:
    """Make the caller's current stream of each device wait for its leaf streams."""
    for leaf in leaf_streams:
        ambient = _streams().current_stream(leaf.device_index)
        if ambient != leaf:
            ambient.wait_stream(leaf)
