"""CUDA reductions, scans and softmax, checked against torch on the same GPU.

The first tests port the reduction seed tests of test_cuda (sizes as in the seed);
the rest run every reduction op on refimpl and on torch from the same host data, for
float32/float64/float16/bfloat16/int64/bool, contiguous and transposed inputs, several
dims and keepdim, and compare values, dtypes, shapes and devices (and indices
exactly). Where torch refuses a dtype, refimpl must refuse it too. Skipped without a
GPU or without torch built for CUDA.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs torch with CUDA"),
]

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "bool"]
# (rtol, atol) per dtype for values of order 1 reduced over up to ~1400 elements
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2),
       "bfloat16": (2e-2, 5e-2), "int64": (0, 0), "bool": (0, 0)}


def host(shape, dtype: str, seed: int = 0, kind: str = "normal") -> np.ndarray:
    """Deterministic host values for ``dtype``: normal floats (near 1 for products),
    small integers, random bools."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-3, 4, shape).astype(np.int64)
    if kind == "near_one":
        return 1 + 0.01 * rng.standard_normal(shape)
    return rng.standard_normal(shape)


def pair(arr: np.ndarray, dtype: str):
    """The same values as a refimpl and a torch CUDA tensor of ``dtype``."""
    arr = np.array(arr, order="C")  # a copy that keeps 0-dim arrays 0-dim
    r = t.from_numpy(arr).cuda().to(getattr(t, dtype))
    q = torch.from_numpy(arr).cuda().to(getattr(torch, dtype))
    return r, q


def to_np(x) -> np.ndarray:
    """Host float64 (or complex128, int64, bool) values of a refimpl or torch tensor."""
    if isinstance(x, t.Tensor):
        if x.dtype.is_complex:
            return np.asarray(x.cpu().to(t.complex128).tolist())
        if x.dtype in (t.int64, t.bool):
            return np.asarray(x.cpu().tolist())
        return np.asarray(x.cpu().to(t.float64).tolist())
    if x.is_complex():
        return x.cpu().to(torch.complex128).numpy()
    if x.dtype in (torch.int64, torch.bool):
        return x.cpu().numpy()
    return x.cpu().to(torch.float64).numpy()


def same(r, q, dtype: str, exact: bool = False) -> None:
    """refimpl result ``r`` equals torch's ``q`` (tuples elementwise)."""
    if isinstance(q, tuple):
        assert isinstance(r, tuple) and len(r) == len(q)
        for a, b in zip(r, q):
            same(a, b, dtype, exact or b.dtype == torch.int64)
        return
    assert str(r.dtype).split(".")[-1] == str(q.dtype).split(".")[-1], (r.dtype, q.dtype)
    assert tuple(r.shape) == tuple(q.shape)
    assert r.device.type == "cuda"
    rtol, atol = (0, 0) if exact else TOL.get(str(q.dtype).split(".")[-1], TOL[dtype])
    np.testing.assert_allclose(to_np(r), to_np(q), rtol=rtol, atol=atol, equal_nan=True)


# -- the seed tests of test_cuda ---------------------------------------------------------

def test_reduction_gpu_memory_accessing():
    x = t.ones(512, 8, dtype=t.float32, device="cuda")
    s = t.sum(x, 0)
    t.cuda.synchronize()
    assert s.device.type == "cuda" and s.tolist() == [512.0] * 8


def test_sum_fp16():
    x = t.zeros(10, device="cuda", dtype=t.float16)
    assert x.sum().item() == 0
    x = t.ones(65504, device="cuda", dtype=t.float16)
    assert x.sum().item() == 65504
    assert x.sum(dtype=t.float32).item() == 65504
    x = t.ones(65536, device="cuda", dtype=t.float16)
    assert x.sum(dtype=t.float32).item() == 65536
    rng = np.random.default_rng(0)
    a = (rng.random(1203611) < 0.0005).astype(np.float32)
    x = t.from_numpy(a).to(device="cuda", dtype=t.float16)
    assert x.sum().item() == a.sum()
    a = (rng.random((100, 121, 80)) < 0.0005).astype(np.float32)
    x = t.from_numpy(a).to(device="cuda", dtype=t.float16)
    np.testing.assert_array_equal(x.sum((0, 2)).float().cpu().numpy(), a.sum((0, 2)))


