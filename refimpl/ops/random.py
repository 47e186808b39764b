"""Random factories and in-place samplers, drawn from refimpl's Philox generator.

Values come from ``refimpl._random`` (counter-based Philox4x32-10); torch draws
different numbers, so cases compare distributions and shapes, never values. On a CUDA
device the draw runs on the device (``refimpl.cuda._random_kernels``) from that
device's generator (or a CUDA ``generator=``), never on the host.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl import _random as R
from refimpl._device import resolve
from refimpl._memory_format import like_strides, relaid
from refimpl._state import STATE
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.factories import _finish, _shape_args, empty


def _gen(generator, dev=None) -> R.Generator:
    """The generator a draw on ``dev`` uses: the given one, or the device's default."""
    if dev is None or dev.type != "cuda":
        return generator if generator is not None else R.default_generator
    if generator is None:
        from refimpl.cuda import random as cuda_random

        return cuda_random.default_generator(dev.index)
    if generator.device.type != "cuda":
        raise RuntimeError("Expected a 'cuda' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator


def _floating(dtype, name: str) -> D.dtype:
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f'"{name}" not implemented for \'{D.type_name(dt)}\'')
    return dt


def _fill_from(t: Tensor, values: np.ndarray) -> Tensor:
    """Write host-drawn values into the CPU tensor ``t`` and bump its version."""
    np.copyto(t._np, values.reshape(t.shape).astype(t.dtype.np))
    t._version_counter.bump()
    return t


def _draw_cuda(t: Tensor, dist: str, generator, **params) -> Tensor:
    """Fill the CUDA tensor ``t`` on the device from its CUDA generator (a strided ``t``
    gets a contiguous draw copied in) and bump its version."""
    from refimpl.cuda import _random_kernels, _tensor_ops

    if t._storage.device.type == "meta":  # a fake CUDA tensor: no data to draw
        return t
    gen = _gen(generator, t._storage.device)
    if t.is_contiguous():
        _random_kernels.draw(t, dist, gen, **params)
    else:
        tmp = Tensor._empty(t._shape, t.dtype, t._storage.device)
        _random_kernels.draw(tmp, dist, gen, **params)
        _tensor_ops.copy_(t, tmp)
    t._version_counter.bump()
    return t


def _uniform_values(n: int, dt: D.dtype, gen: R.Generator) -> np.ndarray:
    if dt.is_complex:
        return (gen.uniform(2 * n, dt.to_real() is D.float64).reshape(n, 2)
                @ np.array([1, 1j]))
    return gen.uniform(n, dt is D.float64)


def _bounded(values: np.ndarray, dt: D.dtype, from_: float, to: float) -> np.ndarray:
    """Uniform values in ``dt``: one that rounds up to ``to`` becomes ``from_`` (torch's
    rule for narrow dtypes, so the range stays half-open)."""
    if dt.is_complex or dt.itemsize > 2:
        return values
    cast = values.astype(dt.np)
    return np.where(cast.astype(np.float64) >= to, np.asarray(from_).astype(dt.np), cast)


def _normal_values(n: int, dt: D.dtype, gen: R.Generator) -> np.ndarray:
    if dt.is_complex:
        z = gen.normal(2 * n, True).reshape(n, 2) * np.sqrt(0.5)
        return z @ np.array([1, 1j])
    return gen.normal(n, dt is D.float64)


def _sample(size, dt: D.dtype, device, values, requires_grad: bool, out, cuda) -> Tensor:
    """A fresh tensor (or ``out``) of ``size``: filled by ``values(n)`` (a host draw from
    the CPU generator) on the CPU, by ``cuda(t)`` (a device draw) on a CUDA device."""
    shape = _shape_args(size)
    if out is not None:
        out.resize_(shape)
        t = out
    else:
        t = empty(*shape, dtype=dt, device=device)
    kind = t._storage.device.type  # a fake CUDA tensor's storage is a meta one
    if kind == "cuda":
        cuda(t)
    elif kind != "meta":  # meta and fake tensors have no data to draw
        _fill_from(t, values(t.numel()))
    if out is not None:
        return out
    t._version_counter.version = 0  # a fresh tensor starts at version 0
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
         out=None) -> Tensor:
    """Uniform values in [0, 1)."""
    dt = _floating(dtype if out is None else out.dtype, "check_uniform_bounds")
    return _sample(size, dt, device,
                   lambda n: _bounded(_uniform_values(n, dt, _gen(generator)), dt, 0.0, 1.0),
                   requires_grad, out, lambda t: _draw_cuda(t, "uniform", generator))


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
          out=None) -> Tensor:
    """Standard normal values."""
    dt = _floating(dtype if out is None else out.dtype, "normal_kernel_cpu")
    return _sample(size, dt, device, lambda n: _normal_values(n, dt, _gen(generator)),
                   requires_grad, out,
                   lambda t: _draw_cuda(t, "normal", generator, a=0.0, b=1.0))


