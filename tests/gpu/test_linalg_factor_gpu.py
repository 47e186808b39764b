"""Factorisations and solvers on CUDA (cuSOLVER, cuBLAS trsm), against torch on the same
GPU (issue #10): values, torch's errors after the info check, gradients through the
differentiable composites, and ``_ex`` variants that do not synchronise."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs torch with CUDA"),
    pytest.mark.skipif(importlib.util.find_spec("nvmath") is None,
                       reason="needs nvmath-python (cuSOLVER bindings)"),
]

TOL = {"float32": 2e-4, "float64": 1e-9, "complex64": 2e-4, "complex128": 1e-9}


def _arr(shape, dtype: str, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


def _well(shape, dtype, seed):
    return _arr(shape, dtype, seed) + 3 * np.eye(shape[-1], dtype=dtype)


def _spd(shape, dtype, seed):
    a = _arr(shape, dtype, seed)
    return a @ np.swapaxes(a, -1, -2).conj() + shape[-1] * np.eye(shape[-1], dtype=dtype)


def _pair(a: np.ndarray, grad: bool = False):
    return (t.tensor(a, device="cuda", requires_grad=grad),
            torch.tensor(a, device="cuda", requires_grad=grad))


def _close(x, y, dtype: str) -> None:
    xs = x if isinstance(x, (tuple, list)) else (x,)
    ys = y if isinstance(y, (tuple, list)) else (y,)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        assert a.device.type == "cuda"
        an = a.detach().cpu().resolve_conj().numpy()
        bn = b.detach().cpu().resolve_conj().numpy()
        assert an.shape == bn.shape and an.dtype == bn.dtype, (an.shape, bn.shape)
        np.testing.assert_allclose(an, bn, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_lu_solve_inv_det(dtype):
    (ra, qa), (rb, qb) = _pair(_well((2, 4, 4), dtype, 1)), _pair(_arr((2, 4, 3), dtype, 2))
    _close(t.linalg.lu_factor_ex(ra), torch.linalg.lu_factor_ex(qa), dtype)
    _close(t.linalg.lu(ra), torch.linalg.lu(qa), dtype)
    _close(t.linalg.solve(ra, rb), torch.linalg.solve(qa, qb), dtype)
    _close(t.linalg.solve(ra, rb.mT, left=False), torch.linalg.solve(qa, qb.mT, left=False),
           dtype)
    _close(t.linalg.solve_ex(ra, rb[..., 0]), torch.linalg.solve_ex(qa, qb[..., 0]), dtype)
    _close(t.linalg.inv(ra), torch.linalg.inv(qa), dtype)
    _close(t.linalg.inv_ex(ra), torch.linalg.inv_ex(qa), dtype)
    _close(t.linalg.det(ra), torch.linalg.det(qa), dtype)
    if not dtype.startswith("complex"):
        _close(t.linalg.slogdet(ra), torch.linalg.slogdet(qa), dtype)
        _close(t.logdet(ra), torch.logdet(qa), dtype)
    lu, piv = t.linalg.lu_factor(ra)
    qlu, qpiv = torch.linalg.lu_factor(qa)
    for adjoint in (False, True):
        _close(t.linalg.lu_solve(lu, piv, rb, adjoint=adjoint),
               torch.linalg.lu_solve(qlu, qpiv, qb, adjoint=adjoint), dtype)
    _close(t.lu_unpack(lu, piv), torch.lu_unpack(qlu, qpiv), dtype)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_lu_rectangular_and_without_pivoting(shape):
    r, q = _pair(_arr(shape, "float64", 3))
    _close(t.linalg.lu_factor_ex(r), torch.linalg.lu_factor_ex(q), "float64")
    _close(t.linalg.lu_factor_ex(r, pivot=False), torch.linalg.lu_factor_ex(q, pivot=False),
           "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_cholesky_and_triangular(dtype):
    (ra, qa), (rb, qb) = _pair(_spd((2, 4, 4), dtype, 4)), _pair(_arr((2, 4, 2), dtype, 5))
    for upper in (False, True):
        _close(t.linalg.cholesky_ex(ra, upper=upper), torch.linalg.cholesky_ex(qa, upper=upper),
               dtype)
        rl, ql = t.linalg.cholesky(ra, upper=upper), torch.linalg.cholesky(qa, upper=upper)
        _close(t.cholesky_solve(rb, rl, upper), torch.cholesky_solve(qb, ql, upper), dtype)
        _close(t.cholesky_inverse(rl, upper), torch.cholesky_inverse(ql, upper), dtype)
    for upper, unit, left in ((True, False, True), (False, True, True), (True, False, False)):
        rhs_r, rhs_q = (rb, qb) if left else (rb.mT, qb.mT)
        _close(t.linalg.solve_triangular(ra, rhs_r, upper=upper, unitriangular=unit, left=left),
               torch.linalg.solve_triangular(qa, rhs_q, upper=upper, unitriangular=unit,
                                             left=left), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_geqrf_householder_ormqr(dtype, shape):
    r, q = _pair(_arr(shape, dtype, 6))
    for mode in ("reduced", "complete", "r"):
        _close(t.linalg.qr(r, mode=mode), torch.linalg.qr(q, mode=mode), dtype)
    g, tau = t.geqrf(r)
    qg, qtau = torch.geqrf(q)
    _close((g, tau), (qg, qtau), dtype)
    if shape[-2] >= shape[-1]:
        _close(t.linalg.householder_product(g, tau), torch.linalg.householder_product(qg, qtau),
               dtype)
    rc, qc = _pair(_arr((*shape[:-2], shape[-2], 2), dtype, 7))
    for transpose in (False, True):
        _close(t.ormqr(g, tau, rc, True, transpose), torch.ormqr(qg, qtau, qc, True, transpose),
               dtype)


def test_singular_errors_name_the_batch_element():
    a = np.zeros((2, 3, 3))
    a[0] = np.eye(3)
    ra, qa = _pair(a)
    calls = [lambda m, A: m.linalg.solve(A, A.new_ones(2, 3, 1)),
             lambda m, A: m.linalg.inv(A),
             lambda m, A: m.inverse(A),
             lambda m, A: m.linalg.cholesky(A),
             lambda m, A: m.linalg.lu_factor(A)]
    for call in calls:
        with pytest.raises(RuntimeError) as want:
            call(torch, qa)
        with pytest.raises(RuntimeError) as got:
            call(t, ra)
        assert str(got.value) == str(want.value)
    _close(t.linalg.lu_factor_ex(ra).info, torch.linalg.lu_factor_ex(qa).info, "float64")
    _close(t.linalg.cholesky_ex(ra).info, torch.linalg.cholesky_ex(qa).info, "float64")
    _close(t.linalg.det(ra), torch.linalg.det(qa), "float64")


def test_ex_variants_do_not_synchronise():
    ra, _ = _pair(_well((3, 4, 4), "float64", 8))
    rb, _ = _pair(_arr((3, 4, 2), "float64", 9))
    t.cuda.set_sync_debug_mode("error")
    try:
        t.linalg.lu_factor_ex(ra)
        t.linalg.solve_ex(ra, rb)
        t.linalg.inv_ex(ra)
        t.linalg.cholesky_ex(ra @ ra.mT)
        t.linalg.solve_triangular(ra, rb, upper=True)
        t.linalg.qr(ra)
    finally:
        t.cuda.set_sync_debug_mode(0)


@pytest.mark.parametrize("name", ["solve", "lu", "cholesky", "qr", "slogdet", "tri"])
def test_gradients_on_cuda(name):
    fns = {
        "solve": lambda m, A: m.linalg.solve(A, A.mT),
        "lu": lambda m, A: m.linalg.lu(A)[1:],
        "cholesky": lambda m, A: m.linalg.cholesky(A @ A.mT),
        "qr": lambda m, A: m.linalg.qr(A),
        "slogdet": lambda m, A: m.linalg.slogdet(A)[1],
        "tri": lambda m, A: m.linalg.solve_triangular(A, A.mT, upper=False),
    }
    a = _well((2, 4, 4), "float64", 10)
    ra, qa = _pair(a, grad=True)
    r_out, q_out = fns[name](t, ra), fns[name](torch, qa)
    r_out = r_out if isinstance(r_out, tuple) else (r_out,)
    q_out = q_out if isinstance(q_out, tuple) else (q_out,)
    weights = [_arr(tuple(o.shape), "float64", 11 + i) for i, o in enumerate(q_out)]
    r_loss = sum((o * t.tensor(w, device="cuda")).sum() for o, w in zip(r_out, weights))
    q_loss = sum((o * torch.tensor(w, device="cuda")).sum() for o, w in zip(q_out, weights))
    (rg,), (qg,) = t.autograd.grad(r_loss, [ra]), torch.autograd.grad(q_loss, [qa])
    _close(rg, qg, "float64")


def test_matrix_exp_and_tensor_functions():
    r, q = _pair(_arr((3, 4, 4), "float64", 12))
    _close(t.matrix_exp(r), torch.matrix_exp(q), "float64")
    a, qa = _pair(_well((6, 6), "float64", 13).reshape(2, 3, 6))
    _close(t.linalg.tensorinv(a, ind=2), torch.linalg.tensorinv(qa, ind=2), "float64")
    x, qx = _pair(_arr((2, 4), "float64", 14))
    _close(t.linalg.vander(x), torch.linalg.vander(qx), "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_ldl_symmetric(dtype):
    a = _arr((3, 5, 5), dtype, 15)
    a = a + np.swapaxes(a, -1, -2)
    (ra, qa), (rb, qb) = _pair(a), _pair(_arr((3, 5, 2), dtype, 16))
    r_ld, r_piv, r_info = t.linalg.ldl_factor_ex(ra)
    q_ld, q_piv, q_info = torch.linalg.ldl_factor_ex(qa)
    _close((r_ld, r_piv, r_info), (q_ld, q_piv, q_info), dtype)
    _close(t.linalg.ldl_solve(r_ld, r_piv, rb), torch.linalg.ldl_solve(q_ld, q_piv, qb), dtype)