def test_mean_fp16():
    x = t.ones(65536, device="cuda", dtype=t.float16)
    assert x.mean().item() == 1
    x = t.ones(65536, device="cuda", dtype=t.float16)
    assert x.mean(dtype=t.float32).item() == 1


def test_prod_large():
    x = t.ones(240000, device="cuda", dtype=t.float32)
    assert x.prod().item() == 1
    for dtype in (t.complex64, t.complex128):
        x = t.ones(240000, device="cuda", dtype=dtype) * (0 + 1j)
        assert x.prod().item() == 1


def test_min_max_inits():
    x = t.tensor([0], dtype=t.uint8, device="cuda")
    y = t.tensor([255], dtype=t.uint8, device="cuda")
    _, v = x.max(dim=0)
    assert v.item() == 0 and v.device.type == "cuda"
    _, v = y.min(dim=0)
    assert v.item() == 0


def test_tiny_half_norm_():
    a = t.arange(25).cuda().float()
    a /= 100000000
    b = a.half()
    assert b.norm().item() > 0


# -- every reduction against torch --------------------------------------------------------

def _full_or_dim(name: str):
    def fn(L, x, dim, keepdim):
        if dim is None:
            return getattr(L, name)(x)
        return getattr(L, name)(x, dim, keepdim=keepdim)
    return fn


MULTI = {
    "sum": _full_or_dim("sum"),
    "nansum": _full_or_dim("nansum"),
    "mean": _full_or_dim("mean"),
    "amax": lambda L, x, d, k: L.amax(x, () if d is None else d, keepdim=k),
    "amin": lambda L, x, d, k: L.amin(x, () if d is None else d, keepdim=k),
    "var": lambda L, x, d, k: L.var(x, d, keepdim=k),
    "std_c0": lambda L, x, d, k: L.std(x, d, keepdim=k, correction=0),
    "var_mean": lambda L, x, d, k: tuple(L.var_mean(x, d, keepdim=k)),
    "std_mean": lambda L, x, d, k: tuple(L.std_mean(x, d, keepdim=k, correction=2)),
    "logsumexp": lambda L, x, d, k: L.logsumexp(x, tuple(range(x.dim())) if d is None else d,
                                                keepdim=k),
    "all": lambda L, x, d, k: L.all(x) if d is None else L.all(x, d, keepdim=k),
    "any": lambda L, x, d, k: L.any(x) if d is None else L.any(x, d, keepdim=k),
    "count_nonzero": lambda L, x, d, k: L.count_nonzero(x, d),
    "sum_dtype_f64": lambda L, x, d, k: L.sum(x, d, keepdim=k, dtype=L.float64),
}


def _vector_norm(p):
    """``linalg.vector_norm`` (torch) / ``norm`` (refimpl, whose ``norm`` with a number
    is the vector norm) of order ``p``."""
    def fn(L, x, d, k):
        if L is torch:
            return torch.linalg.vector_norm(x, p, d, keepdim=k)
        return L.norm(x, p, d, keepdim=k)
    return fn


def _norm(p):
    def fn(L, x, d, k):
        return L.norm(x, p, d, keepdim=k)
    return fn


for _p in (0, 1, 2, math.inf, -math.inf, 3, 0.5):
    MULTI[f"norm_{_p}"] = _vector_norm(_p)
    MULTI[f"tnorm_{_p}"] = _norm(_p)

