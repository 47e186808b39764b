"""Derivative rules of the elementwise ops against torch: gradients (also at the special
points torch defines: abs and relu at 0, clamp bounds, maximum ties, pow at 0), double
backward, and the autograd node names torch records."""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import In, check, check_double_backward

import refimpl as t
from refimpl.ops import activation

torch = pytest.importorskip("torch")


def vals(*v, dtype: str = "float64") -> In:
    """Explicit values."""
    return In(np.array(v), dtype)


def rnd(shape, seed: int, low: float = -2.0, high: float = 2.0, dtype: str = "float64") -> In:
    """Uniform values (avoiding exact special points unless the test puts them in)."""
    return In(np.random.default_rng(seed).uniform(low, high, shape), dtype)


def act(lib, name: str):
    return getattr(activation if lib is t else torch.nn.functional, name)


POS = rnd((3, 4), 1, 0.2, 0.9)       # inside (0, 1): log, logit, asin, atanh, erfinv ...
ANY = rnd((3, 4), 2)
BIG = rnd((3, 4), 3, 1.2, 3.0)       # > 1: acosh

UNARY = [
    ("exp", ANY), ("exp2", ANY), ("expm1", ANY), ("log", POS), ("log2", POS), ("log10", POS),
    ("log1p", POS), ("sqrt", POS), ("rsqrt", POS), ("reciprocal", POS), ("square", ANY),
    ("sin", ANY), ("cos", ANY), ("tan", POS), ("asin", POS), ("acos", POS), ("atan", ANY),
    ("sinh", ANY), ("cosh", ANY), ("tanh", ANY), ("asinh", ANY), ("acosh", BIG),
    ("atanh", POS), ("sigmoid", ANY), ("logit", POS), ("relu", ANY), ("erf", ANY),
    ("erfc", ANY), ("erfinv", POS), ("lgamma", BIG), ("digamma", BIG), ("floor", ANY),
    ("ceil", ANY), ("round", ANY), ("trunc", ANY), ("frac", ANY), ("neg", ANY), ("abs", ANY),
    ("sign", ANY), ("sgn", ANY), ("deg2rad", ANY), ("rad2deg", ANY), ("nan_to_num", ANY),
    ("angle", ANY),
]


@pytest.mark.parametrize("name,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_grad(name, x):
    check(lambda lib, v: getattr(lib, name)(v), x, grad=True)


@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "sigmoid", "log", "sqrt", "abs", "sgn",
                                  "reciprocal", "angle"])
def test_unary_grad_complex(name):
    rng = np.random.default_rng(5)
    z = In(rng.uniform(0.2, 1.5, (2, 3)) + 1j * rng.uniform(-1, 1, (2, 3)), "complex128")
    # a real loss of the complex result: torch's convention (grad * conj(derivative))
    check(lambda lib, v: (getattr(lib, name)(v) * (0.3 - 0.7j)).real, z, grad=True)


@pytest.mark.parametrize("name", ["gelu", "silu", "softplus", "hardtanh"])
def test_activation_grad(name):
    check(lambda lib, v: act(lib, name)(v), rnd((3, 4), 7, -3, 3), grad=True)
    if name == "gelu":
        check(lambda lib, v: act(lib, name)(v, approximate="tanh"), ANY, grad=True)
    if name == "softplus":
        check(lambda lib, v: act(lib, name)(v, beta=2, threshold=1), ANY, grad=True)


BINARY = ["add", "sub", "mul", "div", "pow", "atan2", "hypot", "maximum", "minimum", "fmax",
          "fmin", "copysign", "xlogy", "logaddexp", "logaddexp2", "remainder", "fmod", "rsub",
          "float_power"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_grad_broadcast(name):
    a, b = rnd((3, 4), 11, 0.3, 2.0), rnd((4,), 12, 0.3, 2.0)
    check(lambda lib, x, y: getattr(lib, name)(x, y), a, b, grad=True)
    check(lambda lib, x, y: getattr(lib, name)(y, x), a, b, grad=True)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "remainder", "fmod",
                                  "xlogy", "copysign", "rsub"])
@pytest.mark.parametrize("scalar", [2, -1.5, 0])
def test_binary_grad_python_scalar(name, scalar):
    check(lambda lib, x: getattr(lib, name)(x, scalar), rnd((2, 3), 13, 0.3, 2), grad=True)
    if name in ("pow", "xlogy"):
        check(lambda lib, x: getattr(lib, name)(abs(scalar) + 0.5, x), ANY, grad=True)


def test_alpha_grad():
    a, b = rnd((2, 3), 14), rnd((3,), 15)
    for name in ("add", "sub", "rsub"):
        check(lambda lib, x, y, n=name: getattr(lib, n)(x, y, alpha=-2.5), a, b, grad=True)


