"""The per-parameter SGD and Adam/AdamW updates on the CPU as numpy arithmetic in place.

torch's single-tensor (for-loop) optimizers, its default for CPU parameters, run a few
in-place ops per parameter; here the same arithmetic, in the same order and dtype, runs
directly on the parameters' and states' numpy views, without dispatching each op. Each
tensor's version counter is bumped as often as those in-place ops would bump it.
``plain(...)`` decides when this applies: every tensor a plain (or ``nn.Parameter``) dense CPU float32/float64
tensor without math bits, and nothing that watches ops (dispatch modes, the profiler,
forward AD) active; otherwise the optimizers run their ops.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor

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


def unwatched() -> bool:
    """Whether an update may skip its ops: grad mode off and nothing that watches ops
    (dispatch modes, the profiler, forward AD) active."""
    _dispatch, FW, STATE, _ = _MODULES or _modules()
    return not (_dispatch.MODE_STACK or _dispatch.PROFILE_LAYER is not None or FW.active
                or STATE.grad_enabled)


def plain_tensor(t) -> bool:
    """A plain tensor or ``nn.Parameter`` (dense: refimpl has no sparse layouts), without
    math bits, and not a tensor that records a graph."""
    parameter = (_MODULES or _modules())[3]
    # (a tensor with a grad_fn requires grad: "records a graph" is having one; a view's
    # grad_fn is computed, anything else's is its node)
    return ((type(t) is Tensor or type(t) is parameter) and not t._conj_bit
            and not t._neg_bit
            and (t._gfn is None if t._view_meta is None else t.grad_fn is None))


def plain(*tensors, inside_op: bool = False) -> bool:
    """Whether the numpy updates may stand for the ops on these tensors. ``inside_op``:
    the update is part of one op in torch (batch norm's running statistics), which shows
    no ops of its own to the profiler or a dispatch mode."""
    if not inside_op and not unwatched():
        return False
    dtype = None
    for t in tensors:
        if t is None:
            continue
        if t._storage.device.type != "cpu" or not plain_tensor(t):
            return False
        if dtype is None:
            dtype = t.dtype
        if t.dtype is not dtype or not (dtype is D.float32 or dtype is D.float64):
            return False
    return True


def _bump(t: Tensor, times: int = 1) -> None:
    t._version_counter.version += times


def sgd(p: Tensor, grad: Tensor, buf: Tensor | None, lr: float, momentum: float,
        dampening: float, weight_decay: float, nesterov: bool, maximize: bool) -> None:
    """One SGD update of ``p`` (``buf``, the momentum buffer, exists already when
    ``momentum`` is not 0)."""
    pa = p._np
    g = grad._np
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * pa
    if momentum != 0:
        ba = buf._np
        ba *= momentum
        ba += (1 - dampening) * g if dampening else g
        _bump(buf, 2)
        g = g + momentum * ba if nesterov else ba
    pa += -lr * g
    _bump(p)


def adam(p: Tensor, grad: Tensor, state: dict, lr: float, beta1: float, beta2: float,
         eps: float, weight_decay: float, decoupled: bool, amsgrad: bool,
         maximize: bool) -> None:
    """One Adam (or AdamW with ``decoupled``) update of ``p`` and its state."""
    pa = p._np
    g = grad._np
    if maximize:
        g = -g
    step_t = state["step"]
    step_t._np[...] += 1  # (a 0-d CPU tensor, float32 as torch's)
    _bump(step_t)
    if weight_decay != 0:
        if decoupled:
            pa *= 1 - lr * weight_decay
            _bump(p)
        else:
            g = g + weight_decay * pa
    ea, eas = state["exp_avg"], state["exp_avg_sq"]
    m, v = ea._np, eas._np
    w = m.dtype.type(1 - beta1)
    diff = g - m
    if abs(w) < 0.5:
        m += w * diff
    else:
        m[...] = g - diff * (1 - w)
    _bump(ea)
    v *= beta2
    sq = np.multiply(g, g)
    sq *= sq.dtype.type(1 - beta2)
    v += sq
    _bump(eas, 2)
    step = float(step_t._np)
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    if amsgrad:
        mx = state["max_exp_avg_sq"]
        np.maximum(mx._np, v, out=mx._np)
        _bump(mx)
        v = mx._np
    denom = np.sqrt(v)  # then (sqrt(v) / bias_correction2_sqrt + eps), in place
    denom /= denom.dtype.type(bias_correction2_sqrt)
    denom += denom.dtype.type(eps)
    upd = np.divide(m, denom, out=denom)
    upd *= upd.dtype.type(-step_size)
    pa += upd
    _bump(p)
