"""Random-number kernels: NVRTC kernels that draw from a generator's Philox stream.

The stream is the one ``refimpl._random`` defines: Philox4x32-10 keyed by the 64-bit
seed, counter block ``offset + q`` giving four 32-bit words. A kernel computes block
``q`` once and turns its words into the ``E`` elements ``q*E .. q*E+E-1`` of a
contiguous output, so every element depends only on (seed, offset, its index), never
on the launch shape, and the same state gives the same values as the CPU generator.

Before a launch the generator reserves the blocks the call consumes with
``philox_launch_args(blocks)`` (torch's ``philox_cuda_state``): the offset advances by
that count rounded up to a multiple of 4, as torch's CUDA generator reserves its
offsets. A launch captured in a CUDA graph gets, instead of the values, the addresses
of its generator state's device seed and offset plus its offset within the graph
(``refimpl.cuda.random``): ``philox_params`` reads them, so each replay draws anew.
Outside capture the addresses are null and the kernel uses the values it was given.

Element recipes (the CPU generator's, so values agree across devices):

* uniform, 24-bit: ``(w >> 8) * 2^-24`` (float32, float16, bfloat16; 4 per block);
  53-bit: ``((w0 << 21) ^ w1) mod 2^53 * 2^-53`` (float64; 2 per block). A value that
  rounds up to ``to`` in a narrow dtype becomes ``from``, as torch's CUDA kernel does.
* normal: Box-Muller on two 53-bit uniforms, a pair of normals per block.
* integers: ``low + ((w0 << 32) | w1) mod span`` (2 per block).
* bernoulli / exponential: one 53-bit uniform per element (2 per block).
* randperm: 62-bit random keys, then a bitonic sort of (key, index) pairs.
* multinomial: inverse-CDF draws by a linear scan of each row (without replacement
  the drawn category's weight is removed before the next draw).
"""

from __future__ import annotations

import ctypes
import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, _kernels, _tensor_ops, streams
from refimpl.cuda._pointwise import load_functions

_BLOCK = 256
_MAX_GRID = 1 << 16

_PHILOX = r"""
__device__ __forceinline__ void philox(unsigned long long ctr, unsigned long long key,
                                       unsigned int w[4]) {
  unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0u, c3 = 0u;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  #pragma unroll
  for (int r = 0; r < 10; ++r) {
    unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
__device__ __forceinline__ float u24(unsigned int w) {
  return (float)(w >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double u53(unsigned int a, unsigned int b) {
  unsigned long long bits = (((unsigned long long)a << 21) ^ (unsigned long long)b)
                            & ((1ull << 53) - 1ull);
  return (double)bits * (1.0 / 9007199254740992.0); }
struct Params {
  long long n; unsigned long long seed; unsigned long long offset;
  double a; double b; long long lo; unsigned long long span; const double* probs;
  const unsigned long long* seed_ptr; const unsigned long long* offset_ptr; };
// a launch captured in a graph reads its seed and base offset from device memory
__device__ __forceinline__ Params philox_params(Params p) {
  if (p.seed_ptr) { p.seed = *p.seed_ptr; p.offset += *p.offset_ptr; }
  return p; }
#define BLOCK_LOOP(q, nb) for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
  q < (nb); q += (long long)gridDim.x * blockDim.x)
"""


class _Params(ctypes.Structure):
    _fields_ = [("n", ctypes.c_longlong), ("seed", ctypes.c_ulonglong),
                ("offset", ctypes.c_ulonglong), ("a", ctypes.c_double),
                ("b", ctypes.c_double), ("lo", ctypes.c_longlong),
                ("span", ctypes.c_ulonglong), ("probs", ctypes.c_uint64),
                ("seed_ptr", ctypes.c_uint64), ("offset_ptr", ctypes.c_uint64)]


def _ctype(name: str) -> str:
    return _kernels._DTYPES[name][0]


def _store(name: str, value: str) -> str:
    """A C expression of dtype ``name`` from a double (or integer) expression."""
    kind = _kernels._DTYPES[name][2]
    if kind == "half":
        return f"f2h((float)({value}))"
    if kind == "bf16":
        return f"f2bf((float)({value}))"
    if kind == "bool":
        return f"(unsigned char)(({value}) != 0)"
    return f"({_ctype(name)})({value})"


def _narrow(name: str) -> bool:
    return name in ("float32", "float16", "bfloat16")


def _per_block(dist: str, name: str) -> int:
    """How many elements one Philox block (4 words) yields."""
    complex_ = name.startswith("complex")
    if dist == "uniform":
        if complex_:
            return 2 if name == "complex64" else 1
        return 4 if _narrow(name) else 2
    if dist == "normal":
        return 1 if complex_ else 2
    return 2  # integers, bernoulli, exponential, randperm keys


