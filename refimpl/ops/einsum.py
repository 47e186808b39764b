"""Tensor contractions: einsum, tensordot, inner (spec TENSOR-307).

Re-exported by ``linalg``. ``einsum`` parses the equation itself (torch's messages for
malformed equations and mismatched sizes; a size-1 dimension broadcasts against its
label's size, as in torch), then contracts with ``numpy.einsum``. Its backward is an
einsum per operand, so double backward works. ``tensordot`` and ``inner`` are written
with ``einsum``.
"""

from __future__ import annotations

import string

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
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


def _einsum_backward(ctx, grad):
    equation = ctx.args[0]
    ops = _operands(ctx.args[1:])
    terms, rhs, _, _ = _parse(equation, ops)
    grads = []
    for i, (term, op) in enumerate(zip(terms, ops)):
        if not (op.requires_grad if isinstance(op, Tensor) else False):
            grads.append(None)
            continue
        labels = term.replace("...", "")
        if len(set(labels)) != len(labels):
            raise NotImplementedError("refimpl: einsum backward through a subscript repeated "
                                      "within one operand is not implemented")
        others = [(t, o) for j, (t, o) in enumerate(zip(terms, ops)) if j != i]
        present = set(rhs) | {c for t, _ in others for c in t}
        kept = "".join(c for c in term if c in present or c == ".")
        eq = ",".join([rhs] + [t for t, _ in others]) + "->" + kept
        g = einsum(eq, grad, *[o.conj() if o.dtype.is_complex else o for _, o in others])
        if kept != term:
            # labels summed inside this operand alone: the gradient is constant along them
            for pos, c in enumerate(term.replace("...", "." * (op.dim() - len(labels)))):
                if c not in present:
                    g = g.unsqueeze(pos)
            g = g.expand(op.shape)
        # a size-1 dim broadcast against its label's size: sum over it; a label whose size
        # came from a size-1 dim elsewhere: broadcast back
        g = sum_to(g, op.shape)
        grads.append(g if g.shape == op.shape else g.expand(op.shape))
    if len(ctx.args) == 2 and isinstance(ctx.args[1], (list, tuple)):
        return None, grads
    return (None, *grads)


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


_einsum = defop("einsum", meta=_einsum_meta, cpu=_einsum_cpu, backward=_einsum_backward,
                jvp=_einsum_jvp, extra={"method": False})


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation over ``operands`` (given as arguments or as one list), e.g.
    ``einsum('bij,bjk->bik', a, b)``; without ``->`` the output holds the labels that
    appear once, in alphabetical order (TENSOR-307)."""
    return _einsum(equation, *operands)


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
