"""The special-function kernels of refimpl against mpmath (tight tolerances: the
conformance cases have to admit torch's own errors, these check refimpl's), the
polynomials against torch's values in float32 and float64, and the CUDA device code
compiled with NVRTC (skipped where NVRTC is missing)."""

from __future__ import annotations

import numpy as np
import pytest

from refimpl.ops import special_bessel as B
from refimpl.ops import special_gamma as G
from refimpl.ops import special_poly as P

mp = pytest.importorskip("mpmath")
mp.mp.dps = 30

_XS = [-30.0, -16.5, -7.75, -2.5, -0.3, 0.0, 1e-8, 0.1, 0.49, 0.5, 1.99, 2.01, 5.0, 7.9, 8.1,
       24.9, 25.1, 40.0, 100.0]


def _check(fn, ref, xs, rtol: float, atol: float = 0.0) -> None:
    got = fn(np.array(xs))
    want = np.array([float(ref(mp.mpf(x))) for x in xs])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,ref", [
    ("bessel_j0", lambda x: mp.besselj(0, x)),
    ("bessel_j1", lambda x: mp.besselj(1, x)),
    ("i0", lambda x: mp.besseli(0, x)),
    ("i1", lambda x: mp.besseli(1, x)),
    ("i0e", lambda x: mp.besseli(0, x) * mp.exp(-abs(x))),
    ("i1e", lambda x: mp.besseli(1, x) * mp.exp(-abs(x))),
    ("airy_ai", lambda x: mp.airyai(x)),
])
def test_functions_on_the_whole_line(name, ref):
    _check(getattr(B, name), ref, _XS, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("name,ref", [
    ("bessel_y0", lambda x: mp.bessely(0, x)),
    ("bessel_y1", lambda x: mp.bessely(1, x)),
    ("modified_bessel_k0", lambda x: mp.besselk(0, x)),
    ("modified_bessel_k1", lambda x: mp.besselk(1, x)),
    ("scaled_modified_bessel_k0", lambda x: mp.besselk(0, x) * mp.exp(x)),
    ("scaled_modified_bessel_k1", lambda x: mp.besselk(1, x) * mp.exp(x)),
])
def test_functions_on_the_half_line(name, ref):
    xs = [x for x in _XS if x > 0] + [700.0]
    _check(getattr(B, name), ref, xs, rtol=1e-10, atol=1e-15)
    edge = getattr(B, name)(np.array([0.0, -1.0]))
    assert np.isinf(edge[0]) and np.isnan(edge[1])


def test_erfcx_zeta_and_incomplete_gamma():
    _check(G.erfcx, lambda x: mp.exp(x * x) * mp.erfc(x), [-5.0, -0.5, 0.0, 3.0, 24.9, 25.1, 1e3],
           rtol=1e-12)
    s, q = np.array([2.0, 3.0, 1.5, 4.5, 3.0]), np.array([1.0, 0.5, 2.0, 10.0, -2.5])
    want = [float(mp.zeta(a, b)) for a, b in zip(s, q)]
    np.testing.assert_allclose(G.zeta(s, q), want, rtol=1e-12)
    a, x = np.array([0.5, 2.0, 5.0, 30.0, 0.1]), np.array([0.3, 1.5, 7.0, 25.0, 4.0])
    lower = [float(mp.gammainc(u, 0, v, regularized=True)) for u, v in zip(a, x)]
    np.testing.assert_allclose(G.igamma(a, x), lower, rtol=1e-12)
    np.testing.assert_allclose(G.igammac(a, x), 1 - np.array(lower), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_polynomials_match_torch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, 64).astype(dtype)
    x[:4] = [-1.0, 1.0, 0.0, 0.5]
    n = rng.integers(-2, 14, 64).astype(dtype)
    tx, tn = torch.from_numpy(x), torch.from_numpy(n)
    S = torch.special
    for kind in "tuvw":
        for shifted in (False, True):
            name = f"{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
            want = getattr(S, name)(tx, tn).numpy()
            np.testing.assert_allclose(P.chebyshev(kind, x, n, shifted), want, rtol=2e-5,
                                       atol=1e-5, err_msg=name)
    for fn, ref in ((P.hermite_h, S.hermite_polynomial_h), (P.hermite_he, S.hermite_polynomial_he),
                    (P.laguerre_l, S.laguerre_polynomial_l), (P.legendre_p, S.legendre_polynomial_p)):
        got, want = fn(x, n), ref(tx, tn).numpy()
        if dtype is np.float32:  # the recurrences round as torch's fused multiply-adds
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_device_code_compiles():
    from refimpl import _dtype as D
    from refimpl.cuda import _driver
    from refimpl.ops.special_cuda import compile_check

    try:
        _driver.nvrtc_version()
    except (ImportError, RuntimeError) as exc:  # no bindings or no NVRTC library here
        pytest.skip(f"NVRTC unavailable: {exc}")
    f32, f64 = D.float32, D.float64
    assert compile_check("sp_airy_ai((double)a) + sp_k(1, (double)a, true) + sp_i_scaled(0, a)"
                         " + sp_spherical_j0(a) + sp_j0(a) + sp_y1(a) + sp_erfcx(a) + sp_sinc(a)",
                         (f32,), (f32,), f32)
    assert compile_check("sp_zeta(a, b) + sp_igamma(a, b, true) + sp_cheb(2, true, a, b)"
                         " + sp_hermite(true, a, b) + sp_laguerre(a, b) + sp_legendre(a, b)",
                         (f64, f64), (f64, f64), f64)
    assert compile_check("sp_gcd(a, b) + sp_lcm(a, b)", (D.int64, D.int64), (D.int64, D.int64),
                         D.int64)


_HOST_SHIM = r"""
#include <cmath>
#include <cstdio>
using std::isinf; using std::isfinite;
#define DI static inline
#define R_PI 3.14159265358979323846
template<class T> struct cplx { T re, im; };
template<class T> static cplx<T> mk(T re, T im) { return {re, im}; }
static double cyl_bessel_i0(double x) { return std::cyl_bessel_i(0.0, std::fabs(x)); }
static double cyl_bessel_i1(double x) { return std::copysign(std::cyl_bessel_i(1.0, std::fabs(x)), x); }
static double erfcx(double x) { return std::exp(x * x) * std::erfc(x); }
"""

_HOST_MAIN = r"""
int main() {
  double a, b;
  while (scanf("%lf %lf", &a, &b) == 2)
    printf("%.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g\n",
           sp_airy_ai(a), sp_k(0, a, false), sp_k(1, a, true), sp_i_scaled(1, a),
           sp_zeta(a, b), sp_igamma(a, b, true), sp_cheb<double>(1, true, a, b),
           sp_hermite<double>(false, a, b), sp_laguerre<double>(a, b),
           sp_legendre<double>(a, b), (double)sp_gcd((long long)a, (long long)b));
}
"""


def test_device_functions_agree_with_the_cpu_kernels(tmp_path):
    """The CUDA device functions, compiled for the host (a C++ compiler is all it
    needs), give the CPU kernels' values: the two implementations of each algorithm
    cannot drift apart unseen on machines without a GPU."""
    import shutil
    import subprocess

    from refimpl.ops.special_cuda import SPECIAL_DEVICE

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, exe = tmp_path / "dev.cpp", tmp_path / "dev"
    src.write_text(_HOST_SHIM + SPECIAL_DEVICE + _HOST_MAIN)
    subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(src)], check=True)
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.uniform(-12, 40, 300), [0.0, 2.0, -8.5, 1e-8, np.inf, np.nan]])
    b = np.concatenate([np.round(rng.uniform(-3, 30, 300)), [1.0, 2.0, 3.0, 12.0, 2.0, 2.0]])
    feed = "\n".join(f"{float(x)!r} {float(y)!r}" for x, y in zip(a, b))
    out = subprocess.run([str(exe)], input=feed, capture_output=True, text=True, check=True,
                         timeout=60).stdout
    dev = np.array([[float(v) for v in line.split()] for line in out.strip().splitlines()])
    with np.errstate(all="ignore"):
        ref = [B.airy_ai(a), B.modified_bessel_k0(a), B.scaled_modified_bessel_k1(a), B.i1e(a),
               G.zeta(a, b), G.igammac(a, b), P.chebyshev("u", a, b, True), P.hermite_he(a, b),
               P.laguerre_l(a, b), P.legendre_p(a, b)]
    for column, want in enumerate(ref):
        np.testing.assert_allclose(dev[:, column], want, rtol=1e-9, atol=1e-300, equal_nan=True,
                                   err_msg=f"column {column}")
    finite = np.isfinite(a)
    np.testing.assert_array_equal(dev[finite, 10], np.gcd(a[finite].astype(np.int64),
                                                          b[finite].astype(np.int64)))