def randint(*args, generator=None, dtype=None, device=None, requires_grad: bool = False,
            size=None) -> Tensor:
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    if size is not None:
        args = (*args, size)
    if len(args) == 2:
        low, (high, shape) = 0, args
    elif len(args) == 3:
        low, high, shape = args
    else:
        raise TypeError("randint() expects (high, size) or (low, high, size)")
    if low >= high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    dt = D.dtype_from_any(dtype) if dtype is not None else D.int64
    low, high = int(low), int(high)
    return _sample((shape,), dt, device,
                   lambda n: _gen(generator).integers(n, low, high), requires_grad, None,
                   lambda t: _draw_cuda(t, "integers", generator, lo=low, span=high - low))


def randperm(n: int, *, generator=None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (the order of random keys, on the device for CUDA)."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dt = D.dtype_from_any(dtype) if dtype is not None else D.int64
    dev = resolve(device) if device is not None else None
    if dev is not None and dev.type == "cuda":
        from refimpl.cuda import _random_kernels

        out = empty(n, dtype=dt, device=dev)
        _random_kernels.randperm(out, _gen(generator, out._storage.device))
        out._version_counter.version = 0
        return out.requires_grad_(True) if requires_grad else out
    keys = _gen(generator).integers(n, 0, 1 << 62)
    perm = np.argsort(keys, kind="stable")
    return _finish(Tensor._from_array(perm.astype(dt.np), dt), device, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False, out=None) -> Tensor:
    """Normal values with the given mean and std (scalars or tensors, broadcast)."""
    for s in (std,):
        if not isinstance(s, Tensor) and s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {s}")
    if isinstance(std, Tensor) and bool((std < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if size is None:
        shapes = [x.shape for x in (mean, std) if isinstance(x, Tensor)]
        from refimpl.ops._helpers import broadcast_shapes

        size = broadcast_shapes(*shapes) if shapes else ()
        like = next(x for x in (mean, std) if isinstance(x, Tensor)) if shapes else None
        dtype = dtype or (like.dtype if like is not None else None)
        device = device or (like.device if like is not None else None)
    dev = resolve(device) if device is not None else None
    if dev is not None and dev.type == "cuda" and not isinstance(mean, Tensor) \
            and not isinstance(std, Tensor):
        # scalar parameters on the device: one draw of N(mean, std)
        dt = _floating(dtype, "normal_kernel_cuda")
        out_t = empty(*_shape_args((size,)), dtype=dt, device=dev)
        _draw_cuda(out_t, "normal", generator, a=float(mean), b=float(std))
        out_t._version_counter.version = 0
    else:
        z = randn(*_shape_args((size,)), generator=generator, dtype=dtype, device=device)
        out_t = z * std + mean
    return out_t.requires_grad_(True) if requires_grad else out_t


def _check_p(p: float, name: str = "bernoulli_") -> None:
    if not 0 <= p <= 1:
        raise RuntimeError(f"{name} expects p to be in [0, 1], but got p={p}")


def _probs_cuda(p: Tensor, like: Tensor) -> Tensor:
    """``p`` broadcast to ``like``'s shape as a contiguous float64 CUDA tensor."""
    from refimpl.cuda import _tensor_ops

    probs = Tensor._empty(like._shape, D.float64, like._storage.device)
    _tensor_ops.copy_(probs, p)
    return probs


def _drawn_meta(input: Tensor, drawn: Tensor) -> TensorSpec:
    return TensorSpec(drawn._shape, drawn.dtype, drawn.device)


# The autograd node of bernoulli drawn from probabilities that require grad: torch's
# BernoulliBackward0, whose gradient is zero (the draw is not differentiable in p)
_bernoulli_node = defop(
    "_bernoulli_draw", meta=_drawn_meta, cpu=lambda input, drawn: drawn.clone(),
    cuda=lambda input, drawn: drawn.clone(), saves=(), node="BernoulliBackward0",
    backward=lambda ctx, g: (g.new_zeros(ctx.args[0].shape), None),
    extra={"method": False})


def _no_derivative(ctx, g):
    raise RuntimeError("derivative for aten::bernoulli is not implemented")


# bernoulli(input, p) of an input that requires grad: torch's node says the derivative is
# not implemented
_bernoulli_p_node = defop(
    "_bernoulli_p_draw", meta=_drawn_meta, cpu=lambda input, drawn: drawn.clone(),
    cuda=lambda input, drawn: drawn.clone(), saves=(), node="NotImplemented",
    backward=_no_derivative, extra={"method": False})


def bernoulli(input: Tensor, p=None, *, generator=None, out=None) -> Tensor:
    """1 with probability ``input`` (or ``p``), else 0, in input's dtype.

    On CUDA, probabilities given as a tensor are not range-checked (torch checks them
    with a device-side assertion); values above 1 always give 1, below 0 always 0.
    Probabilities that require grad give a result that requires grad, with a zero
    gradient (torch's ``BernoulliBackward0``).
    """
    tracked = input.requires_grad and STATE.grad_enabled
    if tracked and out is not None:
        raise RuntimeError("bernoulli(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    result = _bernoulli(input, p, generator, out)
    if tracked:
        return (_bernoulli_node if p is None else _bernoulli_p_node)(input, result)
    return result


def _bernoulli(input: Tensor, p, generator, out) -> Tensor:
    if out is not None:
        from refimpl._dispatch import assert_no_internal_overlap

        assert_no_internal_overlap(out)
    if p is not None:
        _check_p(p)
    if input.is_cuda:
        result = Tensor._empty(input._shape, input.dtype, input._storage.device)
        if p is None:
            _draw_cuda(result, "bernoulli", generator, probs=_probs_cuda(input, result))
        else:
            _draw_cuda(result, "bernoulli", generator, a=float(p))
        result._version_counter.version = 0
        if out is not None:
            out.resize_(result.shape)
            out.copy_(result)
            return out
        return result
    probs = input._np if p is None else np.full(input.shape, p)
    probs = np.asarray(probs, dtype=np.float64)
    if ((probs < 0) | (probs > 1)).any():
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
            "message be improved?  If so, please report an enhancement request to PyTorch.)"
        )
    u = _gen(generator).uniform(probs.size, True).reshape(probs.shape)
    return Tensor._from_array((u < probs).astype(input.dtype.np), input.dtype)


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None) -> Tensor:
    """Fill in place with uniform values in [from_, to)."""
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={from_} > to={to}")
    if self.is_cuda:
        return _draw_cuda(self, "uniform", generator, a=float(from_), b=float(to))
    u = _uniform_values(self.numel(), self.dtype, _gen(generator))
    return _fill_from(self, _bounded(from_ + u * (to - from_), self.dtype, from_, to))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill in place with normal values."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if self.is_cuda:
        return _draw_cuda(self, "normal", generator, a=float(mean), b=float(std))
    return _fill_from(self, mean + std * _normal_values(self.numel(), self.dtype,
                                                        _gen(generator)))


# random_()'s default upper bound for floating dtypes: every integer up to 2^mantissa
# (plus the implicit bit) is exactly representable
_RANDOM_TO = {"float32": 2 ** 24 + 1, "float64": 2 ** 53 + 1, "float16": 2 ** 11 + 1,
              "bfloat16": 2 ** 8 + 1}


def random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator=None) -> Tensor:
    """Fill in place with integers in [from_, to) (to defaults to the dtype's range)."""
    if to is None:
        to = _RANDOM_TO.get(self.dtype.name) or (
            int(np.iinfo(self.dtype.np).max) + 1 if self.dtype.category == 1 else 2)
    if self.is_cuda:
        return _draw_cuda(self, "integers", generator, lo=int(from_), span=int(to) - int(from_))
    return _fill_from(self, _gen(generator).integers(self.numel(), int(from_), int(to)))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill in place with 0/1 draws of probability ``p`` (a float or a tensor)."""
    if not isinstance(p, Tensor):
        _check_p(p)
    if self.is_cuda:
        if isinstance(p, Tensor):
            return _draw_cuda(self, "bernoulli", generator, probs=_probs_cuda(p, self))
        return _draw_cuda(self, "bernoulli", generator, a=float(p))
    probs = p._np if isinstance(p, Tensor) else p
    u = _gen(generator).uniform(self.numel(), True).reshape(self.shape)
    return _fill_from(self, (u < probs).astype(np.float64))


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill in place with exponential values of rate ``lambd`` (``-log(1 - u) / lambd``)."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    _floating(self.dtype, "exponential")
    if self.is_cuda:
        return _draw_cuda(self, "exponential", generator, a=float(lambd))
    u = _gen(generator).uniform(self.numel(), True)
    return _fill_from(self, -np.log1p(-u) / lambd)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None, out=None) -> Tensor:
    """Category indices drawn from the rows of ``input`` (non-negative weights, not
    necessarily normalised); without replacement each row's categories are distinct."""
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not (input.dtype.is_floating_point):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{D.type_name(input.dtype)}")
    if out is not None and out.dtype != D.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {D.type_name(out.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    cats = input._shape[-1]
    if not replacement and num_samples > cats:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if cats > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    rows = input.reshape(1, cats) if input.dim() == 1 else input
    shape = (num_samples,) if input.dim() == 1 else (rows._shape[0], num_samples)
    if input.is_cuda:
        from refimpl.cuda import _random_kernels

        result = Tensor._empty(shape, D.int64, input._storage.device)
        if replacement and num_samples > 1:  # torch checks these weights on the device
            from refimpl.cuda._multinomial_assert import check_rows

            check_rows(rows)
        bad, zero, _ = _random_kernels.multinomial(
            result, rows, num_samples, replacement, _gen(generator, input._storage.device))
    else:
        w = rows._np.astype(np.float64)
        if replacement:
            _check_rows_with_replacement(w)
        drawn, bad, zero = _multinomial_np(w, num_samples, replacement, _gen(generator))
        result = None if drawn is None else Tensor._from_array(drawn.reshape(shape), D.int64)
    if bad:
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if zero:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if out is not None:
        out.resize_(shape)
        out.copy_(result)
        return out
    return result


def _check_rows_with_replacement(w: np.ndarray) -> None:
    """torch's CPU checks of draws with replacement: row by row, entry by entry (a NaN
    fails the ``>= 0`` test first), then the row's sum."""
    with np.errstate(invalid="ignore"):
        negative, infinite = ~(w >= 0), (w >= 0) & ~np.isfinite(w)
        bad = negative | infinite | ~(w.sum(1, keepdims=True) > 0)
    rows = np.flatnonzero(bad.any(1))
    if not rows.size:
        return
    r = rows[0]
    entries = np.flatnonzero(negative[r] | infinite[r])
    if not entries.size:
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    kind = "< 0" if negative[r, entries[0]] else "= infinity or NaN"
    raise RuntimeError(f"invalid multinomial distribution (encountering probability entry {kind})")


def _multinomial_np(w: np.ndarray, ns: int, replacement: bool, gen: R.Generator):
    """The CUDA kernel's algorithm in numpy: inverse-CDF draws, row by row."""
    rows, cats = w.shape
    if not np.isfinite(w).all() or (w < 0).any():
        return None, True, False
    if (w.sum(1) <= 0).any():
        return None, False, True
    u = gen.uniform(rows * ns, True).reshape(rows, ns)
    out = np.zeros((rows, ns), dtype=np.int64)
    for r in range(rows):
        weights = w[r].copy()
        for s in range(ns):
            total = weights.sum()
            if total <= 0:  # only zero weights left: the unused categories in order
                unused = [c for c in range(cats) if c not in set(out[r, :s].tolist())]
                out[r, s:] = unused[:ns - s]
                break
            cdf = np.cumsum(weights)
            c = int(np.searchsorted(cdf, u[r, s] * total, side="right"))
            c = min(c, int(np.flatnonzero(weights > 0)[-1]))
            out[r, s] = c
            if not replacement:
                weights[c] = 0.0
    return out, False, False


def rand_like(input: Tensor, *, dtype=None, device=None, requires_grad=False,
              memory_format=None, **_) -> Tensor:
    """``rand`` shaped (and laid out, TENSOR-014) like ``input``."""
    t = relaid(rand(input.shape, dtype=dtype or input.dtype, device=device or input.device),
               like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def randn_like(input: Tensor, *, dtype=None, device=None, requires_grad=False,
               memory_format=None, **_) -> Tensor:
    """``randn`` shaped (and laid out) like ``input``."""
    t = relaid(randn(input.shape, dtype=dtype or input.dtype, device=device or input.device),
               like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def randint_like(input: Tensor, low, high=None, *, dtype=None, device=None,
                 memory_format=None, **_) -> Tensor:
    """``randint`` shaped (and laid out) like ``input``."""
    if high is None:
        low, high = 0, low
    return relaid(randint(low, high, input.shape, dtype=dtype or input.dtype,
                          device=device or input.device), like_strides(input, memory_format))


Generator = R.Generator
default_generator = R.default_generator
manual_seed, seed, initial_seed = R.manual_seed, R.seed, R.initial_seed
get_rng_state, set_rng_state = R.get_rng_state, R.set_rng_state

__all__ = [
    "Generator",
    "bernoulli",
    "default_generator",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "multinomial",
    "normal",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "set_rng_state",
]
TENSOR_METHODS = ("uniform_", "normal_", "random_", "bernoulli_", "bernoulli", "exponential_",
                  "multinomial")
