"""The spectral linalg functions on CUDA compute with cuSOLVER only: the CPU kernels of
the linear-algebra ops (decompositions, products) are made to raise while they run (no
silent CPU fallback), and the results are checked against numpy through sign-free
quantities. Skipped where no GPU is present."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t
from refimpl.ops._registry import REGISTRY

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

RNG = np.random.default_rng(0)


_PRODUCTS = {"mm", "bmm", "mv", "matmul", "dot", "vdot", "addmm", "baddbmm", "inverse"}


def _refuse_cpu_linalg(mp) -> None:
    for name, op in list(REGISTRY.items()):
        if op.cpu is not None and ("linalg" in name or name in _PRODUCTS):
            def refuse(*args, _name=name, **kwargs):
                raise AssertionError(f"CPU kernel of '{_name}' ran during a CUDA program")
            mp.setattr(op, "cpu", refuse)


@pytest.fixture
def gpu_only(monkeypatch):
    _refuse_cpu_linalg(monkeypatch)


def _cuda(a: np.ndarray) -> t.Tensor:
    return t.tensor(a).to("cuda")


def _host(x: t.Tensor) -> np.ndarray:
    return x.cpu()._np


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_eigh_and_svd_on_cusolver(dtype):
    a = RNG.standard_normal((3, 6, 4)).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 1j * RNG.standard_normal(a.shape)
    h = a[..., :4, :] + np.conj(np.swapaxes(a[..., :4, :], -1, -2))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    A, H = _cuda(a), _cuda(h)
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        _refuse_cpu_linalg(mp)
        L, V = t.linalg.eigh(H)
        results["eigh"] = (_host(L), _host(V))
        for full in (False, True):
            for M in (A, A.mT):
                U, S, Vh = t.linalg.svd(M, full_matrices=full)
                results[("svd", full, M is A)] = (_host(U), _host(S), _host(Vh))
    L, V = results["eigh"]
    np.testing.assert_allclose(L, np.linalg.eigvalsh(h), rtol=tol, atol=tol)
    np.testing.assert_allclose((V * L[..., None, :]) @ np.conj(np.swapaxes(V, -1, -2)), h,
                               rtol=tol, atol=tol * 10)
    for (_, full, plain), (U, S, Vh) in ((k, v) for k, v in results.items() if k != "eigh"):
        m = a if plain else np.swapaxes(a, -1, -2)
        np.testing.assert_allclose(S, np.linalg.svd(m, compute_uv=False), rtol=tol, atol=tol)
        k = S.shape[-1]
        rec = (U[..., :k] * S[..., None, :]) @ Vh[..., :k, :]
        np.testing.assert_allclose(rec, m, rtol=tol, atol=tol * 10)
        if full:
            eye = np.eye(U.shape[-1])
            np.testing.assert_allclose(np.conj(np.swapaxes(U, -1, -2)) @ U,
                                       np.broadcast_to(eye, U.shape), atol=tol * 10)


def test_eig_lstsq_pinv_rank_on_cusolver(gpu_only):
    a = RNG.standard_normal((2, 5, 5))
    b = RNG.standard_normal((2, 5, 2))
    tall = RNG.standard_normal((7, 3))
    L, V = t.linalg.eig(_cuda(a))
    L, V = _host(L), _host(V)
    np.testing.assert_allclose(a @ V, V * L[..., None, :], atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(V, axis=-2), np.ones((2, 5)), rtol=1e-10)
    sol = t.linalg.lstsq(_cuda(a), _cuda(b))
    np.testing.assert_allclose(_host(sol.solution), np.linalg.solve(a, b), rtol=1e-9,
                               atol=1e-9)
    wide = t.linalg.lstsq(_cuda(tall.T), _cuda(np.ones(3))).solution
    np.testing.assert_allclose(_host(wide), np.linalg.lstsq(tall.T, np.ones(3), rcond=None)[0],
                               atol=1e-9)
    res = t.linalg.lstsq(_cuda(tall), _cuda(np.ones((7, 1)))).residuals
    np.testing.assert_allclose(_host(res), np.linalg.lstsq(tall, np.ones((7, 1)),
                                                           rcond=None)[1], rtol=1e-9)
    np.testing.assert_allclose(_host(t.linalg.pinv(_cuda(tall))), np.linalg.pinv(tall),
                               atol=1e-10)
    low = tall @ RNG.standard_normal((3, 7))
    assert t.linalg.matrix_rank(_cuda(low)).item() == 3
    with pytest.raises(RuntimeError, match="`driver` other than `gels` is not supported"):
        t.linalg.lstsq(_cuda(a), _cuda(b), driver="gelsd")


def test_svd_backward_on_cuda(gpu_only):
    a = RNG.standard_normal((4, 3))
    A = _cuda(a).requires_grad_()
    t.linalg.svdvals(A).sum().backward()
    U, _, Vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(_host(A.grad), U @ Vh, atol=1e-10)
