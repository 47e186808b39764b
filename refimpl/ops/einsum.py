"""Tensor contractions: einsum, tensordot, inner (spec TENSOR-307).

Re-exported by ``linalg``. ``einsum`` parses the equation itself (torch's messages for
malformed equations and mismatched sizes; a size-1 dimension broadcasts against its
label's size, as in torch), then contracts with ``numpy.einsum`` on the CPU. On CUDA, as in torch, the operands are
contracted left to right, each pair as one batched GEMM on cuBLAS after permuting
and merging dims (labels that no later operand or the output needs are summed out
first, by a GEMM with a vector of ones); repeated labels are diagonals and size-1
dims broadcasts, both plain strided views. Its backward is an
einsum per operand, so double backward works. ``tensordot`` and ``inner`` are written
with ``einsum``.
"""

from __future__ import annotations

import itertools
import math
import string

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops._helpers import np_result, sum_to, to_np
from refimpl.ops._registry import TensorSpec, defop

_LETTERS = string.ascii_letters


def _parse(equation: str, operands) -> tuple:
    """(input subscripts, output subscripts, {label: size}, ellipsis shape) of an einsum,
    validated against the operands with torch's messages."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    sizes: dict = {}
    ell_shapes = []
    for i, (term, op) in enumerate(zip(terms, operands)):
        labels = term.replace("...", "")
        if "." in labels:
            raise RuntimeError(f"einsum(): found '.' for operand {i} that is not part of any "
                               "ellipsis")
        has_ell = "..." in term
        if not has_ell and len(labels) != op.dim():
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(labels)}) does not "
                f"match the number of dimensions ({op.dim()}) for operand {i} and no ellipsis "
                "was given")
        if has_ell and len(labels) > op.dim():
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(labels)}) is more "
                f"than the number of dimensions ({op.dim()}) for operand {i}")
        n_ell = op.dim() - len(labels)
        before = term.split("...")[0] if has_ell else labels
        dims = list(before) + ["."] * n_ell + list(labels[len(before):])
        ell_shapes.append(op._shape[len(before):len(before) + n_ell] if has_ell else ())
        for label, size in zip(dims, op._shape):
            if label == ".":
                continue
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label] = size
            elif size not in (1, seen):
                raise RuntimeError(
                    f"einsum(): subscript {label} has size {size} for operand {i} which does "
                    f"not broadcast with previously seen size {seen}")
    if arrow:
        for label in rhs.replace("...", ""):
            if label not in sizes:
                raise RuntimeError(f"einsum(): output subscript {label} does not appear in "
                                   "the equation for any input operand")
            if rhs.count(label) > 1:
                raise RuntimeError(f"einsum(): output subscript {label} appears more than "
                                   "once in the output")
    else:
        once = sorted(c for c in sizes if lhs.count(c) == 1)
        rhs = ("..." if "..." in lhs else "") + "".join(once)
    return terms, rhs, sizes, ell_shapes


def _operands(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return tuple(args)


def _ell_broadcast(ell_shapes) -> tuple:
    from refimpl.ops._helpers import broadcast_shapes

    return broadcast_shapes(*ell_shapes)


def _einsum_meta(equation, *args) -> TensorSpec:
    ops = _operands(args)
    _check_dtypes(ops)
    _, rhs, sizes, ell = _parse(equation, ops)
    before, _, after = rhs.partition("...")
    shape = [sizes[c] for c in before]
    if "..." in rhs:
        shape += list(_ell_broadcast(ell))
    shape += [sizes[c] for c in after]
    return TensorSpec(tuple(shape), ops[0].dtype, ops[0].device)


def _check_dtypes(ops) -> None:
    for op in ops[1:]:
        if op.dtype is not ops[0].dtype:
            raise RuntimeError(f"expected scalar type {D.type_name(ops[0].dtype)} but found "
                               f"{D.type_name(op.dtype)}")


def _einsum_cpu(equation, *args) -> np.ndarray:
    ops = _operands(args)
    _check_dtypes(ops)
    terms, rhs, sizes, _ = _parse(equation, ops)
    dtype = ops[0].dtype
    if dtype is D.bool_ and len(ops) > 1:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    arrays = []
    for term, op in zip(terms, ops):
        arr = to_np(op, dtype)
        labels = term.replace("...", "")
        n_ell = op.dim() - len(labels)
        before = term.split("...")[0] if "..." in term else labels
        dims = list(before) + ["."] * n_ell + list(labels[len(before):])
        target = tuple(sizes[c] if c != "." else s for c, s in zip(dims, arr.shape))
        arrays.append(np.broadcast_to(arr, target) if target != arr.shape else arr)
    out = np.einsum(",".join(terms) + "->" + rhs, *arrays, optimize=len(arrays) > 1)
    return np_result(out, dtype)


# -- CUDA: contractions as batched GEMMs on cuBLAS -----------------------------------------

def _raw(x: Tensor, shape, stride) -> Tensor:
    """A view of ``x``'s storage with the given shape and strides (no autograd record)."""
    return Tensor._make(x._storage, tuple(shape), tuple(stride), x._offset, x.dtype)


