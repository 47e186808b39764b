"""The spectral linalg functions against torch: values, gradients, jvps and errors
(TENSOR-307). Eigen- and singular vectors are compared through functions that do not
depend on their sign or phase (numpy's LAPACK and torch's MKL choose them differently)."""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import check, randn

import refimpl as t

SQ = randn((2, 4, 4), "float64", seed=1)
TALL = randn((5, 3), "float64", seed=2)
WIDE = randn((3, 5), "float64", seed=3)
CSQ = randn((3, 3), "complex128", seed=4)
CTALL = randn((4, 3), "complex128", seed=5)
RHS = randn((5, 2), "float64", seed=6)


def _sym(x):
    return x + x.mH


def _real(*outs):
    """The outputs with complex ones split into real and imaginary parts (the oracle
    differentiates a real weighted sum)."""
    return tuple(p for o in outs for p in ((o.real, o.imag) if o.is_complex() else (o,)))


def _svd_invariants(m, a):
    U, S, Vh = m.linalg.svd(a, full_matrices=False)
    return _real(U @ Vh, S, U.abs(), Vh.abs())


def _eigh_invariants(m, a):
    L, V = m.linalg.eigh(_sym(a))
    return _real(L, V.abs(), (V * L.unsqueeze(-2).to(V.dtype)) @ V.mH)


CASES = {
    "eigh": (_eigh_invariants, [SQ]),
    "eigh_complex": (_eigh_invariants, [CSQ]),
    "eigh_upper": (lambda m, a: m.linalg.eigh(a, UPLO="U").eigenvalues, [SQ]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(_sym(a)), [SQ]),
    "svd_tall": (_svd_invariants, [TALL]),
    "svd_wide": (_svd_invariants, [WIDE]),
    "svd_complex": (_svd_invariants, [CTALL]),
    "svd_full_shapes": (lambda m, a: [list(x.shape) for x in m.linalg.svd(a)], [TALL]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [WIDE]),
    "svd_legacy": (lambda m, a: (m.svd(a).S, m.svd(a).U @ m.svd(a).V.mT), [TALL]),
    "svd_legacy_no_uv": (lambda m, a: m.svd(a, compute_uv=False), [TALL]),
    "eig": (lambda m, a: (m.linalg.eig(a)[1].abs(), m.linalg.eig(a)[0].abs()), [SQ]),
    "eig_complex": (lambda m, a: m.linalg.eig(a)[1].abs(), [CSQ]),
    "eigvals": (lambda m, a: m.linalg.eigvals(a).real, [SQ]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [TALL]),
    "pinv_wide_complex": (lambda m, a: _real(m.linalg.pinv(a.mH)), [CTALL]),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(_sym(a), hermitian=True), [SQ]),
    "pinv_rtol": (lambda m, a: m.linalg.pinv(a, rtol=0.5), [TALL]),
    "pinverse": (lambda m, a: m.pinverse(a), [WIDE]),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a @ a.mT), [TALL]),
    "matrix_rank_hermitian": (lambda m, a: m.linalg.matrix_rank(_sym(a), hermitian=True), [SQ]),
    "cond_2": (lambda m, a: m.linalg.cond(a), [SQ]),
    "lstsq_gelsd": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), [TALL, RHS]),
    "lstsq_gels": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gels"), [TALL, RHS]),
    "lstsq_vector": (lambda m, a, b: m.linalg.lstsq(a, b[:, 0]), [TALL, RHS]),
    "lstsq_wide": (lambda m, a, b: m.linalg.lstsq(a.mT, b[:3]).solution, [TALL, RHS]),
}

# torch 2.13 cannot differentiate cond through the inverse (an in-place fill of the
# saved inverse): values only
NO_GRAD = {
    "cond_fro": (lambda m, a: m.linalg.cond(a, "fro"), [SQ]),
    "cond_nuc": (lambda m, a: m.linalg.cond(a, "nuc"), [SQ]),
    "cond_inf_singular": (lambda m, a: m.linalg.cond(a * 0, float("inf")), [SQ]),
}

