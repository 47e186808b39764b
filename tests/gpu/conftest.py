"""What the GPU tests share: capturing a CUDA graph the way torch's tests do."""

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
