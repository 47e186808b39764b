"""CUDA side of the special functions: device code placed before the generated
elementwise kernels, and the ``Unary``/``Binary`` forms whose kernels include it.

The device functions are the algorithms of ``special_bessel``, ``special_gamma`` and
``special_poly`` written once more in CUDA C (evaluated in double; the polynomials in
the compute type, as torch's). libdevice supplies ``j0``, ``j1``, ``y0``, ``y1``,
``cyl_bessel_i0``, ``cyl_bessel_i1`` and ``erfcx``.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl.ops._pointwise import Binary, Unary
from refimpl.ops._pointwise_cuda import cuda_expr, generator, no_cuda_complex, not_implemented_cuda

SPECIAL_DEVICE = r"""
#define SP_EULER 0.57721566490153286061
DI double sp_j0(double x) { return j0(x); }
DI double sp_j1(double x) { return j1(x); }
DI double sp_y0(double x) { return y0(x); }
DI double sp_y1(double x) { return y1(x); }
DI double sp_i0(double x) { return cyl_bessel_i0(x); }
DI double sp_i1(double x) { return cyl_bessel_i1(x); }
DI double sp_erfcx(double x) { return erfcx(x); }
DI double sp_i_series(int nu, double a) {
  double q = a * a / 4, term = nu == 0 ? 1.0 : a / 2, total = term;
  for (int k = 1; k < 80; ++k) { term *= q / (k * (double)(k + nu)); total += term; }
  return total; }
DI double sp_i_scaled(int nu, double x) {
  double a = fabs(x), r;
  if (x != x) return x;
  if (isinf(a)) return 0.0;
  if (a <= 30) { r = sp_i_series(nu, a) * exp(-a); }
  else {
    double mu = 4.0 * nu * nu, term = 1, total = 1;
    for (int k = 1; k < 30; ++k) { term = -term * (mu - (2 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * a); total += term; }
    r = total / sqrt(2 * R_PI * a); }
  return (nu == 1 && x < 0) ? -r : r; }
DI double sp_k_series(int nu, double x) {
  double q = x * x / 4, lh = log(x / 2);
  if (nu == 0) {
    double term = 1, psi = -SP_EULER, total = psi;
    for (int k = 1; k < 30; ++k) { term *= q / ((double)k * k); psi += 1.0 / k; total += psi * term; }
    return total - lh * sp_i_series(0, x); }
  double term = x / 4, ps = 1 - 2 * SP_EULER, total = ps * term;
  for (int k = 1; k < 30; ++k) { term *= q / ((double)k * (k + 1)); ps += 1.0 / k + 1.0 / (k + 1); total += ps * term; }
  return 1 / x + lh * sp_i_series(1, x) - total; }
DI double sp_k_scaled_quad(double nu, double z) {
  double h = fmin(0.25, 0.6 / sqrt(z));
  double t_end = acosh(1 + 45 / z) + 2 * fabs(nu) * h;
  int steps = (int)ceil(t_end / h) + 1;
  double total = 0.5;
  for (int j = 1; j < steps; ++j) {
    double t = j * h, s = sinh(t / 2);
    total += exp(-2 * z * s * s) * cosh(nu * t); }
  return h * total; }
DI double sp_k(int nu, double x, bool scaled) {
  if (x != x || x < 0) return NAN;
  if (x == 0) return INFINITY;
  if (isinf(x)) return 0.0;
  if (x < 0.5) { double s = sp_k_series(nu, x); return scaled ? s * exp(x) : s; }
  double v = sp_k_scaled_quad(nu, x);
  return scaled ? v : v * exp(-x); }
DI double sp_airy_ai(double x) {
  if (x != x) return x;
  if (isinf(x)) return 0.0;
  if (x >= 110) return 0.0;
  if (x >= -8 && x <= 2) {
    double x3 = x * x * x, f = 1, g = x, tf = 1, tg = x;
    for (int k = 1; k < 60; ++k) {
      tf *= x3 / ((3.0 * k - 1) * (3.0 * k)); tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
      f += tf; g += tg; }
    return 0.355028053887817239260 * f - 0.258819403792806798405 * g; }
  if (x > 2) {
    double z = 2.0 / 3.0 * x * sqrt(x);
    return sqrt(x / 3) / R_PI * sp_k_scaled_quad(1.0 / 3.0, z) * exp(-z); }
  double a = -x, z = 2.0 / 3.0 * a * sqrt(a), p = 1, q = 0, u = 1, term = 1;
  for (int k = 1; k < 30; ++k) {
    u *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k);
    term /= z;
    double sign = ((k / 2) % 2) ? -1.0 : 1.0;
    if (k % 2) q += sign * u * term; else p += sign * u * term; }
  double ph = z + R_PI / 4;
  return (sin(ph) * p - cos(ph) * q) / (sqrt(R_PI) * sqrt(sqrt(a))); }
DI double sp_spherical_j0(double x) {
  if (isinf(x)) return 0.0;
  if (fabs(x) < 0.5) {
    double x2 = x * x, s = 1;
    for (int k = 7; k >= 1; --k) s = 1 - x2 / (2.0 * k * (2 * k + 1)) * s;
    return s; }
  return sin(x) / x; }
