"""Lazy conjugation and negation: the conjugate and negative bits (torch's "math views").

``z.conj()`` of a complex tensor is a view of the same memory whose *logical* values are
the conjugates of the stored ones: its conjugate bit is set (``is_conj()``), nothing is
computed. ``x._neg_view()`` is the same with a negative bit, and the imaginary part of a
conjugated tensor is a negative view (``z.conj().imag``). Views of such tensors keep the
bits; ``resolve_conj``/``resolve_neg`` (and any op that makes a new tensor) materialise
the logical values.

Kernels never see the bits. The dispatcher's kernel layer calls :func:`kernel` for every
op once a math view has ever existed (:data:`ACTIVE`); it replaces inputs that carry a
bit by plain tensors holding their logical values, and an op that writes into a tensor
with a bit (in-place ops, ``copy_``, ``fill_``, ``out=``) computes the logical result and
stores its conjugate / negation, so the tensor's logical values are the ones written.
Spec: TENSOR-025.
"""

from __future__ import annotations

from refimpl._tensor import Tensor

# Set when the first math view is made; until then the dispatcher skips this layer.
ACTIVE = False
PASS = object()  # kernel(): "no input has a bit, run the op as usual"


def has_bits(t: Tensor) -> bool:
    """Whether ``t`` carries a conjugate or negative bit."""
    return t._conj_bit or t._neg_bit


def set_bits(t: Tensor, conj: bool, neg: bool) -> Tensor:
    """Give ``t`` these bits (a tensor made to alias another)."""
    global ACTIVE
    if conj or neg:
        ACTIVE = True
    t._conj_bit, t._neg_bit = conj, neg
    return t


def copy_bits(dst: Tensor, src: Tensor) -> Tensor:
    """``dst`` (an alias of ``src``'s memory) with ``src``'s bits."""
    if src._conj_bit or src._neg_bit:
        dst._conj_bit, dst._neg_bit = src._conj_bit, src._neg_bit
    return dst


def _raw(t: Tensor) -> Tensor:
    """The stored values of ``t`` as a plain alias (no bits, no autograd)."""
    return Tensor._make(t._storage, t._shape, t._stride, t._offset, t.dtype,
                        t._version_counter)


def _apply_bits(values: Tensor, bits: Tensor) -> Tensor:
    """``values`` conjugated and/or negated as ``bits``'s bits say (both are their own
    inverse, so this maps stored values to logical ones and back)."""
    from refimpl.ops.elementwise import neg
    from refimpl.ops.elementwise_unary import conj_physical

    if bits._conj_bit:
        values = conj_physical(values)
    if bits._neg_bit:
        values = neg(values)
    return values


def resolved(t: Tensor) -> Tensor:
    """A plain tensor holding ``t``'s logical values (``t`` itself when it has no bit)."""
    if not (t._conj_bit or t._neg_bit):
        return t
    out = _apply_bits(_raw(t), t)
    if out._storage is t._storage:  # a conjugate bit on a real tensor: nothing applied
        from refimpl.ops.copy import clone

        out = clone(out)
    return out


def stored_form(dst: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """(plain alias of ``dst``, what to store there) so that ``dst``'s logical values
    become ``values``."""
    return _raw(dst), _apply_bits(resolved(values), dst)


def _plain_args(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    def plain(a):
        if isinstance(a, Tensor):
            return resolved(a)
        if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
            return type(a)(resolved(x) if isinstance(x, Tensor) else x for x in a)
        return a

    return tuple(plain(a) for a in args), {k: plain(v) for k, v in kwargs.items()}


def _any_bits(args: tuple, kwargs: dict) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            if a._conj_bit or a._neg_bit:
                return True
        elif isinstance(a, (list, tuple)) and any(
                isinstance(x, Tensor) and (x._conj_bit or x._neg_bit) for x in a):
            return True
    return False


def kernel(op, args: tuple, kwargs: dict, run):
    """The kernel layer's handling of an op with an input that carries a bit; ``run`` is
    the kernel layer itself. Returns :data:`PASS` when no input has a bit."""
    if op.extra.get("dtype_view") or not _any_bits(args, kwargs):
        return PASS  # dtype views alias their input, bits included
    self = args[0] if args else None
    writes = op.kind == "inplace" or op.extra.get("writes_input0")
    if writes and isinstance(self, Tensor) and has_bits(self):
        from refimpl._dispatch import check_inplace_allowed, copy_into, write_into

        check_inplace_allowed(self)
        plain_args, plain_kwargs = _plain_args(args[1:], kwargs)
        if op.kind == "inplace":
            result = run(op.base, (resolved(self), *plain_args), plain_kwargs)
            write_into(self, result, op.name)
        elif op.name == "copy_":
            copy_into(self, plain_args[0])
        else:  # fill_ and the like: run on a plain copy, store the logical result
            tmp = resolved(self)
            run(op, (tmp, *plain_args), plain_kwargs)
            copy_into(self, tmp)
        return self
    plain_args, plain_kwargs = _plain_args(args, kwargs)
    if writes:  # the written tensor is plain: it keeps its identity
        plain_args = (self, *plain_args[1:])
    return run(op, plain_args, plain_kwargs)
