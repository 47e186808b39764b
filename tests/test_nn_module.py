"""nn.Module machinery against torch where the conformance cases do not reach: extra
state, submodule lookup, deprecated non-full backward hooks, registration hooks,
conversion across devices (meta), pickling and deepcopy, legacy loss arguments."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import refimpl

torch = pytest.importorskip("torch")


def _both(fn):
    out = []
    for lib in (torch, refimpl):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            result = fn(lib)
        out.append((result, [type(x.message).__name__ + ": " + str(x.message) for x in w]))
    return out


def test_extra_state_roundtrip():
    def run(lib):
        class WithState(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.counter = 3

            def get_extra_state(self):
                return {"counter": self.counter}

            def set_extra_state(self, state):
                self.counter = state["counter"]

        a = WithState()
        a.counter = 7
        sd = a.state_dict()
        b = WithState()
        res = b.load_state_dict(sd)
        missing = WithState().load_state_dict({}, strict=False)
        return list(sd), b.counter, repr(res), list(missing.missing_keys)

    (t_res, _), (r_res, _) = _both(run)
    assert r_res == t_res == (["_extra_state"], 7, "<All keys matched successfully>",
                              ["_extra_state"])


def test_get_submodule_parameter_buffer():
    def run(lib):
        net = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        out = [type(net.get_submodule("1")).__name__, tuple(net.get_parameter("0.bias").shape),
               tuple(net.get_buffer("1.running_mean").shape)]
        for call in (lambda: net.get_submodule("0.nope"), lambda: net.get_parameter("1.running_mean"),
                     lambda: net.get_buffer("0.weight"), lambda: net.get_submodule("0.weight")):
            try:
                call()
            except AttributeError as e:
                out.append(str(e))
        return out

    (t_res, _), (r_res, _) = _both(run)
    assert r_res == t_res


def test_non_full_backward_hook_matches_torch():
    def run(lib):
        lin = lib.nn.Module()
        lin.w = lib.nn.Parameter(lib.tensor([2.0, 3.0]))
        lin.forward = lambda x: (x * lin.w).sum()
        seen = []
        lin.register_backward_hook(lambda m, gi, go: seen.append(
            ([g.tolist() if g is not None else None for g in gi], go[0].tolist())))
        x = lib.tensor([1.0, 1.0], requires_grad=True)
        type(lin).__call__(lin, x).backward()
        return seen

    (t_res, t_warn), (r_res, r_warn) = _both(run)
    assert r_res == t_res
    assert len(r_warn) == len(t_warn)


def test_registration_hooks_match_torch():
    def run(lib):
        mm = lib.nn.modules.module
        seen = []
        hs = [mm.register_module_parameter_registration_hook(
                  lambda m, n, p: seen.append(("param", n))),
              mm.register_module_buffer_registration_hook(
                  lambda m, n, b: seen.append(("buffer", n))),
              mm.register_module_module_registration_hook(
                  lambda m, n, s: seen.append(("module", n)))]
        try:
            lib.nn.Sequential(lib.nn.BatchNorm1d(2))
        finally:
            for h in hs:
                h.remove()
        return seen

    (t_res, _), (r_res, _) = _both(run)
    assert r_res == t_res


def test_to_meta_keeps_parameter_objects():
    m = refimpl.nn.Linear(3, 2)
    w = m.weight
    m.weight.grad = refimpl.ones(2, 3)
    m.to("meta")
    assert m.weight is w
    assert m.weight.device.type == "meta" and m.weight.grad.device.type == "meta"
    assert isinstance(m.weight, refimpl.nn.Parameter) and m.weight.requires_grad


def test_pickle_and_deepcopy():
    m = refimpl.nn.Sequential(refimpl.nn.Linear(2, 3), refimpl.nn.BatchNorm1d(3))
    m.register_forward_hook(print)
    for clone in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        assert repr(clone) == repr(m)
        for (k, a), (_, b) in zip(m.state_dict().items(), clone.state_dict().items(),
                                  strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
        assert clone[0].weight is not m[0].weight
        assert isinstance(clone[0].weight, refimpl.nn.Parameter)
        assert len(clone._forward_hooks) == 1


def test_legacy_loss_arguments_warn_as_torch():
    def run(lib):
        return [lib.nn.MSELoss(size_average=False).reduction,
                lib.nn.CrossEntropyLoss(reduce=False).reduction,
                lib.nn.L1Loss(size_average=True, reduce=True).reduction]

    (t_res, t_warn), (r_res, r_warn) = _both(run)
    assert r_res == t_res == ["sum", "none", "mean"]
    assert r_warn == t_warn