def test_special_points():
    # abs'(0) = 0, relu'(0) = 0, sign/sgn have zero gradients
    x = vals(-1.0, 0.0, 2.0, -0.0)
    for fn in [lambda lib, v: v.abs(), lambda lib, v: v.relu(), lambda lib, v: v.sgn(),
               lambda lib, v: v.clamp(0.0, 2.0), lambda lib, v: v.clamp(min=-1.0),
               lambda lib, v: v.clamp(max=0.0), lambda lib, v: v.pow(2), lambda lib, v: v.pow(0),
               lambda lib, v: v.pow(0.5), lambda lib, v: v.pow(-1), lambda lib, v: lib.xlogy(v, v),
               lambda lib, v: lib.threshold(v, 0.0, 5.0), lambda lib, v: v.nan_to_num(),
               lambda lib, v: act(lib, "hardtanh")(v, -1.0, 2.0)]:
        check(fn, x, grad=True)
    # maximum/minimum split ties in halves; fmax/fmin give the tie to the first input
    a, b = vals(1.0, 2.0, 3.0, 0.0), vals(1.0, 5.0, 3.0, -1.0)
    for name in ("maximum", "minimum", "fmax", "fmin"):
        check(lambda lib, x, y, n=name: getattr(lib, n)(x, y), a, b, grad=True)
    # pow at a zero base: d/dexponent is 0 for exponent >= 0
    base, exp = vals(0.0, 0.0, 2.0, 0.0), vals(2.0, 0.0, 0.0, 0.5)
    check(lambda lib, x, y: lib.pow(x, y), base, exp, grad=True)
    check(lambda lib, y: lib.pow(0.0, y), exp, grad=True)


def test_clamp_tensor_bounds_grad():
    x, lo, hi = rnd((3, 4), 21), rnd((4,), 22, -1, 0), rnd((3, 1), 23, 0, 1)
    check(lambda lib, v, a, b: lib.clamp(v, a, b), x, lo, hi, grad=True)
    check(lambda lib, v, a: lib.clamp(v, min=a), x, lo, grad=True)
    check(lambda lib, v, b: lib.clamp(v, max=b), x, hi, grad=True)
    check(lambda lib, v, a, b: lib.clamp(v, b, a), x, lo, hi, grad=True)  # min > max
    check(lambda lib, v, a: lib.clamp_min(v, a), x, lo, grad=True)
    check(lambda lib, v, b: lib.clamp_max(v, b), x, hi, grad=True)


def test_ternary_grads():
    c = In(np.array([[True, False, True, False]] * 3), "bool")
    x, y, w = rnd((3, 4), 31), rnd((4,), 32), rnd((3, 1), 33, 0, 1)
    check(lambda lib, c, x, y: lib.where(c, x, y), c, x, y, grad=True)
    check(lambda lib, c, x: lib.where(c, x, 0.5), c, x, grad=True)
    check(lambda lib, x, y, w: lib.lerp(x, y, w), x, y, w, grad=True)
    check(lambda lib, x, y: lib.lerp(x, y, 0.3), x, y, grad=True)
    check(lambda lib, x, y, w: lib.addcmul(x, y, w, value=-1.5), x, y, w, grad=True)
    check(lambda lib, x, y, w: lib.addcdiv(x, y, w + 2, value=0.5), x, y, w, grad=True)


def test_rounded_division_grad_is_zero():
    a, b = rnd((2, 3), 41), rnd((3,), 42, 0.5, 2)
    for mode in ("trunc", "floor"):
        check(lambda lib, x, y, m=mode: lib.div(x, y, rounding_mode=m), a, b, grad=True)


def test_mixed_dtype_and_complex_grads():
    a, b = rnd((2, 3), 51, dtype="float32"), rnd((3,), 52)
    check(lambda lib, x, y: x * y + x / y, a, b, grad=True)
    rng = np.random.default_rng(53)
    z = In(rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)), "complex128")
    check(lambda lib, x, z: (x * z + z / (x + 3)).imag, b, z, grad=True)
    check(lambda lib, z: (z * z.conj()).real, z, grad=True)
    check(lambda lib, z: (z.abs() + z.angle()) * z.sgn().real, z, grad=True)


@pytest.mark.parametrize("fn", [
    lambda lib, x, y: (x * y).sin(), lambda lib, x, y: x.pow(y), lambda lib, x, y: x / y,
    lambda lib, x, y: lib.atan2(x, y).exp(), lambda lib, x, y: (x.sigmoid() * y.tanh()),
    lambda lib, x, y: lib.lerp(x, y, 0.25).log(), lambda lib, x, y: lib.xlogy(x, y),
])
def test_double_backward(fn):
    check_double_backward(fn, rnd((2, 3), 61, 0.5, 1.5), rnd((3,), 62, 0.5, 1.5))


