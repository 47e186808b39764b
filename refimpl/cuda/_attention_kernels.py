"""Scaled dot-product attention on CUDA: cuBLAS batched GEMMs around two NVRTC kernels.

Products small enough (``SMALL_MACS``) run instead as one ``bmm_small`` kernel each,
which reads any 4-d strides (no copies of head views) and skips cuBLAS's host time.

The forward (``forward``) is three launches: the scores ``scale * q @ k^T`` as one
strided-batched GEMM (the scale is the GEMM's alpha) into the weights buffer, one kernel
that masks each row (a boolean or additive mask broadcast over the batch and head dims,
or the causal triangle) and replaces it by its softmax in place, and the GEMM of the
weights with ``v``. The backward (``backward``) forms ``grad_v = w^T @ g`` and
``gw = g @ v^T`` by GEMM, turns ``gw`` in place into the scores' gradient
``w * (gw - rowsum(gw * w)) * scale`` with one kernel, and forms ``grad_q = gs @ k`` and
``grad_k = gs^T @ q`` by GEMM. Transposes are strided views handed to the GEMM; a
4-d operand whose batch and head dims cannot be walked with one stride (the head views
of a packed projection, say) is copied once into a dense buffer.

Each kernel gives a warp to a row (grid-stride over rows, 64-bit offsets) and sums in
float32 for float32 tensors and in float64 for float64 ones, lane-strided then by a
fixed shuffle tree: the same numbers on every run. A row whose every position is masked
gives zeros, as the CPU kernel and torch's math path; a NaN score makes its row NaN.
Everything runs on the current stream with the caching allocator, so it can be
captured in a CUDA graph.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._pointwise import load_functions

_ROWS_PER_BLOCK = 4  # one warp per row
_MAX_GRID = 1 << 16

_SOURCE = r"""
template<class T> __device__ __forceinline__ T exp_t(T x);
template<> __device__ __forceinline__ float exp_t<float>(float x) { return expf(x); }
template<> __device__ __forceinline__ double exp_t<double>(double x) { return exp(x); }
template<class T> __device__ __forceinline__ T neg_inf();
template<> __device__ __forceinline__ float neg_inf<float>() {
  return __int_as_float(0xff800000); }
template<> __device__ __forceinline__ double neg_inf<double>() {
  return __longlong_as_double(0xfff0000000000000ULL); }

template<class T> __device__ __forceinline__ T max_nan(T a, T b) {
  return (a > b || a != a) ? a : b;  // a NaN wins, as numpy's max
}

template<class T> __device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template<class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// s: (B*H*L, S) scores, masked and replaced by their row softmax in place.
// mode 0: no mask, 1: boolean mask (keep where true), 2: additive mask of T.
// mask element (b, h, l, j) at b*m0 + h*m1 + l*m2 + j*m3 (0 strides broadcast).
template<class T>
__device__ void softmax_rows(T* s, const void* mask, long long rows, long long L,
                             long long H, long long S, long long m0, long long m1,
                             long long m2, long long m3, int mode, int causal) {
  const T ninf = neg_inf<T>();
  const int lane = threadIdx.x;
  for (long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y; row < rows;
       row += (long long)gridDim.x * blockDim.y) {
    T* r = s + row * S;
    const long long l = row % L, bh = row / L;
    const long long base = (bh / H) * m0 + (bh % H) * m1 + l * m2;
    T top = ninf;
    for (long long j = lane; j < S; j += 32) {
      T v = r[j];
      if (causal && j > l) v = ninf;
      if (mode == 1 && !((const unsigned char*)mask)[base + j * m3]) v = ninf;
      if (mode == 2) v = v + ((const T*)mask)[base + j * m3];
      r[j] = v;
      top = max_nan(top, v);
    }
    top = warp_max(top);
    if (top == ninf) {  // every position masked: zeros
      for (long long j = lane; j < S; j += 32) r[j] = (T)0;
      continue;
    }
    T sum = (T)0;
    for (long long j = lane; j < S; j += 32) sum += exp_t(r[j] - top);
    sum = warp_sum(sum);
    for (long long j = lane; j < S; j += 32) r[j] = exp_t(r[j] - top) / sum;
  }
}

