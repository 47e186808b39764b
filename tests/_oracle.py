"""Differential testing against torch: run one program on refimpl and on torch, compare.

``check(fn, *inputs)`` builds each input on both sides from the same numpy data, calls
``fn(module, *tensors)`` with ``module`` being ``refimpl`` and then ``torch``, and
asserts the same outcome: equal values (NaN equal to NaN), dtypes and shapes, the same
named-tuple type, or the same exception type and message. With ``grad=True`` the
floating inputs require grad and the gradients of a weighted sum of the floating
outputs are compared too.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")

TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float32": (1e-5, 1e-5),
       "float64": (1e-10, 1e-10), "complex64": (1e-5, 1e-5), "complex128": (1e-10, 1e-10)}


class In:
    """One input: numpy data and a dtype name (``requires_grad`` follows ``check``)."""

    def __init__(self, data, dtype: str = "float32") -> None:
        self.data = np.asarray(data)
        self.dtype = dtype

    def build(self, mod, requires_grad: bool):
        arr = self.data
        if self.dtype == "bool":
            arr = arr.astype(bool)
        elif self.dtype.startswith("complex"):
            arr = arr.astype(np.complex128)
        elif "int" in self.dtype:
            arr = arr.astype(np.int64)
        else:
            arr = arr.astype(np.float64)
        if mod is t:
            x = t.tensor(arr, dtype=getattr(t, self.dtype))
        else:
            x = torch.tensor(arr).to(getattr(torch, self.dtype))
        if requires_grad and (self.dtype.startswith("float") or self.dtype.startswith("bfloat")
                              or self.dtype.startswith("complex")):
            x.requires_grad_(True)
        return x


def randn(shape, dtype: str = "float32", seed: int = 0) -> In:
    """Standard-normal data."""
    return In(np.random.default_rng(seed).standard_normal(shape), dtype)


def randint(low: int, high: int, shape, dtype: str = "int64", seed: int = 0) -> In:
    """Uniform integers in [low, high)."""
    return In(np.random.default_rng(seed).integers(low, high, shape), dtype)


def _build(x, mod, requires_grad: bool):
    if isinstance(x, In):
        return x.build(mod, requires_grad)
    if isinstance(x, list) and x and all(isinstance(e, In) for e in x):
        return [e.build(mod, requires_grad) for e in x]
    return x


def _outcome(fn, mod, inputs, requires_grad):
    args = [_build(x, mod, requires_grad) for x in inputs]
    try:
        return args, fn(mod, *args), None
    except Exception as e:  # noqa: BLE001 - the exception itself is the outcome compared
        return args, None, e


def _message(e: BaseException) -> str:
    """The message compared: argument-parser TypeErrors (whose text depends on torch's
    overload tables) compare by type only."""
    if isinstance(e, TypeError):
        return "TypeError"
    return str(e).split(" (Triggered internally")[0]


def to_np(x) -> np.ndarray:
    """A refimpl or torch tensor as a float64/complex128/int/bool numpy array."""
    if isinstance(x, t.Tensor):
        arr = np.asarray(x.detach().resolve_conj().resolve_neg()._np)
        return arr.astype(np.float64) if arr.dtype.name in ("float16", "bfloat16") else arr
    x = x.detach()
    if x._is_zerotensor():  # torch's symbolic zero gradient
        x = torch.zeros(x.shape, dtype=x.dtype)
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float64)
    return x.resolve_conj().numpy()


def assert_same(r, T, rtol=None, atol=None, indices: bool = True, where: str = "result"):
    """Assert a refimpl result ``r`` equals the torch result ``T``."""
    if isinstance(T, torch.Tensor):
        assert isinstance(r, t.Tensor), f"{where}: expected a tensor, got {type(r).__name__}"
        assert repr(r.dtype) == str(T.dtype), f"{where}: dtype {r.dtype} != {T.dtype}"
        assert tuple(r.shape) == tuple(T.shape), f"{where}: shape {r.shape} != {T.shape}"
        a, b = to_np(r), to_np(T)
        name = str(T.dtype).removeprefix("torch.")
        if name in TOL:
            rt, at = TOL[name]
            np.testing.assert_allclose(a, b, rtol=rtol or rt, atol=atol or at, equal_nan=True,
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(T, tuple):
        assert isinstance(r, tuple) and len(r) == len(T), f"{where}: {r!r} vs {T!r}"
        if hasattr(T, "n_fields") or hasattr(T, "_fields"):
            assert type(r).__name__ == type(T).__name__, f"{where}: {type(r)} vs {type(T)}"
        for i, (a, b) in enumerate(zip(r, T)):
            if not indices and i == 1:
                continue
            assert_same(a, b, rtol, atol, indices, f"{where}[{i}]")
    elif isinstance(T, torch.dtype):
        assert repr(r) == str(T)
    else:
        both_nan = isinstance(r, float) and isinstance(T, float) and np.isnan(r) and np.isnan(T)
        assert r == T or both_nan, f"{where}: {r!r} != {T!r}"


def _float_outputs(out) -> list:
    outs = list(out) if isinstance(out, tuple) else [out]
    return [o for o in outs if hasattr(o, "requires_grad") and o.requires_grad]


def _grads(args, out, mod, seed):
    outs = _float_outputs(out)
    if not outs:
        return None
    total = None
    rng = np.random.default_rng(seed)
    for o in outs:
        w = rng.standard_normal(tuple(o.shape))
        wt = t.tensor(w, dtype=o.dtype) if mod is t else torch.tensor(w).to(o.dtype)
        s = (o * wt).sum()
        total = s if total is None else total + s
    total.backward()
    flat = []
    for a in args:
        flat.extend(a if isinstance(a, list) else [a])
    return [a.grad for a in flat if hasattr(a, "grad") and getattr(a, "requires_grad", False)]


def _second_grads(args, out, mod, seed):
    """Gradients of ``sum(w * d(weighted outputs)/d inputs)``: double backward."""
    outs = _float_outputs(out)
    flat = [a for a in args if hasattr(a, "requires_grad") and a.requires_grad]
    rng = np.random.default_rng(seed)
    total = None
    for o in outs:
        w = rng.standard_normal(tuple(o.shape))
        wt = t.tensor(w, dtype=o.dtype) if mod is t else torch.tensor(w).to(o.dtype)
        s = (o * wt).sum()
        total = s if total is None else total + s
    firsts = mod.autograd.grad(total, flat, create_graph=True, allow_unused=True)
    second = None
    for g in firsts:
        if g is None or not g.requires_grad:
            continue
        w = rng.standard_normal(tuple(g.shape))
        s = (g * (t.tensor(w, dtype=g.dtype) if mod is t else torch.tensor(w).to(g.dtype))).sum()
        second = s if second is None else second + s
    if second is None:
        return [None] * len(flat)
    return list(mod.autograd.grad(second, flat, allow_unused=True))


def check_double_backward(fn, *inputs, rtol=1e-6, atol=1e-8, seed: int = 0):
    """Second-order gradients of ``fn`` (through its backward formulas) match torch's."""
    rargs, r, rerr = _outcome(fn, t, inputs, True)
    targs, T, terr = _outcome(fn, torch, inputs, True)
    assert rerr is None and terr is None, (rerr, terr)
    gr, gT = _second_grads(rargs, r, t, seed), _second_grads(targs, T, torch, seed)
    for i, (a, b) in enumerate(zip(gr, gT)):
        if b is None:
            assert a is None or not bool((a != 0).any()), f"grad2[{i}]: torch has none"
            continue
        assert a is not None, f"grad2[{i}]: refimpl has none"
        assert_same(a, b, rtol, atol, True, f"grad2[{i}]")