SINGLE = {
    "prod": lambda L, x, d, k: L.prod(x) if d is None else L.prod(x, d, keepdim=k),
    "max": lambda L, x, d, k: L.max(x) if d is None else tuple(L.max(x, d, keepdim=k)),
    "min": lambda L, x, d, k: L.min(x) if d is None else tuple(L.min(x, d, keepdim=k)),
    "argmax": lambda L, x, d, k: L.argmax(x, d, keepdim=k),
    "argmin": lambda L, x, d, k: L.argmin(x, d, keepdim=k),
    "aminmax": lambda L, x, d, k: tuple(L.aminmax(x, dim=d, keepdim=k)),
}
SCANS = {
    "cumsum": lambda L, x, d: L.cumsum(x, d),
    "cumprod": lambda L, x, d: L.cumprod(x, d),
    "cummax": lambda L, x, d: tuple(L.cummax(x, d)),
    "cummin": lambda L, x, d: tuple(L.cummin(x, d)),
    "softmax": lambda L, x, d: L.softmax(x, d),
    "log_softmax": lambda L, x, d: L.log_softmax(x, d),
    "softmax_f64": lambda L, x, d: L.softmax(x, d, dtype=L.float64),
}
SHAPE = (6, 7, 33)


def _inputs(dtype: str, layout: str, kind: str = "normal"):
    if layout == "contiguous":
        return pair(host(SHAPE, dtype, 1, kind), dtype)
    r, q = pair(host(SHAPE[::-1], dtype, 1, kind), dtype)
    return r.transpose(0, 2), q.transpose(0, 2)


def _compare(fn, r_in, q_in, dtype: str) -> None:
    try:
        expected = fn(torch, q_in)
    except (RuntimeError, NotImplementedError, TypeError, IndexError) as exc:
        with pytest.raises(Exception):  # noqa: B017 - torch's refusal, any exception type
            fn(t, r_in)
        return exc
    same(fn(t, r_in), expected, dtype)
    return None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), (1,)])
