"""The SGD and Adam/AdamW updates of plain CUDA parameters as multi-tensor kernels.

torch's optimizers run their update on CUDA as fused multi-tensor kernels (its
``foreach`` default); the ops of the single-tensor update (about eight in-place ops
per parameter for Adam) each cost a dispatch, an allocation and a launch here. This
module runs the same arithmetic, in the same order and compute type, in NVRTC kernels
on the current stream of the parameters' device: an optimizer queues each parameter's
update in an :class:`Updates` (``sgd``/``adam``), then ``launch()`` runs one kernel per
device and dtype for up to ``_MAX_TENSORS`` parameters (their pointers and sizes travel
in the kernel's argument struct; ``blockIdx.y`` picks the parameter). Each tensor's
version counter is bumped when queued, as often as those in-place ops would bump it.

``plain(...)`` decides when this applies: every tensor a plain (or ``nn.Parameter``)
dense, contiguous CUDA float32/float64 tensor of one shape on one device, without math
bits (the gradient, the second, may have any layout: the kernel reads a contiguous copy
of it), and nothing that watches ops (dispatch modes, the profiler, forward AD) active;
otherwise the optimizers run their ops.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _driver, streams
from refimpl.cuda._pointwise import load_functions
from refimpl.optim._cpu_update import plain_tensor, unwatched

_BLOCK = 256
_MAX_GRID = 1 << 16
_MAX_TENSORS = 24  # per launch: the argument struct stays under 2 KiB

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

#define MAXT MAX_TENSORS
template<class T> struct SgdList {
  T* p[MAXT]; const T* g[MAXT]; T* buf[MAXT]; long long n[MAXT]; };
template<class T> struct AdamList {
  T* p[MAXT]; const T* g[MAXT]; T* m[MAXT]; T* v[MAXT]; T* vmax[MAXT]; long long n[MAXT];
  T bc2_sqrt[MAXT]; T neg_step_size[MAXT]; };

// blockIdx.y picks the tensor; blockIdx.x strides over its elements
#define SGD(NAME, T) extern "C" __global__ void NAME(SgdList<T> L, T neg_lr, T momentum, \
    T alpha, T wd, int flags) { \
  const int t = blockIdx.y; \
  sgd_body<T>(L.p[t], L.g[t], L.buf[t], L.n[t], neg_lr, momentum, alpha, wd, flags); }
#define ADAM(NAME, T) extern "C" __global__ void NAME(AdamList<T> L, T decay, T w, T beta2, \
    T one_minus_beta2, T wd, T eps, int flags) { \
  const int t = blockIdx.y; \
  adam_body<T>(L.p[t], L.g[t], L.m[t], L.v[t], L.vmax[t], L.n[t], decay, w, beta2, \
               one_minus_beta2, wd, L.bc2_sqrt[t], eps, L.neg_step_size[t], flags); }
SGD(sgd_f32, float)
SGD(sgd_f64, double)
ADAM(adam_f32, float)
ADAM(adam_f64, double)
""".replace("MAX_TENSORS", str(_MAX_TENSORS))

_functions: dict = {}  # (kind, dtype, device index) -> loaded kernel handle
_SUFFIX = {D.float32: "f32", D.float64: "f64"}


def plain(*tensors, inside_op: bool = False) -> bool:
    """Whether one fused kernel may stand for the update's ops on these tensors
    (``inside_op``: as in ``_cpu_update.plain``, whatever watches ops)."""
    if not inside_op and not unwatched():
        return False
    first = None
    for i, t in enumerate(tensors):
        if t is None:
            continue
        if not plain_tensor(t):
            return False
        if first is None:
            first = t
            dev = t._storage.device
            if dev.type != "cuda" or t.dtype not in _SUFFIX:
                return False
        elif t.dtype is not first.dtype or t._shape != first._shape or (
                t._storage.device is not dev and t._storage.device != dev):
            return False
        if i != 1 and not t.is_contiguous():  # the gradient may have any layout
            return False
    return first is not None


def _ptr(t: Tensor | None) -> int:
    return 0 if t is None else t._storage._data.ptr + t._offset * t.dtype.itemsize


_LISTS: dict = {}  # (kind, dtype) -> struct.Struct of the kernel's list argument


def _list_struct(kind: str, dtype: D.dtype):
    """The byte layout of ``SgdList<T>``/``AdamList<T>``: its arrays in field order, each
    of ``_MAX_TENSORS`` entries (C's alignment: ``@``)."""
    layout = _LISTS.get((kind, dtype))
    if layout is None:
        import struct

        scalar = "f" if dtype is D.float32 else "d"
        codes = "QQQq" if kind == "sgd" else f"QQQQQq{scalar}{scalar}"
        layout = struct.Struct("@" + "".join(f"{_MAX_TENSORS}{c}" for c in codes))
        _LISTS[(kind, dtype)] = layout
    return layout