def _labeled(op: Tensor, term: str, ell_labels: list, sizes: dict) -> tuple:
    """``op`` as a view with one dim per distinct label: repeated labels become their
    diagonal (strides summed), size-1 dims broadcast to their label's size (stride 0)."""
    labels = term.replace("...", "")
    n_ell = op.dim() - len(labels)
    before = term.split("...")[0] if "..." in term else labels
    dims = list(before) + ell_labels[len(ell_labels) - n_ell:] + list(labels[len(before):])
    out_labels, shape, stride = [], [], []
    for label, size, st in zip(dims, op._shape, op._stride):
        target = sizes[label]
        st = 0 if size == 1 and target != 1 else st
        if label in out_labels:
            stride[out_labels.index(label)] += st
            continue
        out_labels.append(label)
        shape.append(target)
        stride.append(st)
    return _raw(op, shape, stride), out_labels


def _merge(x: Tensor, groups: list) -> Tensor | None:
    """``x`` with each group of consecutive dims merged into one, as a view (None when
    the strides do not allow it). An empty group is a dim of size 1."""
    shape, stride, i = [], [], 0
    for n in groups:
        dims = [(x._shape[j], x._stride[j]) for j in range(i, i + n) if x._shape[j] != 1]
        i += n
        size = math.prod(d for d, _ in dims)
        for (_, outer), (inner_size, inner) in itertools.pairwise(dims):
            if outer != inner * inner_size:
                return None
        shape.append(size)
        stride.append(dims[-1][1] if dims else 1)
    return _raw(x, shape, stride)


def _grouped(x: Tensor, labels: list, groups: list) -> Tensor:
    """``x`` permuted to the label groups' order and merged to one dim per group (a
    contiguous copy only when the strides cannot be merged)."""
    from refimpl.cuda import _blas

    order = [labels.index(c) for g in groups for c in g]
    perm = _raw(x, [x._shape[j] for j in order], [x._stride[j] for j in order])
    merged = _merge(perm, [len(g) for g in groups])
    return merged if merged is not None else _merge(_blas.dense_copy(perm),
                                                    [len(g) for g in groups])


def _sum_out(x: Tensor, labels: list, drop: list, sizes: dict) -> tuple:
    """Sum ``x`` over the labels in ``drop``: a GEMM with a vector of ones for BLAS
    dtypes, the reduction kernels otherwise."""
    if not drop:
        return x, labels
    from refimpl.cuda import _blas, _tensor_ops

    keep = [c for c in labels if c not in drop]
    shape = [sizes[c] for c in keep]
    if not _blas.blas_dtype(x.dtype):
        from refimpl.autograd.grad_mode import no_grad

        with no_grad():
            return x.sum([labels.index(c) for c in drop]), keep
    mat = _grouped(x, labels, [keep, drop])
    ones = Tensor._empty((mat._shape[1], 1), x.dtype, x._storage.device)
    _tensor_ops.fill_(ones, 1)
    out = Tensor._empty((mat._shape[0], 1), x.dtype, x._storage.device)
    _blas.gemm(out, mat, ones)
    return _raw(out, shape, contiguous_strides(tuple(shape))), keep


