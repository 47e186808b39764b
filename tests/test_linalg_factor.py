"""Factorisations and solvers (issue #10) on the CPU, against torch 2.13 as the oracle:
values (LAPACK's pivots and signs), torch's errors, gradients (complex included, which
the op_db walk does not cover) and forward-mode tangents."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.autograd import forward_ad as rfwd

torch = pytest.importorskip("torch")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _arr(shape, dtype: str, seed: int) -> np.ndarray:
    r = _rng(seed)
    a = r.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


def _pair(a: np.ndarray, grad: bool = False):
    return (t.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


def _close(x, y, tol: float = 1e-10) -> None:
    xs = x if isinstance(x, (tuple, list)) else (x,)
    ys = y if isinstance(y, (tuple, list)) else (y,)
    assert len(xs) == len(ys)
    for a, b in zip(xs, ys):
        an, bn = a.detach().numpy(), b.detach().resolve_conj().numpy()
        assert an.shape == bn.shape, (an.shape, bn.shape)
        assert an.dtype == bn.dtype, (an.dtype, bn.dtype)
        np.testing.assert_allclose(an, bn, rtol=tol, atol=tol)


def _well(shape, dtype, seed):
    a = _arr(shape, dtype, seed)
    return a + 3 * np.eye(shape[-1], dtype=dtype)


def _spd(shape, dtype, seed):
    a = _arr(shape, dtype, seed)
    return a @ np.swapaxes(a, -1, -2).conj() + shape[-1] * np.eye(shape[-1], dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (0, 3, 3), (5, 3), (3, 5)])
def test_lu_factor_matches_lapack(dtype, shape):
    a = _arr(shape, dtype, 1)
    r, q = _pair(a)
    tol = 1e-5 if dtype == "float32" else 1e-10
    _close(t.linalg.lu_factor_ex(r), torch.linalg.lu_factor_ex(q), tol)
    _close(t.linalg.lu(r), torch.linalg.lu(q), tol)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_solvers_match_torch(dtype):
    a, b = _well((2, 4, 4), dtype, 2), _arr((2, 4, 3), dtype, 3)
    (ra, qa), (rb, qb) = _pair(a), _pair(b)
    _close(t.linalg.solve(ra, rb), torch.linalg.solve(qa, qb))
    _close(t.linalg.solve(ra, rb.mT, left=False), torch.linalg.solve(qa, qb.mT, left=False))
    _close(t.linalg.solve_ex(ra, rb[..., 0]), torch.linalg.solve_ex(qa, qb[..., 0]))
    _close(t.linalg.inv_ex(ra), torch.linalg.inv_ex(qa))
    _close(t.linalg.slogdet(ra), torch.linalg.slogdet(qa))
    _close(t.logdet(ra), torch.logdet(qa))
    lu, piv = t.linalg.lu_factor(ra)
    qlu, qpiv = torch.linalg.lu_factor(qa)
    for adjoint in (False, True):
        _close(t.linalg.lu_solve(lu, piv, rb, adjoint=adjoint),
               torch.linalg.lu_solve(qlu, qpiv, qb, adjoint=adjoint))
    for upper, unit, left in ((True, False, True), (False, True, True), (True, False, False)):
        rhs_r, rhs_q = (rb, qb) if left else (rb.mT, qb.mT)
        _close(t.linalg.solve_triangular(ra, rhs_r, upper=upper, unitriangular=unit, left=left),
               torch.linalg.solve_triangular(qa, rhs_q, upper=upper, unitriangular=unit,
                                             left=left))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_cholesky_family(dtype):
    a, b = _spd((2, 4, 4), dtype, 4), _arr((2, 4, 2), dtype, 5)
    (ra, qa), (rb, qb) = _pair(a), _pair(b)
    for upper in (False, True):
        _close(t.linalg.cholesky_ex(ra, upper=upper), torch.linalg.cholesky_ex(qa, upper=upper))
        rl, ql = t.linalg.cholesky(ra, upper=upper), torch.linalg.cholesky(qa, upper=upper)
        _close(t.cholesky_solve(rb, rl, upper), torch.cholesky_solve(qb, ql, upper))
        _close(t.cholesky_inverse(rl, upper), torch.cholesky_inverse(ql, upper))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_qr_family(dtype, shape):
    r, q = _pair(_arr(shape, dtype, 6))
    for mode in ("reduced", "complete", "r"):
        _close(t.linalg.qr(r, mode=mode), torch.linalg.qr(q, mode=mode))
    g, tau = t.geqrf(r)
    qg, qtau = torch.geqrf(q)
    _close((g, tau), (qg, qtau))
    if shape[-2] >= shape[-1]:
        _close(t.linalg.householder_product(g, tau), torch.linalg.householder_product(qg, qtau))
    c = _arr((*shape[:-2], shape[-2], 2), dtype, 7)
    rc, qc = _pair(c)
    for transpose in (False, True):
        _close(t.ormqr(g, tau, rc, True, transpose), torch.ormqr(qg, qtau, qc, True, transpose))


@pytest.mark.parametrize("hermitian,dtype", [(False, "float64"), (False, "complex128"),
                                             (True, "complex128")])
def test_ldl_matches_sytrf(hermitian, dtype):
    a = _arr((6, 5, 5), dtype, 8)
    a = a + (np.swapaxes(a, -1, -2).conj() if hermitian else np.swapaxes(a, -1, -2))
    b = _arr((6, 5, 2), dtype, 9)
    (ra, qa), (rb, qb) = _pair(a), _pair(b)
    r_ld, r_piv = t.linalg.ldl_factor(ra, hermitian=hermitian)
    q_ld, q_piv = torch.linalg.ldl_factor(qa, hermitian=hermitian)
    _close((r_ld, r_piv), (q_ld, q_piv))
    _close(t.linalg.ldl_solve(r_ld, r_piv, rb, hermitian=hermitian),
           torch.linalg.ldl_solve(q_ld, q_piv, qb, hermitian=hermitian), 1e-9)


def test_matrix_exp_vander_tensor_functions():
    r, q = _pair(_arr((3, 4, 4), "float64", 10))
    _close(t.matrix_exp(r), torch.matrix_exp(q), 1e-9)
    x, qx = _pair(_arr((2, 4), "float64", 11))
    _close(t.linalg.vander(x, N=5), torch.linalg.vander(qx, N=5))
    a, qa = _pair(_well((6, 6), "float64", 12).reshape(2, 3, 6))
    _close(t.linalg.tensorinv(a, ind=2), torch.linalg.tensorinv(qa, ind=2))


def _raises_like(fn_r, fn_q) -> None:
    with pytest.raises(Exception) as want:
        fn_q()
    with pytest.raises(Exception) as got:
        fn_r()
    assert type(got.value).__mro__[1:2] == type(want.value).__mro__[1:2] or isinstance(
        got.value, type(want.value).__mro__[1])
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("call", [
    lambda m, A: m.linalg.solve(A, A.new_ones(2, 3, 1)),
    lambda m, A: m.linalg.inv(A),
    lambda m, A: m.linalg.cholesky(A),
    lambda m, A: m.linalg.lu_factor(A),
    lambda m, A: m.linalg.lu_factor_ex(A, check_errors=True),
    lambda m, A: m.linalg.cholesky_ex(A, check_errors=True),
    lambda m, A: m.linalg.solve(A, A.new_ones(4, 1)),
    lambda m, A: m.linalg.solve(A, A.new_ones(3)[0]),
    lambda m, A: m.linalg.solve(A.int(), A.new_ones(3)),
    lambda m, A: m.linalg.cholesky(A[..., :2]),
    lambda m, A: m.linalg.qr(A, mode="x"),
    lambda m, A: m.linalg.lu_solve(A, A.new_ones(2, 3).long(), A),
    lambda m, A: m.linalg.householder_product(A[0, :2], A.new_ones(1)),
    lambda m, A: m.ormqr(A[0], A.new_ones(4), A[0]),
    lambda m, A: m.linalg.tensorinv(A, ind=0),
    lambda m, A: m.linalg.lu(A.long()),
    lambda m, A: m.linalg.solve(A.half(), A.half()),
    lambda m, A: m.cholesky_solve(A.long(), A.long()),
    lambda m, A: m.linalg.householder_product(A.long(), A[:, 0].long()),
    lambda m, A: m.linalg.ldl_solve(A, A[..., 0].int(), A.float()),
    lambda m, A: m.linalg.ldl_solve(A, A[..., 0].int(), A[0, 0]),
    lambda m, A: m.linalg.solve_triangular(A, A[0, :2], upper=True),
    lambda m, A: m.triangular_solve(A[0, :2, :2], A),
    lambda m, A: m.ormqr(A[0], A[0, 0].float(), A[0]),
])
def test_errors_match_torch(call):
    a = np.zeros((2, 3, 3))
    a[0] = np.eye(3)
    _raises_like(lambda: call(t, t.tensor(a)), lambda: call(torch, torch.tensor(a)))


def _grads(fn, arrays):
    rs = [t.tensor(a, requires_grad=True) for a in arrays]
    qs = [torch.tensor(a, requires_grad=True) for a in arrays]
    r_out, q_out = fn(t, *rs), fn(torch, *qs)
    r_out = r_out if isinstance(r_out, (tuple, list)) else (r_out,)
    q_out = q_out if isinstance(q_out, (tuple, list)) else (q_out,)
    weights = [_arr(tuple(o.shape), "complex128" if o.is_complex() else "float64", 20 + i)
               for i, o in enumerate(q_out) if o.is_floating_point() or o.is_complex()]
    r_loss = sum((o * t.tensor(w)).real.sum() if o.dtype.is_complex else (o * t.tensor(w)).sum()
                 for o, w in zip(r_out, weights))
    q_loss = sum((o * torch.tensor(w)).real.sum() for o, w in zip(q_out, weights))
    return t.autograd.grad(r_loss, rs), torch.autograd.grad(q_loss, qs)


GRAD_CASES = {
    "solve": (lambda m, A, B: m.linalg.solve(A, B), [(3, 3), (3, 2)]),
    "lu_factor": (lambda m, A: m.linalg.lu_factor(A).LU, [(4, 4)]),
    "lu_wide": (lambda m, A: m.linalg.lu(A)[1:], [(3, 5)]),
    "lu_tall": (lambda m, A: m.linalg.lu(A)[1:], [(5, 3)]),
    "slogdet": (lambda m, A: m.linalg.slogdet(A), [(3, 3)]),
    "qr": (lambda m, A: m.linalg.qr(A), [(4, 3)]),
    "qr_wide": (lambda m, A: m.linalg.qr(A), [(3, 4)]),
    "tri": (lambda m, A, B: m.linalg.solve_triangular(A, B, upper=True), [(3, 3), (3, 2)]),
    "householder": (lambda m, A, tau: m.linalg.householder_product(A, tau), [(4, 3), (2,)]),
    "matrix_exp": (lambda m, A: m.matrix_exp(A), [(3, 3)]),
}


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_torch(name, dtype):
    fn, shapes = GRAD_CASES[name]
    arrays = [_well(s, dtype, 30 + i) if len(s) == 2 and s[0] == s[1] else _arr(s, dtype, 30 + i)
              for i, s in enumerate(shapes)]
    _close(*_grads(fn, arrays), 1e-8)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_cholesky_gradient_matches_torch(dtype):
    a = _spd((3, 3), dtype, 40)
    for upper in (False, True):
        _close(*_grads(lambda m, A, up=upper: m.linalg.cholesky(A, upper=up), [a]), 1e-8)


JVP_CASES = {
    "lu_factor": (lambda m, A: m.linalg.lu_factor_ex(A).LU, (4, 4)),
    "lu_wide": (lambda m, A: m.linalg.lu_factor_ex(A).LU, (3, 5)),
    "lu_tall": (lambda m, A: m.linalg.lu_factor_ex(A).LU, (5, 3)),
    "cholesky": (lambda m, A: m.linalg.cholesky(A @ A.mT), (3, 3)),
    "slogdet": (lambda m, A: m.linalg.slogdet(A)[1], (3, 3)),
    "tri": (lambda m, A: m.linalg.solve_triangular(A, A, upper=False), (3, 3)),
    "qr": (lambda m, A: m.linalg.qr(A).Q + m.linalg.qr(A).R.sum(), (4, 3)),
    "qr_r": (lambda m, A: m.linalg.qr(A).R, (4, 3)),
    "qr_wide": (lambda m, A: m.linalg.qr(A).R, (3, 5)),
    "qr_wide_q": (lambda m, A: m.linalg.qr(A).Q, (3, 5)),
}


@pytest.mark.parametrize("name", sorted(JVP_CASES))
def test_forward_ad_matches_torch(name):
    fn, shape = JVP_CASES[name]
    a, ta = _well(shape, "float64", 50) if shape[0] == shape[1] else _arr(shape, "float64", 50), \
        _arr(shape, "float64", 51)
    import torch.autograd.forward_ad as qfwd

    with qfwd.dual_level():
        want = qfwd.unpack_dual(fn(torch, qfwd.make_dual(torch.tensor(a), torch.tensor(ta))))
    with rfwd.dual_level():
        got = rfwd.unpack_dual(fn(t, rfwd.make_dual(t.tensor(a), t.tensor(ta))))
    _close(got.primal, want.primal)
    _close(got.tangent, want.tangent, 1e-8)


def test_meta_shapes():
    a = t.empty(2, 5, 3, device="meta")
    LU, piv, info = t.linalg.lu_factor_ex(a)
    assert (LU.shape, piv.shape, info.shape) == ((2, 5, 3), (2, 3), (2,))
    assert piv.dtype is t.int32
    q, r = t.linalg.qr(a)
    assert (q.shape, r.shape) == ((2, 5, 3), (2, 3, 3))
    sign, logabs = t.linalg.slogdet(t.empty(4, 4, dtype=t.complex64, device="meta"))
    assert sign.dtype is t.complex64 and logabs.dtype is t.float32


def test_legacy_names_and_methods():
    a = _spd((3, 3), "float64", 60)
    r, q = _pair(a)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        _close(t.cholesky(r, upper=True), torch.linalg.cholesky(q, upper=True))
    _close(r.slogdet(), q.slogdet())
    _close(r.logdet(), q.logdet())
    _close(t.qr(r, some=False), torch.qr(q, some=False))
    with pytest.warns(UserWarning, match="torch.triangular_solve is deprecated"):
        sol = t.triangular_solve(r, r, upper=False)
    _close(sol, torch.triangular_solve(q, q, upper=False))
    assert issubclass(t.linalg.LinAlgError, RuntimeError)


def test_factors_are_column_major_as_lapack_returns_them():
    a, s = _arr((2, 4, 4), "float64", 70), _spd((2, 4, 4), "float64", 71)
    w, b = _arr((2, 5, 3), "float64", 72), _arr((2, 4, 3), "float64", 73)
    calls = [lambda m, A, S, W, B: m.linalg.lu_factor(A)[0],
             lambda m, A, S, W, B: m.linalg.solve(A, B),
             lambda m, A, S, W, B: m.linalg.cholesky(S),
             lambda m, A, S, W, B: m.linalg.qr(W)[0],
             lambda m, A, S, W, B: m.linalg.qr(W)[1],
             lambda m, A, S, W, B: m.geqrf(W)[0],
             lambda m, A, S, W, B: m.linalg.solve_triangular(A, B, upper=True),
             lambda m, A, S, W, B: m.linalg.ldl_factor(S)[0]]
    for call in calls:
        got = call(t, *(t.tensor(x) for x in (a, s, w, b)))
        want = call(torch, *(torch.tensor(x) for x in (a, s, w, b)))
        assert got.stride() == want.stride()


@pytest.mark.parametrize("call", [
    lambda m, A: m.linalg.solve(A, A[:, :1].detach(), out=m.empty(0, dtype=A.dtype)),
    lambda m, A: m.linalg.lu_factor(A, out=(m.empty(0, dtype=A.dtype),
                                            m.empty(0, dtype=m.int32))),
    lambda m, A: m.cholesky_solve(A[:, :1].detach(), A, out=m.empty(0, dtype=A.dtype)),
])
def test_out_refuses_inputs_that_require_grad(call):
    a = _well((3, 3), "float64", 80)
    _raises_like(lambda: call(t, t.tensor(a, requires_grad=True)),
                 lambda: call(torch, torch.tensor(a, requires_grad=True)))


def test_cholesky_solve_reads_only_the_factors_triangle():
    low = np.tril(_arr((3, 3), "float64", 90)) + 3 * np.eye(3)
    low[0, 2] = 5.0  # not part of the factor: potrs never reads it
    b = _arr((3, 2), "float64", 91)
    (rl, ql), (rb, qb) = _pair(low), _pair(b)
    _close(t.cholesky_solve(rb, rl), torch.cholesky_solve(qb, ql))
    _close(t.cholesky_inverse(rl), torch.cholesky_inverse(ql))


def test_fake_tensors_get_shapes_without_reading_infos():
    from refimpl._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b, w = t.empty(2, 4, 4), t.empty(2, 4, 3), t.empty(2, 5, 3)
        assert t.linalg.solve(a, b).shape == (2, 4, 3)
        assert t.linalg.cholesky(a).shape == (2, 4, 4)
        assert [x.shape for x in t.linalg.lu(w)] == [(2, 5, 5), (2, 5, 3), (2, 3, 3)]
        assert t.matrix_exp(a).shape == (2, 4, 4)
        assert t.linalg.ldl_factor(a).pivots.shape == (2, 4)
