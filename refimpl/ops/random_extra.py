"""The remaining in-place distributions, their functional forms, ``fill`` and ``put``
(spec: TENSOR-5xx random numbers).

``cauchy_``, ``log_normal_`` and ``geometric_`` transform draws of the generator's own
uniform and normal streams (``uniform_``/``normal_`` of ``random.py``: numpy on the CPU
generator, the Philox kernels of ``refimpl/cuda/_random_kernels.py`` on a CUDA one), so
they consume the same Philox offsets as every other CUDA random op and are reproducible
under ``manual_seed``. Values are not torch's (torch's recipes per distribution differ),
their distributions are: see the conformance cases that test them.

``uniform``, ``cauchy``, ``exponential``, ``geometric`` and ``log_normal`` are the
functional forms torch registers as aten ops (``torch.ops.aten.uniform``): a fresh tensor
like ``self`` filled by the in-place op. Their derivative is zero.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.random import exponential_, normal_, uniform_


def _draw(self: Tensor, generator, normal: tuple | None = None) -> Tensor:
    """A float64 tensor shaped like ``self`` on its device: uniform in [0, 1), or normal
    with ``normal = (mean, std)``, from ``generator`` (the device's default if None)."""
    u = Tensor._empty(tuple(self.shape), D.float64, self._storage.device)
    if normal is not None:
        return normal_(u, *normal, generator=generator)
    return uniform_(u, generator=generator)


def _no_data(self: Tensor) -> bool:
    """A meta (or fake) tensor: nothing to draw, the op returns it as it is."""
    return self._storage.device.type == "meta"


def _continuous(self: Tensor, what: str) -> None:
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified "
                           f"{_long_name(self.dtype)}")


def _long_name(dt: D.dtype) -> str:
    return "long int" if dt is D.int64 else D.type_name(dt)


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator=None) -> Tensor:
    """Fill in place with Cauchy values: ``median + sigma * tan(pi * (u - 1/2))``."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    _continuous(self, "Cauchy")
    if _no_data(self):
        return self
    u = _draw(self, generator)
    return self.copy_(((u - 0.5) * math.pi).tan() * sigma + median)


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator=None) -> Tensor:
    """Fill in place with ``exp`` of normal values of ``mean`` and ``std``."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"log_normal_{self.device.type}\" not implemented for "
                                  f"'{D.type_name(self.dtype)}'")
    if _no_data(self):
        return self
    return self.copy_(_draw(self, generator, (mean, std)).exp())


def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill in place with the number of Bernoulli(``p``) trials up to the first success
    (1, 2, ...): ``ceil(log(1 - u) / log(1 - p))``."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    if _no_data(self):
        return self
    u = _draw(self, generator)
    trials = ((-u).log1p() / math.log1p(-p)).ceil().clamp(min=1)
    return self.copy_(trials)


# -- functional forms (aten ops) ----------------------------------------------------------------

def _functional(name: str, inplace) -> object:
    def kernel(self: Tensor, *args, generator=None, **kwargs) -> Tensor:
        out = Tensor._empty(tuple(self.shape), self.dtype, self._storage.device)
        return inplace(out, *args, generator=generator, **kwargs)

    return defop(name, meta=lambda self, *a, **k: TensorSpec(tuple(self.shape), self.dtype,
                                                             self.device),
                 cpu=kernel, cuda=kernel, saves=(),
                 backward=lambda ctx, g: (g.mul(0),),
                 jvp=lambda ctx, t, *_: None if t is None else t.mul(0),
                 extra={"method": False})


uniform = _functional("uniform", uniform_)
cauchy = _functional("cauchy", cauchy_)
exponential = _functional("exponential", exponential_)
geometric = _functional("geometric", geometric_)
log_normal = _functional("log_normal", log_normal_)


# -- fill ----------------------------------------------------------------------------------------

# the C++ type names torch's scalar conversion names in its overflow message
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "int64_t", "int32": "int",
            "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t"}


