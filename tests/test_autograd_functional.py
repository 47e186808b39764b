"""refimpl.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against torch."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.autograd import functional as F

torch = pytest.importorskip("torch")
TF = torch.autograd.functional

X = [1.0, 2.0, 3.0]
Y = [0.5, -1.0, 2.0]


def _values(x):
    if isinstance(x, (tuple, list)):
        return [_values(v) for v in x]
    return None if x is None else np.asarray(x.detach().tolist(), np.float64)


def _same(a, b) -> None:
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def _both(call):
    """call(lib, functional) on refimpl and on torch; the results must agree."""
    ours = call(t, F)
    theirs = call(torch, TF)
    _same(_values(ours), _values(theirs))
    return ours


def _cube_sum(a):
    return (a * a * a).sum()


def _pair(a, b):
    return a * b + a * a


CASES = {
    "vjp": lambda lib, f: f.vjp(_pair, (lib.tensor(X), lib.tensor(Y)), lib.ones(3)),
    "vjp_scalar": lambda lib, f: f.vjp(_cube_sum, lib.tensor(X)),
    "jvp": lambda lib, f: f.jvp(_pair, (lib.tensor(X), lib.tensor(Y)),
                                (lib.ones(3), lib.tensor(Y))),
    "jacobian_tuple": lambda lib, f: f.jacobian(_pair, (lib.tensor(X), lib.tensor(Y))),
    "jacobian_single": lambda lib, f: f.jacobian(lambda a: a * a, lib.tensor(X)),
    "jacobian_multi_out": lambda lib, f: f.jacobian(lambda a: (a * 2.0, a.sum()),
                                                    lib.tensor(X)),
    "hessian": lambda lib, f: f.hessian(_cube_sum, lib.tensor(X)),
    "hessian_tuple": lambda lib, f: f.hessian(lambda a, b: (a * b * a).sum(),
                                              (lib.tensor(X), lib.tensor(Y))),
    "vhp": lambda lib, f: f.vhp(_cube_sum, lib.tensor(X), lib.tensor(Y)),
    "hvp": lambda lib, f: f.hvp(_cube_sum, lib.tensor(X), lib.tensor(Y)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    _both(CASES[name])


def test_create_graph_keeps_history():
    _, g = F.vjp(_cube_sum, t.tensor(X, requires_grad=True), create_graph=True)
    assert g.requires_grad
    _, g = F.vjp(_cube_sum, t.tensor(X))
    assert not g.requires_grad


@pytest.mark.parametrize("lib_f", ["refimpl", "torch"])
def test_errors(lib_f):
    lib, f = (t, F) if lib_f == "refimpl" else (torch, TF)
    x = lib.tensor(X)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not"):
        f.vjp(lambda a: lib.tensor(Y) * 1.0, x, lib.ones(3), strict=True)
    with pytest.raises(RuntimeError, match="is independent of input 1. This is not allowed"):
        f.vjp(lambda a, b: a * 2.0, (x, lib.tensor(Y)), lib.ones(3), strict=True)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be torch.Size\(\[3\]\)"):
        f.vjp(lambda a: a * 2.0, x, lib.ones(4))
    with pytest.raises(RuntimeError, match="The vector v can only be None"):
        f.vjp(lambda a: a * 2.0, x)