// g: (rows, S) weights' gradient, replaced in place by w * (g - rowsum(g * w)) * scale.
template<class T>
__device__ void softmax_backward_rows(T* g, const T* w, long long rows, long long S,
                                      T scale) {
  const int lane = threadIdx.x;
  for (long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y; row < rows;
       row += (long long)gridDim.x * blockDim.y) {
    T* gr = g + row * S;
    const T* wr = w + row * S;
    T dot = (T)0;
    for (long long j = lane; j < S; j += 32) dot += gr[j] * wr[j];
    dot = warp_sum(dot);
    for (long long j = lane; j < S; j += 32) gr[j] = wr[j] * (gr[j] - dot) * scale;
  }
}

// c = alpha * a @ b over (B, H) batches of small matrices, one thread per element of the
// dense (B, H, R, C) result (lanes along the flat index); a (B, H, R, P) and b (B, H, P, C)
// are read through their four strides, so head views and transposes need no copy. The
// sum runs over p in order, in T.
template<class T>
__device__ void bmm_small(const T* a, const T* b, T* c, long long total, long long H,
                          long long R, long long C, long long P, long long a0, long long a1,
                          long long a2, long long a3, long long b0, long long b1,
                          long long b2, long long b3, T alpha) {
  for (long long e = ((long long)blockIdx.x * blockDim.y + threadIdx.y) * 32 + threadIdx.x;
       e < total; e += (long long)gridDim.x * blockDim.y * 32) {
    const long long j = e % C, i = (e / C) % R, z = e / (R * C);
    const T* ar = a + (z / H) * a0 + (z % H) * a1 + i * a2;
    const T* bc = b + (z / H) * b0 + (z % H) * b1 + j * b3;
    T acc = (T)0;
    for (long long p = 0; p < P; ++p) acc += ar[p * a3] * bc[p * b2];
    c[e] = alpha * acc;
  }
}

#define BMM(NAME, T) extern "C" __global__ void NAME(const T* a, const T* b, T* c, \
    long long total, long long H, long long R, long long C, long long P, long long a0, \
    long long a1, long long a2, long long a3, long long b0, long long b1, long long b2, \
    long long b3, T alpha) { \
  bmm_small<T>(a, b, c, total, H, R, C, P, a0, a1, a2, a3, b0, b1, b2, b3, alpha); }
BMM(sdpa_bmm_f32, float)
BMM(sdpa_bmm_f64, double)

#define SOFTMAX(NAME, T) extern "C" __global__ void NAME(T* s, const void* mask, \
    long long rows, long long L, long long H, long long S, long long m0, long long m1, \
    long long m2, long long m3, int mode, int causal) { \
  softmax_rows<T>(s, mask, rows, L, H, S, m0, m1, m2, m3, mode, causal); }
#define SOFTMAX_BW(NAME, T) extern "C" __global__ void NAME(T* g, const T* w, \
    long long rows, long long S, T scale) { \
  softmax_backward_rows<T>(g, w, rows, S, scale); }
SOFTMAX(sdpa_softmax_f32, float)
SOFTMAX(sdpa_softmax_f64, double)
SOFTMAX_BW(sdpa_softmax_bw_f32, float)
SOFTMAX_BW(sdpa_softmax_bw_f64, double)
"""

# dtype -> (kernel name suffix, launch layout code of the kernel's T)
_SUFFIX = {D.float32: ("f32", "f"), D.float64: ("f64", "d")}
# (kernel, device index) -> (loaded kernel handle, {launch fmt: packed fmt})
_functions: dict = {}
# The launch layouts (``_driver.ParamLayout`` codes, F for the dtype's T: see _launch).
# softmax_rows: s, mask; rows, L, H, S and the mask's four strides; mode, causal
_SOFTMAX_FMT = "PP" + "q" * 8 + "ii"
# bmm_small: a, b, c; total, H, R, C, P and a's and b's four strides; alpha
_BMM_FMT = "PPP" + "q" * 13 + "F"


def supports(q: Tensor) -> bool:
    """Whether these kernels take attention over ``q``'s dtype (float32, float64)."""
    return q.dtype in _SUFFIX and q.dim() == 4