def _emit(dist: str, name: str) -> str:
    """The body that writes block q's elements (``w`` holds its four words)."""
    E = _per_block(dist, name)
    lines = []
    if dist == "uniform" and name.startswith("complex"):
        part = "float" if name == "complex64" else "double"
        for i in range(E):
            if name == "complex64":
                re, im = f"u24(w[{2 * i}])", f"u24(w[{2 * i + 1}])"
            else:
                re, im = "u53(w[0], w[1])", "u53(w[2], w[3])"
            lines.append(
                f"if (q * {E} + {i} < p.n) out[q * {E} + {i}] = {_ctype(name)}{{"
                f"({part})(p.a + {re} * (p.b - p.a)), ({part})(p.a + {im} * (p.b - p.a))}};")
    elif dist == "uniform":
        for i in range(E):
            if _narrow(name):
                x = f"(float)p.a + u24(w[{i}]) * (float)(p.b - p.a)"
                lines.append(
                    f"if (q * {E} + {i} < p.n) {{ float x = {x}; {_ctype(name)} v = "
                    f"{_store(name, 'x')}; if ({_load(name, 'v')} >= (float)p.b) "
                    f"v = {_store(name, 'p.a')}; out[q * {E} + {i}] = v; }}")
            else:
                x = f"p.a + u53(w[{2 * i}], w[{2 * i + 1}]) * (p.b - p.a)"
                lines.append(f"if (q * {E} + {i} < p.n) out[q * {E} + {i}] = {x};")
    elif dist == "normal":
        lines.append("double r = sqrt(-2.0 * log1p(-u53(w[0], w[1])));")
        lines.append("double th = 6.283185307179586 * u53(w[2], w[3]);")
        if name.startswith("complex"):
            part = "float" if name == "complex64" else "double"
            s = "0.7071067811865476"
            lines.append(
                f"out[q] = {_ctype(name)}{{({part})(p.a + p.b * {s} * r * cos(th)), "
                f"({part})(p.a + p.b * {s} * r * sin(th))}};")
        else:
            for i, f in enumerate(("cos", "sin")):
                lines.append(f"if (q * 2 + {i} < p.n) out[q * 2 + {i}] = "
                             f"{_store(name, f'p.a + p.b * r * {f}(th)')};")
    elif dist == "integers":
        for i in range(2):
            bits = f"(((unsigned long long)w[{2 * i}] << 32) | w[{2 * i + 1}])"
            lines.append(f"if (q * 2 + {i} < p.n) out[q * 2 + {i}] = "
                         f"{_store(name, f'p.lo + (long long)({bits} % p.span)')};")
    elif dist == "bernoulli":
        for i in range(2):
            e = f"q * 2 + {i}"
            test = f"u53(w[{2 * i}], w[{2 * i + 1}]) < (p.probs ? p.probs[{e}] : p.a)"
            lines.append(f"if ({e} < p.n) out[{e}] = {_store(name, test)};")
    elif dist == "exponential":
        for i in range(2):
            lines.append(f"if (q * 2 + {i} < p.n) out[q * 2 + {i}] = "
                         f"{_store(name, f'-log1p(-u53(w[{2 * i}], w[{2 * i + 1}])) / p.a')};")
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return "\n      ".join(lines)


def _load(name: str, v: str) -> str:
    kind = _kernels._DTYPES[name][2]
    return {"half": f"h2f({v})", "bf16": f"bf2f({v})"}.get(kind, v)


_sources: dict[tuple[str, str], str] = {}


def _source(dist: str, name: str) -> str:
    key = (dist, name)
    src = _sources.get(key)
    if src is None:
        E = _per_block(dist, name)
        src = _kernels._PRELUDE + _PHILOX + (
            f"extern \"C\" __global__ void draw({_ctype(name)}* out, Params pin) {{\n"
            "  const Params p = philox_params(pin);\n"
            f"  long long nb = (p.n + {E - 1}) / {E};\n"
            "  BLOCK_LOOP(q, nb) {\n"
            "      unsigned int w[4]; philox(p.offset + (unsigned long long)q, p.seed, w);\n"
            f"      {_emit(dist, name)}\n"
            "  }\n}\n")
        _sources[key] = src
    return src


_functions: dict[tuple[str, str, int], int] = {}


