"""CUDA kernels of the indexing and data-movement ops, compared with torch on the same GPU:
every op runs on refimpl CUDA tensors and on torch CUDA tensors built from the same data
(contiguous and non-contiguous, every listed dtype) and the results must agree, exactly
for data movement and integer accumulation, within rounding for float accumulation.
Skipped where there is no GPU or no CUDA build of torch."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()),
    reason="needs a CUDA device and a CUDA build of torch")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "bool"]


@pytest.fixture(autouse=True)
def _collect():
    """Free each test's CUDA tensors held in reference cycles (exception tracebacks)
    before the next test, so that later memory-statistics tests start clean."""
    yield
    gc.collect()
RNG = np.random.default_rng(0)


def data(shape, dtype: str) -> np.ndarray:
    """Deterministic values fitting ``dtype`` (small integers, exact in half types)."""
    vals = RNG.integers(-8, 9, size=shape)
    if dtype == "bool":
        return vals > 0
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        return (vals / 4).astype(np.float64)
    return vals.astype(np.int64)


def make(lib, arr: np.ndarray, dtype: str, noncontig: bool = False):
    """``arr`` as a CUDA tensor of ``lib`` (refimpl or torch); with ``noncontig`` the
    same values seen through a transposed buffer."""
    dt = getattr(lib, dtype)
    if noncontig and arr.ndim >= 2 and arr.size:
        swapped = np.swapaxes(arr, 0, 1)
        x = lib.tensor(swapped.reshape(-1).tolist(), dtype=dt, device="cuda").reshape(
            swapped.shape).transpose(0, 1)
        assert not x.is_contiguous()
        return x
    return lib.tensor(arr.reshape(-1).tolist(), dtype=dt, device="cuda").reshape(arr.shape)


def host(x) -> np.ndarray:
    """A CUDA result of either library as a numpy array (float64, int64 or bool)."""
    if x.dtype in (t.bool, torch.bool):
        return np.asarray(x.cpu().tolist(), dtype=bool)
    if x.is_floating_point():
        return np.asarray(x.double().cpu().tolist(), dtype=np.float64)
    return np.asarray(x.long().cpu().tolist(), dtype=np.int64)


def same(a, b, exact: bool = True) -> None:
    """refimpl result ``a`` equals torch result ``b`` (shape, dtype name and values)."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, exact)
        return
    assert a.is_cuda and tuple(a.shape) == tuple(b.shape)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    ha, hb = host(a), host(b)
    if exact:
        np.testing.assert_array_equal(ha, hb)
    else:
        np.testing.assert_allclose(ha, hb, rtol=2e-2, atol=2e-2)


def both(fn, *arrays, dtype: str = "float32", noncontig: bool = False, index_arrays=(),
         exact: bool = True):
    """Run ``fn(lib, *tensors, *index_tensors)`` on refimpl and torch and compare."""
    outs = []
    for lib in (t, torch):
        ts = [make(lib, a, dtype, noncontig) for a in arrays]
        idx = [lib.tensor(np.asarray(i).reshape(-1).tolist(),
                          dtype=lib.bool if np.asarray(i).dtype == bool else lib.int64,
                          device="cuda").reshape(np.asarray(i).shape) for i in index_arrays]
        outs.append(fn(lib, *ts, *idx))
    same(outs[0], outs[1], exact)
    return outs