DI double sp_lgamma(double x) { return lgamma(x); }
DI double sp_igamma(double a, double x, bool upper) {
  if (a != a || x != x || a < 0 || x < 0) return NAN;
  double one = upper ? 0.0 : 1.0, zero = upper ? 1.0 : 0.0;
  if (a == 0) return x > 0 ? one : NAN;
  if (x == 0) return zero;
  if (isinf(a)) return isinf(x) ? NAN : zero;
  if (isinf(x)) return one;
  double pre = exp(a * log(x) - x - lgamma(a));
  if (x < a + 1) {
    double term = 1 / a, total = term, ap = a;
    for (int i = 0; i < 2000; ++i) {
      ap += 1; term *= x / ap; total += term;
      if (fabs(term) <= fabs(total) * 1e-17) break; }
    double p = total * pre;
    return upper ? 1 - p : p; }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / (b == 0 ? tiny : b), h = d;
  for (int i = 1; i < 2000; ++i) {
    double an = -i * (i - a);
    b += 2; d = an * d + b; d = 1 / (d == 0 ? tiny : d);
    c = b + an / c; if (c == 0) c = tiny;
    double delta = d * c; h *= delta;
    if (fabs(delta - 1) <= 1e-16) break; }
  double qv = h * pre;
  return upper ? qv : 1 - qv; }
DI double sp_zeta(double s, double q) {
  if (s != s || q != q) return NAN;
  if (s == 1) return INFINITY;
  if (s < 1) return NAN;
  bool q_int = q == floor(q);
  if (q <= 0 && q_int) return INFINITY;
  if (q <= 0 && s != floor(s)) return NAN;
  if (isinf(s)) return q == 1 ? 1.0 : (q > 1 ? 0.0 : NAN);
  if (isinf(q)) return NAN;
  const double B[10] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730,
                        7.0 / 6, -3617.0 / 510, 43867.0 / 798, -174611.0 / 330};
  double acc = 0, a = q;
  while (a < 15) { acc += pow(a, -s); a += 1; }
  double tail = pow(a, 1 - s) / (s - 1) + 0.5 * pow(a, -s), rising = s, pw = pow(a, -s - 1);
  double fact = 2;
  for (int j = 1; j <= 10; ++j) {
    tail += B[j - 1] / fact * rising * pw;
    rising *= (s + 2 * j - 1) * (s + 2 * j); pw /= a * a; fact *= (2.0 * j + 1) * (2 * j + 2); }
  return acc + tail; }
template<class T> DI long long sp_degree(T n) { return isfinite((double)n) ? (long long)n : -1; }
template<class T> DI T sp_cheb(int kind, bool shifted, T x, T nn) {
  long long n = sp_degree(nn);
  if (n < 0) return 0;
  bool odd = n % 2 == 1;
  T y = shifted ? x + x - (T)1 : x;
  T n1 = (T)(n + 1), n2 = (T)(n + n + 1), sg = odd ? (T)-1 : (T)1;
  T top = kind == 0 ? (T)1 : kind == 1 ? n1 : kind == 2 ? (T)1 : n2;
  T bottom = kind == 0 ? sg : kind == 1 ? sg * n1 : kind == 2 ? sg * n2 : sg;
  bool at_top = shifted ? x == (T)1 : (fabs(x) == (T)1 && x > 0);
  bool at_bottom = shifted ? x == (T)0 : (fabs(x) == (T)1 && x < 0);
  if (at_top) return top;
  if (at_bottom) return bottom;
  const int from_plain[4] = {6, 8, 8, 8}, from_shifted[4] = {6, 6, 6, 4};
  int from = shifted ? from_shifted[kind] : from_plain[kind];
  if (n > from && fabs(y) < (T)1) {
    T th = acos(y), nf = (T)n;
    if (kind == 0) return cos(nf * th);
    if (kind == 1) return sin(th) != (T)0 ? sin((nf + 1) * th) / sin(th) : (nf + 1) * cos((nf + 1) * th) / y;
    if (kind == 2) return sin(th / (T)2) != (T)1 ? cos((nf + (T)0.5) * th) / cos(th / (T)2) : bottom;
    return cos(th / (T)2) != (T)1 ? sin((nf + (T)0.5) * th) / sin(th / (T)2) : top; }
  T p = 1, q = kind == 0 ? y : kind == 1 ? y + y : kind == 2 ? y + y - (T)1 : y + y + (T)1;
  if (n == 0) return 1;
  for (long long k = 1; k < n && q == q; ++k) { T r = (y + y) * q - p; p = q; q = r; }
  return q; }
template<class T> DI T sp_hermite(bool phys, T x, T nn) {
  long long n = sp_degree(nn);
  if (n < 0) return 0;
  if (n == 0) return 1;
  if (n > (sizeof(T) == 4 ? 128 : 512)) return (T)NAN;
  T p = 1, q = phys ? x + x : x;
  for (long long k = 1; k < n; ++k) {
    T r = phys ? (x + x) * q - (T)(2 * k) * p : x * q - (T)k * p; p = q; q = r; }
  return q; }