def check(fn, *inputs, grad: bool = False, rtol=None, atol=None, indices: bool = True,
          seed: int = 0):
    """Run ``fn(module, *inputs)`` on refimpl and torch and assert the same outcome;
    returns the refimpl result."""
    rargs, r, rerr = _outcome(fn, t, inputs, grad)
    targs, T, terr = _outcome(fn, torch, inputs, grad)
    if terr is not None:
        assert rerr is not None, f"torch raised {type(terr).__name__}: {terr}; refimpl " \
                                 f"returned {r!r}"
        assert type(rerr).__name__.lstrip("_") == type(terr).__name__.lstrip("_") or \
            isinstance(rerr, type(terr)), f"{type(rerr).__name__} != {type(terr).__name__}: {rerr}"
        assert _message(rerr) == _message(terr), f"refimpl: {rerr!r}\n   torch: {terr!r}"
        return rerr
    if rerr is not None:
        raise rerr
    assert_same(r, T, rtol, atol, indices)
    if grad:
        gr, gT = _grads(rargs, r, t, seed), _grads(targs, T, torch, seed)
        assert (gr is None) == (gT is None)
        if gT is not None:
            for i, (a, b) in enumerate(zip(gr, gT)):
                if b is None:
                    assert a is None, f"grad[{i}]: torch has none"
                    continue
                assert a is not None, f"grad[{i}]: refimpl has none"
                assert_same(a, b, rtol, atol, True, f"grad[{i}]")
    return r