# -- gather-style ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noncontig", [False, True])
def test_index_with_tensors(dtype, noncontig):
    x = data((5, 6, 3), dtype)
    i0 = np.array([[0, -1], [2, 4]])
    i1 = np.array([1, -6])
    both(lambda lib, a, i, j: a[i, j], x, dtype=dtype, noncontig=noncontig,
         index_arrays=(i0, i1))
    both(lambda lib, a, i: a[:, i], x, dtype=dtype, noncontig=noncontig, index_arrays=(i1,))
    both(lambda lib, a, i, j: a[i, :, j[:1]], x, dtype=dtype, noncontig=noncontig,
         index_arrays=(np.array([3, 0]), np.array([2])))
    both(lambda lib, a, m: a[m], x, dtype=dtype, noncontig=noncontig,
         index_arrays=(data((5,), "bool"),))
    both(lambda lib, a, m: a[m], x, dtype=dtype, noncontig=noncontig,
         index_arrays=(data((5, 6), "bool"),))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put_and_accumulate(dtype):
    x = data((6, 4), dtype)
    v = data((3, 4), dtype)
    idx = np.array([1, -1, 1])  # duplicates: accumulate sums them

    def put(lib, a, vals, i):
        return a.index_put((i,), vals, accumulate=True)

    both(put, x, v, dtype=dtype, index_arrays=(idx,), exact=dtype not in ("float16",
                                                                           "bfloat16"))

    def setitem(lib, a, vals, i):
        a = a.clone()
        a[i] = vals[0]
        return a

    both(setitem, x, v, dtype=dtype, index_arrays=(np.array([0, 3]),))

    def setmask(lib, a, vals, m):
        a = a.clone()
        a[m] = vals[0, 0]
        return a

    both(setmask, x, v, dtype=dtype, index_arrays=(data((6, 4), "bool"),))