NODES = [
    ("x + y", "AddBackward0"), ("x + 2", "AddBackward0"), ("x - y", "SubBackward0"),
    ("x * 2", "MulBackward0"), ("x / y", "DivBackward0"), ("x ** 2", "PowBackward0"),
    ("x ** y", "PowBackward1"), ("lib.pow(2, x)", "PowBackward2"),
    ("lib.rsub(x, y)", "RsubBackward0"), ("lib.rsub(x, 2)", "RsubBackward1"),
    ("lib.clamp(x, 0)", "ClampBackward1"), ("lib.clamp(x, y, y)", "ClampBackward0"),
    ("lib.clamp_min(x, 0)", "ClampMinBackward0"), ("lib.clamp_max(x, y)", "ClampMaxBackward1"),
    ("lib.where(x > 0, x, y)", "WhereBackward0"), ("lib.lerp(x, y, 0.5)", "LerpBackward0"),
    ("lib.lerp(x, y, x)", "LerpBackward1"), ("lib.maximum(x, y)", "MaximumBackward0"),
    ("lib.div(x, y, rounding_mode='floor')", "DivBackward2"),
    ("lib.remainder(x, 2)", "RemainderBackward0"), ("lib.remainder(x, y)", "RemainderBackward1"),
    ("lib.fmod(x, 2)", "FmodBackward0"), ("lib.fmod(x, y)", "FmodBackward1"),
    ("lib.square(x)", "PowBackward0"), ("lib.round(x)", "RoundBackward0"),
    ("lib.round(x, decimals=2)", "RoundBackward1"), ("lib.xlogy(x, y)", "XlogyBackward0"),
    ("lib.xlogy(2, x)", "XlogyBackward1"), ("lib.xlogy(x, 2)", "XlogyBackward2"),
    ("lib.copysign(x, y)", "CopysignBackward0"), ("lib.copysign(x, 2)", "CopysignBackward1"),
    ("x.abs()", "AbsBackward0"), ("-x", "NegBackward0"), ("x.exp2()", "Exp2Backward0"),
    ("x.sigmoid()", "SigmoidBackward0"), ("x.relu()", "ReluBackward0"),
    ("lib.threshold(x, 0., 1.)", "ThresholdBackward0"), ("x.sgn()", "SgnBackward0"),
    ("lib.addcmul(x, x, y)", "AddcmulBackward0"), ("lib.nan_to_num(x)", "NanToNumBackward0"),
    ("x.deg2rad()", "Deg2RadBackward0"), ("lib.logaddexp(x, y)", "LogaddexpBackward0"),
    ("lib.erfinv(x)", "ErfinvBackward0"), ("lib.polygamma(1, x)", "PolygammaBackward0"),
    ("x.clone().mul_(2)", "MulBackward0"), ("x.clone().pow_(2)", "PowBackward0"),
]


@pytest.mark.parametrize("expr,node", NODES, ids=[n[0] for n in NODES])
def test_node_names(expr, node):
    for lib in (torch, t):
        x = lib.tensor([0.5, 1.5, 2.0], requires_grad=True)
        y = lib.tensor([1.0, -1.0, 3.0], requires_grad=True)
        out = eval(expr, {"lib": lib, "x": x, "y": y})
        assert type(out.grad_fn).__name__ == node, (lib.__name__, expr)


@pytest.mark.parametrize("fn", [
    lambda lib, x: x.relu(), lambda lib, x: x.sigmoid(), lambda lib, x: x.tanh(),
    lambda lib, x: lib.threshold(x, 0.1, 2.0),
], ids=["relu", "sigmoid", "tanh", "threshold"])
def test_backward_ops_double_backward(fn):
    """relu/sigmoid/tanh/threshold differentiate through torch's *_backward ops."""
    check_double_backward(lambda lib, x, y: fn(lib, x) * y, rnd((2, 3), 71), rnd((3,), 72))
    names = []
    for lib in (torch, t):
        x = lib.tensor([-1.0, 0.5, 2.0], requires_grad=True)
        (g,) = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=True)
        names.append(type(g.grad_fn).__name__)
    assert names[0] == names[1]


