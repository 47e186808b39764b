"""Inference mode details the conformance cases do not reach, each compared with torch:
the mode is per thread, factories and conversions made inside it give inference
tensors, in-place ops of every entry point refuse inference tensors outside it, and
inference tensors never enter a graph."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")


def _both(fn):
    return fn(t), fn(torch)


def test_mode_is_per_thread():
    def probe(mod):
        seen = []
        with mod.inference_mode():
            th = threading.Thread(target=lambda: seen.append(mod.is_inference_mode_enabled()))
            th.start()
            th.join()
            seen.append(mod.is_inference_mode_enabled())
        return seen

    ours, theirs = _both(probe)
    assert ours == theirs == [False, True]


@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2, 3),
    lambda m: m.ones(2, 3, dtype=m.float64),
    lambda m: m.tensor([1.0, 2.0]),
    lambda m: m.arange(4),
    lambda m: m.empty(3),
    lambda m: m.rand(3),
    lambda m: m.from_numpy(np.ones(3)),
    lambda m: m.full((2,), 7.0),
])
def test_factories_inside_the_mode_make_inference_tensors(make):
    def probe(mod):
        with mod.inference_mode():
            x = make(mod)
        outside = make(mod)
        return x.is_inference(), outside.is_inference()

    ours, theirs = _both(probe)
    assert ours == theirs


@pytest.mark.parametrize("op", [
    lambda x: x.add_(1),
    lambda x: x.zero_(),
    lambda x: x.fill_(2.0),
    lambda x: x.copy_(x.clone()),
    lambda x: x.t_(),
    lambda x: x.unsqueeze_(0),
    lambda x: x.resize_(6),
    lambda x: x.__setitem__(0, 1.0),
    lambda x: x.index_fill_(0, x.new_zeros(1).long(), 0.0),
    lambda x: x.clamp_(0, 1),
])
def test_every_inplace_entry_point_refuses_inference_tensors_outside(op):
    def probe(mod):
        with mod.inference_mode():
            x = mod.ones(2, 3)
        try:
            op(x)
            return None
        except RuntimeError as e:
            return str(e)

    ours, theirs = _both(probe)
    assert ours == theirs
    assert theirs is not None and theirs.startswith("Inplace update to inference tensor")


def test_inference_tensors_do_not_enter_graphs():
    def probe(mod):
        w = mod.ones(3, requires_grad=True)
        with mod.inference_mode():
            c = mod.full((3,), 2.0)
            inside = (c * w)  # recorded nothing: inference mode disables autograd
        out = (c + w).sum()  # c needs no saving for add: allowed
        out.backward()
        return (inside.requires_grad, inside.is_inference(), out.is_inference(),
                w.grad.tolist(), c.requires_grad)

    ours, theirs = _both(probe)
    assert ours == theirs


def test_detach_and_clone_of_inference_tensors():
    def probe(mod):
        with mod.inference_mode():
            c = mod.ones(2)
            d_in = c.detach()
        d_out = c.detach()
        cl = c.clone()
        return (d_in.is_inference(), d_out.is_inference(), cl.is_inference(),
                d_out._is_view(), cl.requires_grad)

    ours, theirs = _both(probe)
    assert ours == theirs


def test_version_counter_of_inference_tensors_and_increment_version():
    def probe(mod):
        with mod.inference_mode():
            c = mod.ones(2)
        mod.autograd.graph.increment_version(c)
        try:
            _ = c._version
            return "no error"
        except RuntimeError as e:
            return str(e)

    ours, theirs = _both(probe)
    assert ours == theirs == "Inference tensors do not track version counter."
