"""refimpl.special against torch.special: values, gradients, special points."""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import In, check, randn

X = randn((3, 4), "float64", seed=5)
P = In(np.random.default_rng(6).uniform(0.02, 0.98, (3, 4)), "float64")
POS = In(np.random.default_rng(7).uniform(1.5, 4.0, (3, 4)), "float64")
SPECIAL = In(np.array([0.0, -1.0, 2.0, np.nan, 1.0, 0.5, -0.5, 3.0]), "float32")
INTS = In(np.array([0, 1, 2, -3]), "int64")

CASES = {
    "expit": (lambda m, x: m.special.expit(x), [X]),
    "gammaln": (lambda m, x: m.special.gammaln(x), [POS]),
    "psi": (lambda m, x: m.special.psi(x), [POS]),
    "polygamma": (lambda m, x: m.special.polygamma(2, x), [POS]),
    "logit_eps": (lambda m, p: m.special.logit(p, 1e-3), [P]),
    "xlogy": (lambda m, x, p: m.special.xlogy(x, p), [X, P]),
    "xlog1py": (lambda m, x, p: m.special.xlog1py(x, p), [X, P]),
    "entr": (lambda m, p: m.special.entr(p), [P]),
    "sinc": (lambda m, x: m.special.sinc(x), [X]),
    "ndtr": (lambda m, x: m.special.ndtr(x), [X]),
    "ndtri": (lambda m, p: m.special.ndtri(p), [P]),
    "log_ndtr": (lambda m, x: m.special.log_ndtr(x * 4), [X]),
    "multigammaln": (lambda m, x: m.special.multigammaln(x, 3), [POS]),
    "logsumexp": (lambda m, x: m.special.logsumexp(x, 1), [X]),
    "softmax": (lambda m, x: m.special.softmax(x, 0), [X]),
    "log_softmax": (lambda m, x: m.special.log_softmax(x, 1), [X]),
    "erf_family": (lambda m, p: m.special.erf(p) + m.special.erfc(p) + m.special.erfinv(p)
                   + m.special.expm1(p) + m.special.log1p(p) + m.special.exp2(p), [P]),
}

POINTS = {
    "entr_points": (lambda m, x: m.special.entr(x), [SPECIAL]),
    "sinc_points": (lambda m, x: m.special.sinc(x), [SPECIAL]),
    "ndtri_ends": (lambda m: m.special.ndtri(m.tensor([0.0, 0.5, 1.0, 0.975])), []),
    "log_ndtr_tail": (lambda m: m.special.log_ndtr(m.tensor([-40.0, -25.0, -10.0, 0.0, 5.0],
                                                               dtype=m.float64)), []),
    "xlog1py_zero_nan": (lambda m: m.special.xlog1py(m.tensor([0.0, 1.0, 0.0]),
                                                     m.tensor([float("nan"), 1.0, 2.0])), []),
    "ints": (lambda m, i: m.stack([m.special.entr(i), m.special.sinc(i), m.special.ndtr(i)]),
             [INTS]),
    "multigammaln_p0": (lambda m, x: m.special.multigammaln(x, 0), [POS]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_matches_torch(name):
    fn, inputs = CASES[name]
    check(fn, *inputs, grad=True)


@pytest.mark.parametrize("name", sorted(POINTS))
def test_special_points_match_torch(name):
    fn, inputs = POINTS[name]
    check(fn, *inputs, rtol=1e-6, atol=1e-6)
