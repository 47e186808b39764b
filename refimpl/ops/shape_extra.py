"""Shape utilities that torch composes from other ops (spec: TENSOR-004..008).

Each function here is written over refimpl's own ops (reshape, flip, cat, arange,
nonzero, ...), as torch's are over its own: autograd, fake tensors and the CUDA device
come from the ops they call, so nothing in this module touches data directly. Argument
checks and messages are torch's.
"""

from __future__ import annotations

import itertools

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops.views import int_list, size_args


def with_out(name: str, out, inputs: tuple, compute):
    """A composite's ``out=``: ``compute()`` without autograd written into ``out`` (a
    tensor or a tuple of them) with the dispatcher's resize and cast rules; torch's error,
    naming the op torch's composite writes ``out`` with, when an input requires grad (no
    error where ``name`` is None: torch's op writes ``out`` outside autograd)."""
    from refimpl._dispatch import _write_out
    from refimpl._state import STATE
    from refimpl.autograd.grad_mode import no_grad

    if name is not None and STATE.grad_enabled and any(isinstance(x, Tensor) and x.requires_grad
                                  for x in (*inputs, *(out if isinstance(out, tuple)
                                                       else (out,)))):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    with no_grad():
        result = compute()
    if isinstance(out, (tuple, list)):
        for o, r in zip(out, result):
            _write_out(o, r, name or "out")
        return out
    _write_out(out, result, name or "out")
    return out


def ravel(input: Tensor) -> Tensor:
    """The elements as a 1-D tensor (a view when the strides allow it)."""
    return input.reshape(-1)


