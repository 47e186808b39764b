"""Graph-safe CUDA generator states without a GPU (refimpl.cuda.random, GRAPH-106).

The bookkeeping of ``CUDAGeneratorState`` (shared and cloned states, offsets counted
within a capture, torch's errors) is host code; whether the current stream captures
is asked of the driver, so the capture is simulated here by replacing that query.
Replays on a device are tested in tests/gpu/test_cuda_graph_rng_gpu.py.
"""

from __future__ import annotations

import pytest

import refimpl as t
from refimpl.cuda import random as cuda_random


@pytest.fixture
def capturing(monkeypatch):
    """Make the current stream look like it captures a graph."""
    monkeypatch.setattr(cuda_random, "_capturing", lambda index: True)


def test_cuda_generators_share_or_copy_their_state():
    g = t.Generator(device="cuda")
    assert isinstance(g, cuda_random.CUDAGenerator)
    g.manual_seed(7)
    shared, copy = g.graphsafe_get_state(), g.clone_state()
    assert g.philox_cuda_state(5) == (7, 0)  # 5 blocks reserve 8
    assert shared.get_offset() == 8 and copy.get_offset() == 0
    copy.manual_seed(9)
    g.graphsafe_set_state(copy)
    assert g.initial_seed() == 9 and shared.initial_seed() == 7
    with pytest.raises(RuntimeError, match="Expected a CUDA Generator"):
        g.graphsafe_set_state(t.Generator())


def test_eager_launch_arguments_are_values():
    g = t.Generator(device="cuda").manual_seed(3)
    assert g.philox_launch_args(1) == (3, 0, 0, 0)
    assert g.philox_launch_args(9) == (3, 4, 0, 0)
    assert g.get_offset() == 16


def test_offsets_within_a_capture(capturing):
    g = t.Generator(device="cuda")
    state = g._state
    with pytest.raises(RuntimeError, match="^Attempt to increase offset for a CUDA generator "
                                           "not in capture mode.$"):
        state.increase(4)
    state.capturing = True  # what capture_prologue sets, without its device tensors
    assert [state.increase(n) for n in (1, 6, 4)] == [0, 4, 12]
    assert state.offset == 0  # the eager offset moves only at replays
    assert state.capture_epilogue() == 16 and not state.capturing


def test_eager_draw_while_a_state_captures():
    state = t.Generator(device="cuda")._state
    state.capturing = True
    with pytest.raises(RuntimeError, match="^Offset increment outside graph capture "
                                           "encountered unexpectedly.$"):
        state.increase(4)


def test_seed_and_offset_during_a_capture(capturing):
    g = t.Generator(device="cuda")
    g._state.seed = 5
    g._state.offset = 12
    g.manual_seed(5)  # the seed in use: accepted, nothing rewinds
    assert g._state.offset == 12
    with pytest.raises(RuntimeError, match="^CUDAGeneratorImpl::set_current_seed can be "
                                           "called during stream capture only if new seed is "
                                           "the same as the original seed.$"):
        g.manual_seed(6)
    for call, name in ((g.get_offset, "get_offset"), (lambda: g.set_offset(0), "set_offset")):
        with pytest.raises(RuntimeError, match=f"^Cannot call CUDAGeneratorImpl::{name} during "
                                               "CUDA graph capture"):
            call()


def test_cpu_generator_has_no_graph_safe_state():
    g = t.Generator().manual_seed(4)
    with pytest.raises(NotImplementedError, match="graphsafe_get_state is not supported"):
        g.graphsafe_get_state()
    copy = g.clone_state()
    assert type(copy) is type(g) and copy.initial_seed() == 4