def _launch(kind: str, p: Tensor, items: list, scalars: list) -> None:
    """One kernel over ``items`` (tuples of pointers, the size, per-tensor scalars: the
    list struct's fields in order), all of ``p``'s dtype and device, with the shared
    ``scalars`` (floats of that dtype, then the int flags) after the list struct."""
    index = p._storage.device.index
    suffix = _SUFFIX[p.dtype]
    key = (kind, p.dtype, index)
    fn = _functions.get(key)
    if fn is None:
        fn = load_functions(_SOURCE, (f"{kind}_{suffix}",), index)[0]
        _functions[key] = fn
    layout = _list_struct(kind, p.dtype)
    pad = [0] * (_MAX_TENSORS - len(items))
    values = []
    for column in zip(*items):  # field by field, unused entries zero
        values += column
        values += pad
    packed = layout.pack(*values)
    fmt = f"{layout.size}s" + ("f" if p.dtype is D.float32 else "d") * (len(scalars) - 1) + "i"
    most = max(item[-1 if kind == "sgd" else 5] for item in items)
    grid = min(max(-(-most // _BLOCK), 1), _MAX_GRID)
    _driver.launch_packed(index, fn, (grid, len(items), 1), (_BLOCK, 1, 1), fmt,
                          (packed, *scalars), streams.current_stream_handle(index), 0,
                          f"{kind}_{suffix}")


def _bump(t: Tensor, times: int = 1) -> None:
    t._version_counter.version += times


class Updates:
    """The queued updates of one parameter group: ``sgd``/``adam`` queue a parameter's
    update (and bump its tensors' versions), ``launch`` runs them in as few kernels as
    the devices, dtypes and ``_MAX_TENSORS`` allow. The queued gradients (contiguous
    copies included) stay referenced until then."""

    def __init__(self) -> None:
        self._queued: dict = {}  # (kind, dtype, device) -> [(p, item, keepalive)]

    def _queue(self, kind: str, p: Tensor, item: tuple, grad: Tensor) -> None:
        self._queued.setdefault((kind, p.dtype, p._storage.device), []).append(
            (p, item, grad))

    def sgd(self, p: Tensor, grad: Tensor, buf: Tensor | None, momentum: float) -> None:
        """Queue one SGD update of ``p`` (``buf``, the momentum buffer, exists already
        when ``momentum`` is not 0)."""
        n = math.prod(p._shape)
        if n:
            grad = grad if grad.is_contiguous() else grad.contiguous()
            self._queue("sgd", p, (_ptr(p), _ptr(grad), _ptr(buf), n), grad)
        if momentum != 0:
            buf._version_counter.version += 2
        p._version_counter.version += 1

    def adam(self, p: Tensor, grad: Tensor, state: dict, lr: float, beta1: float,
             beta2: float, weight_decay: float, decoupled: bool, amsgrad: bool) -> None:
        """Queue one Adam (or AdamW with ``decoupled``) update of ``p`` and its state; the
        step counter is the 0-d CPU tensor of the non-capturable path."""
        step_t = state["step"]
        step_t._np[...] += 1
        _bump(step_t)
        ea, eas = state["exp_avg"], state["exp_avg_sq"]
        mx = state.get("max_exp_avg_sq") if amsgrad else None
        step = float(step_t._np)
        step_size = lr / (1 - beta1 ** step)
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        n = math.prod(p._shape)
        if n:
            grad = grad if grad.is_contiguous() else grad.contiguous()
            self._queue("adam", p, (_ptr(p), _ptr(grad), _ptr(ea), _ptr(eas), _ptr(mx),
                                    n, bias_correction2_sqrt, -step_size), grad)
        # the versions the ops would bump (written out: this runs per parameter)
        p._version_counter.version += 2 if weight_decay != 0 and decoupled else 1
        ea._version_counter.version += 1
        eas._version_counter.version += 2
        if amsgrad:
            mx._version_counter.version += 1

    def launch_sgd(self, lr: float, momentum: float, dampening: float, weight_decay: float,
                   nesterov: bool, maximize: bool) -> None:
        """Run the queued SGD updates with the group's hyperparameters."""
        flags = (bool(maximize) | bool(nesterov) << 1 | (weight_decay != 0) << 2
                 | (momentum != 0) << 3)
        for (kind, _, _), queued in self._take("sgd"):
            self._chunks(kind, queued, [-lr, momentum, 1 - dampening, weight_decay, flags])

    def launch_adam(self, lr: float, beta1: float, beta2: float, eps: float,
                    weight_decay: float, decoupled: bool, amsgrad: bool,
                    maximize: bool) -> None:
        """Run the queued Adam/AdamW updates with the group's hyperparameters."""
        flags = (bool(maximize) | bool(decoupled) << 1 | (weight_decay != 0) << 2
                 | bool(amsgrad) << 3)
        for (kind, _, _), queued in self._take("adam"):
            self._chunks(kind, queued, [1 - lr * weight_decay, 1 - beta1, beta2, 1 - beta2,
                                        weight_decay, eps, flags])

    def _take(self, kind: str) -> list:
        taken = [(key, q) for key, q in self._queued.items() if key[0] == kind]
        for key, _ in taken:
            del self._queued[key]
        return taken

    @staticmethod
    def _chunks(kind: str, queued: list, scalars: list) -> None:
        for i in range(0, len(queued), _MAX_TENSORS):
            part = queued[i:i + _MAX_TENSORS]
            _launch(kind, part[0][0], [item for _, item, _ in part], scalars)
