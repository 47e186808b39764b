"""``refimpl.masked``: torch.masked's reductions and normalisations on strided tensors
(spec TENSOR-110).

Each function takes torch.masked's arguments (``dim``, ``keepdim``, ``dtype`` and a
boolean ``mask=`` broadcastable to the input; ``None`` keeps every element). Masked-out
elements are replaced by the operation's identity (0 for sums and norms, 1 for
products, -inf/+inf or the integer extremes for max/min, NaN for the median) before the
ordinary refimpl op runs, so every function runs on every device and differentiates
through the ops it uses (masked-out elements get zero gradient). A slice whose elements
are all masked out reduces to the identity; ``mean``, ``var``, ``std`` and ``median``
give NaN there.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
           "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]

def _t():
    import refimpl

    return refimpl


def _input_mask(input: Tensor, mask) -> Tensor:
    """The mask broadcast to ``input``'s shape, as bool."""
    if mask.shape != input.shape:
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                             "higher than of the input)")
        mask = _t().broadcast_to(mask.clone(), input.shape)
    return mask.to(dtype=D.bool_)


def _int_limit(dtype: D.dtype, top: bool) -> int:
    bits = dtype.itemsize * 8
    if dtype is D.bool_:
        return int(top)
    if not dtype.is_signed:
        return (1 << bits) - 1 if top else 0
    return (1 << (bits - 1)) - 1 if top else -(1 << (bits - 1))


def _identity(op: str, input: Tensor, ord=None):
    """The value a masked-out element takes for ``op`` (a Python number)."""
    dtype = input.dtype
    if op in ("sum", "cumsum"):
        return 0
    if op in ("prod", "cumprod"):
        return 1
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        return -math.inf if dtype.category >= 2 else _int_limit(dtype, False)
    if op in ("amin", "argmin"):
        return math.inf if dtype.category >= 2 else _int_limit(dtype, True)
    if op == "norm":
        return math.inf if ord == -math.inf else 0
    if op == "median":
        return math.nan
    raise NotImplementedError(f"identity of {op} on {dtype} input")


def _fill(op: str, input: Tensor, mask, ord=None) -> Tensor:
    if mask is None:
        return input
    m = _input_mask(input, mask)
    return _t().where(m, input, input.new_full((), _identity(op, input, ord)))


def _dims(dim, ndim: int) -> tuple:
    """``dim`` as a tuple of non-negative dims (None: all of them)."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    n = max(ndim, 1)  # a 0-dim tensor takes dim 0 or -1
    out = []
    for d in dims:
        if d >= n or d < -n:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[{-n}, {n - 1}], but got {d})")
        if d % n in out:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        out.append(d % n)
    return tuple(out)


def sum(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Sum of the unmasked elements (0 for a fully masked slice)."""
    filled = _fill("sum", input, mask)
    return _t().sum(filled, _dims(dim, input.ndim), keepdim=bool(keepdim), dtype=dtype)


