"""refimpl.linalg against torch.linalg: values, gradients and errors (TENSOR-307/508)."""

from __future__ import annotations

import math

import pytest
from _oracle import check, randn

A = randn((3, 4, 4), "float64", seed=1)
R = randn((4, 3), "float64", seed=2)
V = randn((5,), "float64", seed=3)
C = randn((2, 3, 3), "complex128", seed=4)

CASES = {
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, 3, (1, 2)), [A]),
    "vector_norm_inf": (lambda m, a: m.linalg.vector_norm(a, math.inf), [A]),
    "matrix_norm_fro": (lambda m, a: m.linalg.matrix_norm(a), [A]),
    "matrix_norm_inf": (lambda m, a: m.linalg.matrix_norm(a, math.inf), [A]),
    "matrix_norm_-inf": (lambda m, a: m.linalg.matrix_norm(a, -math.inf, keepdim=True), [A]),
    "matrix_norm_1": (lambda m, a: m.linalg.matrix_norm(a, 1, dim=(0, 2)), [A]),
    "matrix_norm_-1": (lambda m, a: m.linalg.matrix_norm(a, -1), [R]),
    "matrix_norm_complex": (lambda m, c: m.linalg.matrix_norm(c, 1), [C]),
    "norm_all": (lambda m, a: m.linalg.norm(a), [A]),
    "norm_vector_dim": (lambda m, a: m.linalg.norm(a, 1, dim=1), [A]),
    "norm_matrix_dims": (lambda m, a: m.linalg.norm(a, math.inf, dim=(1, 2)), [A]),
    "norm_2d_ord": (lambda m, r: m.linalg.norm(r, "fro"), [R]),
    "norm_1d_ord": (lambda m, v: m.linalg.norm(v, 3), [V]),
    "vecdot": (lambda m, a, r: m.linalg.vecdot(a, r.t()[None, :, :]), [A, R]),
    "vecdot_complex": (lambda m, c: m.linalg.vecdot(c, c.flip(0), dim=1).abs(), [C]),
    "multi_dot_3": (lambda m, a, r: m.linalg.multi_dot([a[0], r, r.t()]), [A, R]),
    "multi_dot_vectors": (lambda m, v, a: m.linalg.multi_dot([v[:4], a[1], a[2], v[1:]]),
                          [V, A]),
    "matrix_power_3": (lambda m, a: m.linalg.matrix_power(a, 3), [A]),
    "matrix_power_0": (lambda m, a: m.linalg.matrix_power(a, 0), [A]),
    "matrix_power_1": (lambda m, a: m.linalg.matrix_power(a, 1), [A]),
    "matrix_power_-2": (lambda m, a: m.linalg.matrix_power(a, -2), [A]),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), [A]),
    "det": (lambda m, a: m.linalg.det(a), [A]),
    "inv": (lambda m, a: m.linalg.inv(a), [A]),
    "cross": (lambda m, r: m.linalg.cross(r, r.flip(0), dim=1), [R]),
}

ERRORS = {
    "matrix_norm_1d": (lambda m, v: m.linalg.matrix_norm(v), [V]),
    "matrix_norm_order": (lambda m, a: m.linalg.matrix_norm(a, 3), [A]),
    "matrix_norm_int": (lambda m, a: m.linalg.matrix_norm(a.int()), [A]),
    "norm_3d_ord": (lambda m, a: m.linalg.norm(a, 2), [A]),
    "multi_dot_one": (lambda m, a: m.linalg.multi_dot([a[0]]), [A]),
    "multi_dot_shapes": (lambda m, a, r: m.linalg.multi_dot([r, r]), [A, R]),
    "multi_dot_3d": (lambda m, a: m.linalg.multi_dot([a[0], a, a[0]]), [A]),
    "multi_dot_dtypes": (lambda m, a: m.linalg.multi_dot([a[0], a[1].float()]), [A]),
    "multi_dot_dtypes_int": (lambda m, a: m.linalg.multi_dot([a[0].long(), a[1].bool()]), [A]),
    "matrix_power_square": (lambda m, r: m.linalg.matrix_power(r, 2), [R]),
    "vecdot_dtypes": (lambda m, v: m.linalg.vecdot(v, v.float()), [V]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_matches_torch(name):
    fn, inputs = CASES[name]
    check(fn, *inputs, grad=True)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_linalg_errors_match_torch(name):
    fn, inputs = ERRORS[name]
    check(fn, *inputs)


def test_spectral_matrix_norms_come_from_singular_values():
    import numpy as np

    import refimpl as t

    a = np.arange(6.0).reshape(2, 3) - 2.5
    for ord_ in (2, -2, "nuc"):
        got = float(t.linalg.matrix_norm(t.tensor(a), ord_))
        assert np.isclose(got, np.linalg.norm(a, ord_), rtol=1e-12)
