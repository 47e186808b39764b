"""CUDA elementwise kernels against the CPU kernels (themselves checked against torch by
the conformance suite) and against torch CUDA where torch is installed: every op of the
elementwise modules over dtypes, layouts (contiguous, transposed, broadcast, 0-dim),
CPU scalars, ``out=`` and in-place forms. Skipped where no GPU is present.

``TENSORCTL_GPU_SHARD=k/n`` runs every n-th case only (the first run compiles each
kernel once; shards spread that over processes).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import refimpl as t
from refimpl.ops import activation as A

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool",
          "complex64"]
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-4, "complex64": 1e-4, "float64": 1e-9}


def _shard(cases: list) -> list:
    spec = os.environ.get("TENSORCTL_GPU_SHARD")
    if not spec:
        return cases
    k, n = (int(v) for v in spec.split("/"))
    return [c for i, c in enumerate(cases) if i % n == k]


def _data(shape, dtype: str, seed: int = 0, positive: bool = False, unit: bool = False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    if dtype == "complex64":
        x = x + 1j * rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5
    if unit:
        x = np.tanh(x) * 0.9
    if dtype in ("int32", "int64", "uint8"):
        x = np.round(x * 10) % (256 if dtype == "uint8" else 1000) - (0 if dtype == "uint8" else 500)
    if dtype == "bool":
        x = x > 0
    return t.tensor(x).to(getattr(t, dtype))


def _same(got, want, dtype: str) -> None:
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    g, w = got.cpu(), want
    if g.dtype in (t.float16, t.bfloat16):
        g, w = g.to(t.float32), w.to(t.float32)
    g, w = g._np, w._np
    tol = TOL.get(str(got.dtype).split(".")[1], 1e-9)
    if g.dtype.kind in "fc":
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


# Known gaps of the CUDA kernels (NotImplementedError naming the op and dtype): complex
# asin/acos (their results near the branch cuts are not established on the device).
CUDA_GAPS = {("asin", "complex64"), ("acos", "complex64")}
# Where torch's CUDA kernel takes a dtype its CPU kernel refuses, refimpl's does too: the
# CPU raises, and the CUDA result is the one given here (bool abs is the identity).
CUDA_ONLY = {("abs", "bool"): lambda x: x}


def _cpu_accepts(fn, args) -> bool:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - argument errors come first on both devices
        return False
    return True


def _both(fn, *args, dtype: str):
    """fn on CPU operands and on their CUDA copies: the same result or the same error."""
    if (getattr(fn, "name", getattr(fn, "__name__", "")), dtype) in CUDA_GAPS and \
            _cpu_accepts(fn, args):
        with pytest.raises(NotImplementedError):
            fn(*[a.cuda() if isinstance(a, t.Tensor) and a.dim() else a for a in args])
        return
    only = CUDA_ONLY.get((getattr(fn, "name", getattr(fn, "__name__", "")), dtype))
    if only is not None:
        with pytest.raises(NotImplementedError):
            fn(*args)
        got = fn(*[a.cuda() if isinstance(a, t.Tensor) and a.dim() else a for a in args])
        _same(got, only(*args), dtype)
        return
    try:
        want = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the CUDA side must raise alike
        with pytest.raises(type(exc)) as info:
            fn(*[a.cuda() if isinstance(a, t.Tensor) and a.dim() else a for a in args])
        text = re.sub(r'"(\w+?)(_vml_cpu|_cpu_out|_cpu)?" not implemented',
                      r'"\1_cuda" not implemented', str(exc))
        assert str(info.value) == text or "refimpl has no CUDA kernel" in str(info.value)
        return
    got = fn(*[a.cuda() if isinstance(a, t.Tensor) and a.dim() else a for a in args])
    _same(got, want, dtype)


UNARY = ["abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "rsqrt", "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "tanh", "asinh", "acosh", "atanh", "sigmoid", "deg2rad", "rad2deg", "erf", "erfc",
         "erfinv", "lgamma", "digamma", "floor", "ceil", "trunc", "round", "frac", "sign",
         "sgn", "angle", "signbit", "nan_to_num", "conj_physical", "isnan", "isinf",
         "isfinite", "isposinf", "isneginf", "isreal", "logical_not", "bitwise_not", "relu",
         "logit"]
_POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma", "acosh"}
_UNIT = {"asin", "acos", "atanh", "erfinv", "logit"}


@pytest.mark.parametrize("name,dtype", _shard([(n, d) for n in UNARY for d in DTYPES]))
def test_unary(name, dtype):
    fn = getattr(t, name)
    x = _data((67, 35), dtype, positive=name in _POSITIVE, unit=name in _UNIT)
    if name == "acosh" and dtype not in ("bool", "uint8"):
        x = x + 1
    if name == "logit" and dtype in ("float32", "float64"):
        x = x.abs()
    _both(fn, x, dtype=dtype)


BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2",
          "hypot", "maximum", "minimum", "fmax", "fmin", "copysign", "xlogy", "logaddexp",
          "logaddexp2", "nextafter", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
          "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "bitwise_left_shift", "bitwise_right_shift", "heaviside"]
LAYOUTS = ["contiguous", "transposed", "broadcast", "zero_dim", "python_scalar"]


def _operands(layout: str, dtype: str, name: str):
    pos = name in ("pow", "xlogy") and dtype not in ("bool",)
    a = _data((40, 33), dtype, 1, positive=pos)
    if name in ("bitwise_left_shift", "bitwise_right_shift"):
        b = _data((40, 33), dtype, 2).abs() % 9 if dtype != "bool" else _data((40, 33), dtype)
    else:
        b = _data((40, 33), dtype, 2, positive=name in ("div", "floor_divide", "remainder",
                                                       "fmod"))
    if name == "pow" and dtype.startswith(("int", "uint")):
        b = b.abs() % 4
    if layout == "transposed":
        return a.t().contiguous().t(), b.t().contiguous().t()
    if layout == "broadcast":
        return a, b[:, :1]
    if layout == "zero_dim":
        return a, b[3, 4].clone()  # a CPU 0-dim tensor joining the CUDA op
    if layout == "python_scalar":
        return a, (3 if dtype.startswith(("int", "uint")) else True if dtype == "bool"
                   else 1.75)
    return a, b


@pytest.mark.parametrize("name,dtype,layout", _shard(
    [(n, d, lay) for n in BINARY for d in DTYPES for lay in
     (LAYOUTS if d in ("float32", "int64", "float16") or n == "add" else ["contiguous"])]))
def test_binary(name, dtype, layout):
    fn = getattr(t, name)
    a, b = _operands(layout, dtype, name)
    if layout == "zero_dim" and (name, dtype) not in CUDA_GAPS:
        want = None
        try:
            want = fn(a, b)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(type(exc)):
                fn(a.cuda(), b)
            return
        _same(fn(a.cuda(), b), want, dtype)
        _same(fn(a.cuda(), b.cuda()), want, dtype)  # a CUDA 0-dim tensor
        return
    _both(fn, a, b, dtype=dtype)


@pytest.mark.parametrize("dtype", _shard(DTYPES))
def test_ternary_and_clamp(dtype):
    x, y, z = (_data((30, 20), dtype, s) for s in (1, 2, 3))
    cond = _data((30, 1), "bool", 4)
    _both(lambda c, a, b: t.where(c, a, b), cond, x, y, dtype=dtype)
    _both(lambda c, a: t.where(c, a, 0), cond, x, dtype=dtype)
    if dtype in ("float32", "float64", "float16", "bfloat16", "complex64"):
        _both(lambda a, b: t.lerp(a, b, 0.3), x, y, dtype=dtype)
        _both(lambda a, b, w: t.lerp(a, b, w), x, y, z.abs() % 1, dtype=dtype)
        _both(lambda a, b, c: t.addcdiv(a, b, c, value=0.5), x, y, z, dtype=dtype)
    if dtype != "bool":
        _both(lambda a, b, c: t.addcmul(a, b, c, value=2), x, y, z, dtype=dtype)
    if dtype != "complex64":
        _both(lambda a: t.clamp(a, -1, 2), x, dtype=dtype)
        _both(lambda a: t.clamp_min(a, 0), x, dtype=dtype)
        _both(lambda a, lo, hi: t.clamp(a, lo, hi), x, y, z, dtype=dtype)
        _both(lambda a, lo: t.clamp_max(a, lo), x, y[:1], dtype=dtype)


@pytest.mark.parametrize("dtype", _shard(["float32", "float64", "float16", "bfloat16"]))
def test_activations_and_backward_ops(dtype):
    x, g = _data((50, 9), dtype, 1), _data((50, 9), dtype, 2)
    for fn in (lambda a: A.gelu(a), lambda a: A.gelu(a, approximate="tanh"), A.silu,
               lambda a: A.softplus(a, 2.0, 3.0), lambda a: A.hardtanh(a, -0.5, 0.5),
               lambda a: t.threshold(a, 0.1, -3.0), lambda a: t.logit(a, 0.2),
               lambda a: t.polygamma(1, a.abs() + 0.5), lambda a: t.polygamma(3, a.abs() + 0.5),
               lambda a: t.round(a, decimals=2), lambda a: t.nan_to_num(a / 0, 1.0)):
        _both(fn, x, dtype=dtype)
    for fn in (A.sigmoid_backward, A.tanh_backward, lambda a, b: A.threshold_backward(a, b, 0.2)):
        _both(fn, g, x, dtype=dtype)
    _both(lambda a, b: t.isclose(a, b, rtol=0.5), x, g, dtype=dtype)


@pytest.mark.parametrize("dtype", _shard(["float32", "int64", "float16", "complex64"]))
def test_out_and_inplace(dtype):
    x, y = _data((64, 17), dtype, 1), _data((64, 17), dtype, 2)
    want = t.mul(x, y)
    out = t.empty((64, 17), dtype=getattr(t, dtype), device="cuda")
    assert t.mul(x.cuda(), y.cuda(), out=out) is out
    _same(out, want, dtype)
    xc = x.cuda()
    ptr, version = xc.data_ptr(), xc._version
    xc.add_(y.cuda())
    assert xc.data_ptr() == ptr and xc._version == version + 1
    _same(xc, x + y, dtype)
    xc = x.cuda()
    xc.t().mul_(2)  # a strided self
    _same(xc, x * 2, dtype)
    xc = x.cuda()
    xc[1:].sub_(xc[:-1].clone())
    w = x.clone()
    w[1:].sub_(x[:-1].clone())
    _same(xc, w, dtype)
    if dtype != "complex64":
        xc = x.cuda()
        xc.clamp_(-1, 1)
        _same(xc, x.clamp(-1, 1), dtype)


def test_large_vector_path_and_tail():
    for n in (1, 3, 4097, (1 << 20) + 3):
        x = t.arange(n, dtype=t.float32)
        _same(x.cuda() * 2 + 1, x * 2 + 1, "float32")
    x = t.arange(1 << 12, dtype=t.float32).cuda()[1:]  # misaligned: the scalar path
    _same(x + x, (t.arange(1 << 12, dtype=t.float32)[1:]) * 2, "float32")


def test_matches_torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 7)).astype(np.float32)
    b = rng.standard_normal((1, 7)).astype(np.float32)
    ra, rb = t.tensor(a).cuda(), t.tensor(b).cuda()
    ta, tb = torch.tensor(a).cuda(), torch.tensor(b).cuda()
    for rf, tf in ((lambda x, y: x + 2 * y, lambda x, y: x + 2 * y),
                   (lambda x, y: (x * y).exp().tanh(), lambda x, y: (x * y).exp().tanh()),
                   (lambda x, y: t.where(x > y, x, y.sigmoid()),
                    lambda x, y: torch.where(x > y, x, y.sigmoid())),
                   (lambda x, y: (x.half() / y.half()).float(),
                    lambda x, y: (x.half() / y.half()).float()),
                   (lambda x, y: (x.bfloat16() - y.bfloat16()).float(),
                    lambda x, y: (x.bfloat16() - y.bfloat16()).float())):
        np.testing.assert_allclose(rf(ra, rb).cpu()._np, tf(ta, tb).cpu().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_kernels_compile_once():
    from refimpl.cuda import _nvrtc

    x = t.ones(5, device="cuda")
    x * 3.5
    before = dict(_nvrtc._functions)
    for _ in range(3):
        x * 3.5
    assert _nvrtc._functions == before
