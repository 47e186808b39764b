"""Random numbers in CUDA graphs, against refimpl's CPU Philox stream (spec GRAPH-106).

The conformance cases (graphs.rng.*) compare a target's replays with its own eager
draws, since torch's numbers are not refimpl's. Here each replay is compared with the
CPU generator at the same (seed, offset): the replayed kernels must read the state
the replay wrote, not the one seen at capture. Skipped where no GPU is present.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")


def host(x) -> np.ndarray:
    return np.asarray(x.cpu().to(t.float64).tolist())


@pytest.mark.parametrize("draw", ["rand", "randn", "randperm"])
def test_each_replay_draws_the_cpu_generators_numbers_at_its_offset(draw, capture_graph):
    fns = {"rand": lambda gen=None: t.rand(1000, device="cuda" if gen is None else "cpu",
                                           generator=gen),
           "randn": lambda gen=None: t.randn(333, dtype=t.float64,
                                             device="cuda" if gen is None else "cpu",
                                             generator=gen),
           "randperm": lambda gen=None: t.randperm(500, device="cuda" if gen is None else "cpu",
                                                   generator=gen)}
    fn = fns[draw]
    t.cuda.manual_seed(11)
    gen = t.cuda.default_generators[0]
    g, out = capture_graph(fn)
    assert gen.get_offset() == 0  # capturing consumes no offset
    cpu = t.Generator()
    seen = []
    for _ in range(3):
        cpu.manual_seed(11).set_offset(gen.get_offset())
        g.replay()
        want = host(fn(cpu))
        # normals: the device's log/cos may differ from numpy's in the last bit
        np.testing.assert_allclose(host(out), want, rtol=1e-12, atol=1e-12)
        seen.append(want)
    assert not np.array_equal(seen[0], seen[1]) and not np.array_equal(seen[1], seen[2])
    assert gen.get_offset() > 0


def test_replays_after_a_seed_change_and_a_cloned_state():
    t.cuda.manual_seed(3)
    gen = t.cuda.default_generators[0]
    clone = gen.clone_state()
    g = t.cuda.CUDAGraph()
    g.register_generator_state(clone)
    s = t.cuda.Stream()
    with t.cuda.stream(s):
        g.capture_begin()
        a = t.rand(64, device="cuda")
        b = t.rand(64, device="cuda", generator=clone)
        g.capture_end()
    t.cuda.current_stream().wait_stream(s)
    t.cuda.manual_seed(77)  # the default state is reseeded; the clone keeps seed 3
    g.replay()
    cpu = t.Generator()
    np.testing.assert_array_equal(host(a), host(t.rand(64, generator=cpu.manual_seed(77))))
    np.testing.assert_array_equal(host(b), host(t.rand(64, generator=cpu.manual_seed(3))))
    assert gen.get_offset() == clone.get_offset() == 16