def _ptr(t: Tensor) -> int:
    """The address of ``t``'s first element."""
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def _launch(name: str, t: Tensor, rows: int, fmt: str, *args) -> None:
    """Launch kernel ``name`` (for ``t``'s dtype) over ``rows`` warps' worth of work;
    ``fmt`` spells its parameters as ``_driver.ParamLayout`` does, with ``F`` for the
    dtype's own float (the kernel's T), resolved once per kernel."""
    index = t._storage.device.index
    key = (name, index)
    entry = _functions.get(key)
    if entry is None:
        fn = load_functions(_SOURCE, (name,), index)[0]
        entry = _functions[key] = (fn, {})
    fn, fmts = entry
    layout = fmts.get(fmt)
    if layout is None:
        layout = fmts[fmt] = fmt.replace("F", _SUFFIX[t.dtype][1])
    grid = min(max(-(-rows // _ROWS_PER_BLOCK), 1), _MAX_GRID)
    _driver.launch_packed(index, fn, (grid, 1, 1), (32, _ROWS_PER_BLOCK, 1), layout, args,
                          streams.current_stream_handle(index), 0, name)


def _dense(t: Tensor) -> Tensor:
    from refimpl.cuda._blas import dense_copy

    return t if t.is_contiguous() else dense_copy(t)


def _batched(t: Tensor) -> Tensor:
    """A (B, H, R, C) tensor as a (B*H, R, C) view when one stride walks its batch and
    head dims; otherwise a view of a dense copy."""
    b, h, r, c = t._shape
    s0, s1, s2, s3 = t._stride
    if h == 1:
        step = s0
    elif b == 1 or s0 == s1 * h:
        step = s1
    else:
        from refimpl.cuda._blas import dense_copy

        t = dense_copy(t)
        step, s2, s3 = r * c, c, 1
    return Tensor._make(t._storage, (b * h, r, c), (step, s2, s3), t._offset, t.dtype)


def _mT(t: Tensor) -> Tensor:
    """The transpose of each matrix of a 3-d tensor (a view)."""
    n, r, c = t._shape
    return Tensor._make(t._storage, (n, c, r), (t._stride[0], t._stride[2], t._stride[1]),
                        t._offset, t.dtype)


def _empty4(b: int, h: int, r: int, c: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """A fresh contiguous (b, h, r, c) tensor and its (b*h, r, c) view."""
    out = Tensor._empty((b, h, r, c), like.dtype, like._storage.device)
    return out, Tensor._make(out._storage, (b * h, r, c), (r * c, c, 1), 0, like.dtype)


def _mask_strides(mask: Tensor) -> list[int]:
    """The (b, h, l, s) strides of a mask right-aligned to the scores (0 = broadcast)."""
    strides = [0, 0, 0, 0]
    for i, (size, stride) in enumerate(zip(reversed(mask._shape), reversed(mask._stride))):
        strides[3 - i] = stride if size != 1 else 0
    return strides


def _softmax(w: Tensor, mask: Tensor | None, causal: bool) -> None:
    b, h, length, source = w._shape
    rows = b * h * length
    mode = 0 if mask is None else 1 if mask.dtype is D.bool_ else 2
    strides = _mask_strides(mask) if mask is not None else [0, 0, 0, 0]
    mptr = _ptr(mask) if mask is not None else 0
    _launch(f"sdpa_softmax_{_SUFFIX[w.dtype][0]}", w, rows, _SOFTMAX_FMT,
            _ptr(w), mptr, rows, length, h, source, *strides, mode, int(bool(causal)))


def _softmax_backward(gs: Tensor, w: Tensor, scale: float) -> None:
    """``gs = w * (gs - rowsum(gs * w)) * scale`` in place (both contiguous, one shape)."""
    rows, source = gs.numel() // gs._shape[-1], gs._shape[-1]
    # g, w; rows, S; scale (F: the dtype's T)
    _launch(f"sdpa_softmax_bw_{_SUFFIX[gs.dtype][0]}", gs, rows, "PPqqF",
            _ptr(gs), _ptr(w), rows, source, scale)


# Products of at most this many multiply-adds in all run as one bmm_small launch each,
# reading the operands through their strides, instead of cuBLAS (whose host time, and
# the copies of head views it cannot walk, cost more than such products). 2**24 measured
# with the convolution's limits (refimpl.cuda._conv_kernels.DIRECT_MACS): the bench-size
# transformer step is 22% shorter than with 2**20, the test size unchanged.
SMALL_MACS = 1 << 24


def _small(b: int, h: int, rows: int, cols: int, inner: int) -> bool:
    return b * h * rows * cols * inner <= SMALL_MACS


def _bmm(out: Tensor, a: Tensor, b: Tensor, alpha: float = 1.0) -> Tensor:
    """``out`` (dense (B, H, R, C)) = ``alpha * a @ b`` for 4-d operands of any strides."""
    _, h, r, c = out._shape
    total = out.numel()
    if total:
        _launch(f"sdpa_bmm_{_SUFFIX[out.dtype][0]}", out, -(-total // 32), _BMM_FMT,
                _ptr(a), _ptr(b), _ptr(out), total, h, r, c, a._shape[-1], *a._stride,
                *b._stride, alpha)
    return out


def _t(x: Tensor) -> Tensor:
    """The transpose of each matrix of a 4-d tensor (a view)."""
    b, h, r, c = x._shape
    s0, s1, s2, s3 = x._stride
    return Tensor._make(x._storage, (b, h, c, r), (s0, s1, s3, s2), x._offset, x.dtype)


def forward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float,
            causal: bool) -> tuple[Tensor, Tensor]:
    """(softmax(scale * q @ k^T masked) @ v, the weights), both contiguous, for 4-d
    float32/float64 CUDA tensors of one batch shape (``supports``)."""
    from refimpl.cuda._blas import gemm

    b, h, length, hd = q._shape
    source, dv = k._shape[-2], v._shape[-1]
    small = _small(b, h, length, source, max(hd, dv))
    w, w3 = _empty4(b, h, length, source, q)
    if small:
        _bmm(w, q, _t(k), scale)
    else:
        gemm(w3, _batched(q), _mT(_batched(k)), alpha=scale)
    if causal:
        mask = None
    _softmax(w, mask, causal)
    out, out3 = _empty4(b, h, length, dv, q)
    if small:
        _bmm(out, w, v)
    else:
        gemm(out3, w3, _batched(v))
    return out, w


def backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, w: Tensor, scale: float,
             mask3) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The gradients of q, k, v (None where ``mask3`` says none is needed) from the
    output's gradient and the saved weights ``w``."""
    from refimpl.cuda._blas import gemm

    b, h, length, hd = q._shape
    source = k._shape[-2]
    w = _dense(w)
    gq = gk = gv = None
    if _small(b, h, length, source, max(hd, v._shape[-1])):
        # small products: one bmm_small launch each, operands read through their strides
        if mask3[2]:
            gv = _bmm(_empty4(b, h, source, v._shape[-1], q)[0], _t(w), grad)
        if mask3[0] or mask3[1]:
            gs = _bmm(_empty4(b, h, length, source, q)[0], grad, _t(v))
            _softmax_backward(gs, w, scale)
            if mask3[0]:
                gq = _bmm(_empty4(b, h, length, hd, q)[0], gs, k)
            if mask3[1]:
                gk = _bmm(_empty4(b, h, source, k._shape[-1], q)[0], _t(gs), q)
        return gq, gk, gv
    g3 = _batched(grad)
    w3 = _batched(w)
    if mask3[2]:
        gv, gv3 = _empty4(b, h, source, v._shape[-1], q)
        gemm(gv3, _mT(w3), g3)
    if mask3[0] or mask3[1]:
        gs, gs3 = _empty4(b, h, length, source, q)
        gemm(gs3, g3, _mT(_batched(v)))
        _softmax_backward(gs, w, scale)
        if mask3[0]:
            gq, gq3 = _empty4(b, h, length, q._shape[-1], q)
            gemm(gq3, gs3, _batched(k))
        if mask3[1]:
            gk, gk3 = _empty4(b, h, source, k._shape[-1], q)
            gemm(gk3, _mT(gs3), _batched(q))
    return gq, gk, gv