def _contract(a: Tensor, la: list, b: Tensor, lb: list, keep: set, sizes: dict) -> tuple:
    """Contract two labeled operands with one batched GEMM: [batch, m, k] @ [batch, k, n]."""
    from refimpl.cuda import _blas

    a, la = _sum_out(a, la, [c for c in la if c not in lb and c not in keep], sizes)
    b, lb = _sum_out(b, lb, [c for c in lb if c not in la and c not in keep], sizes)
    batch = [c for c in la if c in lb and c in keep]
    contracted = [c for c in la if c in lb and c not in keep]
    m = [c for c in la if c not in lb]
    n = [c for c in lb if c not in la]
    left = _grouped(a, la, [batch, m, contracted])
    right = _grouped(b, lb, [batch, contracted, n])
    out = Tensor._empty((left._shape[0], left._shape[1], right._shape[2]), a.dtype,
                        a._storage.device)
    _blas.gemm(out, left, right)
    labels = batch + m + n
    shape = [sizes[c] for c in labels]
    return _raw(out, shape, contiguous_strides(tuple(shape))), labels


def _einsum_cuda(equation, *args) -> Tensor:
    from refimpl.cuda import _blas

    ops = _operands(args)
    _check_dtypes(ops)
    terms, rhs, sizes, ell = _parse(equation, ops)
    if len(ops) > 1 and not _blas.blas_dtype(ops[0].dtype):
        raise NotImplementedError(
            f"\"baddbmm_cuda\" not implemented for '{D.type_name(ops[0].dtype)}'")
    ell_shape = _ell_broadcast(ell) if any("..." in term for term in terms) else ()
    ell_labels = [f"...{i}" for i in range(len(ell_shape))]
    sizes = {**sizes, **dict(zip(ell_labels, ell_shape))}
    before, _, after = rhs.partition("...")
    out_labels = list(before) + (ell_labels if "..." in rhs else []) + list(after)
    labeled = [_labeled(op, term, ell_labels, sizes) for term, op in zip(terms, ops)]
    x, lx = labeled[0]
    for i, (y, ly) in enumerate(labeled[1:], start=1):
        later = {c for _, lz in labeled[i + 1:] for c in lz}
        x, lx = _contract(x, lx, y, ly, set(out_labels) | later, sizes)
    x, lx = _sum_out(x, lx, [c for c in lx if c not in out_labels], sizes)
    order = [lx.index(c) for c in out_labels]
    return _blas.dense_copy(_raw(x, [x._shape[j] for j in order], [x._stride[j] for j in order]))


def _einsum_backward(ctx, grad):
    equation = ctx.args[0]
    ops = _operands(ctx.args[1:])
    terms, rhs, sizes, _ = _parse(equation, ops)
    grads = []
    for i, (term, op) in enumerate(zip(terms, ops)):
        if not (op.requires_grad if isinstance(op, Tensor) else False):
            grads.append(None)
            continue
        others = [(t, o) for j, (t, o) in enumerate(zip(terms, ops)) if j != i]
        grads.append(_operand_grad(grad, term, op, rhs, others, sizes))
    if len(ctx.args) == 2 and isinstance(ctx.args[1], (list, tuple)):
        return None, grads
    return (None, *grads)


