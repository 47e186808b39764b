"""The per-parameter SGD and Adam/AdamW updates on CUDA as one kernel launch each.

torch's optimizers run their update on CUDA as fused multi-tensor kernels (its
``foreach`` default); the ops of the single-tensor update (about eight in-place ops
per parameter for Adam) each cost a dispatch, an allocation and a launch here. This
module runs the same arithmetic, in the same order and compute type, in one NVRTC
kernel per parameter on the current stream of the parameter's device. Each tensor's
version counter is bumped as often as those in-place ops would bump it.

``plain(...)`` decides when this applies: every tensor a plain (or ``nn.Parameter``)
dense, contiguous CUDA float32/float64 tensor of one shape on one device, without math
bits (the gradient, the second, may have any layout: the kernel reads a contiguous copy
of it), and nothing that watches ops (dispatch modes, the profiler, forward AD) active;
otherwise the optimizers run their ops.
"""

from __future__ import annotations

import ctypes

from refimpl import _dtype as D
from refimpl._tensor import Tensor

_BLOCK = 256
_MAX_GRID = 1 << 16

# The updates, templated on the element type T. Each standalone product of the op path
# is rounded on its own (__fmul_rn-like with T's own rounding), as separate ops store it.
_SOURCE = r"""
template<class T> __device__ __forceinline__ T mul_rn(T a, T b);
template<> __device__ __forceinline__ float mul_rn<float>(float a, float b) {
  return __fmul_rn(a, b); }
template<> __device__ __forceinline__ double mul_rn<double>(double a, double b) {
  return __dmul_rn(a, b); }

template<class T>
__device__ void sgd_body(T* p, const T* g, T* buf, long long n, T neg_lr, T momentum,
                         T alpha, T wd, int flags) {
  const bool maximize = flags & 1, nesterov = flags & 2, has_wd = flags & 4,
             has_mom = flags & 8;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    T pv = p[i];
    T gv = maximize ? -g[i] : g[i];
    if (has_wd) gv = gv + wd * pv;
    if (has_mom) {
      T b = mul_rn(buf[i], momentum);
      b = b + alpha * gv;
      buf[i] = b;
      gv = nesterov ? gv + momentum * b : b;
    }
    p[i] = pv + neg_lr * gv;
  }
}

template<class T>
__device__ void adam_body(T* p, const T* g, T* m, T* v, T* vmax, long long n, T decay,
                          T w, T beta2, T one_minus_beta2, T wd, T bc2_sqrt, T eps,
                          T neg_step_size, int flags) {
  const bool maximize = flags & 1, decoupled = flags & 2, has_wd = flags & 4,
             amsgrad = flags & 8;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    T pv = p[i];
    T gv = maximize ? -g[i] : g[i];
    if (has_wd) {
      if (decoupled) pv = mul_rn(pv, decay);
      else gv = gv + wd * pv;
    }
    T mv = m[i];
    T diff = gv - mv;
    mv = (w < (T)0.5) ? mv + w * diff : gv - diff * ((T)1 - w);
    m[i] = mv;
    T vv = mul_rn(v[i], beta2);
    vv = vv + one_minus_beta2 * mul_rn(gv, gv);
    v[i] = vv;
    if (amsgrad) {
      T mx = vmax[i];
      mx = (mx != mx || mx > vv) ? mx : vv;  // NaN propagates, as maximum's
      vmax[i] = mx;
      vv = mx;
    }
    T denom = sqrt(vv) / bc2_sqrt;
    denom = denom + eps;
    p[i] = pv + neg_step_size * (mv / denom);
  }
}

#define SGD(NAME, T) extern "C" __global__ void NAME(T* p, const T* g, T* buf, long long n, \
    T neg_lr, T momentum, T alpha, T wd, int flags) { \
  sgd_body<T>(p, g, buf, n, neg_lr, momentum, alpha, wd, flags); }
#define ADAM(NAME, T) extern "C" __global__ void NAME(T* p, const T* g, T* m, T* v, \
    T* vmax, long long n, T decay, T w, T beta2, T one_minus_beta2, T wd, T bc2_sqrt, \
    T eps, T neg_step_size, int flags) { \
  adam_body<T>(p, g, m, v, vmax, n, decay, w, beta2, one_minus_beta2, wd, bc2_sqrt, eps, \
               neg_step_size, flags); }
SGD(sgd_f32, float)
SGD(sgd_f64, double)
ADAM(adam_f32, float)
ADAM(adam_f64, double)
"""

_functions: dict = {}  # (kind, dtype, device index) -> loaded kernel handle
_SUFFIX = {D.float32: ("f32", ctypes.c_float), D.float64: ("f64", ctypes.c_double)}


_MODULES: tuple = ()


