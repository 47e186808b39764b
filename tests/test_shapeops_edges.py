"""Edge cases of the issue #10 ops, each run on refimpl and on torch (the oracle) with
the same numpy inputs: results (values, dtypes, shapes) or exception types and messages
must agree. They reach what op_db's samples do not: 2-D coordinates, empty and 0-dim
inputs, infinities and NaNs, broadcasting batches, negative dims and indices."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
Y = rng.standard_normal((3, 5))
X2 = np.cumsum(rng.uniform(0.1, 1, (3, 5)), 1)
Z = rng.standard_normal((4,))
C3 = np.cumsum(rng.uniform(0.1, 1, 3))
A4 = rng.standard_normal((2, 1, 3, 4))
B4 = rng.standard_normal((5, 2, 4))

CASES = {
    'trapz_x2d': lambda m: m.trapezoid(m.tensor(Y), m.tensor(X2)),
    'trapz_x2d_dim0': lambda m: m.trapezoid(m.tensor(Y), m.tensor(X2), dim=0),
    'cumtrapz_dx': lambda m: m.cumulative_trapezoid(m.tensor(Y), dx=0.3, dim=0),
    'cumtrapz_x2d': lambda m: m.cumulative_trapezoid(m.tensor(Y), m.tensor(X2)),
    'trapz_int': lambda m: m.trapezoid(m.tensor([1,2,3])),
    'trapz_bcast_x': lambda m: m.trapezoid(m.tensor(Y), m.tensor(X2[:1])),
    'diff_big_n': lambda m: m.diff(m.tensor(Y), n=7),
    'diff_int': lambda m: m.diff(m.tensor([1,5,2]), n=2),
    'diff_prepend_bad': lambda m: m.diff(m.tensor(Y), prepend=m.tensor(Z)),
    'grad_coords_2d': lambda m: m.gradient(m.tensor(Y), spacing=(m.tensor(C3), m.tensor(X2[0]))),
    'grad_int': lambda m: m.gradient(m.tensor([[1,4,9],[2,3,8]]), dim=1),
    'grad_scalar_list': lambda m: m.gradient(m.tensor(Y), spacing=[2.0, 3.0]),
    'grad_dim_tuple': lambda m: m.gradient(m.tensor(Y), spacing=2.0, dim=(1,)),
    'cov_1d': lambda m: m.cov(m.tensor(Z)),
    'cov_int': lambda m: m.cov(m.tensor([[1,2,4],[3,1,0]])),
    'cov_single_obs': lambda m: m.cov(m.tensor([[1.],[2.]])),
    'corr_const': lambda m: m.corrcoef(m.tensor([[1.,1.,1.],[1.,2.,3.]])),
    'quant_keepdim_none': lambda m: m.quantile(m.tensor(Y), m.tensor([0.2,0.9],dtype=m.float64), keepdim=True),
    'quant_0d': lambda m: m.quantile(m.tensor(2.5, dtype=m.float64), 0.3),
    'quant_neg_dim': lambda m: m.quantile(m.tensor(Y), 0.7, dim=-2, keepdim=True),
    'nanq_allnan': lambda m: m.nanquantile(m.tensor([[np.nan,np.nan],[1.,2.]]), 0.5, dim=1),
    'nanq_nearest': lambda m: m.nanquantile(m.tensor([1.,np.nan,3.,4.,2.5]), m.tensor([0.125,0.375,0.625],dtype=m.float32), interpolation='nearest'),
    'hist_tensor_bins': lambda m: m.histogram(m.tensor(Z), m.tensor([-1.,0.,0.5,2.],dtype=m.float64)),
    'hist_weight': lambda m: m.histogram(m.tensor(Y), 4, weight=m.tensor(np.abs(Y)), density=True),
    'hist_f32': lambda m: m.histogram(m.tensor(Y.astype(np.float32)), 5, range=(-1., 1.)),
    'hist_const': lambda m: m.histogram(m.tensor([1.,1.,1.]), 4),
    'histdd_range': lambda m: m.histogramdd(m.tensor(Y[:, :2]), [2,3], range=[-1.,1.,-2.,2.]),
    'histdd_int_bins': lambda m: m.histogramdd(m.tensor(Y[:, :2]), 3),
    'bincount_u8': lambda m: m.bincount(m.tensor([0,3,3,1],dtype=m.uint8), m.tensor([1.,2.,3.,4.],dtype=m.float32)),
    'bincount_intw': lambda m: m.bincount(m.tensor([0,3,3]), m.tensor([1,2,3])),
    'cdist_p0': lambda m: m.cdist(m.tensor(Y), m.tensor(Y[:2]), p=0.),
    'cdist_p_half': lambda m: m.cdist(m.tensor(Y), m.tensor(Y[:2]), p=0.5),
    'cdist_empty': lambda m: m.cdist(m.tensor(Y[:0]), m.tensor(Y[:2])),
    'cdist_bcast': lambda m: m.cdist(m.tensor(A4), m.tensor(B4)),
    'logcse_empty': lambda m: m.logcumsumexp(m.tensor(Y[:0]), 0),
    'logcse_inf': lambda m: m.logcumsumexp(m.tensor([-np.inf, -np.inf, 1., np.inf, 2.]), 0),
    'logcse_nan': lambda m: m.logcumsumexp(m.tensor([1., np.nan, 1.]), 0),
    'kron_0d': lambda m: m.kron(m.tensor(2.), m.tensor([[1.,2.]])),
    'kron_int_float': lambda m: m.kron(m.tensor([1,2]), m.tensor([0.5])),
    'block_diag_empty': lambda m: m.block_diag(m.tensor(Y[:0]), m.tensor([1.,2.])),
    'combos_r3': lambda m: m.combinations(m.tensor([1,2,3,4]), 3, True),
    'rot90_neg': lambda m: m.rot90(m.tensor(Y), -3, [1, 0]),
    'sum_to_size_lead': lambda m: m.tensor(Y).sum_to_size(5),
    'unravel_neg': lambda m: m.unravel_index(m.tensor([-1, -7]), (2,3)),
    'unravel_2d': lambda m: m.unravel_index(m.tensor([[1,5],[2,3]]), (2,3)),
    'unravel_int': lambda m: m.unravel_index(m.tensor(4), m.Size([2, 3])),
    'tril_neg_off': lambda m: m.tril_indices(4, 3, -2),
    'triu_big_off': lambda m: m.triu_indices(3, 3, 5),
    'diagflat_neg': lambda m: m.diagflat(m.tensor([1,2,3]), -2),
    'vsplit_list': lambda m: m.vsplit(m.tensor(Y), [1, 2, 9]),
    'put_acc_dup': lambda m: m.put(m.zeros(5), m.tensor([1,1,-1]), m.tensor([1.,2.,3.]), True),
    'fill_bool': lambda m: m.fill(m.zeros(3, dtype=m.bool), 2.5),
    'fill_complex_to_float': lambda m: m.fill(m.zeros(2), 1+2j),
    'select_scatter_neg_dim': lambda m: m.select_scatter(m.tensor(Y), m.tensor(Y[:,0]*0), -1, 2),
    'slice_scatter_neg': lambda m: m.slice_scatter(m.tensor(Y), m.zeros(3,2,dtype=m.float64), 1, -2),
    'diag_scatter_off': lambda m: m.diagonal_scatter(m.tensor(Y), m.zeros(2, dtype=m.float64), -1),
    'expand_copy_neg1': lambda m: m.expand_copy(m.tensor(Z), (2, -1)),
    'squeeze_copy_tuple': lambda m: m.squeeze_copy(m.zeros(1,3,1), (0, 2)),
    'unbind_copy_neg': lambda m: m.unbind_copy(m.tensor(Y), -1),
    'as_strided_copy_off': lambda m: m.as_strided_copy(m.tensor(Z), (2,), (2,), 1),
}


def _run(m, call):
    try:
        r = call(m)
    except Exception as e:  # noqa: BLE001 - the exception is the result
        return "raises", f"{type(e).__name__}: {e}"
    return "returns", [np.asarray(p.detach().numpy()) for p in _flat(r)]


def _flat(r) -> list:
    if isinstance(r, (tuple, list)):
        return [x for part in r for x in _flat(part)]
    return [r]


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_torch(name):
    got_kind, got = _run(t, CASES[name])
    want_kind, want = _run(torch, CASES[name])
    assert got_kind == want_kind, (got, want)
    if got_kind == "raises":
        assert got == want
        return
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, equal_nan=True)
