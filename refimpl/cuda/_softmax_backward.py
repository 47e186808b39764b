"""The softmax and log_softmax derivatives on CUDA as one row kernel.

``d softmax = y * (g - sum(g * y))`` and ``d log_softmax = g - exp(y) * sum(g)``, the
sum along the last dim: one block per row (a grid-stride loop over rows) sums its row
(warp shuffles, then shared memory, in a fixed order: a run repeats its bits) and writes
the row's gradient, one launch in all. float32 sums in float and float64 in double, as
torch's kernels do. For rows of contiguous ``grad`` and ``y`` along the last dim; the
caller composes the formula from ops otherwise.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._pointwise import load_functions

_SOURCE = r"""
template<class T, bool LOG>
__device__ void rows_body(const T* g, const T* y, T* out, long long rows, long long n) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = g + r * n;
    const T* yr = y + r * n;
    T* o = out + r * n;
    T s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += LOG ? gr[i] : gr[i] * yr[i];
    for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
      T v = lane < warps ? part[lane] : (T)0;
      for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
      if (lane == 0) part[0] = v;
    }
    __syncthreads();
    s = part[0];
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
      o[i] = LOG ? gr[i] - exp(yr[i]) * s : yr[i] * (gr[i] - s);
    __syncthreads();  // part[] is reused by the next row
  }
}
#define ROWS(NAME, T, LOG) extern "C" __global__ void NAME(const T* g, const T* y, T* out, \
    long long rows, long long n) { rows_body<T, LOG>(g, y, out, rows, n); }
ROWS(softmax_bw_f32, float, false)
ROWS(softmax_bw_f64, double, false)
ROWS(log_softmax_bw_f32, float, true)
ROWS(log_softmax_bw_f64, double, true)
"""

_SUFFIX = {D.float32: "f32", D.float64: "f64"}
_MAX_GRID = 1 << 16
_functions: dict = {}  # (name, device index) -> kernel handle


def applies(grad: Tensor, y: Tensor, dim: int) -> bool:
    """Whether the row kernel takes this derivative: the last dim, both contiguous."""
    return (dim == y.dim() - 1 and y.dtype in _SUFFIX and y.is_contiguous()
            and grad.is_contiguous())


def backward(grad: Tensor, y: Tensor, log: bool) -> Tensor:
    """The softmax (or log_softmax with ``log``) derivative along the last dim."""
    out = Tensor._empty(y._shape, y.dtype, y.device)
    n = y._shape[-1] if y._shape else 1
    rows = y.numel() // n if n else 0
    if rows == 0:
        return out
    index = y._storage.device.index
    name = f"{'log_' if log else ''}softmax_bw_{_SUFFIX[y.dtype]}"
    fn = _functions.get((name, index))
    if fn is None:
        fn = _functions[(name, index)] = load_functions(_SOURCE, (name,), index)[0]
    block = min(1024, max(32, -(-n // 32) * 32))
    size = y.dtype.itemsize
    ptrs = [t._storage._data.ptr + t._offset * size for t in (grad, y, out)]
    # ROWS's parameters: g, y, out (addresses), rows, n
    _driver.launch_packed(index, fn, (min(rows, _MAX_GRID), 1, 1), (block, 1, 1), "PPPqq",
                          (*ptrs, rows, n), streams.current_stream_handle(index), 0, name)
    return out