def _fill_value_check(value, dtype: D.dtype | None = None) -> None:
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    if isinstance(value, complex) and value.imag != 0 and dtype is not None and \
            dtype.name in _C_TYPES:
        raise RuntimeError(f"value cannot be converted to type {_C_TYPES[dtype.name]} without "
                           "overflow")


def _fill_meta(self: Tensor, value) -> TensorSpec:
    _fill_value_check(value, self.dtype)
    return TensorSpec(tuple(self.shape), self.dtype, self.device)


def _fill_kernel(self: Tensor, value) -> Tensor:
    _fill_value_check(value, self.dtype)
    out = Tensor._empty(tuple(self.shape), self.dtype, self._storage.device)
    if self.device.type == "cuda":
        from refimpl.cuda import _tensor_ops

        if isinstance(value, Tensor) and value.device.type == "cuda":
            _tensor_ops.copy_(out, value)  # a device-side broadcast copy: no sync
        elif isinstance(value, Tensor):  # a CPU scalar tensor: its value, as torch reads it
            _tensor_ops.fill_(out, value.item())
        else:
            _tensor_ops.fill_(out, value)
        return out
    if isinstance(value, Tensor):
        value = value._np.astype(self.dtype.np)
    elif self.dtype.category < 3 and isinstance(value, complex):
        value = value.real
    out._np[...] = value
    return out


def _fill_value(ctx):
    return ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("value")


def _fill_op(name: str, node: str):
    return defop(
        name, meta=_fill_meta, cpu=_fill_kernel, cuda=_fill_kernel, saves=(), node=node,
        backward=lambda ctx, g: (g.mul(0), g.sum().to(_fill_value(ctx).dtype)
                                 if isinstance(_fill_value(ctx), Tensor) else None),
        jvp=lambda ctx, t_self, t_value=None: None if t_value is None else
        t_value.expand(tuple(ctx.args[0].shape)).clone(), extra={"method": False})


# torch's two overloads, aten::fill.Scalar and aten::fill.Tensor, and their nodes
fill_scalar = _fill_op("fill", "FillBackward0")
fill_tensor = _fill_op("fill.Tensor", "FillBackward1")


def fill(input: Tensor, value) -> Tensor:
    """A fresh tensor like ``input`` holding ``value`` everywhere (a number, or a 0-dim
    tensor, whose gradient is the sum of the output's)."""
    return (fill_tensor if isinstance(value, Tensor) else fill_scalar)(input, value)


# -- put -----------------------------------------------------------------------------------------

def _put_check(self: Tensor, index: Tensor, source: Tensor) -> None:
    if index.dtype is not D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{D.type_name(index.dtype)}")
    if self.dtype is not source.dtype:
        raise RuntimeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{D.type_name(self.dtype)} and source.dtype = {D.type_name(source.dtype)}")
    if index.numel() != source.numel():
        raise IndexError(
            "put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = self.numel()
    if index.numel() and self.device.type == "cpu":
        bad = index._np.reshape(-1)
        bad = bad[(bad >= n) | (bad < -n)]
        if bad.size:
            raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor "
                             f"of {n} elements.")


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``source`` written (or added, with ``accumulate``) at the
    flat indices ``index`` (negative indices count from the end)."""
    from refimpl._memory_format import contiguous_format

    _put_check(input, index, source)
    flat = input.clone(memory_format=contiguous_format).reshape(-1)
    if index.numel():
        where = index.reshape(-1)
        where = where.where(where >= 0, where + input.numel())
        flat = flat.index_put((where,), source.reshape(-1), accumulate)
    return flat.reshape(tuple(input.shape))


def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``put`` written into ``self``."""
    return self.copy_(put(self, index, source, accumulate))


__all__ = ["fill", "put"]
TENSOR_METHODS = ("cauchy_", "log_normal_", "geometric_", "put", "put_")
