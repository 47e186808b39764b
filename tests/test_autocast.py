"""Unit tests of refimpl's autocast internals: the op-list data, the layer's state
handling, the cast cache and composites joining the lists by name (spec AUTOCAST)."""

from __future__ import annotations

import threading

import pytest

import refimpl as t
from refimpl import _autocast as ac
from refimpl.amp import _op_lists


def test_lists_are_disjoint_per_device():
    for device in ("cpu", "cuda"):
        seen: dict = {}
        for policy, per_device in _op_lists.POLICIES.items():
            for name in per_device[device]:
                assert name not in seen, (device, name, seen.get(name), policy)
                seen[name] = policy


def test_policy_lookup():
    assert _op_lists.policy_of("cuda", "mm") == "lower_precision_fp"
    assert _op_lists.policy_of("cpu", "mm") == "lower_precision_fp"
    assert _op_lists.policy_of("cuda", "exp") == "fp32"
    assert _op_lists.policy_of("cpu", "exp") is None
    assert _op_lists.policy_of("cuda", "sum") == "fp32_set_opt_dtype"
    assert _op_lists.policy_of("cpu", "cat") == "promote"
    assert _op_lists.policy_of("cuda", "cat") is None
    assert _op_lists.policy_of("cuda", "binary_cross_entropy") == "banned"
    assert _op_lists.policy_of("cpu", "binary_cross_entropy") == "fp32"


def test_every_listed_refimpl_op_is_filtered_by_the_dispatcher():
    from refimpl.ops._registry import REGISTRY

    for device in ("cpu", "cuda"):
        for per_device in _op_lists.POLICIES.values():
            for name in per_device[device] & set(REGISTRY):
                assert name in ac.AUTOCAST.ops


def test_state_is_per_thread():
    seen = []
    with t.autocast("cpu"):
        worker = threading.Thread(target=lambda: seen.append(t.is_autocast_enabled("cpu")))
        worker.start()
        worker.join()
        assert t.is_autocast_enabled("cpu")
    assert seen == [False]


def test_exception_restores_state():
    with pytest.raises(ValueError, match="boom"), t.autocast("cpu", dtype=t.float16):
        raise ValueError("boom")
    assert not t.is_autocast_enabled("cpu")
    assert t.get_autocast_dtype("cpu") == t.bfloat16
    assert ac.AUTOCAST.nesting == 0
    assert not ac.AUTOCAST.active


def test_cache_cleared_at_outermost_exit_only():
    w = t.ones(2, 2, requires_grad=True)
    a = t.ones(2, 2)
    with t.autocast("cpu"):
        with t.autocast("cpu"):
            t.mm(a, w)
        assert len(ac._CACHE) == 1  # the inner exit keeps it
    assert len(ac._CACHE) == 0


def test_cache_ignores_dead_sources():
    a = t.ones(2, 2)
    # under no_grad the cast has no graph, so nothing but the caller holds the source
    with t.autocast("cpu"), t.no_grad():
        w = t.ones(2, 2, requires_grad=True)
        cast = ac.cached_cast(t.bfloat16, w, "cpu")
        key = id(w)
        del w
        assert ac._CACHE[key][0]() is None
        w2 = t.ones(2, 2, requires_grad=True)
        assert ac.cached_cast(t.bfloat16, w2, "cpu") is not cast
        t.mm(a, w2)


def test_meta_tensors_are_not_autocast():
    a = t.empty(3, 3, device="meta")
    with t.autocast("cpu"):
        assert t.mm(a, a).dtype == t.float32


def test_a_composite_joins_its_list_by_name():
    # "linear" is on both devices' lower-precision lists; refimpl has no such op yet
    @ac.composite("linear")
    def linear(x, w):
        return t.mm(x, w.t())

    x, w = t.ones(2, 3), t.ones(4, 3)
    with t.autocast("cpu"):
        assert linear(x, w).dtype == t.bfloat16
    assert linear(x, w).dtype == t.float32


def test_layer_is_off_when_no_region_is_active():
    assert not ac.AUTOCAST.active
    with t.autocast("cpu"):
        assert ac.AUTOCAST.active
        with t.autocast("cpu", enabled=False):
            assert not ac.AUTOCAST.active
    assert not ac.AUTOCAST.active