def test_complex_double_backward():
    """Second derivatives through complex formulas (real losses at both levels)."""
    rng = np.random.default_rng(73)
    zv = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    wv = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    fns = [lambda a, b: (a.sigmoid() * b).real, lambda a, b: (a.tanh() * b).imag,
           lambda a, b: (a * a.exp() / b).real, lambda a, b: (a.sgn() * b.abs()).real]
    for fn in fns:
        results = []
        for lib in (torch, t):
            z = lib.tensor(zv, requires_grad=True)
            w = lib.tensor(wv, requires_grad=True)
            gz, gw = lib.autograd.grad(fn(z, w).sum(), (z, w), create_graph=True)
            second = lib.autograd.grad((gz * (0.5 - 1j)).real.sum() + (gw * 2j).real.sum(),
                                       (z, w))
            results.append([np.asarray(g.detach().resolve_conj().numpy() if lib is torch
                                       else g.detach().resolve_conj()._np) for g in second])
        for r, o in zip(results[1], results[0]):
            np.testing.assert_allclose(r, o, rtol=1e-9, atol=1e-12)


class _Ctx:
    """What a jvp rule reads (refimpl.autograd builds the same when forward AD runs)."""

    def __init__(self, args, kwargs, outputs) -> None:
        self.args, self.kwargs, self.outputs = args, kwargs, outputs
        self.needs_input_grad = tuple(isinstance(a, t.Tensor) for a in args)


JVPS = [
    # (refimpl op name, torch call, positional inputs (In or scalar), kwargs)
    ("exp", "exp", ["x"], {}), ("sin", "sin", ["x"], {}), ("log", "log", ["p"], {}),
    ("sqrt", "sqrt", ["p"], {}), ("tanh", "tanh", ["x"], {}), ("sigmoid", "sigmoid", ["x"], {}),
    ("erfinv", "erfinv", ["u"], {}), ("abs", "abs", ["x"], {}), ("relu", "relu", ["x"], {}),
    ("add", "add", ["x", "y"], {"alpha": 2}), ("sub", "sub", ["x", "y"], {}),
    ("mul", "mul", ["x", "y"], {}), ("div", "div", ["x", "p"], {}),
    ("pow", "pow", ["p", "y"], {}), ("pow.Tensor_Scalar", "pow", ["x", 3], {}),
    ("pow.Scalar", "pow", [2.0, "y"], {}), ("atan2", "atan2", ["x", "y"], {}),
    ("maximum", "maximum", ["x", "y"], {}), ("hypot", "hypot", ["x", "y"], {}),
    ("clamp", "clamp", ["x", -0.5, 0.5], {}), ("clamp.Tensor", "clamp", ["x", "y", "p"], {}),
    ("lerp.Tensor", "lerp", ["x", "y", "u"], {}), ("addcmul", "addcmul", ["x", "y", "p"], {}),
    ("addcdiv", "addcdiv", ["x", "y", "p"], {"value": 2}), ("xlogy", "xlogy", ["x", "p"], {}),
    ("logaddexp", "logaddexp", ["x", "y"], {}), ("copysign", "copysign", ["x", "y"], {}),
    ("remainder.Tensor", "remainder", ["x", "p"], {}), ("fmod.Tensor", "fmod", ["x", "p"], {}),
    ("polygamma", None, ["p", 1], {}), ("sgn", "sgn", ["x"], {}),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's forward-AD internals
@pytest.mark.parametrize("name,tname,inputs,kwargs", JVPS, ids=[j[0] for j in JVPS])
def test_jvp_rules(name, tname, inputs, kwargs):
    """Each jvp rule against torch's forward-mode AD (refimpl's engine is not there yet)."""
    import torch.autograd.forward_ad as fwad

    rng = np.random.default_rng(91)
    pools = {"x": rng.uniform(-2, 2, (2, 3)), "y": rng.uniform(-2, 2, (3,)),
             "p": rng.uniform(0.5, 2, (2, 3)), "u": rng.uniform(-0.9, 0.9, (2, 3))}
    tangents = {k: rng.standard_normal(v.shape) for k, v in pools.items()}
    op = t.ops.REGISTRY[name]
    r_args = [t.tensor(pools[a]) if isinstance(a, str) else a for a in inputs]
    out = op(*r_args, **kwargs)
    r_tan = [t.tensor(tangents[a]) if isinstance(a, str) else None for a in inputs]
    got = op.jvp(_Ctx(tuple(r_args), kwargs, (out,)), *r_tan)
    with fwad.dual_level():
        o_args = [fwad.make_dual(torch.tensor(pools[a]), torch.tensor(tangents[a]))
                  if isinstance(a, str) else a for a in inputs]
        if tname is None:  # polygamma(n, x) takes n first
            o_out = torch.polygamma(o_args[1], o_args[0])
        else:
            o_out = getattr(torch, tname)(*o_args, **kwargs)
        expected = fwad.unpack_dual(o_out).tangent
    np.testing.assert_allclose(got._np, expected.numpy(), rtol=1e-9, atol=1e-12)