def _split_along(fn: str, input: Tensor, indices_or_sections, dim: int, need: int) -> tuple:
    if input.dim() < need:
        raise RuntimeError(f"torch.{fn} requires a tensor with at least {need} dimension, but "
                           f"got a tensor with {input.dim()} dimensions!")
    arg = indices_or_sections
    if isinstance(arg, bool) or not isinstance(arg, (int, list, tuple)):
        kind = "Tensor" if isinstance(arg, Tensor) else type(arg).__name__
        raise TypeError(
            f"{fn}() received an invalid combination of arguments - got (Tensor, {kind}), but "
            "expected one of:\n * (Tensor input, int sections)\n * (Tensor input, tuple of "
            "ints indices)\n")
    if isinstance(arg, int):
        size = input.shape[dim]
        if arg == 0 or size % arg:
            raise RuntimeError(
                f"torch.{fn} attempted to split along dimension {dim}, but the size of the "
                f"dimension {size} is not divisible by the split_size {arg}!")
    return input.tensor_split(arg, dim)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 1 (dim 0 for a 1-D tensor) into equal sections or at indices."""
    dim = 1 if input.dim() > 1 else 0
    return _split_along("hsplit", input, indices_or_sections, dim, 1)


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 0 of a tensor of at least 2 dims."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """Split along dim 2 of a tensor of at least 3 dims."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by ``k`` quarter turns in the plane of ``dims`` (from the first dim towards
    the second)."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    n = input.dim()
    if n < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {n}")
    d0, d1 = wrap_dim(dims[0], n), wrap_dim(dims[1], n)
    if d0 == d1:
        raise RuntimeError("expected rotation dims to be different, but got dim0 = "
                           f"{dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip([d0]).transpose(d0, d1)
    return input.clone()


def kron(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """The Kronecker product: block ``(i, j)`` is ``input[i, j] * other``, in any number
    of dims (the shorter operand gets leading size-1 dims)."""
    if out is not None:
        return with_out("mul", out, (input, other), lambda: kron(input, other))
    n = max(input.dim(), other.dim())
    a = input.reshape((1,) * (n - input.dim()) + tuple(input.shape))
    b = other.reshape((1,) * (n - other.dim()) + tuple(other.shape))
    # interleave: a gets a size-1 dim after each of its dims, b before each of its dims
    a = a.reshape(tuple(x for s in a.shape for x in (s, 1)))
    b = b.reshape(tuple(x for s in b.shape for x in (1, s)))
    return (a * b).reshape(tuple(p * q for p, q in zip(_kron_shape(a, n), _kron_shape(b, n))))


def _kron_shape(t: Tensor, n: int) -> tuple:
    """The shape of an interleaved ``kron`` operand, with its size-1 dims dropped."""
    return tuple(max(t.shape[2 * i], t.shape[2 * i + 1]) for i in range(n))


def block_diag(*tensors) -> Tensor:
    """The tensors (0-, 1- or 2-D) placed along the diagonal of a zero matrix."""
    from refimpl.ops.factories import zeros
    from refimpl.ops.shape import cat

    mats = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1
                    else t)
    if not mats:
        return zeros((1, 0))
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = D.promote_types(dtype, m.dtype)
    device = mats[0].device
    for i, m in enumerate(mats):
        if m.device != device:
            raise RuntimeError(
                "torch.block_diag: input tensors must all be on the same device. Input 0 is "
                f"on device {device} and input {i} is on device {m.device}.")
    width = sum(m.shape[1] for m in mats)
    rows, col = [], 0
    for m in mats:
        r, c = m.shape
        parts = [zeros((r, col), dtype=dtype, device=device), m.to(dtype),
                 zeros((r, width - col - c), dtype=dtype, device=device)]
        rows.append(cat(parts, 1))
        col += c
    return cat(rows, 0)


def _check_1d(t: Tensor) -> None:
    if t.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element from each 1-D tensor, as rows (itertools.product
    order); one tensor is returned as it is."""
    from refimpl.ops.broadcast import meshgrid
    from refimpl.ops.shape import stack

    for t in tensors:
        _check_1d(t)
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of a 1-D tensor's elements, one per row
    (itertools.combinations order, or combinations_with_replacement)."""
    from refimpl.ops.factories import empty, tensor

    _check_1d(input)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    # the positions are metadata of the op (they depend on the length only); the values
    # are gathered from the input on its own device
    index = tensor([i for row in rows for i in row], dtype=D.int64, device=input.device)
    return input.index_select(0, index).reshape(len(rows), r)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The flattened input as the ``offset``-th diagonal of a square matrix."""
    return input.reshape(-1).diag_embed(offset, 0, 1)


def broadcast_shapes(*shapes) -> tuple:
    """The shape that tensors of ``shapes`` broadcast to (no tensors are made)."""
    from refimpl._tensor import Size

    dims = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        if any(x < 0 for x in s):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
        dims.append(s)
    n = max((len(s) for s in dims), default=0)
    out = [1] * n
    for i, s in enumerate(dims):
        for j, x in enumerate(s):
            k = n - len(s) + j
            if x == 1:
                continue
            if out[k] not in (1, x):
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {x} at {j - len(s)}! "
                    f"Mismatching argument at index {i} had {s}; but expected shape should "
                    f"be broadcastable to {out}")
            out[k] = x
    return Size(out)


def sum_to_size(self: Tensor, *size) -> Tensor:
    """Sum ``self`` down to ``size``, which it must be expandable to (broadcasting's
    adjoint)."""
    from refimpl.ops._helpers import sum_to

    size = size_args(size, "sum_to_size", "size")
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s not in (1, shape[lead + i]) for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    if not shape:
        return self.sum()  # torch sums a 0-dim tensor (bool becomes int64)
    return sum_to(self, size)


def _tri_indices(fn: str, row: int, col: int, offset: int, lower: bool, dtype, device):
    from refimpl.ops.factories import arange, empty

    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dtype = D.int64 if dtype is None else dtype
    if dtype not in (D.int64, D.int32):
        raise NotImplementedError(f'"{fn}" not implemented for '
                                  f"'{D.type_name(dtype)}'")
    if row == 0 or col == 0:
        return empty((2, 0), dtype=dtype, device=device)
    r = arange(row, device=device).reshape(-1, 1)
    c = arange(col, device=device).reshape(1, -1)
    keep = (c - r <= offset) if lower else (c - r >= offset)
    return keep.nonzero().t().to(dtype)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None,
                 layout=None, pin_memory: bool = False) -> Tensor:
    """The ``[2, N]`` coordinates of the lower triangle of a ``row x col`` matrix."""
    return _tri_indices("tril_indices", row, col, offset, True, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None,
                 layout=None, pin_memory: bool = False) -> Tensor:
    """The ``[2, N]`` coordinates of the upper triangle of a ``row x col`` matrix."""
    return _tri_indices("triu_indices", row, col, offset, False, dtype, device)


def unravel_index(indices, shape) -> tuple:
    """Flat indices into a tensor of ``shape`` as one index tensor per dim (the first
    dim wraps, as torch's does)."""
    from refimpl.ops.factories import tensor

    if not isinstance(indices, Tensor):
        indices = tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is D.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(int_list("unravel_index", "shape",
                                                                   shape))
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    indices = indices.to(D.int64)
    out = []
    for s in reversed(shape):
        out.append(indices.remainder(s))
        indices = indices.div(s, rounding_mode="floor")
    return tuple(reversed(out))


def new_empty_strided(self: Tensor, size, stride, *, dtype=None, device=None,
                      requires_grad: bool = False, layout=None,
                      pin_memory: bool = False) -> Tensor:
    """``empty_strided`` with ``self``'s dtype and device unless given."""
    from refimpl.ops.factories import empty_strided

    return empty_strided(size, stride, dtype=dtype or self.dtype,
                         device=device or self.device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, device=None,
                   requires_grad: bool = False, layout=None, pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of ``size`` whose dims are laid out in memory in the order
    ``physical_layout`` (outermost first)."""
    from refimpl.ops.factories import empty_strided

    size, order = tuple(size), tuple(physical_layout)
    n = len(size)
    if len(order) != n:
        raise RuntimeError("Number of dimensions in size does not match the length of the "
                           "physical_layout; i.e. len(size) = "
                           f"{n} is not equal to len(physical_layout) = {len(order)}")
    for i, d in enumerate(order):
        if not 0 <= d < n:
            raise RuntimeError(
                f"Dimension out of range (expected to be between 0 and {n - 1}, but got {d} at "
                f"index {i}).  NB: negative dims not currently supported; file an issue if you "
                "want it.")
    if len(set(order)) != n:
        raise RuntimeError("Duplicate dim not allowed")
    stride = [0] * n
    step = 1
    for d in reversed(order):
        stride[d] = step
        step *= max(size[d], 1)
    return empty_strided(size, stride, dtype=dtype, device=device, requires_grad=requires_grad)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1, out=None) -> Tensor:
    """``nonzero`` padded with ``fill_value`` rows (or cut) to exactly ``size`` rows."""
    if out is not None:
        return with_out("nonzero_static", out, (input,),
                        lambda: nonzero_static(input, size=size, fill_value=fill_value))
    from refimpl.ops.factories import full
    from refimpl.ops.shape import cat

    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size]
    pad = full((size - found.shape[0], max(input.dim(), 0)), fill_value, dtype=D.int64,
               device=input.device)
    return cat([found, pad], 0)


def __rdiv__(self: Tensor, other) -> Tensor:
    """``other / self`` (the reflected true division)."""
    return self.reciprocal() * other if not isinstance(other, Tensor) else other.div(self)


__all__ = [
    "block_diag",
    "broadcast_shapes",
    "cartesian_prod",
    "combinations",
    "diagflat",
    "dsplit",
    "empty_permuted",
    "hsplit",
    "kron",
    "nonzero_static",
    "ravel",
    "rot90",
    "tril_indices",
    "triu_indices",
    "unravel_index",
    "vsplit",
]
TENSOR_METHODS = ("ravel", "dsplit", "hsplit", "vsplit", "rot90", "kron", "diagflat",
                  "sum_to_size", "new_empty_strided", "nonzero_static", "__rdiv__")