def _function(source: str, kernel: str, idx: int) -> int:
    """A kernel's handle, loaded once per device (capture-safe, see ``load_functions``)."""
    fn = _functions.get((source, kernel, idx))
    if fn is None:
        fn = _functions[(source, kernel, idx)] = load_functions(source, (kernel,), idx)[0]
    return fn


def _launch(fn: int, idx: int, threads: int, args: list) -> None:
    grid = min(max(math.ceil(threads / _BLOCK), 1), _MAX_GRID)
    _driver.launch(idx, fn, (grid, 1, 1), (_BLOCK, 1, 1), args,
                   streams.current_stream_handle(idx))


def _where(out: Tensor) -> tuple[int, int]:
    return out._storage._data.ptr + out._offset * out.dtype.itemsize, \
        out._storage._data.device_index


def draw(out: Tensor, dist: str, gen, *, a: float = 0.0, b: float = 1.0, lo: int = 0,
         span: int = 1, probs: Tensor | None = None) -> Tensor:
    """Fill the contiguous CUDA tensor ``out`` from ``gen``'s stream (see the module doc).

    ``dist``: ``uniform`` in [a, b), ``normal`` (mean a, std b), ``integers`` in
    [lo, lo + span), ``bernoulli`` (probability a, or ``probs``: a contiguous float64
    CUDA tensor of out's shape), ``exponential`` (rate a).
    """
    n = out.numel()
    if n == 0:
        return out
    name = out.dtype.name
    E = _per_block(dist, name)
    blocks = -(-n // E)
    seed, offset, seed_ptr, offset_ptr = gen.philox_launch_args(blocks)
    ptr, idx = _where(out)
    fn = _function(_source(dist, name), "draw", idx)
    params = _Params(n, seed, offset, float(a), float(b), int(lo), int(span) % (1 << 64),
                     _where(probs)[0] if probs is not None else 0, seed_ptr, offset_ptr)
    _launch(fn, idx, blocks, [ctypes.c_uint64(ptr), params])
    return out


# -- randperm: random keys, bitonic sort ---------------------------------------------------

_PERM = _kernels._PRELUDE + _PHILOX + r"""
extern "C" __global__ void perm_init(unsigned long long* keys, long long* idx, long long N,
                                     Params pin) {
  const Params p = philox_params(pin);
  BLOCK_LOOP(i, N) {
    unsigned long long k = 0xFFFFFFFFFFFFFFFFull;
    if (i < p.n) {
      unsigned int w[4]; philox(p.offset + (unsigned long long)(i / 2), p.seed, w);
      int j = (int)(i % 2) * 2;
      k = ((((unsigned long long)w[j] << 32) | w[j + 1])) & ((1ull << 62) - 1ull);
    }
    keys[i] = k; idx[i] = i;
  }
}
extern "C" __global__ void bitonic_step(unsigned long long* keys, long long* idx, long long N,
                                        long long size, long long stride) {
  BLOCK_LOOP(i, N) {
    long long j = i ^ stride;
    if (j > i) {
      bool up = (i & size) == 0;
      bool greater = keys[i] > keys[j] || (keys[i] == keys[j] && idx[i] > idx[j]);
      if (greater == up) {
        unsigned long long k = keys[i]; keys[i] = keys[j]; keys[j] = k;
        long long t = idx[i]; idx[i] = idx[j]; idx[j] = t;
      }
    }
  }
}
"""


def randperm(out: Tensor, gen) -> Tensor:
    """Write a random permutation of ``0..n-1`` into the 1-D contiguous CUDA ``out``
    (the order of 62-bit random keys, ties broken by index: the CPU generator's
    permutation for the same state)."""
    n = out.numel()
    if n == 0:
        return out
    idx_dev = out._storage._data.device_index
    N = 1 << max(n - 1, 1).bit_length()
    keys = Tensor._empty((N,), D.int64, out._storage.device)
    order = Tensor._empty((N,), D.int64, out._storage.device)
    seed, offset, seed_ptr, offset_ptr = gen.philox_launch_args(-(-n // 2))
    params = _Params(n, seed, offset, 0.0, 0.0, 0, 1, 0, seed_ptr, offset_ptr)
    kptr, iptr = _where(keys)[0], _where(order)[0]
    init = _function(_PERM, "perm_init", idx_dev)
    _launch(init, idx_dev, N, [ctypes.c_uint64(kptr), ctypes.c_uint64(iptr),
                               ctypes.c_longlong(N), params])
    step = _function(_PERM, "bitonic_step", idx_dev)
    size = 2
    while size <= N:
        stride = size // 2
        while stride >= 1:
            _launch(step, idx_dev, N, [ctypes.c_uint64(kptr), ctypes.c_uint64(iptr),
                                       ctypes.c_longlong(N), ctypes.c_longlong(size),
                                       ctypes.c_longlong(stride)])
            stride //= 2
        size *= 2
    first = Tensor._make(order._storage, (n,), (1,), 0, D.int64)
    _tensor_ops.copy_(out, first)
    return out


# -- multinomial -----------------------------------------------------------------------------

_MULTINOMIAL = _kernels._PRELUDE + _PHILOX + r"""
// weights: rows x cats (float64, a scratch copy); out: rows x ns (int64); bad: error flag
__device__ long long pick(const double* w, long long cats, double total, double u) {
  double target = u * total, acc = 0.0; long long last = -1;
  for (long long c = 0; c < cats; ++c) {
    if (w[c] <= 0.0) continue;
    acc += w[c]; last = c;
    if (target < acc) return c;
  }
  return last;  // rounding left target at the very top: the last category with weight
}
__device__ __forceinline__ double uniform_at(const Params& p, long long e) {
  unsigned int w[4]; philox(p.offset + (unsigned long long)(e / 2), p.seed, w);
  int j = (int)(e % 2) * 2; return u53(w[j], w[j + 1]);
}
__device__ bool row_total(const double* w, long long cats, double* total) {
  double s = 0.0;
  for (long long c = 0; c < cats; ++c) {
    double v = w[c];
    if (!(v >= 0.0) || isinf(v)) return false;
    s += v;
  }
  *total = s; return true;
}
extern "C" __global__ void with_replacement(double* weights, long long* out, long long rows,
    long long cats, long long ns, int* bad, Params pin) {
  const Params p = philox_params(pin);
  BLOCK_LOOP(e, rows * ns) {
    long long r = e / ns; const double* w = weights + r * cats; double total;
    if (!row_total(w, cats, &total)) { bad[0] = 1; continue; }
    if (!(total > 0.0)) { bad[1] = 1; continue; }
    out[e] = pick(w, cats, total, uniform_at(p, e));
  }
}
extern "C" __global__ void without_replacement(double* weights, long long* out, long long rows,
    long long cats, long long ns, int* bad, Params pin) {
  const Params p = philox_params(pin);
  BLOCK_LOOP(r, rows) {
    double* w = weights + r * cats; double total;
    if (!row_total(w, cats, &total)) { bad[0] = 1; continue; }
    if (!(total > 0.0)) { bad[1] = 1; continue; }
    for (long long s = 0; s < ns; ++s) {
      long long c = pick(w, cats, total, uniform_at(p, r * ns + s));
      out[r * ns + s] = c;
      if (c < 0) { bad[2] = 1; break; }
      total -= w[c]; w[c] = 0.0;
      if (!(total > 0.0)) {  // only zero weights left: torch draws them in index order
        for (long long z = 0, t = s + 1; t < ns && z < cats; ++z)
          if (w[z] == 0.0) { bool used = false;
            for (long long k = 0; k < t; ++k) used |= out[r * ns + k] == z;
            if (!used) out[r * ns + t++] = z; }
        break;
      }
    }
  }
}
"""


def multinomial(out: Tensor, probs: Tensor, num_samples: int, replacement: bool,
                gen) -> tuple[bool, bool, bool]:
    """Draw ``num_samples`` categories per row of the 2-D ``probs`` into the contiguous
    int64 ``out`` (rows x num_samples). Returns the error flags (bad values, a row
    summing to zero, not enough categories with weight), read back after the kernel."""
    rows, cats = probs._shape
    ptr, idx = _where(out)
    weights = Tensor._empty((rows, cats), D.float64, out._storage.device)
    _tensor_ops.copy_(weights, probs)
    flags = Tensor._empty((3,), D.int32, out._storage.device)
    _tensor_ops.fill_(flags, 0)
    seed, offset, seed_ptr, offset_ptr = gen.philox_launch_args(-(-(rows * num_samples) // 2))
    params = _Params(rows * num_samples, seed, offset, 0.0, 0.0, 0, 1, 0, seed_ptr, offset_ptr)
    kernel = "with_replacement" if replacement else "without_replacement"
    fn = _function(_MULTINOMIAL, kernel, idx)
    _launch(fn, idx, rows * num_samples if replacement else rows,
            [ctypes.c_uint64(_where(weights)[0]), ctypes.c_uint64(ptr),
             ctypes.c_longlong(rows), ctypes.c_longlong(cats),
             ctypes.c_longlong(num_samples), ctypes.c_uint64(_where(flags)[0]), params])
    host = flags.cpu().tolist()
    return bool(host[0]), bool(host[1]), bool(host[2])
