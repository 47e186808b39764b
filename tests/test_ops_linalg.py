"""Matrix products, einsum and friends against torch: values, dtypes, errors, gradients."""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn, torch

import refimpl as t

FLOATS = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
NUMERIC = [*FLOATS, "uint8", "int8", "int16", "int32", "int64"]


def mat(shape, dtype: str = "float32", seed: int = 0) -> In:
    """Small values every dtype holds exactly (integers for integer dtypes)."""
    if "int" in dtype:
        return randint(0 if dtype == "uint8" else -3, 4, shape, dtype, seed)
    return randn(shape, dtype, seed)


MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3,)),
    ((5, 2, 3), (3, 4)), ((3,), (5, 3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
    ((2, 1, 2, 3), (5, 3, 4)), ((1, 2, 3), (6, 1, 3, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
    ((4, 0, 2, 3), (3, 1)),
]
MATMUL_ERRORS = [
    ((), (2,)), ((2,), ()), ((2,), (3,)), ((2,), (3, 4)), ((2, 3), (4,)), ((2, 3), (4, 5)),
    ((5, 2, 3), (4, 6)), ((5, 2, 3), (4, 3, 6)), ((5, 2, 3), (5, 4, 6)), ((2,), (5, 3, 6)),
    ((5, 2, 3), (4,)), ((2, 3), (5, 4, 6)),
]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES)
def test_matmul_shapes(a, b):
    check(lambda m, x, y: m.matmul(x, y), mat(a), mat(b, seed=1))
    check(lambda m, x, y: x @ y, mat(a, "float64"), mat(b, "float64", seed=1))


@pytest.mark.parametrize("a,b", MATMUL_ERRORS)
def test_matmul_errors(a, b):
    check(lambda m, x, y: x @ y, mat(a), mat(b, seed=1))


@pytest.mark.parametrize("dtype", NUMERIC)
def test_matmul_dtypes(dtype):
    for a, b in (((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((4, 2, 3), (4, 3, 2))):
        check(lambda m, x, y: x @ y, mat(a, dtype), mat(b, dtype, seed=1), rtol=2e-2)


@pytest.mark.parametrize("other", ["float64", "int64", "float16", "bool", "complex64"])
def test_matmul_dtype_mismatch(other):
    for a, b in (((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((4, 2, 3), (4, 3, 2))):
        check(lambda m, x, y: x @ y, mat(a), mat(b, other, seed=1))


def test_bool_products_are_not_implemented():
    x = randint(0, 2, (2, 2), "bool")
    check(lambda m, a: m.mm(a, a), x)
    check(lambda m, a: m.mv(a, a[0]), x)
    check(lambda m, a: m.dot(a[0], a[1]), x)
    check(lambda m, a: m.bmm(a[None], a[None]), x)
    check(lambda m, a: m.trace(a), x)


def test_mm_bmm_mv_dot_errors():
    f = mat((2, 3))
    check(lambda m, x: m.mm(x[0], x), f)
    check(lambda m, x: m.mm(x, x[None]), f)
    check(lambda m, x: m.mm(x, x), f)
    check(lambda m, x: m.bmm(x, x), f)
    check(lambda m, x: m.bmm(x[None], x), f)
    check(lambda m, x: m.bmm(x[None], x[None]), f)
    check(lambda m, x, y: m.bmm(x[None], y[None]), f, mat((3, 2), "float64"))
    check(lambda m, x: m.mv(x, x[0]), f)
    check(lambda m, x: m.mv(x[0], x[0]), f)
    check(lambda m, x: m.mv(x, x.t()), f)
    check(lambda m, x, y: m.mv(x, y), f, mat((3,), "float64"))
    check(lambda m, x, y: m.mv(y, x[0]), f, mat((2, 3), "float64"))
    check(lambda m, x: m.dot(x, x[0]), f)
    check(lambda m, x, y: m.dot(x[0], y), f, mat((4,)))
    check(lambda m, x, y: m.dot(x[0], y), f, mat((3,), "float64"))
    check(lambda m, x, y: m.vdot(x[0], y), f, mat((4,)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int64"])
def test_dot_vdot_outer(dtype):
    a, b = mat((4,), dtype), mat((4,), dtype, seed=1)
    check(lambda m, x, y: m.dot(x, y), a, b)
    check(lambda m, x, y: m.vdot(x, y), a, b)
    check(lambda m, x, y: m.outer(x, y), a, b)
    check(lambda m, x, y: x.ger(y), a, b)
    check(lambda m, x, y: m.inner(x, y), a, b)


def test_outer_promotes_and_checks_dims():
    check(lambda m, x, y: m.outer(x, y), mat((3,), "int64"), mat((2,)))
    check(lambda m, x, y: m.outer(x, y), mat((3, 1)), mat((2,)))
    check(lambda m, x, y: m.outer(x, y), mat((3,)), mat((2, 1)))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (2, 3), (0, 1), (0.5, -1.5)])
def test_addmm_addmv_baddbmm_addbmm(beta, alpha):
    nan_bias = In(np.full((2, 4), np.nan))
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), mat((2, 4)),
          mat((2, 3), seed=1), mat((3, 4), seed=2))
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), mat((4,)),
          mat((2, 3), seed=1), mat((3, 4), seed=2))
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=beta, alpha=alpha), nan_bias,
          mat((2, 3), seed=1), mat((3, 4), seed=2))
    check(lambda m, c, a, v: m.addmv(c, a, v, beta=beta, alpha=alpha), mat((2,)),
          mat((2, 3), seed=1), mat((3,), seed=2))
    check(lambda m, c, a, b: m.baddbmm(c, a, b, beta=beta, alpha=alpha), mat((5, 2, 4)),
          mat((5, 2, 3), seed=1), mat((5, 3, 4), seed=2))
    check(lambda m, c, a, b: m.addbmm(c, a, b, beta=beta, alpha=alpha), mat((2, 4)),
          mat((5, 2, 3), seed=1), mat((5, 3, 4), seed=2))