ERRORS = {
    "eigh_square": (lambda m, a: m.linalg.eigh(a), [TALL]),
    "eigh_uplo": (lambda m, a: m.linalg.eigh(a, UPLO="x"), [SQ]),
    "eigh_int": (lambda m, a: m.linalg.eigvalsh(a.long()), [SQ]),
    "svd_int": (lambda m, a: m.linalg.svd(a.long()), [TALL]),
    "svd_nan": (lambda m, a: m.linalg.svd(a * float("nan")), [SQ]),
    "svd_driver_cpu": (lambda m, a: m.linalg.svd(a, driver="gesvdj"), [SQ]),
    "eig_nan": (lambda m, a: m.linalg.eig(a * float("inf")), [SQ]),
    "eig_half": (lambda m, a: m.linalg.eigvals(a.half()), [SQ]),
    "pinv_1d": (lambda m, a: m.linalg.pinv(a[0, 0]), [SQ]),
    "matrix_rank_hermitian_square": (lambda m, a: m.linalg.matrix_rank(a, hermitian=True),
                                     [TALL]),
    "cond_order": (lambda m, a: m.linalg.cond(a, 3), [SQ]),
    "lstsq_rows": (lambda m, a, b: m.linalg.lstsq(a, b[:4]), [TALL, RHS]),
    "lstsq_driver": (lambda m, a, b: m.linalg.lstsq(a, b, driver="x"), [TALL, RHS]),
    "lstsq_dims": (lambda m, a, b: m.linalg.lstsq(a, b[0, 0]), [TALL, RHS]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_spectral_matches_torch(name):
    fn, inputs = CASES[name]
    check(fn, *inputs, grad=True)


@pytest.mark.parametrize("name", sorted(NO_GRAD))
def test_spectral_values_match_torch(name):
    fn, inputs = NO_GRAD[name]
    check(fn, *inputs)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_spectral_errors_match_torch(name):
    fn, inputs = ERRORS[name]
    check(fn, *inputs)


@pytest.mark.parametrize("name", ["eigh", "svd", "eig"])
def test_ill_defined_phase_losses_match_torch(name):
    def loss(m, c):
        if name == "eigh":
            vectors = m.linalg.eigh(_sym(c)).eigenvectors
        elif name == "svd":
            vectors = m.linalg.svd(c).U
        else:
            vectors = m.linalg.eig(c).eigenvectors
        return m.autograd.grad(vectors.sum().abs(), c)

    check(loss, CSQ, grad=True)


def test_jvps_match_torch():
    def tangents(m, a, d):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(a, d)
            outs = list(_svd_invariants(m, x)) + [m.linalg.eigvalsh(_sym(x)),
                                                   m.linalg.pinv(x)]
            return tuple(fw.unpack_dual(o).tangent for o in outs)

    check(tangents, randn((4, 4), "float64", seed=7), randn((4, 4), "float64", seed=8))


def test_meta_shapes_and_dtypes():
    A = t.empty(2, 5, 3, dtype=t.complex64, device="meta")
    U, S, Vh = t.linalg.svd(A)
    assert [tuple(U.shape), tuple(S.shape), tuple(Vh.shape)] == [(2, 5, 5), (2, 3), (2, 3, 3)]
    assert S.dtype is t.float32 and U.device.type == "meta"
    L, V = t.linalg.eig(t.empty(4, 4, device="meta"))
    assert L.dtype is t.complex64 and tuple(V.shape) == (4, 4)
    sol = t.linalg.lstsq(t.empty(3, 6, 4, device="meta"), t.empty(6, 2, device="meta"))
    assert tuple(sol.solution.shape) == (3, 4, 2) and tuple(sol.rank.shape) == (3,)


def test_column_major_results_view_cusolver_memory():
    from refimpl.cuda._cusolver_spectral import _as_columns

    buf = t.arange(12.0)
    out = _as_columns(buf, (2, 2, 3))
    # each 2x3 matrix is read column by column from its 6 consecutive elements
    assert out.stride() == (6, 1, 2)
    np.testing.assert_array_equal(out._np[1], np.arange(6.0, 12.0).reshape(3, 2).T)


def test_lowrank_reconstructs_and_validates():
    rng = np.random.default_rng(9)
    A = t.tensor(rng.standard_normal((7, 2)) @ rng.standard_normal((2, 5)))
    U, S, V = t.svd_lowrank(A, q=2, niter=1)
    np.testing.assert_allclose((U @ t.diag(S) @ V.mT)._np, A._np, atol=1e-9)
    with pytest.raises(ValueError, match=r"^q\(=6\) must be non-negative integer and not "
                                         r"greater than min\(m, n\)=5$"):
        t.pca_lowrank(A, q=6)

