"""Differential tests of the shape ops against torch (spec TENSOR-012, TENSOR-306,
TENSOR-309): values, dtype promotion, fresh (non-aliasing) outputs, autograd nodes,
gradients and error messages; and the broadcasting helpers, which return views.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, randint, randn, torch

import refimpl as t

X = randn((3, 4, 5), seed=21)
M = randn((3, 4), seed=22)
N = randn((2, 4), seed=23)
V = randn((5,), seed=24)
S = In(1.5)
IM = randint(-5, 5, (3, 4), seed=25)
E0 = In(np.zeros(0))


def _node(x):
    return None if x.grad_fn is None else type(x.grad_fn).__name__


def _run_both(fn, inputs, requires_grad):
    out = []
    for m in (t, torch):
        args = [x.build(m, requires_grad) if isinstance(x, In) else
                [e.build(m, requires_grad) for e in x] if isinstance(x, list) else x
                for x in inputs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append((args, fn(m, *args)))
    return out


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _facts(out, args) -> list:
    firsts = [a for a in args if hasattr(a, "untyped_storage")]
    ptr = firsts[0].untyped_storage().data_ptr() if firsts else None
    return [(tuple(o.shape), tuple(o.stride()), o.storage_offset(), str(o.dtype),
             o._base is not None, o.untyped_storage().data_ptr() == ptr, _node(o))
            for o in _flat(out)]


def check_shape(fn, *inputs, grad: bool = True):
    """``check`` plus strides, offsets, aliasing and autograd node of every output."""
    res = check(fn, *inputs, grad=grad)
    assert not isinstance(res, Exception), res
    for rg in ((True, False) if grad else (False,)):
        (ra, r), (ta, T) = _run_both(fn, inputs, rg)
        assert _facts(r, ra) == _facts(T, ta)


CASES = {
    "cat": (lambda m, a, b: m.cat([a, b]), M, N),
    "cat_dim1": (lambda m, a, b: m.cat((a, b.t()[:3]), 1), M, N),
    "cat_neg_dim": (lambda m, a: m.cat([a, a], -1), X),
    "cat_one": (lambda m, a: m.cat([a]), M),
    "cat_promote_int_float": (lambda m, a, b: m.cat([a, b]), IM, M),
    "cat_promote_bool": (lambda m, a: m.cat([a, a > 0]), IM),
    "cat_promote_int8_uint8": (lambda m: m.cat([m.tensor([1, 2], dtype=m.int8),
                                                m.tensor([1], dtype=m.uint8)]),),
    "cat_skips_empty_1d": (lambda m, a, e: m.cat([e, a, e], 1), M, E0),
    "cat_empty_promotes": (lambda m, a: m.cat([a, m.zeros(0, dtype=m.float64)]), V),
    "cat_all_empty": (lambda m, e: m.cat([e, e], 1), E0),
    "cat_empty_rows": (lambda m, a: m.cat([a[:0], a]), M),
    "concat": (lambda m, a, b: m.concat([a, b], dim=0), M, N),
    "concatenate_axis": (lambda m, a: m.concatenate([a, a], axis=1), M),
    "cat_axis_kw": (lambda m, a: m.cat([a, a], axis=1), M),
    "stack": (lambda m, a: m.stack([a, a * 2]), M),
    "stack_last": (lambda m, a: m.stack([a, a], -1), X),
    "stack_promote": (lambda m, a, b: m.stack([a, b]), M, IM),
    "stack_scalars": (lambda m, s: m.stack([s, s * 2]), S),
    "hstack": (lambda m, a, b: m.hstack([a, b.t()[:3]]), M, N),
    "hstack_1d": (lambda m, v: m.hstack([v, v]), V),
    "hstack_scalars": (lambda m, s: m.hstack([s, s]), S),
    "vstack": (lambda m, a, b: m.vstack([a, b]), M, N),
    "vstack_1d": (lambda m, v: m.vstack([v, v]), V),
    "row_stack": (lambda m, v: m.row_stack([v, v]), V),
    "dstack": (lambda m, v: m.dstack([v, v]), V),
    "column_stack": (lambda m, v, a: m.column_stack([v[:3], a]), V, M),
    "flip": (lambda m, x: x.flip(0, 2), X),
    "flip_list": (lambda m, x: m.flip(x, [-1]), X),
    "flip_none": (lambda m, x: x.flip(()), X),
    "flip_scalar": (lambda m, s: s.flip(0), S),
    "flip_noncontig": (lambda m, x: x.transpose(0, 2)[::2].flip(1), X),
    "fliplr": (lambda m, a: a.fliplr(), M),
    "flipud": (lambda m, a: m.flipud(a), M),
    "roll": (lambda m, x: x.roll(2), X),
    "roll_dims": (lambda m, x: x.roll((1, -2), (0, 2)), X),
    "roll_neg": (lambda m, x: m.roll(x, -7, 1), X),
    "roll_scalar": (lambda m, s: s.roll(1), S),
    "repeat": (lambda m, a: a.repeat(2, 1), M),
    "repeat_more_dims": (lambda m, a: a.repeat(2, 1, 3), M),
    "repeat_tuple": (lambda m, a: a.repeat((1, 2)), M),
    "repeat_zero": (lambda m, a: a.repeat(0, 1), M),
    "repeat_scalar": (lambda m, s: s.repeat(2, 3), S),
    "tile": (lambda m, a: a.tile(2), M),
    "tile_more": (lambda m, a: m.tile(a, (2, 1, 1)), M),
    "repeat_interleave": (lambda m, a: a.repeat_interleave(2), M),
    "repeat_interleave_dim": (lambda m, a: a.repeat_interleave(3, 1), M),
    "repeat_interleave_tensor": (lambda m, a: a.repeat_interleave(m.tensor([1, 0, 2]), 0), M),
    "repeat_interleave_0d": (lambda m, a: a.repeat_interleave(m.tensor(2), 0), M),
    "tril": (lambda m, a: a.tril(), M),
    "tril_k": (lambda m, x: x.tril(1), X),
    "triu": (lambda m, a: m.triu(a, -1), M),
    "triu_int": (lambda m, a: a.triu(2), IM),
    "diag_from_1d": (lambda m, v: m.diag(v), V),
    "diag_from_1d_k": (lambda m, v: v.diag(-2), V),
    "diag_from_2d": (lambda m, a: m.diag(a, 1), M),
    "diag_empty": (lambda m, a: a.diag(10), M),
    "diag_embed": (lambda m, a: m.diag_embed(a), M),
    "diag_embed_dims": (lambda m, a: a.diag_embed(1, 0, 2), M),
    "diagonal_copy": (lambda m, x: m.diagonal_copy(x, 0, 1, 2), X),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_op(name):
    fn, *inputs = CASES[name]
    check_shape(fn, *inputs)


def test_repeat_interleave_indices_form():
    check(lambda m: m.repeat_interleave(m.tensor([1, 2, 0, 3])))


VIEW_HELPERS = {
    "broadcast_tensors": (lambda m, a, v: m.broadcast_tensors(a[:, :1], v[:4]), M, V),
    "broadcast_tensors_same": (lambda m, a: m.broadcast_tensors(a, a[0]), M),
    "atleast_1d": (lambda m, s: m.atleast_1d(s), S),
    "atleast_2d_1d": (lambda m, v: m.atleast_2d(v), V),
    "atleast_2d_0d": (lambda m, s: m.atleast_2d(s), S),
    "atleast_3d_1d": (lambda m, v: m.atleast_3d(v), V),
    "atleast_3d_2d": (lambda m, a: m.atleast_3d(a), M),
    "atleast_3d_0d": (lambda m, s: m.atleast_3d(s), S),
    "atleast_many": (lambda m, s, v: m.atleast_2d(s, v), S, V),
    "atleast_list": (lambda m, s, v: m.atleast_1d([s, v]), S, V),
    "meshgrid_ij": (lambda m, v, a: m.meshgrid(v, a[0], indexing="ij"), V, M),
    "meshgrid_xy": (lambda m, v, a: m.meshgrid(v, a[0], indexing="xy"), V, M),
    "meshgrid_list": (lambda m, v, a: m.meshgrid([v[:2], a[0], v], indexing="ij"), V, M),
    "meshgrid_0d": (lambda m, s, v: m.meshgrid(s, v, indexing="ij"), S, V),
}


@pytest.mark.parametrize("name", sorted(VIEW_HELPERS))
def test_broadcast_helper(name):
    fn, *inputs = VIEW_HELPERS[name]
    check(fn, *inputs, grad=True)
    (ra, r), (ta, T) = _run_both(fn, inputs, False)
    rfacts = [(tuple(o.shape), o.stride(), o._base is not None,
               any(o is a for a in ra)) for o in _flat(r)]
    tfacts = [(tuple(o.shape), o.stride(), o._base is not None,
               any(o is a for a in ta)) for o in _flat(T)]
    assert rfacts == tfacts


def test_meshgrid_warns_once_without_indexing():
    from refimpl.ops import broadcast

    broadcast._warned.clear()
    with pytest.warns(UserWarning, match="it will be required to pass the indexing"):
        t.meshgrid(t.zeros(2), t.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.meshgrid(t.zeros(2), t.zeros(3))


ERRORS = {
    "cat_empty_list": (lambda m: m.cat([]),),
    "cat_not_tensor": (lambda m, a: m.cat([a, 1]), M),
    "cat_tensor_arg": (lambda m, a: m.cat(a), M),
    "cat_zero_dim": (lambda m, s: m.cat([s, s]), S),
    "cat_zero_dim_second": (lambda m, v, s: m.cat([v, s]), V, S),
    "cat_sizes": (lambda m, a, b: m.cat([a, b.t()]), M, N),
    "cat_ndim": (lambda m, a, v: m.cat([a, v]), M, V),
    "cat_dim_range": (lambda m, a: m.cat([a, a], 2), M),
    "cat_dim_range_empty_first": (lambda m, e, a: m.cat([e, a], 5), E0, M),
    "cat_sizes_later": (lambda m, a: m.cat([a, a, a[:, :2]]), M),
    "stack_empty": (lambda m: m.stack([]),),
    "stack_sizes": (lambda m, a, b: m.stack([a, b]), M, N),
    "stack_dim": (lambda m, a: m.stack([a, a], 3), M),
    "hstack_empty": (lambda m: m.hstack([]),),
    "vstack_empty": (lambda m: m.vstack([]),),
    "flip_dup": (lambda m, x: x.flip(0, 0), X),
    "flip_range": (lambda m, x: x.flip(3), X),
    "fliplr_1d": (lambda m, v: v.fliplr(), V),
    "flipud_0d": (lambda m, s: s.flipud(), S),
    "roll_align": (lambda m, x: x.roll((1, 2), (0,)), X),
    "roll_align_none": (lambda m, x: x.roll((1, 2)), X),
    "roll_empty": (lambda m, x: x.roll(()), X),
    "roll_0d_dim": (lambda m, s: s.roll(1, 0), S),
    "repeat_few": (lambda m, x: x.repeat(2), X),
    "repeat_negative": (lambda m, x: x.repeat(-1, 1, 1), X),
    "tile_negative": (lambda m, x: x.tile(-1), X),
    "repeat_interleave_negative": (lambda m, a: a.repeat_interleave(-1), M),
    "repeat_interleave_size": (lambda m, a: a.repeat_interleave(m.tensor([1, 2]), 0), M),
    "repeat_interleave_neg_tensor": (lambda m, a: a.repeat_interleave(m.tensor([-1, 1, 1]), 0),
                                     M),
    "repeat_interleave_2d": (lambda m, a: a.repeat_interleave(m.tensor([[1]]), 0), M),
    "tril_1d": (lambda m, v: v.tril(), V),
    "triu_float_k": (lambda m, a: a.triu(1.5), M),
    "diag_3d": (lambda m, x: m.diag(x), X),
    "diag_0d": (lambda m, s: m.diag(s), S),
    "diag_embed_same": (lambda m, a: a.diag_embed(0, 0, 0), M),
    "diag_embed_range": (lambda m, a: a.diag_embed(0, 0, 3), M),
    "meshgrid_empty": (lambda m: m.meshgrid(indexing="ij"),),
    "meshgrid_indexing": (lambda m, v: m.meshgrid(v, indexing="foo"), V),
    "meshgrid_dtype": (lambda m, v, i: m.meshgrid(v, i[0], indexing="ij"), V, IM),
    "broadcast_tensors_mismatch": (lambda m, a, v: m.broadcast_tensors(a, v), M, V),
    "broadcast_to_mismatch": (lambda m, a: m.broadcast_to(a, (3, 1)), M),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_shape_error(name):
    fn, *inputs = ERRORS[name]
    assert isinstance(check(fn, *inputs), Exception), f"{name}: torch did not raise"


def test_cat_and_stack_outputs_are_fresh():
    for m in (t, torch):
        a = m.zeros(2, 3)
        c = m.cat([a])
        assert c is not a and c._base is None
        assert c.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()


def test_cat_out():
    for m in (t, torch):
        out = m.empty(4, 3)
        r = m.cat([m.ones(2, 3), m.zeros(2, 3)], out=out)
        assert r is out and out.sum().item() == 6.0