def test_index_put_accumulate_integers_exact_with_many_duplicates():
    for lib in (t, torch):
        base = lib.zeros(7, dtype=lib.int64, device="cuda")
        idx = lib.tensor([i % 7 for i in range(7000)], device="cuda")
        vals = lib.ones(7000, dtype=lib.int64, device="cuda")
        out = base.index_put_((idx,), vals, accumulate=True)
        assert out.cpu().tolist() == [1000] * 7


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noncontig", [False, True])
def test_gather_take_index_select(dtype, noncontig):
    x = data((4, 5), dtype)
    gi = RNG.integers(0, 4, size=(3, 5))
    both(lambda lib, a, i: a.gather(0, i), x, dtype=dtype, noncontig=noncontig,
         index_arrays=(gi,))
    both(lambda lib, a, i: lib.gather(a, 1, i), x, dtype=dtype, noncontig=noncontig,
         index_arrays=(RNG.integers(0, 5, size=(4, 2)),))
    both(lambda lib, a, i: a.index_select(1, i), x, dtype=dtype, noncontig=noncontig,
         index_arrays=(np.array([4, 0, 0, 2]),))
    both(lambda lib, a, i: a.take(i), x, dtype=dtype, noncontig=noncontig,
         index_arrays=(np.array([[0, -1], [7, 19]]),))
    both(lambda lib, a, i: lib.take_along_dim(a, i, 1), x, dtype=dtype, noncontig=noncontig,
         index_arrays=(RNG.integers(0, 5, size=(4, 3)),))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_family(dtype):
    x = data((4, 5), dtype)
    src = data((4, 5), dtype)
    perm = np.stack([RNG.permutation(4) for _ in range(5)], axis=1)[:3]  # no duplicates
    both(lambda lib, a, s, i: a.scatter(0, i, s), x, src, dtype=dtype, index_arrays=(perm,))
    both(lambda lib, a, s, i: a.scatter(0, i, 1), x, src, dtype=dtype, index_arrays=(perm,))
    dup = RNG.integers(0, 4, size=(4, 5))
    exact = dtype not in ("float16", "bfloat16")
    both(lambda lib, a, s, i: a.scatter_add(0, i, s), x, src, dtype=dtype,
         index_arrays=(dup,), exact=exact)
    idx = np.array([0, 2, 2])
    both(lambda lib, a, s, i: a.index_add(0, i, s[:3]), x, src, dtype=dtype,
         index_arrays=(idx,), exact=exact)
    both(lambda lib, a, s, i: a.index_copy(1, i, s[:, :2]), x, src, dtype=dtype,
         index_arrays=(np.array([4, 1]),))
    both(lambda lib, a, s, i: a.index_fill(1, i, 0), x, src, dtype=dtype,
         index_arrays=(np.array([-1, 1]),))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_and_index_reduce(dtype, reduce, include_self):
    x = data((5, 3), dtype)
    src = data((6, 3), dtype)
    idx = RNG.integers(0, 5, size=(6, 3))
    exact = dtype == "int64" or reduce in ("amax", "amin")
    if dtype in ("float16", "bfloat16") and reduce == "prod":
        src = np.sign(src) * 0.5 + (src == 0)  # products stay exact in half types
    both(lambda lib, a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
         x, src, dtype=dtype, index_arrays=(idx,), exact=exact)
    if reduce != "sum":
        both(lambda lib, a, s, i: a.index_reduce(0, i, s, reduce, include_self=include_self),
             x, src, dtype=dtype, index_arrays=(np.array([0, 4, 0, 2, 4, 4]),), exact=exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill(dtype):
    x = data((3, 4), dtype)
    m = data((3, 4), "bool")
    both(lambda lib, a, mm: a.masked_fill(mm, 1), x, dtype=dtype, index_arrays=(m,))
    both(lambda lib, a, mm: a.masked_fill(mm[0], lib.tensor(0, dtype=a.dtype, device="cuda")),
         x, dtype=dtype, noncontig=True, index_arrays=(m,))


def _fails_with_device_assert(stmt: str) -> str:
    """Run ``stmt`` (a CUDA index op) and a synchronization in a fresh interpreter: a
    device-side assert leaves the context unusable, so it cannot run in this process."""
    import subprocess
    import sys

    code = ("import refimpl as t\nx = t.arange(6, device='cuda')\n"
            f"y = {stmt}\n"
            "try:\n    t.cuda.synchronize()\nexcept RuntimeError as e:\n"
            "    print('ERR', e)\n    raise SystemExit(0)\nprint('NO ERROR')\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=120)
    return proc.stdout + proc.stderr


@pytest.mark.parametrize("stmt", [
    "x[t.tensor([7], device='cuda')]",
    "x.view(2, 3).gather(1, t.tensor([[0], [3]], device='cuda'))",
    "x.index_select(0, t.tensor([-7], device='cuda'))",
    "x.take(t.tensor([6], device='cuda'))",
    "x.index_put((t.tensor([-7], device='cuda'),), t.tensor(1, device='cuda'))",
    "x.scatter_add(0, t.tensor([-1], device='cuda'), x)",
    "x.index_copy(0, t.tensor([9], device='cuda'), x[:1])",
    "x[t.tensor([11])]",
])
def test_index_out_of_range_is_a_device_side_assert(stmt):
    out = _fails_with_device_assert(stmt)
    assert "ERR CUDA error: device-side assert triggered" in out, out
    assert "index out of bounds" in out  # the assertion the kernel printed


def test_in_range_indices_need_no_assert():
    out = _fails_with_device_assert("x[t.tensor([5], device='cuda')]")
    assert "NO ERROR" in out, out


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_tensors(dtype):
    x = data((0, 3), dtype)
    both(lambda lib, a, i: a[i], x, dtype=dtype, index_arrays=(np.zeros(0, np.int64),))
    both(lambda lib, a, i: a.index_select(1, i), x, dtype=dtype, index_arrays=(np.array([1]),))
    both(lambda lib, a: lib.cat([a, a]), x, dtype=dtype)
    y = data((4, 3), dtype)
    both(lambda lib, a, i: a.gather(0, i), y, dtype=dtype,
         index_arrays=(np.zeros((0, 3), np.int64),))
    both(lambda lib, a, i: a.index_put((i,), a[:0], accumulate=True), y, dtype=dtype,
         index_arrays=(np.zeros(0, np.int64),))


# -- data movement -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noncontig", [False, True])
def test_shape_ops(dtype, noncontig):
    x = data((4, 3), dtype)
    y = data((4, 3), dtype)
    kw = {"dtype": dtype, "noncontig": noncontig}
    both(lambda lib, a, b: lib.cat([a, b], 1), x, y, **kw)
    both(lambda lib, a, b: lib.cat([a, b[:1], lib.tensor([], dtype=a.dtype, device="cuda")]),
         x, y, **kw)
    both(lambda lib, a, b: lib.stack([a, b], 1), x, y, **kw)
    both(lambda lib, a, b: (lib.hstack([a, b]), lib.vstack([a, b]), lib.dstack([a, b])),
         x, y, **kw)
    both(lambda lib, a: a.flip(0, 1), x, **kw)
    both(lambda lib, a: (a.roll(1, 0), a.roll((-2, 5), (1, 0)), a.roll(3)), x, **kw)
    both(lambda lib, a: (a.repeat(2, 1), a.repeat(2, 1, 3), a.tile((2,))), x, **kw)
    both(lambda lib, a: (a.tril(), a.triu(1), a.tril(-1)), x, **kw)
    both(lambda lib, a: (lib.diag(a), lib.diag(a[0], 1), lib.diag_embed(a)), x, **kw)
    both(lambda lib, a: (a.repeat_interleave(2, 0), lib.fliplr(a), lib.flipud(a)), x, **kw)


def test_cat_promotes_dtypes():
    both(lambda lib, a: lib.cat([a, a.to(lib.float64), a.to(lib.int64)]),
         data((2, 2), "float32"), dtype="float32")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
def test_range_factories(dtype):
    outs = []
    for lib in (t, torch):
        dt = getattr(lib, dtype)
        res = [lib.arange(0, 17, 3, dtype=dt, device="cuda"), lib.eye(3, 4, dtype=dt,
                                                                      device="cuda"),
               lib.full((2, 3), 5, dtype=dt, device="cuda"), lib.zeros(2, dtype=dt, device="cuda")]
        if dtype == "int64":
            res += [lib.linspace(0, 10, 4, dtype=dt, device="cuda"),
                    lib.linspace(-7, 3, 7, dtype=dt, device="cuda")]
        else:
            res += [lib.arange(-1.0, 1.0, 0.25, dtype=dt, device="cuda"),
                    lib.linspace(-2, 3, 11, dtype=dt, device="cuda"),
                    lib.logspace(0, 2, 5, dtype=dt, device="cuda")]
        outs.append(res)
    same(outs[0], outs[1], exact=dtype == "int64")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64"])
def test_space_factories_round_as_torch(dtype):
    """linspace/logspace of a half or integer dtype agree exactly: torch's CUDA kernel rounds
    every intermediate to the half type, and an integer space truncates its bounds, steps
    in float and truncates each value; one step is a fill of the start (or base ** start)."""
    grid = [(-2.0, 50, 50), (0, 1, 11), (1.5, -7.25, 7), (10, 3, 4), (0.1, 0.7, 6), (-5, 5, 51),
            (4, 50, 1), (-3, 0, 2)]
    for fn in ("linspace", "logspace"):
        outs = [[getattr(lib, fn)(a, b, n, dtype=getattr(lib, dtype), device="cuda")
                 for a, b, n in grid if fn == "linspace" or abs(a) + abs(b) < 12]
                for lib in (t, torch)]
        same(outs[0], outs[1])
    outs = [lib.logspace(0, 6, 7, base=2, dtype=getattr(lib, dtype), device="cuda")
            for lib in (t, torch)]
    same(outs[0], outs[1])


# -- backward on the GPU -----------------------------------------------------------------------

def test_backward_of_gather_index_cat_index_select_on_cuda():
    grads = []
    for lib in (t, torch):
        x = lib.tensor(data((4, 3), "float32").tolist(), device="cuda", requires_grad=True)
        i = lib.tensor([[0, 1, 2], [3, 3, 0]], device="cuda")
        parts = [x.gather(0, i), x[lib.tensor([1, 1, -1], device="cuda")],
                 lib.cat([x, x[:1]]), x.index_select(1, lib.tensor([2, 2], device="cuda"))]
        for k, p in enumerate(parts):
            w = lib.arange(p.numel(), dtype=lib.float32, device="cuda").reshape(p.shape)
            (p * w).sum().backward()
            grads.append(x.grad.clone())
            x.grad = None
    n = len(grads) // 2
    for a, b in zip(grads[:n], grads[n:]):
        assert a.is_cuda
        same(a, b)


# -- compaction and sorting --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noncontig", [False, True])
def test_nonzero_masked_select_masked_scatter(dtype, noncontig):
    x = data((5, 4), dtype)
    m = data((5, 4), "bool")
    kw = {"dtype": dtype, "noncontig": noncontig}
    both(lambda lib, a: (a.nonzero(), lib.argwhere(a), a.nonzero(as_tuple=True)), x, **kw)
    both(lambda lib, a, mm: a.masked_select(mm), x, index_arrays=(m,), **kw)
    both(lambda lib, a, mm: a.masked_select(mm[0]), x, index_arrays=(m,), **kw)
    both(lambda lib, a, s, mm: a.masked_scatter(mm, s), x, data((5, 4), dtype),
         index_arrays=(m,), **kw)
    both(lambda lib, a: a[:0].nonzero(), x, **kw)


def test_repeat_interleave_with_tensor_repeats():
    both(lambda lib, a, r: (a.repeat_interleave(r, 0), lib.repeat_interleave(r)),
         data((4, 2), "float32"), index_arrays=(np.array([2, 0, 3, 1]),))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("noncontig", [False, True])
def test_sort_argsort_stable(dtype, noncontig):
    x = data((6, 37), dtype)  # many ties: stability decides the indices
    kw = {"dtype": dtype, "noncontig": noncontig}
    both(lambda lib, a: lib.sort(a, dim=1, stable=True), x, **kw)
    both(lambda lib, a: lib.sort(a, dim=0, descending=True, stable=True), x, **kw)
    both(lambda lib, a: a.argsort(dim=-1, stable=True), x, **kw)
    both(lambda lib, a: lib.sort(a.flatten(), stable=True), x, **kw)


def test_sort_large_rows_and_nan():
    v = RNG.standard_normal(5000)
    v[[3, 77, 4000]] = np.nan
    both(lambda lib, a: lib.sort(a, stable=True), v, dtype="float32")
    both(lambda lib, a: lib.sort(a, descending=True, stable=True), v, dtype="float64")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
def test_topk_kthvalue_median_mode(dtype):
    x = RNG.permutation(120).reshape(5, 24).astype(np.float64) - 60  # no ties
    if dtype == "int64":
        x = x.astype(np.int64)
    both(lambda lib, a: (a.topk(5), a.topk(3, dim=0, largest=False)), x, dtype=dtype)
    both(lambda lib, a: (a.kthvalue(4), a.kthvalue(2, 0, keepdim=True)), x, dtype=dtype)
    both(lambda lib, a: (a.median(), a.median(1), a.nanmedian(0)), x, dtype=dtype)
    # one most frequent value per row (torch's CUDA kernel leaves ties unspecified)
    rows = RNG.permutation(120).reshape(4, 30)[:, :27] - 60
    modes = np.concatenate([rows, np.repeat(rows[:, :1], 3, axis=1)], axis=1)
    both(lambda lib, a: a.mode(1).values, modes, dtype=dtype)


def test_median_with_nan():
    v = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, 1.0, 0.0, 4.0]])
    both(lambda lib, a: (a.median(1), a.nanmedian(1), a.median()), v, dtype="float32")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_unique_and_unique_consecutive(dtype):
    x = data((6, 5), dtype)
    both(lambda lib, a: lib.unique(a, return_inverse=True, return_counts=True), x, dtype=dtype)
    both(lambda lib, a: lib.unique_consecutive(a.flatten().sort().values, return_inverse=True,
                                               return_counts=True), x, dtype=dtype)
    both(lambda lib, a: lib.unique_consecutive(a, return_counts=True), x, dtype=dtype)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize(right):
    bd = np.sort(data((3, 7), "float32"), axis=1)
    v = data((3, 4), "float32")
    both(lambda lib, b, x: lib.searchsorted(b, x, right=right), bd, v)
    both(lambda lib, b, x: lib.bucketize(x, b[0], right=right, out_int32=True), bd, v)
    both(lambda lib, b, x, s: lib.searchsorted(b, x, sorter=s), bd[:1].reshape(7) * 0 +
         np.arange(7)[::-1], v[0], index_arrays=(np.arange(7)[::-1].copy(),))


