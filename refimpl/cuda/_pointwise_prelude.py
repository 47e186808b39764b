"""The CUDA C prelude every generated elementwise kernel starts with.

It gives an op's one-line expression the same meaning for every dtype:

* storage types (``h16``/``bf16`` wrap the 16-bit patterns of float16/bfloat16, ``c64``
  and ``c128`` are complex) and ``Cvt<To>::f(x)``, torch's casts between any two of
  them (half/bfloat16 through float with round to nearest even, a float reaches uint8
  through int64, complex to real keeps the real part, anything to bool is ``!= 0``);
* complex arithmetic (``cplx<T>``) with the usual operators and the functions the
  complex ops need (``exp``, ``log``, ``sqrt``, trigonometry, ``pow``, ...);
* ``r_*`` helpers overloaded per type where torch's semantics differ by dtype
  (integer division rounding, NaN-propagating maximum, remainders, powers of
  integers, predicates, shifts, special functions).

Expressions see compute values: float16/bfloat16 operands arrive as ``float``.
"""

PRELUDE = r"""
typedef signed char i8; typedef unsigned char u8; typedef long long i64;
struct __align__(2) h16 { unsigned short x; };
struct __align__(2) bf16 { unsigned short x; };
template<class T> struct __align__(2 * sizeof(T)) cplx { T re, im; };
typedef cplx<float> c64; typedef cplx<double> c128;
#define DI __device__ __forceinline__
#define R_PI 3.14159265358979323846
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
DI float h2f(h16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f; }
DI h16 f2h(float f) { h16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
DI float bf2f(bf16 b) { return __uint_as_float(((unsigned int)b.x) << 16); }
DI bf16 f2bf(float f) {
  unsigned int u = __float_as_uint(f); bf16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u) { r.x = 0x7fc0; return r; }
  u += 0x7fffu + ((u >> 16) & 1u); r.x = (unsigned short)(u >> 16); return r; }
template<class T> DI T re_of(T v) { return v; }
template<class T> DI T re_of(cplx<T> v) { return v.re; }
DI float re_of(h16 v) { return h2f(v); }
DI float re_of(bf16 v) { return bf2f(v); }
template<class To> struct Cvt { template<class F> static DI To f(F v) { return (To)re_of(v); } };
template<> struct Cvt<bool> {
  template<class F> static DI bool f(F v) { return re_of(v) != 0; }
  template<class T> static DI bool f(cplx<T> v) { return v.re != 0 || v.im != 0; } };
template<> struct Cvt<u8> {
  template<class F> static DI u8 f(F v) { return (u8)re_of(v); }
  static DI u8 f(float v) { return (u8)(i64)v; }
  static DI u8 f(double v) { return (u8)(i64)v; }
  static DI u8 f(h16 v) { return (u8)(i64)h2f(v); }
  static DI u8 f(bf16 v) { return (u8)(i64)bf2f(v); }
  template<class T> static DI u8 f(cplx<T> v) { return (u8)(i64)v.re; } };
template<> struct Cvt<h16> {
  template<class F> static DI h16 f(F v) { return f2h((float)re_of(v)); }
  static DI h16 f(h16 v) { return v; } };
template<> struct Cvt<bf16> {
  template<class F> static DI bf16 f(F v) { return f2bf((float)re_of(v)); }
  static DI bf16 f(bf16 v) { return v; } };
template<class T> struct Cvt<cplx<T> > {
  template<class F> static DI cplx<T> f(F v) { cplx<T> r; r.re = (T)re_of(v); r.im = 0; return r; }
  template<class U> static DI cplx<T> f(cplx<U> v) { cplx<T> r; r.re = (T)v.re; r.im = (T)v.im; return r; } };
template<class T> DI cplx<T> mk(T re, T im) { cplx<T> r; r.re = re; r.im = im; return r; }

// -- complex arithmetic ----------------------------------------------------------------
template<class T> DI cplx<T> operator+(cplx<T> a, cplx<T> b) { return mk(a.re + b.re, a.im + b.im); }
template<class T> DI cplx<T> operator-(cplx<T> a, cplx<T> b) { return mk(a.re - b.re, a.im - b.im); }
template<class T> DI cplx<T> operator*(cplx<T> a, cplx<T> b) {
  return mk(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
template<class T> DI cplx<T> operator/(cplx<T> a, cplx<T> b) {
  // scaled by the larger component of b, so that neither product overflows early
  T ar = fabs(b.re), ai = fabs(b.im);
  if (ar == 0 && ai == 0) return mk(a.re / ar, a.im / ai);
  if (ar >= ai) { T r = b.im / b.re, d = b.re + b.im * r;
    return mk((a.re + a.im * r) / d, (a.im - a.re * r) / d); }
  T r = b.re / b.im, d = b.im + b.re * r;
  return mk((a.re * r + a.im) / d, (a.im * r - a.re) / d); }
template<class T> DI cplx<T> operator-(cplx<T> a) { return mk(-a.re, -a.im); }
template<class T> DI bool operator==(cplx<T> a, cplx<T> b) { return a.re == b.re && a.im == b.im; }
template<class T> DI bool operator!=(cplx<T> a, cplx<T> b) { return !(a == b); }
#define CPLX_MIXED(S) \
  template<class T> DI cplx<T> operator+(cplx<T> a, S s) { return a + mk((T)s, (T)0); } \
  template<class T> DI cplx<T> operator+(S s, cplx<T> a) { return mk((T)s, (T)0) + a; } \
  template<class T> DI cplx<T> operator-(cplx<T> a, S s) { return a - mk((T)s, (T)0); } \
  template<class T> DI cplx<T> operator-(S s, cplx<T> a) { return mk((T)s, (T)0) - a; } \
  template<class T> DI cplx<T> operator*(cplx<T> a, S s) { return a * mk((T)s, (T)0); } \
  template<class T> DI cplx<T> operator*(S s, cplx<T> a) { return mk((T)s, (T)0) * a; } \
  template<class T> DI cplx<T> operator/(cplx<T> a, S s) { return a / mk((T)s, (T)0); } \
  template<class T> DI cplx<T> operator/(S s, cplx<T> a) { return mk((T)s, (T)0) / a; }
CPLX_MIXED(int) CPLX_MIXED(float) CPLX_MIXED(double)
template<class T> DI T r_abs(cplx<T> z) { return hypot(z.re, z.im); }
template<class T> DI cplx<T> exp(cplx<T> z) {
  if (isinf(z.re) && z.re < 0 && !isfinite(z.im)) return mk((T)0, (T)0);
  if (z.im == 0) return mk(exp(z.re), z.im);
  T e = exp(z.re); return mk(e * cos(z.im), e * sin(z.im)); }
template<class T> DI cplx<T> log(cplx<T> z) { return mk(log(r_abs(z)), atan2(z.im, z.re)); }
template<class T> DI cplx<T> sqrt(cplx<T> z) {
  if (z.re == 0 && z.im == 0) return mk((T)0, z.im);
  if (isinf(z.im)) return mk((T)INFINITY, z.im);
  T m = r_abs(z);
  T re = sqrt((m + fabs(z.re)) / 2);
  if (z.re >= 0) return mk(re, z.im / (2 * re));
  return mk(fabs(z.im) / (2 * re), copysign(re, z.im)); }
template<class T> DI cplx<T> sin(cplx<T> z) {
  return mk(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im)); }
template<class T> DI cplx<T> cos(cplx<T> z) {
  return mk(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im)); }
template<class T> DI cplx<T> sinh(cplx<T> z) {
  return mk(sinh(z.re) * cos(z.im), cosh(z.re) * sin(z.im)); }
template<class T> DI cplx<T> cosh(cplx<T> z) {
  return mk(cosh(z.re) * cos(z.im), sinh(z.re) * sin(z.im)); }
template<class T> DI cplx<T> tanh(cplx<T> z) {
  if (fabs(z.re) > 20) return mk(copysign((T)1, z.re), (T)0 * sin(2 * z.im));
  T d = cosh(2 * z.re) + cos(2 * z.im);
  return mk(sinh(2 * z.re) / d, sin(2 * z.im) / d); }
template<class T> DI cplx<T> tan(cplx<T> z) {
  cplx<T> t = tanh(mk(-z.im, z.re)); return mk(t.im, -t.re); }
template<class T> DI cplx<T> r_i(cplx<T> z) { return mk(-z.im, z.re); }
template<class T> DI cplx<T> r_negi(cplx<T> z) { return mk(z.im, -z.re); }
template<class T> DI cplx<T> asinh(cplx<T> z) { return log(z + sqrt(z * z + 1)); }
template<class T> DI cplx<T> acosh(cplx<T> z) { return log(z + sqrt(z + 1) * sqrt(z - 1)); }
template<class T> DI cplx<T> atanh(cplx<T> z) { return (log(1 + z) - log(1 - z)) * 0.5; }
template<class T> DI cplx<T> asin(cplx<T> z) { return r_negi(asinh(r_i(z))); }
template<class T> DI cplx<T> acos(cplx<T> z) { cplx<T> a = asin(z); return mk((T)(R_PI / 2) - a.re, -a.im); }
template<class T> DI cplx<T> atan(cplx<T> z) { return r_negi(atanh(r_i(z))); }
template<class T> DI cplx<T> log1p(cplx<T> z) { return log(z + 1); }
template<class T> DI cplx<T> expm1(cplx<T> z) { return exp(z) - 1; }
template<class T> DI cplx<T> exp2(cplx<T> z) { return exp(z * (T)0.693147180559945309417); }
template<class T> DI cplx<T> log2(cplx<T> z) { return log(z) / (T)0.693147180559945309417; }
template<class T> DI cplx<T> log10(cplx<T> z) { return log(z) / (T)2.30258509299404568402; }
template<class T> DI cplx<T> r_pow(cplx<T> a, cplx<T> b) {
  if (b.re == 0 && b.im == 0) return mk((T)1, (T)0);
  if (a.re == 0 && a.im == 0 && b.re > 0) return mk((T)0, (T)0);
  return exp(b * log(a)); }
template<class T> DI cplx<T> r_conj(cplx<T> z) { return mk(z.re, -z.im); }
template<class T> DI cplx<T> r_sgn(cplx<T> z) {
  T m = r_abs(z); if (m == 0) return mk((T)0, (T)0); return mk(z.re / m, z.im / m); }
template<class T> DI T r_angle(cplx<T> z) { return atan2(z.im, z.re); }
template<class T> DI T r_real(cplx<T> z) { return z.re; }
template<class T> DI T r_imag(cplx<T> z) { return z.im; }
template<class T> DI bool r_isnan(cplx<T> z) { return isnan(z.re) || isnan(z.im); }
template<class T> DI bool r_isinf(cplx<T> z) { return isinf(z.re) || isinf(z.im); }
template<class T> DI bool r_isfinite(cplx<T> z) { return isfinite(z.re) && isfinite(z.im); }
template<class T> DI bool r_nz(cplx<T> z) { return z.re != 0 || z.im != 0; }
template<class T> DI cplx<T> r_sigmoid(cplx<T> z) { return 1 / (1 + exp(-z)); }
template<class T> DI cplx<T> r_rsqrt(cplx<T> z) { return 1 / sqrt(z); }

// -- real helpers (one name, every real type) -------------------------------------------
template<class T> DI T r_real(T v) { return v; }
template<class T> DI T r_conj(T v) { return v; }
template<class T> DI bool r_nz(T v) { return v != 0; }
DI bool r_abs(bool v) { return v; }
DI u8 r_abs(u8 v) { return v; }
template<class T> DI T r_abs(T v) { return v < 0 ? (T)-v : v; }
DI float r_abs(float v) { return fabsf(v); }
DI double r_abs(double v) { return fabs(v); }
template<class T> DI T r_sign(T v) { return (T)((0 < v) - (v < 0)); }
DI bool r_sign(bool v) { return v; }
template<class T> DI T r_sgn(T v) { return r_sign(v); }
template<class T> DI T r_angle(T v) { return isnan((double)v) ? v : (v < 0 ? (T)R_PI : (T)0); }
template<class T> DI bool r_isnan(T v) { return v != v; }
template<class T> DI bool r_isinf(T v) { return false; }
DI bool r_isinf(float v) { return isinf(v); }
DI bool r_isinf(double v) { return isinf(v); }
template<class T> DI bool r_isfinite(T v) { return true; }
DI bool r_isfinite(float v) { return isfinite(v); }
DI bool r_isfinite(double v) { return isfinite(v); }
template<class T> DI bool r_signbit(T v) { return v < 0; }
DI bool r_signbit(bool v) { return false; }
DI bool r_signbit(u8 v) { return false; }
DI bool r_signbit(float v) { return signbit(v); }
DI bool r_signbit(double v) { return signbit(v); }
template<class T> DI T r_floor(T v) { return v; }
DI float r_floor(float v) { return floorf(v); }
DI double r_floor(double v) { return floor(v); }
template<class T> DI T r_ceil(T v) { return v; }
DI float r_ceil(float v) { return ceilf(v); }
DI double r_ceil(double v) { return ceil(v); }
template<class T> DI T r_trunc(T v) { return v; }
DI float r_trunc(float v) { return truncf(v); }
DI double r_trunc(double v) { return trunc(v); }
template<class T> DI T r_round(T v) { return v; }
DI float r_round(float v) { return rintf(v); }
DI double r_round(double v) { return rint(v); }
template<class T> DI T r_sigmoid(T v) { return (T)1 / ((T)1 + exp(-v)); }
template<class T> DI T r_rsqrt(T v) { return rsqrt(v); }
template<class T> DI T r_maximum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template<class T> DI T r_minimum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
DI bool r_maximum(bool a, bool b) { return a || b; }
DI bool r_minimum(bool a, bool b) { return a && b; }
template<class T> DI T r_fmax(T a, T b) { return (a != a) ? b : ((b != b) ? a : (a > b ? a : b)); }
template<class T> DI T r_fmin(T a, T b) { return (a != a) ? b : ((b != b) ? a : (a < b ? a : b)); }
template<class T> DI T r_div_trunc(T a, T b) { return a / b; }
DI float r_div_trunc(float a, float b) { return truncf(a / b); }
DI double r_div_trunc(double a, double b) { return trunc(a / b); }
template<class T> DI T r_div_floor(T a, T b) {
  if (b == 0) return a / b;  // integer division by zero: whatever the hardware gives
  T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) --q; return q; }
template<class T> DI T r_div_floor_f(T a, T b) {
  if (b == 0) return a / b;
  T m = fmod(a, b), d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  T f;
  if (d != 0) { f = floor(d); if (d - f > (T)0.5) f += 1; }
  else f = copysign((T)0, a / b);
  return f; }
DI float r_div_floor(float a, float b) { return r_div_floor_f(a, b); }
DI double r_div_floor(double a, double b) { return r_div_floor_f(a, b); }
/* integers: b == 0 gives what the GPU's integer remainder gives, as in torch's kernel */
template<class T> DI T r_remainder(T a, T b) {
  T r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
template<class T> DI T r_remainder_f(T a, T b) {
  T r = fmod(a, b); if (r != 0 && ((b < 0) != (r < 0))) r += b; return r; }
DI float r_remainder(float a, float b) { return r_remainder_f(a, b); }
DI double r_remainder(double a, double b) { return r_remainder_f(a, b); }
template<class T> DI T r_fmod(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
DI float r_fmod(float a, float b) { return fmodf(a, b); }
DI double r_fmod(double a, double b) { return fmod(a, b); }
template<class T> DI T r_pow(T a, T b) {
  // integers: exponentiation by squaring; negative exponents give 1, -1 or 0 like torch
  if (b < 0) { if (a == 1) return 1; if (a == (T)-1) return (b & 1) ? (T)-1 : (T)1; return 0; }
  T r = 1; T base = a; unsigned long long e = (unsigned long long)b;
  while (e) { if (e & 1) r = (T)(r * base); base = (T)(base * base); e >>= 1; } return r; }
DI bool r_pow(bool a, bool b) { return a || !b; }
DI float r_pow(float a, float b) { return powf(a, b); }
DI double r_pow(double a, double b) { return pow(a, b); }
template<class T> DI T r_lshift(T a, T b) {
  return ((i64)b < 0 || (i64)b >= (i64)(sizeof(T) * 8)) ? (T)0 : (T)(a << b); }
template<class T> DI T r_rshift(T a, T b) {
  const i64 bits = sizeof(T) * 8;
  if ((T)-1 < 0) {  // signed: the sign fill for shifts of the width - 1 or more
    if ((i64)b < 0 || (i64)b >= bits - 1) return (T)(a >> (bits - 1));
    return (T)(a >> b); }
  return ((i64)b < 0 || (i64)b >= bits) ? (T)0 : (T)(a >> b); }
template<class T> DI T r_xlogy(T x, T y) {
  if (y != y) return y; if (x == 0) return 0; return x * log(y); }
template<class T> DI T r_logaddexp(T a, T b) {
  if (isinf(a) && a == b) return a;
  T m = a > b ? a : b; if (m != m || (b != b)) return a + b;
  return m + log1p(exp(-fabs(a - b))); }
template<class T> DI T r_logaddexp2(T a, T b) {
  if (isinf(a) && a == b) return a;
  T m = a > b ? a : b; if (m != m || (b != b)) return a + b;
  return m + log1p(exp2(-fabs(a - b))) / (T)0.693147180559945309417; }
template<class T> DI T r_nan_to_num(T v, T nan, T posinf, T neginf) {
  return v != v ? nan : (v == (T)INFINITY ? posinf : (v == -(T)INFINITY ? neginf : v)); }
template<class T> DI cplx<T> r_logaddexp(cplx<T> a, cplx<T> b) {
  cplx<T> hi = a.re >= b.re ? a : b, lo = a.re >= b.re ? b : a;
  if (isinf(hi.re) && hi == lo) return hi;
  return hi + log1p(exp(lo - hi)); }
template<class T> DI cplx<T> r_nan_to_num(cplx<T> v, T nan, T posinf, T neginf) {
  return mk(r_nan_to_num(v.re, nan, posinf, neginf), r_nan_to_num(v.im, nan, posinf, neginf)); }
// nextafter in a 16-bit format: step the bit pattern of the (exactly representable) value
#define R_NEXTAFTER16(NAME, TO, FROM) \
  DI float NAME(float a, float b) { \
    if (a != a || b != b) return a + b; \
    if (a == b) return b; \
    auto h = TO(a); \
    if ((h.x & 0x7fff) == 0) h.x = b > 0 ? 1 : 0x8001; \
    else h.x = ((a < b) == (a > 0)) ? h.x + 1 : h.x - 1; \
    return FROM(h); }
R_NEXTAFTER16(r_nextafter_h16, f2h, h2f)
R_NEXTAFTER16(r_nextafter_bf16, f2bf, bf2f)
template<class T> DI T r_heaviside(T x, T v) { return x == 0 ? v : (T)(x > 0); }
template<class T> DI T r_frac(T v) { return v - r_trunc(v); }
template<class T> DI T r_logit(T x, T eps, bool has_eps) {
  if (has_eps) { T hi = 1 - eps; x = x < eps ? eps : (x > hi ? hi : x); }
  return log(x / (1 - x)); }
template<class T> DI T r_softplus(T x, T beta, T thr) {
  return x * beta > thr ? x : log1p(exp(x * beta)) / beta; }
template<class T> DI T r_gelu(T x) { return (T)0.5 * x * ((T)1 + erf(x * (T)0.70710678118654752440)); }
template<class T> DI T r_gelu_tanh(T x) {
  T inner = (T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x);
  return (T)0.5 * x * ((T)1 + tanh(inner)); }
// gelu's derivative times the incoming gradient g (torch's GeluBackward kernels)
template<class T> DI T r_gelu_bw(T g, T x) {
  T cdf = (T)0.5 * ((T)1 + erf(x * (T)0.70710678118654752440));
  T pdf = exp((T)-0.5 * x * x) * (T)0.39894228040143267794;
  return g * (cdf + x * pdf); }
template<class T> DI T r_gelu_tanh_bw(T g, T x) {
  const T k = (T)0.79788456080286535588, c = (T)0.044715;
  T th = tanh(k * (x + c * x * x * x));
  T dinner = k * ((T)1 + (T)3 * c * x * x);
  return g * ((T)0.5 * ((T)1 + th) + (T)0.5 * x * ((T)1 - th * th) * dinner); }
template<class T> DI T r_lerp(T a, T b, T w) {
  T d = b - a; return r_abs(w) < 0.5 ? a + w * d : b - d * (1 - w); }
template<class T> DI cplx<T> r_lerp(cplx<T> a, cplx<T> b, cplx<T> w) {
  cplx<T> d = b - a; return r_abs(w) < 0.5 ? a + w * d : b - d * (1 - w); }
template<class T> DI T r_lgamma(T x) { return (isinf(x)) ? (T)INFINITY : lgamma(x); }
// torch's CUDA digamma: the reflection term in double from the fractional part, recurrence
// up to 10 (exactly 10 gives psi(10) plus the sum), then the asymptotic series in z = 1/x^2
template<class T> DI T r_digamma(T x) {
  if (x == 0) return copysign((T)INFINITY, -x);
  T acc = 0;
  if (x < 0) {
    if (x == trunc(x)) return (T)NAN;
    double whole, fr = modf((double)x, &whole);
    acc = (T)(-R_PI / tan(R_PI * fr)); x = 1 - x; }
  while (x < 10) { acc -= 1 / x; x += 1; }
  if (x == 10) return acc + (T)2.25175258906672110764;
  T series = 0;
  if (x < (T)1.0e17) {
    const T c[7] = {(T)8.33333333333333333333E-2, (T)-2.10927960927960927961E-2,
                    (T)7.57575757575757575758E-3, (T)-4.16666666666666666667E-3,
                    (T)3.96825396825396825397E-3, (T)-8.33333333333333333333E-3,
                    (T)8.33333333333333333333E-2};
    T z = 1 / (x * x), p = 0;
    for (int i = 0; i < 7; ++i) p = p * z + c[i];
    series = z * p; }
  return log(x) - (T)0.5 / x - series + acc; }
template<class T> DI T r_trigamma(T x) {
  T sign = 1, result = 0;
  if (x < (T)0.5) { sign = -1; T s = sin((T)R_PI * x);
    result = -((T)R_PI * (T)R_PI) / (s * s); x = 1 - x; }
  for (int i = 0; i < 6; ++i) { result += 1 / (x * x); x += 1; }
  T ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * ((T)(1.0 / 6) - ixx * ((T)(1.0 / 30) - ixx / 42))) / x;
  return sign * result; }
template<class T> DI T r_polygamma(int n, T x) {
  if (n == 0) return r_digamma(x);
  if (n == 1) return r_trigamma(x);
  if (x != x || x == -(T)INFINITY) return (T)NAN;
  if (x == (T)INFINITY) return 0;
  if (x <= 0 && x == floor(x)) return (n & 1) ? (T)INFINITY : -(T)INFINITY;
  // (-1)^(n+1) n! zeta(n + 1, x): direct sum to 12, then the Euler-Maclaurin tail
  double s = n + 1, a = x, acc = 0;
  while (a < 12) { acc += pow(a, -s); a += 1; }
  const double B[8] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730,
                       7.0 / 6, -3617.0 / 510};
  double tail = pow(a, 1 - s) / (s - 1) + 0.5 * pow(a, -s), rising = s, pw = pow(a, -s - 1);
  double fact = 1;
  for (int j = 1; j <= 8; ++j) {
    fact *= (2 * j - 1) * (2 * j);
    tail += B[j - 1] / fact * rising * pw;
    rising *= (s + 2 * j - 1) * (s + 2 * j); pw /= a * a; }
  double nf = 1; for (int k = 2; k <= n; ++k) nf *= k;
  return (T)(((n & 1) ? 1.0 : -1.0) * nf * (acc + tail)); }
"""