def prod(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Product of the unmasked elements (1 for a fully masked slice)."""
    if dtype is None:
        dtype = D.int64 if input.dtype in (D.uint8, D.bool_, D.int8, D.int16, D.int32) \
            else input.dtype
    result = _fill("prod", input, mask).to(dtype=dtype)
    for d in reversed(_dims(dim, input.ndim)):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input: Tensor, dim: int, *, dtype=None, mask=None) -> Tensor:
    """Cumulative sum with masked-out elements counted as 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _dims(dim, input.ndim)[0]
    return _t().cumsum(_fill("sum", input, mask), d, dtype=dtype).to(dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype=None, mask=None) -> Tensor:
    """Cumulative product with masked-out elements counted as 1."""
    dtype = input.dtype if dtype is None else dtype
    d = _dims(dim, input.ndim)[0]
    return _t().cumprod(_fill("prod", input, mask), d, dtype=dtype).to(dtype=dtype)


def _extreme(op: str, input, dim, keepdim, dtype, mask) -> Tensor:
    dtype = input.dtype if dtype is None else dtype
    filled = _fill(op, input, mask)
    return getattr(_t(), op)(filled, _dims(dim, filled.ndim), keepdim=bool(keepdim)).to(dtype=dtype)


def amax(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Maximum of the unmasked elements (-inf, or the integer minimum, when none)."""
    return _extreme("amax", input, dim, keepdim, dtype, mask)


def amin(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Minimum of the unmasked elements (inf, or the integer maximum, when none)."""
    return _extreme("amin", input, dim, keepdim, dtype, mask)


def argmax(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Index of the maximum among the unmasked elements, cast to ``dtype``."""
    dtype = input.dtype if dtype is None else dtype
    return _t().argmax(_fill("argmax", input, mask), dim, keepdim=bool(keepdim)).to(dtype=dtype)


def argmin(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Index of the minimum among the unmasked elements, cast to ``dtype``."""
    dtype = input.dtype if dtype is None else dtype
    return _t().argmin(_fill("argmin", input, mask), dim, keepdim=bool(keepdim)).to(dtype=dtype)


def _count(input: Tensor, dim, keepdim: bool, mask) -> Tensor:
    if mask is None:
        ones = _t().ones(input.shape, dtype=D.int64, device=input.device)
        return sum(ones, dim, keepdim=keepdim)
    return _input_mask(input, mask).sum(dim=_dims(dim, input.ndim), keepdim=bool(keepdim))


def mean(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None, mask=None) -> Tensor:
    """Mean of the unmasked elements (NaN for a fully masked slice)."""
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    if dtype.category < 2:
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    count = _count(input, dim, keepdim, mask)
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return total / count


def median(input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype=None,
           mask=None) -> Tensor:
    """Median of the unmasked elements along ``dim`` (NaN for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    d = _dims(dim, input.ndim)[0]
    is_float = input.dtype.category >= 2
    if not is_float:
        input = input.to(dtype=D.float32)
    output = _t().nanmedian(_fill("median", input, mask), d, keepdim).values
    if is_float:
        return output
    if not bool(output.isnan().any()):
        return output.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not floating "
                     "point")


def logsumexp(input: Tensor, dim=None, *, keepdim: bool = False, dtype=None,
              mask=None) -> Tensor:
    """``log(sum(exp(x)))`` over the unmasked elements (-inf for a fully masked slice)."""
    dtype = input.dtype if dtype is None else dtype
    filled = _fill("logsumexp", input, mask)
    return _t().logsumexp(filled, _dims(dim, input.ndim), keepdim=keepdim).to(dtype=dtype)


def logaddexp(input: Tensor, other: Tensor, *, dtype=None, input_mask=None,
              other_mask=None) -> Tensor:
    """``log(exp(input) + exp(other))`` with masked-out elements as -inf."""
    dtype = input.dtype if dtype is None else dtype
    a = _fill("logaddexp", input, input_mask)
    b = _fill("logaddexp", other, other_mask)
    return _t().logaddexp(a, b).to(dtype=dtype)


def norm(input: Tensor, ord=2.0, dim=None, *, keepdim: bool = False, dtype=None,
         mask=None) -> Tensor:
    """Vector norm of order ``ord`` over the unmasked elements."""
    from refimpl import linalg

    dtype = input.dtype if dtype is None else dtype
    filled = _fill("norm", input, mask, ord)
    return linalg.vector_norm(filled, ord, _dims(dim, input.ndim), bool(keepdim), dtype=dtype)


def _std_var(input: Tensor, dim, unbiased, correction, keepdim, dtype, mask,
             take_sqrt: bool) -> Tensor:
    if unbiased is not None and correction is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    corr = 1.0
    if unbiased is not None:
        corr = 1.0 if unbiased else 0.0
    if correction is not None:
        corr = float(correction)
    if dtype is None:
        dtype = input.dtype if input.dtype.category >= 2 else D.float32
    compute = dtype if dtype.category >= 2 else D.float32
    count = _count(input, dim, True, mask)
    sample_mean = sum(input, dim, keepdim=True, dtype=dtype, mask=mask) / count
    x = input - sample_mean
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute, mask=mask)
    if not keepdim:
        count = count.reshape(total.shape)
    if corr != 0:
        count = count.to(compute.to_real() if compute.category == 3 else compute) - corr
        count = _t().maximum(count, count.new_zeros([]))
    output = (total / count).to(dtype=dtype)
    return output.sqrt() if take_sqrt else output


def var(input: Tensor, dim=None, unbiased=None, *, correction=None, keepdim: bool = False,
        dtype=None, mask=None) -> Tensor:
    """Variance of the unmasked elements (NaN for a fully masked slice)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input: Tensor, dim=None, unbiased=None, *, correction=None, keepdim: bool = False,
        dtype=None, mask=None) -> Tensor:
    """Standard deviation of the unmasked elements (NaN for a fully masked slice)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def _normalization(fn: str, op: str):
    def f(input: Tensor, dim: int, *, dtype=None, mask=None) -> Tensor:
        import refimpl.nn.functional as F

        dtype = input.dtype if dtype is None else dtype
        d = _dims(dim, input.ndim)[0]
        return getattr(F, fn)(_fill(op, input, mask), d, dtype=dtype)

    f.__name__ = fn
    return f


softmax = _normalization("softmax", "amax")
softmax.__doc__ = "Softmax over ``dim`` with masked-out elements as -inf (probability 0)."
log_softmax = _normalization("log_softmax", "amax")
log_softmax.__doc__ = "Log-softmax over ``dim`` with masked-out elements as -inf."
softmin = _normalization("softmin", "amin")
softmin.__doc__ = "Softmin over ``dim`` with masked-out elements as +inf (probability 0)."


def normalize(input: Tensor, ord: float, dim: int, *, eps: float = 1e-12, dtype=None,
              mask=None) -> Tensor:
    """``input`` divided by its masked ``ord``-norm over ``dim`` (at least ``eps``);
    masked-out elements become 0."""
    dtype = input.dtype if dtype is None else dtype
    filled = _fill("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denom = _t().maximum(nrm, nrm.new_full([], eps))
    return filled / denom