def test_histc():
    v = RNG.standard_normal(1000)
    both(lambda lib, a: lib.histc(a, bins=10, min=-2, max=2), v, dtype="float32")


# -- in-place forms, reduce=, and the device-side checks of the other ops ----------------------

@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16"])
def test_inplace_forms_write_self(dtype):
    x = data((4, 5), dtype)
    src = data((4, 5), dtype)
    perm = np.stack([RNG.permutation(4) for _ in range(5)], axis=1)

    def ops(lib, a, s, i):
        a = a.clone()
        v0 = a._version
        a.scatter_(0, i, s)
        a.index_add_(1, i[0, :2], s[:, :2])
        a.masked_fill_(s > 0, 3)
        a.index_put_((i[0],), s[0], accumulate=True)
        a[i[1]] = s[1]
        assert a._version > v0
        return a

    both(ops, x, src, dtype=dtype, index_arrays=(perm,), noncontig=True,
         exact=dtype != "bfloat16")


def test_scatter_reduce_argument_and_noncontiguous_index():
    x = data((6, 4), "float64")
    src = data((6, 4), "float64")
    idx = RNG.integers(0, 6, size=(4, 6)).T  # a transposed (non-contiguous) index
    both(lambda lib, a, s, i: (a.scatter(0, i.contiguous(), s, reduce="add"),
                               a.scatter(0, i.contiguous(), s, reduce="multiply"),
                               a.scatter_add(0, i, s), a.gather(0, i)),
         x, src, dtype="float64", index_arrays=(idx.copy(),), exact=False)