def _operand_grad(grad: Tensor, term: str, op: Tensor, rhs: str, others: list,
                  sizes: dict) -> Tensor:
    """The gradient of one operand: an einsum of the output's gradient with the other
    operands over the operand's distinct labels, then spread back over its own layout:
    constant along labels summed inside it alone (and ellipsis dims the output lacks),
    on the diagonal of a label it repeats."""
    present = set(rhs) | {c for t, _ in others for c in t}
    kept = "".join(c for k, c in enumerate(term)
                   if c == "." or (c in present and c not in term[:k]))
    eq = ",".join([rhs] + [t for t, _ in others]) + "->" + kept
    g = einsum(eq, grad, *[o.conj() if o.dtype.is_complex else o for _, o in others])
    n_ell = op.dim() - len(term.replace("...", ""))
    if "..." in term:  # the ellipsis dims broadcast: summed where the operand has fewer,
        at = term.index("...")  # constant where the output had fewer
        extra = g.dim() - len(kept.replace("...", "")) - n_ell
        if extra > 0:
            g = g.sum(list(range(at, at + extra)))
        for _ in range(-extra):
            g = g.unsqueeze(at)
    full = term.replace("...", "." * n_ell)
    first: dict = {}
    repeats = []
    for pos, c in enumerate(full):
        if c == ".":
            continue
        if c in first:
            repeats.append((first[c], pos))
            g = g.unsqueeze(pos)
            continue
        first[c] = pos
        if c not in present:
            g = g.unsqueeze(pos)
    from refimpl.ops.factories import eye

    for a, b in repeats:
        n = sizes[full[a]]
        shape = [1] * op.dim()
        shape[a] = shape[b] = n
        g = g * eye(n, dtype=g.dtype, device=g.device).reshape(shape)
    if g.shape != op.shape and all(s in (1, t) for s, t in zip(g.shape, op.shape)):
        g = g.expand(op.shape)
    # a size-1 dim broadcast against its label's size: sum over it; a label whose size
    # came from a size-1 dim elsewhere: broadcast back
    g = sum_to(g, op.shape)
    return g if g.shape == op.shape else g.expand(op.shape)


def _einsum_jvp(ctx, *tangents):
    equation = ctx.args[0]
    ops = list(_operands(ctx.args[1:]))
    ts = list(tangents[1]) if len(ctx.args) == 2 and isinstance(ctx.args[1], (list, tuple)) \
        else list(tangents[1:])
    out = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        part = einsum(equation, *ops[:i], t, *ops[i + 1:])
        out = part if out is None else out + part
    return out


_einsum = defop("einsum", meta=_einsum_meta, cpu=_einsum_cpu, cuda=_einsum_cuda,
                backward=_einsum_backward,
                jvp=_einsum_jvp, extra={"method": False})


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation over ``operands`` (given as arguments or as one list), e.g.
    ``einsum('bij,bjk->bik', a, b)``; without ``->`` the output holds the labels that
    appear once, in alphabetical order (TENSOR-307)."""
    return _einsum(equation, *operands)


@composite("tensordot")
def tensordot(a: Tensor, b: Tensor, dims=2, out: Tensor | None = None) -> Tensor:
    """Contract the last ``dims`` dims of ``a`` with the first ``dims`` of ``b``, or the
    dims listed in ``dims = (dims_a, dims_b)`` (TENSOR-307)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    da = [wrap_dim(d, a.dim()) for d in da]
    db = [wrap_dim(d, b.dim()) for d in db]
    la, lb = list(_LETTERS[:a.dim()]), list(_LETTERS[a.dim():a.dim() + b.dim()])
    for x, y in zip(da, db):
        sa, sb = a._shape[x], b._shape[y]
        if sa != sb and 1 not in (sa, sb):
            raise RuntimeError(f"contracted dimensions need to match, but first has size {sa} "
                               f"in dim {x} and second has size {sb} in dim {y}")
        lb[y] = la[x]
    out_labels = [c for i, c in enumerate(la) if i not in da] + \
        [c for i, c in enumerate(lb) if i not in db]
    result = einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out_labels)}", a, b)
    if out is not None:
        from refimpl._dispatch import _write_out

        _write_out(out, result.detach(), "tensordot")
        return out
    return result


def inner(input: Tensor, other: Tensor) -> Tensor:
    """The inner product over the last dims (``input * other`` when either is 0-dim)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input._shape[-1] != other._shape[-1]:
        raise RuntimeError("inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input._shape)} and {list(other._shape)}")
    return tensordot(input, other, ([-1], [-1]))


__all__ = ["einsum", "inner", "tensordot"]