def test_addmm_integer_scalars_and_errors():
    check(lambda m, c, a, b: m.addmm(c, a, b, beta=0.5), mat((2, 2), "int64"),
          mat((2, 3), "int64"), mat((3, 2), "int64"))
    check(lambda m, c, a, b: m.addmm(c, a, b), mat((3,)), mat((2, 3)), mat((3, 2)))
    check(lambda m, c, a, b: m.addmm(c, a, b), mat((2, 2, 2)), mat((2, 3)), mat((3, 2)))
    check(lambda m, c, a, b: m.addmm(c, a, b), mat((2, 2), "float64"), mat((2, 3)),
          mat((3, 2)))
    check(lambda m, c, a, b: m.addmm(c, a, b), mat((2, 2)), mat((2, 3), "float64"),
          mat((3, 2)))
    check(lambda m, c, a, b: m.addmm(c, a, b), mat((2, 2)), mat((3,)), mat((3, 2)))
    check(lambda m, c, a, v: m.addmv(c, a, v), mat((3,)), mat((2, 3)), mat((3,)))
    check(lambda m, c, a, v: m.addmv(c, a, v), mat((1,)), mat((2, 3)), mat((3,)))


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("i,i->", [(3,), (3,)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
    ("i,j->ij", [(2,), (3,)]), ("ijk,ik->j", [(2, 3, 4), (2, 4)]), ("i,i->", [(1,), (3,)]),
    ("Ba,aB", [(2, 3), (3, 2)]), ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]), ("ij,kj->ik", [(2, 3), (0, 3)]),
]
EINSUM_ERRORS = [
    ("ij,jk->ik", [(2, 3), (4, 4)]), ("ij,jk->ik", [(2, 3)]), ("i->", [(2,), (2,)]),
    ("ij->", [(2,)]), ("...ijk->", [(2, 2)]), ("i->j", [(2,)]), ("i->ii", [(2,)]),
    ("i.j", [(2,)]), ("ij,jk", [(2, 3), (3, 4, 1)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(eq, shapes):
    ins = [mat(s, seed=i) for i, s in enumerate(shapes)]
    check(lambda m, *xs: m.einsum(eq, *xs), *ins)
    check(lambda m, *xs: m.einsum(eq, list(xs)), *ins)
    if "ii" not in eq:
        check(lambda m, *xs: m.einsum(eq, *xs), *[mat(s, "float64", i) for i, s in
                                                   enumerate(shapes)], grad=True)


@pytest.mark.parametrize("eq,shapes", EINSUM_ERRORS, ids=[e[0] for e in EINSUM_ERRORS])
def test_einsum_errors(eq, shapes):
    check(lambda m, *xs: m.einsum(eq, *xs), *[mat(s, seed=i) for i, s in enumerate(shapes)])


def test_einsum_dtypes():
    check(lambda m, x, y: m.einsum("i,i->", x, y), mat((3,), "int64"), mat((3,), "int64"))
    check(lambda m, x, y: m.einsum("i,i->", x, y), mat((3,)), mat((3,), "float64"))
    check(lambda m, x, y: m.einsum("i,i->", x, y), mat((3,), "bool"), mat((3,), "bool"))


def test_tensordot_inner():
    check(lambda m, x, y: m.tensordot(x, y), mat((2, 3, 4)), mat((3, 4, 5)))
    check(lambda m, x, y: m.tensordot(x, y, 1), mat((2, 3, 4)), mat((4, 5)))
    check(lambda m, x, y: m.tensordot(x, y, 0), mat((2,)), mat((3,)))
    check(lambda m, x, y: m.tensordot(x, y, ([1, 0], [0, 2])), mat((3, 2)), mat((2, 5, 3)))
    check(lambda m, x, y: m.tensordot(x, y, ([1], [0])), mat((2, 1)), mat((3, 2)))
    check(lambda m, x, y: m.tensordot(x, y, ([1], [0])), mat((2, 3)), mat((4, 2)))
    check(lambda m, x, y: m.tensordot(x, y, -1), mat((2, 3)), mat((3, 2)))
    check(lambda m, x, y: m.tensordot(x, y, 3), mat((2, 3)), mat((3, 2)))
    check(lambda m, x, y: m.inner(x, y), mat((2, 3)), mat((4, 3)))
    check(lambda m, x, y: m.inner(x, y), mat((2, 3)), mat((4, 2)))
    check(lambda m, x, y: x.inner(y), In(2.0), mat((3,)))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8", "complex64"])
def test_trace(dtype):
    check(lambda m, x: m.trace(x), mat((3, 4), dtype))
    check(lambda m, x: x.trace(), mat((4, 2), dtype))
    check(lambda m, x: m.trace(x), mat((3,), dtype))


def test_det_inverse():
    a = In([[1.0, 2.0], [3.0, 4.0]])
    check(lambda m, x: m.det(x), a)
    check(lambda m, x: m.inverse(x), a)
    check(lambda m, x: x.det(), In(np.eye(2)[None].repeat(3, 0)))
    check(lambda m, x: m.det(x), In([[1j, 2.0], [3.0, 4.0]], "complex64"))
    check(lambda m, x: m.inverse(x), In([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]]))
    check(lambda m, x: m.inverse(x), In(np.zeros((2, 2, 2))))
    check(lambda m, x: m.inverse(x), In(np.zeros((0, 0))))
    check(lambda m, x: m.det(x), In(np.zeros((0, 0))))
    for bad in (In([1.0, 2.0]), In(np.ones((2, 3))), In(np.ones((2, 2)), "int64"),
                In(np.ones((2, 2)), "float16")):
        check(lambda m, x: m.det(x), bad)
        check(lambda m, x: m.inverse(x), bad)


def test_cross():
    check(lambda m, x, y: m.linalg_cross(x, y) if m is t else m.linalg.cross(x, y),
          mat((4, 3)), mat((4, 3), seed=1), grad=True)
    check(lambda m, x, y: m.linalg_cross(x, y, dim=0) if m is t else m.linalg.cross(x, y, dim=0),
          mat((3, 2)), mat((1, 2), seed=1), grad=True)
    check(lambda m, x, y: m.cross(x, y, 1), mat((2, 3), "int64"), mat((2, 3), "int64", 1))
    check(lambda m, x, y: m.cross(x, y, -1), mat((2, 2)), mat((2, 2)))
    check(lambda m, x, y: m.cross(x, y, -1), mat((2, 3)), mat((3,)))
    check(lambda m, x, y: m.cross(x, y, -1), mat((2, 3)), mat((2, 3), "float64"))
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg"):
        t.cross(t.ones(2, 3), t.ones(2, 3))


GRADS = [
    ("mm", lambda m, a, b: m.mm(a, b), [(2, 3), (3, 4)]),
    ("bmm", lambda m, a, b: m.bmm(a, b), [(5, 2, 3), (5, 3, 4)]),
    ("mv", lambda m, a, b: m.mv(a, b), [(2, 3), (3,)]),
    ("dot", lambda m, a, b: m.dot(a, b), [(3,), (3,)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [(3,), (3,)]),
    ("outer", lambda m, a, b: m.outer(a, b), [(3,), (2,)]),
    ("addmm", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2), [(4,), (2, 3), (3, 4)]),
    ("addmv", lambda m, c, a, b: m.addmv(c, a, b, alpha=-1), [(2,), (2, 3), (3,)]),
    ("baddbmm", lambda m, c, a, b: m.baddbmm(c, a, b, beta=2), [(1, 2, 4), (5, 2, 3),
                                                                 (5, 3, 4)]),
    ("addbmm", lambda m, c, a, b: m.addbmm(c, a, b), [(2, 4), (5, 2, 3), (5, 3, 4)]),
    ("trace", lambda m, a: m.trace(a), [(3, 4)]),
    ("det", lambda m, a: m.det(a), [(2, 3, 3)]),
    ("inverse", lambda m, a: m.inverse(a), [(2, 3, 3)]),
    ("tensordot", lambda m, a, b: m.tensordot(a, b, ([0, 2], [1, 0])), [(4, 2, 3), (3, 4, 5)]),
    *[(f"matmul{a}{b}", lambda m, x, y: x @ y, [a, b]) for a, b in MATMUL_SHAPES],
]


@pytest.mark.parametrize("name,fn,shapes", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, fn, shapes):
    check(fn, *[mat(s, "float64", i) for i, s in enumerate(shapes)], grad=True)


@pytest.mark.parametrize("name,fn,shapes", GRADS, ids=[g[0] for g in GRADS])
def test_double_backward(name, fn, shapes):
    check_double_backward(fn, *[mat(s, "float64", i) for i, s in enumerate(shapes)])


def test_grad_node_names():
    a = t.ones(2, 3, requires_grad=True)
    b = t.ones(3, 4, requires_grad=True)
    v = t.ones(3, requires_grad=True)
    names = {"MmBackward0": a @ b, "MvBackward0": a @ v, "DotBackward0": v @ v,
             "AddmmBackward0": t.addmm(t.ones(4), a, b), "TraceBackward0": b.trace(),
             "BmmBackward0": t.bmm(a[None], b[None]), "LinalgDetBackward0": t.det(a @ a.t())}
    for name, out in names.items():
        assert type(out.grad_fn).__name__ == name


@pytest.mark.parametrize("op", ["mm", "bmm", "mv", "dot", "addmm", "matmul3d"])
def test_jvp_rules_match_torch_forward_ad(op):
    from types import SimpleNamespace

    from refimpl.ops import REGISTRY

    rng = np.random.default_rng(0)
    shapes = {"mm": [(2, 3), (3, 4)], "bmm": [(2, 2, 3), (2, 3, 4)], "mv": [(2, 3), (3,)],
              "dot": [(3,), (3,)], "addmm": [(4,), (2, 3), (3, 4)],
              "matmul3d": [(2, 2, 3), (2, 3, 4)]}[op]
    xs = [rng.standard_normal(s) for s in shapes]
    vs = [rng.standard_normal(s) for s in shapes]
    name = "bmm" if op == "matmul3d" else op
    kwargs = {"beta": 0.5, "alpha": 2} if op == "addmm" else {}
    rt = [t.tensor(x) for x in xs]
    out = REGISTRY[name](*rt, **kwargs)
    ctx = SimpleNamespace(args=tuple(rt), kwargs=kwargs, outputs=(out,),
                          needs_input_grad=(True,) * len(rt))
    tangent = REGISTRY[name].jvp(ctx, *[t.tensor(v) for v in vs])
    tfn = getattr(torch, name)
    _, expected = torch.func.jvp(lambda *a: tfn(*a, **kwargs), tuple(map(torch.tensor, xs)),
                                 tuple(map(torch.tensor, vs)))
    np.testing.assert_allclose(tangent._np, expected.numpy(), rtol=1e-10, atol=1e-12)


def test_large_float32_matmul_uses_blas_result():
    a = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((128, 32)).astype(np.float32)
    r = t.from_numpy(a) @ t.from_numpy(b)
    np.testing.assert_allclose(r._np, (torch.from_numpy(a) @ torch.from_numpy(b)).numpy(),
                               rtol=1e-4, atol=1e-4)
    assert r.is_contiguous() and r.dtype is t.float32
