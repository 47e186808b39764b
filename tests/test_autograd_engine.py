"""Engine internals of refimpl.autograd that the conformance cases do not reach: deep
graphs (no recursion, no leaks), concurrent backward from several threads, reentrant
backward far deeper than the Python stack allows, errors raised on a worker thread,
execution order, and the graph being freed by reference counting alone (no cycles)."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import refimpl as t
from refimpl.autograd import Function


@pytest.fixture
def no_gc():
    """Freeing must not depend on the cycle collector."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _chain(x, n: int):
    y = x
    for _ in range(n):
        y = y * 1.0
    return y


def _node_next_to_leaf(y, n: int):
    node = y.grad_fn
    for _ in range(n - 1):
        node = node.next_functions[0][0]
    return node


# -- deep graphs ------------------------------------------------------------------------


def test_deep_chain_free_is_iterative_and_fast(no_gc):
    n = 150_000
    x = t.ones(1, requires_grad=True)
    y = _chain(x, n)
    probe = weakref.ref(_node_next_to_leaf(y, n))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # freeing must not recurse per node
    try:
        start = time.perf_counter()
        del y
        elapsed = time.perf_counter() - start
    finally:
        sys.setrecursionlimit(limit)
    assert probe() is None
    assert elapsed < 1.0


def test_deep_chain_backward_does_not_recurse(no_gc):
    n = 50_000
    x = t.ones(2, requires_grad=True)
    y = x
    for _ in range(n):
        y = y + 1.0
    probe = weakref.ref(_node_next_to_leaf(y, n))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        y.sum().backward()
    finally:
        sys.setrecursionlimit(limit)
    assert x.grad.tolist() == [1.0, 1.0]
    del y
    assert probe() is None


def test_backward_releases_saved_tensors_without_retain_graph():
    x = t.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second"):
        y.backward()
    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.tolist() == [6.0, 6.0, 6.0]


@pytest.mark.parametrize("make", ["saved_output", "custom_function", "copy_slices",
                                  "retain_grad", "hook"])
def test_graph_is_freed_by_refcount(no_gc, make):
    """No reference cycle between tensors, nodes and saved variables."""
    x = t.ones(4, requires_grad=True)
    if make == "saved_output":
        y = x.exp()                       # saves its own output
    elif make == "custom_function":
        class Sq(Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return 2 * a * g

        y = Sq.apply(x * 1.0)
    elif make == "copy_slices":
        y = x.clone()
        y[1:3].mul_(2.0)                  # in place through a view: CopySlices on y
    elif make == "retain_grad":
        y = x * 2.0
        y.retain_grad()
    else:
        y = x * 2.0
        y.register_hook(lambda g: g * 1.0)
    node = y.grad_fn
    probe = weakref.ref(node)
    del node
    tensor_probe = weakref.ref(y)
    del y
    assert tensor_probe() is None
    assert probe() is None


# -- threads ----------------------------------------------------------------------------


def test_concurrent_backward_accumulates_into_shared_leaf():
    x = t.ones(5, requires_grad=True)
    n_threads, per_thread = 4, 25
    errors: list = []
    barrier = threading.Barrier(n_threads)

    def work(k: int) -> None:
        try:
            barrier.wait()
            for _ in range(per_thread):
                (x * float(k + 1)).sum().backward()
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    expected = per_thread * sum(range(1, n_threads + 1))
    np.testing.assert_allclose(x.grad.tolist(), [expected] * 5)


def test_concurrent_backward_on_one_retained_graph():
    x = t.ones(3, requires_grad=True)
    y = (x * x * 3.0).sum()
    errors: list = []

    def work() -> None:
        try:
            for _ in range(10):
                y.backward(retain_graph=True)
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    np.testing.assert_allclose(x.grad.tolist(), [6.0 * 30] * 3)


def test_grad_mode_is_thread_local():
    seen: dict = {}

    def work() -> None:
        seen["worker"] = t.is_grad_enabled()

    with t.no_grad():
        th = threading.Thread(target=work)
        th.start()
        th.join()
        seen["main"] = t.is_grad_enabled()
    assert seen == {"worker": True, "main": False}


# -- reentrant backward -----------------------------------------------------------------


class _Reenter(Function):
    """Each backward runs a nested backward of depth - 1 before returning."""

    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        if ctx.depth > 0:
            with t.enable_grad():
                inner = t.ones(1, requires_grad=True)
                out = _Reenter.apply(inner, ctx.depth - 1)
                out.sum().backward()
        return g, None


def test_reentrant_backward_deeper_than_the_stack():
    depth = 400  # every level costs many Python frames: 400 levels overflow one stack
    x = t.ones(1, requires_grad=True)
    _Reenter.apply(x, depth).sum().backward()
    assert x.grad.tolist() == [1.0]


def test_error_on_worker_thread_reaches_caller():
    class Bottom(Function):
        @staticmethod
        def forward(ctx, x, depth):
            ctx.depth = depth
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            with t.enable_grad():
                if ctx.depth == 0:
                    raise ValueError("raised at the bottom")
                inner = t.ones(1, requires_grad=True)
                Bottom.apply(inner, ctx.depth - 1).sum().backward()
            return g, None

    x = t.ones(1, requires_grad=True)
    out = Bottom.apply(x, 60)  # past the depth at which nested tasks move threads
    with pytest.raises(ValueError, match="raised at the bottom"):
        out.sum().backward()
    # the engine is usable afterwards
    (x * 2.0).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_reentrant_grad_inside_hook():
    x = t.ones(2, requires_grad=True)
    inner_x = t.full((2,), 3.0, requires_grad=True)
    got: list = []

    def hook(g):
        with t.enable_grad():
            (gx,) = t.autograd.grad((inner_x * inner_x).sum(), inner_x)
        got.append(gx)
        return g

    y = x * 2.0
    y.register_hook(hook)
    y.sum().backward()
    assert got[0].tolist() == [6.0, 6.0]
    assert x.grad.tolist() == [2.0, 2.0]


# -- order and dependencies -------------------------------------------------------------


def test_node_runs_after_all_its_dependencies():
    order: list = []
    x = t.ones(1, requires_grad=True)
    a = x * 2.0
    b = a * 3.0
    c = a * 4.0
    d = b + c
    for name, v in (("a", a), ("b", b), ("c", c), ("d", d)):
        v.register_hook(lambda g, name=name: order.append(name))
    d.backward()
    assert order[0] == "d"
    assert order[-1] == "a"
    assert set(order[1:3]) == {"b", "c"}
    # newer nodes first among those ready (torch's sequence-number order)
    assert order[1:3] == ["c", "b"]
    assert x.grad.tolist() == [14.0]


def test_grad_with_inputs_runs_only_needed_nodes():
    ran: list = []
    x = t.ones(1, requires_grad=True)
    w = t.ones(1, requires_grad=True)
    a = x * 2.0
    b = w * 3.0
    a.grad_fn.register_hook(lambda gi, go: ran.append("a"))
    b.grad_fn.register_hook(lambda gi, go: ran.append("b"))
    (gx,) = t.autograd.grad(a + b, x)
    assert gx.tolist() == [2.0]
    assert ran == ["a"]
    assert w.grad is None
