"""CUDA matrix products on cuBLAS, checked against torch on the same GPU (TENSOR-307).

Every product runs on refimpl and on torch from the same host data; results must agree
to the precision of the dtype. Skipped without a GPU, without torch built for CUDA, or
without nvmath-python (refimpl's cuBLAS bindings).
"""

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
                       reason="needs nvmath-python (cuBLAS bindings)"),
]

FLOATS = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
# absolute tolerance per unit of sqrt(K) for products of standard normal entries
TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 2e-5, "float64": 1e-12,
       "complex64": 2e-5, "complex128": 1e-12}


@pytest.fixture(autouse=True)
def _full_precision():
    """Products compare at full float32 precision unless a test asks for TF32."""
    saved = (t.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    t.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    t.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _host(shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return x


def pair(shape, dtype: str, seed: int = 0):
    """The same values as a refimpl and a torch CUDA tensor of ``dtype``."""
    x = _host(shape, dtype, seed)
    wide = "complex128" if dtype.startswith("complex") else "float64"
    r = t.tensor(x, dtype=getattr(t, wide)).cuda().to(getattr(t, dtype))
    q = torch.tensor(x, dtype=getattr(torch, wide)).cuda().to(getattr(torch, dtype))
    return r, q


def to_np(x) -> np.ndarray:
    """Host float64/complex128 values of a refimpl or torch tensor."""
    if isinstance(x, t.Tensor):
        wide = t.complex128 if x.dtype.is_complex else t.float64
        return np.asarray(x.cpu().to(wide).tolist())
    wide = torch.complex128 if x.dtype.is_complex else torch.float64
    return x.cpu().to(wide).numpy()


def needs_kernels(fn) -> None:
    """Skip when ``fn`` reaches a CUDA op refimpl has no kernel for yet (elementwise and
    reduction kernels are a separate part of refimpl's CUDA layer)."""
    try:
        fn()
    except NotImplementedError as exc:
        if "no CUDA kernel" in str(exc):
            pytest.skip(str(exc))
        raise


def close(r, q, dtype: str, k: int) -> None:
    assert r.dtype is getattr(t, dtype)
    assert tuple(r.shape) == tuple(q.shape)
    assert r.device == t.device("cuda:0")
    np.testing.assert_allclose(to_np(r), to_np(q), rtol=0, atol=TOL[dtype] * max(k, 1) ** 0.5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_mm_every_dtype_and_transpose(dtype, ta, tb):
    m, k, n = 37, 64, 29
    a, qa = pair((k, m) if ta else (m, k), dtype, 1)
    b, qb = pair((n, k) if tb else (k, n), dtype, 2)
    if ta:
        a, qa = a.t(), qa.t()
    if tb:
        b, qb = b.t(), qb.t()
    close(t.mm(a, b), torch.mm(qa, qb), dtype, k)
    close(a @ b, qa @ qb, dtype, k)


@pytest.mark.parametrize("dtype", ["float32", "complex128", "bfloat16"])
def test_mm_of_strides_blas_cannot_read(dtype):
    a, qa = pair((40, 64), dtype, 3)
    b, qb = pair((64, 60), dtype, 4)
    # every other column: both strides > 1, so a contiguous copy is made
    close(t.mm(a[:, ::2], b[::2, ::3]), torch.mm(qa[:, ::2], qb[::2, ::3]), dtype, 32)
    # a broadcast (zero-stride) operand
    r = t.mm(a, b[:, :1].expand(64, 7))
    close(r, torch.mm(qa, qb[:, :1].expand(64, 7)), dtype, 64)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bmm_and_batched_matmul(dtype):
    a, qa = pair((5, 17, 33), dtype, 5)
    b, qb = pair((5, 33, 9), dtype, 6)
    close(t.bmm(a, b), torch.bmm(qa, qb), dtype, 33)
    close(t.bmm(a.transpose(1, 2).contiguous().transpose(1, 2), b.transpose(1, 2)
                .contiguous().transpose(1, 2)), torch.bmm(qa, qb), dtype, 33)
    # broadcast batches: (2, 1, n, k) @ (3, k, m) -> (2, 3, n, m)
    c, qc = pair((2, 1, 17, 33), dtype, 7)
    d, qd = pair((3, 33, 9), dtype, 8)
    close(t.matmul(c, d), torch.matmul(qc, qd), dtype, 33)
    # batched @ matrix folds into one mm; vector @ batched
    e, qe = pair((33, 9), dtype, 9)
    close(a @ e, qa @ qe, dtype, 33)
    v, qv = pair((17,), dtype, 10)
    close(v @ a, qv @ qa, dtype, 17)
    close(a @ e[:, 0], qa @ qe[:, 0], dtype, 33)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mv_dot_vdot(dtype):
    a, qa = pair((23, 41), dtype, 11)
    x, qx = pair((41,), dtype, 12)
    y, qy = pair((41,), dtype, 13)
    close(t.mv(a, x), torch.mv(qa, qx), dtype, 41)
    close(t.mv(a.t().contiguous().t(), x), torch.mv(qa, qx), dtype, 41)
    close(t.dot(x, y), torch.dot(qx, qy), dtype, 41)
    close(t.vdot(x, y), torch.vdot(qx, qy), dtype, 41)
    close(t.dot(a[:, 0], a[:, 1]), torch.dot(qa[:, 0], qa[:, 1]), dtype, 23)  # strided


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_products(dtype):
    inp, qinp = pair((19, 7), dtype, 14)
    row, qrow = pair((7,), dtype, 15)
    m1, qm1 = pair((19, 31), dtype, 16)
    m2, qm2 = pair((31, 7), dtype, 17)
    for beta, alpha in ((1, 1), (0.5, -2), (0, 3)):
        close(t.addmm(inp, m1, m2, beta=beta, alpha=alpha),
              torch.addmm(qinp, qm1, qm2, beta=beta, alpha=alpha), dtype, 31)
        close(t.addmm(row, m1, m2, beta=beta, alpha=alpha),
              torch.addmm(qrow, qm1, qm2, beta=beta, alpha=alpha), dtype, 31)
    v, qv = pair((31,), dtype, 18)
    b0, qb0 = pair((19,), dtype, 19)
    close(t.addmv(b0, m1, v, beta=2, alpha=0.5), torch.addmv(qb0, qm1, qv, beta=2, alpha=0.5),
          dtype, 31)
    b1, qb1 = pair((4, 19, 31), dtype, 20)
    b2, qb2 = pair((4, 31, 7), dtype, 21)
    bi, qbi = pair((4, 19, 7), dtype, 22)
    close(t.baddbmm(bi, b1, b2, beta=0.5, alpha=2), torch.baddbmm(qbi, qb1, qb2, beta=0.5,
                                                                 alpha=2), dtype, 31)
    close(t.addbmm(inp, b1, b2, beta=0.5, alpha=2), torch.addbmm(qinp, qb1, qb2, beta=0.5,
                                                                alpha=2), dtype, 124)


def test_beta_zero_ignores_nan_input():
    inp = t.full((3, 4), float("nan"), device="cuda")
    m1, _ = pair((3, 5), "float32", 23)
    m2, _ = pair((5, 4), "float32", 24)
    out = t.addmm(inp, m1, m2, beta=0)
    assert not np.isnan(to_np(out)).any()


def test_empty_and_k0_products():
    a = t.empty(3, 0, device="cuda")
    b = t.empty(0, 4, device="cuda")
    assert to_np(t.mm(a, b)).tolist() == [[0.0] * 4] * 3
    inp = t.ones(3, 4, device="cuda")
    assert to_np(t.addmm(inp, a, b, beta=2)).tolist() == [[2.0] * 4] * 3
    assert tuple(t.mm(t.empty(0, 5, device="cuda"), t.empty(5, 2, device="cuda")).shape) \
        == (0, 2)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_integer_products_raise_torchs_error(dtype):
    x = np.ones((3, 3))
    r = t.tensor(x).cuda().to(getattr(t, dtype))
    q = torch.tensor(x).cuda().to(getattr(torch, dtype))
    calls = [(lambda m, mod: mod.mm(m, m)), (lambda m, mod: mod.bmm(m[None], m[None])),
             (lambda m, mod: mod.mv(m, m[0])), (lambda m, mod: mod.dot(m[0], m[1])),
             (lambda m, mod: mod.vdot(m[0], m[1])), (lambda m, mod: mod.addmm(m, m, m)),
             (lambda m, mod: mod.baddbmm(m[None], m[None], m[None])),
             (lambda m, mod: m @ m)]
    mismatches = []
    for i, call in enumerate(calls):
        try:
            call(q, torch)
        except Exception as exc:  # noqa: BLE001 - whatever torch raises, refimpl must match
            want = (type(exc).__name__, str(exc).split("\n")[0])
        else:
            want = None
        try:
            call(r, t)
        except Exception as exc:  # noqa: BLE001
            got = (type(exc).__name__, str(exc).split("\n")[0])
        else:
            got = None
        if got != want:
            mismatches.append((i, want, got))
    assert not mismatches


def test_tf32_flag_changes_float32_results_at_large_k():
    m, k, n = 64, 8192, 64
    a, qa = pair((m, k), "float32", 25)
    b, qb = pair((k, n), "float32", 26)
    exact = _host((m, k), "float32", 25) @ _host((k, n), "float32", 26)
    t.backends.cuda.matmul.allow_tf32 = False
    full = to_np(a @ b)
    t.backends.cuda.matmul.allow_tf32 = True
    assert t.get_float32_matmul_precision() == "high"
    fast = to_np(a @ b)
    torch.backends.cuda.matmul.allow_tf32 = True
    fast_torch = to_np(qa @ qb)
    err_full, err_fast = np.abs(full - exact).max(), np.abs(fast - exact).max()
    assert err_full < 1e-3 < err_fast  # TF32 keeps 10 mantissa bits: errors ~1e-1 here
    assert err_fast > 30 * err_full
    np.testing.assert_allclose(fast, fast_torch, atol=4 * np.abs(fast_torch - exact).max())
    t.set_float32_matmul_precision("highest")
    assert not t.backends.cuda.matmul.allow_tf32
    np.testing.assert_allclose(to_np(a @ b), full, atol=1e-4)


def test_reduced_precision_reduction_flags_are_honoured():
    # same values either way within float16 rounding; the flag must not break the call
    a, qa = pair((64, 4096), "float16", 27)
    b, qb = pair((4096, 64), "float16", 28)
    for allow in (False, True):
        t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = allow
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = allow
        close(a @ b, qa @ qb, "float16", 4096 * 16)
    ab, qab = pair((64, 4096), "bfloat16", 29)
    bb, qbb = pair((4096, 64), "bfloat16", 30)
    for allow in (False, True):
        t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = allow
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = allow
        close(ab @ bb, qab @ qbb, "bfloat16", 4096)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_matmul_backward_matches_torch(dtype):
    if dtype.startswith("complex"):  # the gradients conjugate the other operand
        needs_kernels(lambda: t.ones(2, dtype=t.complex64, device="cuda").conj())
    a, qa = pair((3, 13, 21), dtype, 31)
    b, qb = pair((3, 21, 8), dtype, 32)
    g, qg = pair((3, 13, 8), dtype, 33)
    a.requires_grad_(True)
    b.requires_grad_(True)
    qa.requires_grad_(True)
    qb.requires_grad_(True)
    (a @ b).backward(g)
    (qa @ qb).backward(qg)
    close(a.grad, qa.grad, dtype, 8)
    close(b.grad, qb.grad, dtype, 13)
    m1, qm1 = pair((13, 21), dtype, 34)
    m2, qm2 = pair((21, 8), dtype, 35)
    gm, qgm = pair((13, 8), dtype, 36)
    for x in (m1, m2, qm1, qm2):
        x.requires_grad_(True)
    t.mm(m1, m2).backward(gm)
    torch.mm(qm1, qm2).backward(qgm)
    close(m1.grad, qm1.grad, dtype, 8)
    close(m2.grad, qm2.grad, dtype, 13)


def test_current_blas_handle_per_stream():
    h = t.cuda.current_blas_handle()
    th = torch.cuda.current_blas_handle()
    assert isinstance(h, int) and h != 0
    assert t.cuda.current_blas_handle() == h
    s, ts = t.cuda.Stream(), torch.cuda.Stream()
    with t.cuda.stream(s):
        h2 = t.cuda.current_blas_handle()
        a, _ = pair((8, 8), "float32", 37)
        c = a @ a
    with torch.cuda.stream(ts):
        th2 = torch.cuda.current_blas_handle()
    s.synchronize()
    # torch keeps one handle per thread and device, rebound to the current stream
    assert (h2 == h) == (th2 == th)
    assert to_np(c).shape == (8, 8)


EINSUMS = [
    ("ij,jk->ik", [(6, 5), (5, 4)]),
    ("bij,bjk->bik", [(3, 6, 5), (3, 5, 4)]),
    ("ij,kj->ik", [(6, 5), (4, 5)]),
    ("ii->i", [(5, 5)]),
    ("ii", [(5, 5)]),
    ("ij->", [(6, 5)]),
    ("ij->ji", [(6, 5)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(7,), (3,)]),
    ("ij,ij->ij", [(4, 3), (4, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 6, 5), (3, 5, 4)]),
    ("abc,cd,db->a", [(4, 3, 5), (5, 6), (6, 3)]),
    ("ijk,ikl->jl", [(3, 4, 5), (3, 5, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("ij,j->i", [(4, 1), (6,)]),
]


@pytest.mark.parametrize("dtype", ["float32", "complex64", "float16"])
@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_contractions(eq, shapes, dtype):
    ops = [pair(s, dtype, 40 + i) for i, s in enumerate(shapes)]
    r = t.einsum(eq, *[a for a, _ in ops])
    q = torch.einsum(eq, *[b for _, b in ops])
    close(r, q, dtype, 64)


def test_einsum_integer_permutation_and_product_error():
    x = t.arange(6, device="cuda").reshape(2, 3)
    assert t.einsum("ij->ji", x).cpu().tolist() == [[0, 3], [1, 4], [2, 5]]
    q = torch.arange(6, device="cuda").reshape(2, 3)
    try:
        torch.einsum("ij,jk->ik", q, q.t())
    except Exception as exc:  # noqa: BLE001 - refimpl must raise what torch raises
        with pytest.raises(type(exc)) as info:
            t.einsum("ij,jk->ik", x, x.t())
        assert str(info.value).split("\n")[0] == str(exc).split("\n")[0]
    else:
        pytest.fail("torch multiplies int64 on CUDA in einsum")


def test_tensordot_and_inner():
    a, qa = pair((3, 4, 5), "float32", 60)
    b, qb = pair((4, 5, 2), "float32", 61)
    close(t.tensordot(a, b, 2), torch.tensordot(qa, qb, 2), "float32", 20)
    c, qc = pair((6, 5), "float32", 62)
    close(t.inner(a, c), torch.inner(qa, qc), "float32", 5)


def test_products_built_on_elementwise_and_reduction_kernels():
    x, qx = pair((5,), "float32", 70)
    y, qy = pair((4,), "float32", 71)
    needs_kernels(lambda: t.outer(x, y))
    close(t.outer(x, y), torch.outer(qx, qy), "float32", 1)
    a, qa = pair((4, 3), "float32", 72)
    b, qb = pair((4, 3), "float32", 73)
    needs_kernels(lambda: t.linalg_cross(a, b))
    close(t.linalg_cross(a, b), torch.linalg.cross(qa, qb), "float32", 2)
    m, qm = pair((6, 6), "float32", 74)
    needs_kernels(lambda: t.trace(m))
    close(t.trace(m), torch.trace(qm), "float32", 6)


def test_einsum_backward_on_cuda():
    a, qa = pair((3, 4), "float32", 80)
    b, qb = pair((4, 5), "float32", 81)
    g, qg = pair((3, 5), "float32", 82)
    for x in (a, b, qa, qb):
        x.requires_grad_(True)
    t.einsum("ij,jk->ik", a, b).backward(g)
    torch.einsum("ij,jk->ik", qa, qb).backward(qg)
    close(a.grad, qa.grad, "float32", 5)
    close(b.grad, qb.grad, "float32", 3)
