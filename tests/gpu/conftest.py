"""What the GPU tests share: capturing a CUDA graph the way torch's tests do, and
torch's CUDA results at full float32 precision."""

from __future__ import annotations

import pytest


def _capture(fn):
    """A graph of ``fn()`` captured on a side stream (which waits for the current one,
    and which the current one waits for afterwards), and ``fn``'s result."""
    import refimpl as t

    g = t.cuda.CUDAGraph()
    s = t.cuda.Stream()
    s.wait_stream(t.cuda.current_stream())
    with t.cuda.stream(s):
        g.capture_begin()
        out = fn()
        g.capture_end()
    t.cuda.current_stream().wait_stream(s)
    return g, out


@pytest.fixture
def capture_graph():
    """``capture_graph(fn) -> (graph, fn())``: ``fn`` captured into a CUDA graph."""
    return _capture


@pytest.fixture
def torch_without_tf32():
    """torch's CUDA convolutions and matrix products at full float32 precision (TF32
    off, as refimpl computes them) for the test, then its settings as they were."""
    torch = pytest.importorskip("torch")
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