template<class T> DI T sp_laguerre(T x, T nn) {
  long long n = sp_degree(nn);
  if (n < 0) return 0;
  if (x == (T)0 || n == 0) return 1;
  T p = 1, q = (T)1 - x;
  for (long long k = 1; k < n && q == q; ++k) {
    T r = (((T)(2 * k) + ((T)1 - x)) * q - (T)k * p) / (T)(k + 1); p = q; q = r; }
  return q; }
template<class T> DI T sp_legendre(T x, T nn) {
  long long n = sp_degree(nn);
  if (n < 0) return 0;
  if (fabs(x) == (T)1) return (x > 0 || n % 2 == 0) ? (T)1 : (T)-1;
  if (n == 0) return 1;
  T p = 1, q = x;
  for (long long k = 1; k < n && q == q; ++k) {
    T r = ((T)(2 * k + 1) * x * q - (T)k * p) / (T)(k + 1); p = q; q = r; }
  return q; }
template<class T> DI T sp_sinc(T x) {
  if (x == (T)0) return 1;
  T px = x * (T)R_PI;
  return sin(px) / px; }
template<class T> DI cplx<T> sp_sinc(cplx<T> x) {
  if (x.re == 0 && x.im == 0) return mk((T)1, (T)0);
  cplx<T> px = mk(x.re * (T)R_PI, x.im * (T)R_PI);
  return sin(px) / px; }
template<class T> DI T sp_gcd(T a, T b) {
  a = a < 0 ? -a : a; b = b < 0 ? -b : b;
  while (b != 0) { T t = a % b; a = b; b = t; }
  return a; }
DI bool sp_gcd(bool a, bool b) { return a || b; }
template<class T> DI T sp_lcm(T a, T b) {
  T g = sp_gcd(a, b);
  if (g == 0) return 0;
  T r = a / g * b;
  return r < 0 ? -r : r; }
DI bool sp_lcm(bool a, bool b) { return a && b; }
template<class T> DI T sp_frexp_m(T x) { int e; return frexp(x, &e); }
template<class T> DI int sp_frexp_e(T x) { int e; frexp(x, &e); return (x == x && !isinf(x)) ? e : 0; }
"""

_KERNELS: dict = {}


def run_special(expr: str, inputs: tuple, out_dtype: D.dtype, compute, params, shape, into,
                name: str):
    """Run ``expr`` (which may call the ``sp_*`` device functions) over ``inputs``."""
    names = () if params is None else tuple(params)
    key = (expr, *names)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS.setdefault(key, generator().Elementwise(expr, name, names,
                                                             prelude=SPECIAL_DEVICE))
    values = () if params is None else tuple(params.values())
    return k.run(inputs, out_dtype, compute, values, shape, into)


class SpecialUnary(Unary):
    """A ``Unary`` whose CUDA expression calls the special device functions
    (``cuda_complex``: the expression has a complex overload too)."""

    def cuda_into(self, into, x, *args, **kwargs):
        """The CUDA kernel writing into ``into`` or a fresh tensor."""
        dtype, out = self.prepare(x, args, kwargs)
        if dtype not in self.allow:
            raise not_implemented_cuda(self.kernel or self.name, dtype)
        if dtype.category == 3 and not self.cuda_complex:
            raise no_cuda_complex(self.name, dtype)
        expr, params = cuda_expr(self.cuda_spec, dtype, (x, *args), kwargs)
        return run_special(expr, (x,), out, dtype, params, x._shape, into, self.name)


class SpecialBinary(Binary):
    """A ``Binary`` whose CUDA expression calls the special device functions."""

    def cuda_into(self, into, a, b, **kwargs):
        """The CUDA kernel writing into ``into`` or a fresh tensor."""
        shape, dtype, out = self.prepare(a, b, kwargs)
        if dtype not in self.allow:
            kernel = self.kernel(**kwargs) if callable(self.kernel) else self.kernel
            raise not_implemented_cuda(kernel or self.name, dtype)
        if dtype.category == 3:
            raise no_cuda_complex(self.name, dtype)
        expr, params = cuda_expr(self.cuda_spec, dtype, (a, b), kwargs)
        return run_special(expr, (a, b), out, dtype, params, shape, into, self.name)


def compile_check(expr: str, sig: tuple, compute: tuple, out: D.dtype,
                  arch: str = "sm_90") -> bytes:
    """Compile one expression's kernels with NVRTC only (no device needed)."""
    from refimpl.cuda import _driver, _nvrtc

    gen = generator()
    k = gen.Elementwise(expr, name="check", prelude=SPECIAL_DEVICE)
    plan = gen._Plan(k, tuple(sig), tuple(compute), out, ())
    return _driver.nvrtc_compile(plan.source, "check.cu",
                                 [*_nvrtc._OPTIONS, f"--gpu-architecture={arch}"], cubin=True)