@pytest.mark.parametrize("op", sorted(MULTI))
def test_multi_dim_reductions_match_torch(op, dim, layout, dtype):
    r, q = _inputs(dtype, layout)
    for keepdim in (False, True) if dim is not None else (False,):
        _compare(lambda L, x, k=keepdim: MULTI[op](L, x, dim, k), r, q, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("op", sorted(SINGLE))
def test_single_dim_reductions_match_torch(op, dim, layout, dtype):
    r, q = _inputs(dtype, layout, "near_one" if op == "prod" else "normal")
    for keepdim in (False, True) if dim is not None else (False,):
        _compare(lambda L, x, k=keepdim: SINGLE[op](L, x, dim, k), r, q, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", sorted(SCANS))
def test_scans_and_softmax_match_torch(op, dim, layout, dtype):
    r, q = _inputs(dtype, layout, "near_one" if op == "cumprod" else "normal")
    if op == "cumsum" and dtype in ("float16", "bfloat16"):
        # Both runtimes round the running sum to the dtype at every step, torch in the
        # association of its parallel scan: compare within the bound of n roundings.
        eps = 2.0 ** (-11 if dtype == "float16" else -8)
        bound = SHAPE[dim] * eps * np.abs(to_np(q)).max()
        got, expected = t.cumsum(r, dim), torch.cumsum(q, dim)
        assert got.dtype is getattr(t, dtype) and got.device.type == "cuda"
        np.testing.assert_allclose(to_np(got), to_np(expected), rtol=0, atol=bound)
        return
    _compare(lambda L, x: SCANS[op](L, x, dim), r, q, dtype)


@pytest.mark.parametrize("shape", [(5, 10, 5), (50, 5), (7, 32), (4, 33), (3, 100), (2, 1000)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_reduced_scans_along_last_dim_in_torchs_order(op, dtype, shape):
    """float16/bfloat16 cumsum/cumprod along the last dim of several rows round as torch's
    kernel does (chunked Sklansky tree per row): the values agree exactly."""
    r, q = pair(host(shape, dtype, 5, "near_one" if op == "cumprod" else "normal"), dtype)
    got, expected = getattr(t, op)(r, -1), getattr(torch, op)(q, -1)
    np.testing.assert_array_equal(to_np(got), to_np(expected))


@pytest.mark.parametrize("shape,dim", [((1 << 22,), None), ((3, 200003), 1), ((200003, 3), 0),
                                       ((4096, 4096), 0), ((4096, 4096), 1), ((513, 1025), None)])
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "var", "norm_2", "logsumexp"])
def test_large_reductions_split_across_blocks(op, shape, dim):
    r, q = pair(host(shape, "float32", 3), "float32")
    fn = MULTI[op]
    same(fn(t, r, dim, False), fn(torch, q, dim, False), "float32")


def test_float32_sum_accuracy_is_torchs():
    """A float32 sum of 2^24 values accumulates in float32 in a blocked, tree-combined
    order: its error against the exact sum stays within a small factor of torch's."""
    arr = np.random.default_rng(11).random(1 << 24, dtype=np.float32) + 0.5
    exact = float(np.sum(arr, dtype=np.float64))
    r, q = pair(arr, "float32")
    err_r = abs(r.sum().item() - exact)
    err_q = abs(q.sum().item() - exact)
    assert err_r <= 4 * err_q + 4 * np.spacing(np.float32(exact)), (err_r, err_q)
    assert err_r / exact < 1e-5


@pytest.mark.parametrize("shape,dim", [((64, 8192), -1), ((3, 5000), 1), ((17, 100003), 1),
                                       ((300, 40), 0), ((5, 4, 3), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_softmax_shapes(shape, dim, dtype):
    r, q = pair(host(shape, dtype, 4) * 3, dtype)
    for op in ("softmax", "log_softmax"):
        same(SCANS[op](t, r, dim), SCANS[op](torch, q, dim), dtype)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("op", ["sum", "mean", "var", "std_c0", "var_mean", "std_mean",
                                "norm_2", "norm_1", "norm_inf", "tnorm_3", "all", "any",
                                "count_nonzero"])
def test_complex_reductions_match_torch(op, dtype):
    rng = np.random.default_rng(5)
    arr = rng.standard_normal(SHAPE) + 1j * rng.standard_normal(SHAPE)
    r, q = pair(arr, dtype)
    tol = {"complex64": "float32", "complex128": "float64"}[dtype]
    for dim in (None, 1, (0, 2)):
        same(MULTI[op](t, r, dim, False), MULTI[op](torch, q, dim, False), tol)
    same(t.prod(r[0, 0, :8]), torch.prod(q[0, 0, :8]), tol)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32"])
@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "max", "min", "argmax",
                                "argmin", "all", "any", "count_nonzero", "cumsum", "cummax"])
def test_small_integer_dtypes_match_torch(op, dtype):
    rng = np.random.default_rng(6)
    low = 0 if dtype == "uint8" else -100
    arr = rng.integers(low, 100, SHAPE)
    if op == "prod":
        arr = rng.integers(0 if dtype == "uint8" else -2, 3, SHAPE)
    r, q = pair(arr, dtype)
    for dim in (None, 1, -1):
        if op in SCANS:
            if dim is not None:
                same(SCANS[op](t, r, dim), SCANS[op](torch, q, dim), "int64")
            continue
        fn = MULTI.get(op) or SINGLE[op]
        if dim is None and op in ("argmax", "argmin", "max", "min"):
            same(fn(t, r, None, False), fn(torch, q, None, False), "int64")
            continue
        same(fn(t, r, dim, False), fn(torch, q, dim, False), "int64")


def test_argmax_first_occurrence_and_nan():
    arr = np.array([[1.0, 3.0, 3.0, 2.0], [np.nan, 5.0, np.nan, 1.0], [0, 0, 0, 0]])
    for dtype in ("float32", "float16", "float64"):
        r, q = pair(arr, dtype)
        for dim in (0, 1):
            same(tuple(t.max(r, dim)), tuple(torch.max(q, dim)), dtype)
            same(tuple(t.min(r, dim)), tuple(torch.min(q, dim)), dtype)
            same(t.argmax(r, dim), torch.argmax(q, dim), dtype, exact=True)
        same(t.argmax(r), torch.argmax(q), dtype, exact=True)
        same(t.amax(r, 1), torch.amax(q, 1), dtype)
        same(t.cummax(r, 1)[0], torch.cummax(q, 1)[0], dtype)
        same(t.cummax(r, 1)[1], torch.cummax(q, 1)[1], dtype, exact=True)


def test_empty_and_zero_dim_reductions():
    e = t.ones(0, 3, device="cuda")
    qe = torch.ones(0, 3, device="cuda")
    same(e.sum(), qe.sum(), "float32")
    same(e.sum(0), qe.sum(0), "float32")
    same(e.prod(0), qe.prod(0), "float32")
    same(e.mean(0), qe.mean(0), "float32")
    same(e.logsumexp(0), qe.logsumexp(0), "float32")
    same(e.all(0), qe.all(0), "bool")
    same(e.count_nonzero(0), qe.count_nonzero(0), "int64")
    with pytest.raises(IndexError):
        e.amax(0)
    with pytest.raises(RuntimeError):
        e.max()
    s, qs = pair(np.array(2.5), "float32")
    for name in ("sum", "mean", "amax", "prod", "logsumexp", "std_c0", "var"):
        fn = MULTI.get(name) or SINGLE[name]
        same(fn(t, s, 0, False), fn(torch, qs, 0, False), "float32")
    same(t.softmax(s, 0), torch.softmax(qs, 0), "float32")
    same(t.cumsum(s, 0), torch.cumsum(qs, 0), "float32")


def test_expanded_and_offset_views():
    r, q = pair(host((1, 7), "float32", 9), "float32")
    re, qe = r.expand(1000, 7), q.expand(1000, 7)
    same(re.sum(0), qe.sum(0), "float32")
    same(re.amax(1), qe.amax(1), "float32")
    same(re.argmax(0), qe.argmax(0), "float32", exact=True)
    same(re.var(0), qe.var(0), "float32")
    r, q = pair(host((50, 41), "float32", 10), "float32")
    same(r[3:, 5:].sum(1), q[3:, 5:].sum(1), "float32")
    same(r[1:, 1:].softmax(1), q[1:, 1:].softmax(1), "float32")
    same(r[:, 1::2].mean(0), q[:, 1::2].mean(0), "float32")


def test_outputs_stay_on_the_gpu_without_host_compute():
    x = t.randn(1000, 30).cuda()
    for r in (x.sum(0), x.amax(1), x.var(0), x.softmax(1), x.cumsum(0), x.argmax(1)):
        assert r.device.type == "cuda"


# -- backward on the GPU --------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "mean", "amax", "softmax", "log_softmax", "sum_all"])
def test_backward_on_gpu_matches_torch(op):
    arr = host((37, 19), "float32", 7)
    arr[3, 4] = arr[3, 5] = 9.0  # a tie for amax
    g = host((37, 19), "float32", 8)
    r, q = pair(arr, "float32")
    r.requires_grad_(True)
    q.requires_grad_(True)
    fns = {
        "sum": lambda L, x: L.sum(x, 1),
        "sum_all": lambda L, x: L.sum(x),
        "mean": lambda L, x: L.mean(x, 0, keepdim=True),
        "amax": lambda L, x: L.amax(x, 1),
        "softmax": lambda L, x: L.softmax(x, 1),
        "log_softmax": lambda L, x: L.log_softmax(x, 0),
    }
    out_r, out_q = fns[op](t, r), fns[op](torch, q)
    gr, gq = pair(g[tuple(slice(0, s) for s in out_q.shape)] if out_q.dim() == 2 else
                  g.reshape(-1)[: out_q.numel()].reshape(tuple(out_q.shape)), "float32")
    out_r.backward(gr)
    out_q.backward(gq)
    assert r.grad.device.type == "cuda"
    same(r.grad, q.grad, "float32")