def _modules() -> tuple:
    """(``_dispatch``, forward-AD levels, thread state, ``Parameter``), imported once."""
    global _MODULES
    if not _MODULES:
        from refimpl import _dispatch
        from refimpl._state import FW, STATE
        from refimpl.nn.parameter import Parameter

        _MODULES = (_dispatch, FW, STATE, Parameter)
    return _MODULES


def plain(*tensors) -> bool:
    """Whether one fused kernel may stand for the update's ops on these tensors."""
    _dispatch, FW, STATE, Parameter = _modules()
    if _dispatch.MODE_STACK or _dispatch.PROFILE_LAYER is not None or FW.active \
            or STATE.grad_enabled:
        return False
    first = None
    for i, t in enumerate(tensors):
        if t is None:
            continue
        if type(t) is not Tensor and type(t) is not Parameter or t.is_sparse \
                or t._conj_bit or t._neg_bit or t.requires_grad and t.grad_fn is not None:
            return False
        if first is None:
            first = t
            if t._storage.device.type != "cuda" or t.dtype not in _SUFFIX:
                return False
        elif t.dtype is not first.dtype or t._storage.device != first._storage.device \
                or t._shape != first._shape:
            return False
        if i != 1 and not t.is_contiguous():  # the gradient may have any layout
            return False
    return first is not None


def _ptr(t: Tensor | None) -> ctypes.c_uint64:
    if t is None:
        return ctypes.c_uint64(0)
    return ctypes.c_uint64(t._storage._data.ptr + t._offset * t.dtype.itemsize)


def _launch(kind: str, p: Tensor, args: list) -> None:
    from refimpl.cuda import _driver, streams
    from refimpl.cuda._pointwise import load_functions

    index = p._storage.device.index
    key = (kind, p.dtype, index)
    fn = _functions.get(key)
    if fn is None:
        fn = load_functions(_SOURCE, (f"{kind}_{_SUFFIX[p.dtype][0]}",), index)[0]
        _functions[key] = fn
    n = p.numel()
    grid = min(max(-(-n // _BLOCK), 1), _MAX_GRID)
    _driver.launch(index, fn, (grid, 1, 1), (_BLOCK, 1, 1), args,
                   streams.current_stream_handle(index))


def _bump(t: Tensor, times: int = 1) -> None:
    t._version_counter.version += times


def sgd(p: Tensor, grad: Tensor, buf: Tensor | None, lr: float, momentum: float,
        dampening: float, weight_decay: float, nesterov: bool, maximize: bool) -> None:
    """One SGD update of ``p`` (``buf``, the momentum buffer, exists already when
    ``momentum`` is not 0)."""
    if p.numel():
        grad = grad if grad.is_contiguous() else grad.contiguous()
        T = _SUFFIX[p.dtype][1]
        flags = (bool(maximize) | bool(nesterov) << 1 | (weight_decay != 0) << 2
                 | (momentum != 0) << 3)
        _launch("sgd", p, [_ptr(p), _ptr(grad), _ptr(buf), ctypes.c_longlong(p.numel()),
                           T(-lr), T(momentum), T(1 - dampening), T(weight_decay),
                           ctypes.c_int(flags)])
    if momentum != 0:
        _bump(buf, 2)
    _bump(p)


def adam(p: Tensor, grad: Tensor, state: dict, lr: float, beta1: float, beta2: float,
         eps: float, weight_decay: float, decoupled: bool, amsgrad: bool,
         maximize: bool) -> None:
    """One Adam (or AdamW with ``decoupled``) update of ``p`` and its state; the step
    counter is the 0-d CPU tensor of the non-capturable path."""
    step_t = state["step"]
    step_t._np[...] += 1
    _bump(step_t)
    ea, eas = state["exp_avg"], state["exp_avg_sq"]
    mx = state.get("max_exp_avg_sq") if amsgrad else None
    step = float(step_t._np)
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    if p.numel():
        grad = grad if grad.is_contiguous() else grad.contiguous()
        T = _SUFFIX[p.dtype][1]
        flags = (bool(maximize) | bool(decoupled) << 1 | (weight_decay != 0) << 2
                 | bool(amsgrad) << 3)
        _launch("adam", p, [_ptr(p), _ptr(grad), _ptr(ea), _ptr(eas), _ptr(mx),
                            ctypes.c_longlong(p.numel()), T(1 - lr * weight_decay),
                            T(1 - beta1), T(beta2), T(1 - beta2), T(weight_decay),
                            T(bias_correction2_sqrt), T(eps), T(-step_size),
                            ctypes.c_int(flags)])
    if weight_decay != 0 and decoupled:
        _bump(p)
    _bump(ea)
    _bump(eas, 2)
    if amsgrad:
        _bump(mx)
    _bump(p)