def test_index_put_accumulate_float_many_duplicates():
    v = RNG.standard_normal(20000)
    i = RNG.integers(-10, 10, size=20000)
    both(lambda lib, vals, ii: lib.zeros(10, dtype=vals.dtype, device="cuda").index_put_(
        (ii,), vals, accumulate=True), v, dtype="float64", index_arrays=(i,), exact=False)


def test_recorded_checks_raise_at_the_next_sync():
    x = t.arange(6, device="cuda")
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in "
                                           "mask"):
        x.masked_scatter(x > 1, t.zeros(2, dtype=t.int64, device="cuda")).cpu()
    assert x.cpu().tolist() == list(range(6))


def test_cpu_index_tensors_index_a_cuda_tensor():
    outs = []
    for lib in (t, torch):
        x = lib.arange(12, device="cuda").reshape(3, 4)
        i = lib.tensor([2, 0])
        m = lib.tensor([True, False, True])
        y = x.clone()
        y[i] = 0
        outs.append((x[i], x[m], x[:, i], y))
    same(outs[0], outs[1])
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same "
                                           "device as the indexed tensor"):
        t.arange(3)[t.tensor([1], device="cuda")]


def test_sorting_edge_shapes():
    both(lambda lib, a: (lib.sort(a[:0]), lib.sort(a[:, :1], stable=True), a[:0].argsort(),
                         lib.unique(a[:0]), a[:0].nonzero()), data((3, 4), "float32"))
    both(lambda lib, a: (lib.sort(a[0, 0]), a[0, 0].topk(1), a[0, 0].kthvalue(1),
                         a[0, 0].nonzero()), data((3, 4), "float32"))
    v = data((3, 2049), "float16")  # rows just over one shared-memory tile
    v[1, 5] = np.nan
    both(lambda lib, a: lib.sort(a, dim=1, descending=True, stable=True), v, dtype="float16")
    both(lambda lib, a: lib.sort(a, dim=0, stable=True), v, dtype="float16", noncontig=True)


def test_backward_of_views_on_cuda():
    """select, diagonal, unfold (overlapping windows: summed) and as_strided backward."""
    grads = []
    for lib in (t, torch):
        x = lib.tensor(data((4, 4), "float64").tolist(), dtype=lib.float64, device="cuda",
                       requires_grad=True)
        for f in (lambda a: a[1], lambda a: a.diagonal(1), lambda a: a.unfold(0, 2, 1),
                  lambda a: a.as_strided((2, 3), (4, 1), 2), lambda a: a[:, 1:3].flip(0)):
            p = f(x)
            w = lib.arange(p.numel(), dtype=lib.float64, device="cuda").reshape(p.shape)
            (p * w).sum().backward()
            grads.append(x.grad.clone())
            x.grad = None
    n = len(grads) // 2
    for a, b in zip(grads[:n], grads[n:]):
        same(a, b)
