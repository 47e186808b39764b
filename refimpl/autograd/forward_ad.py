"""Forward-mode AD (spec FWDAD-*): dual levels, dual tensors and the forward layer.

A *dual* tensor carries a tangent (``_fw_grads``) at the current level. One level exists
at a time (torch: nested levels are not supported), so a tensor holds at most one
tangent; exiting the level drops every tangent attached at it (``FW.duals`` keeps weak
references to their holders).

The dispatcher calls ``forward_layer`` instead of the autograd layer while a level is
active. It runs the op (through reverse-mode recording, so both modes compose), then the
op's ``jvp`` rule with forward AD switched off (the rule computes on primal values and
tangents, which carry no tangents of their own at this level) and attaches the result:

* fresh outputs store the tangent laid out like the output (a copy when the rule's
  result has another layout, e.g. an expanded one);
* view outputs store the rule's result, which is the same view of the input's tangent,
  so an in-place op on the view updates the base's tangent;
* in-place ops write the new tangent into the existing tangent **in place** (the user's
  tangent object changes, FWDAD-200); a tensor without one gets a copy, and a view
  without one first gives its base a zero tangent laid out like the base and then
  writes through the matching view of it (FWDAD-201/202).

Tangent layout (FWDAD-102): a tangent is stored as given only when it has the primal's
strides, storage offset and storage size; otherwise a copy laid out like the primal (in
a storage of the primal's size) is stored. That is what lets the tangent of any view be
taken with ``as_strided`` at the view's own geometry.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

from refimpl._state import FW, STATE

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]

# torch's module attribute: the current level, -1 outside any level.
_current_level = -1

_NOT_IMPLEMENTED = (
    "Trying to use forward AD with {} that does not support it because it has not been "
    "implemented yet.\nPlease file an issue to PyTorch at "
    "https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml so that we "
    "can prioritize its implementation or submit a PR adding the implementation to "
    "derivatives.yaml"
)


# -- levels ---------------------------------------------------------------------------------

def enter_dual_level() -> int:
    """Enter a new forward-AD level and return its index (0: levels do not nest)."""
    global _current_level
    if FW.level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    FW.level = 0
    FW.duals = []
    FW.active = True
    _current_level = 0
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Exit the current level: every tangent attached at it is dropped."""
    global _current_level
    if level is None:
        level = FW.level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != FW.level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported."
        )
    duals, FW.duals = FW.duals, []
    FW.active = False
    FW.level = -1
    _current_level = -1
    for ref in duals:
        t = ref()
        if t is not None:
            t._fw_grads = None


class dual_level:
    """Context manager for a forward-AD level: ``with dual_level() as level:``."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)

        return wrapper


def _is_fwd_grad_enabled() -> bool:
    """Whether ops propagate tangents (FWDAD-004); True by default."""
    return STATE.fw_grad_enabled


def _set_fwd_grad_enabled_global(enabled: bool) -> None:
    """``torch._C._set_fwd_grad_enabled``: set the switch without restoring it."""
    STATE.fw_grad_enabled = bool(enabled)


class _set_fwd_grad_enabled:
    """Set the forward-grad switch; as a context manager, restore it on exit."""

    def __init__(self, mode: bool) -> None:
        self.prev = STATE.fw_grad_enabled
        STATE.fw_grad_enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        STATE.fw_grad_enabled = self.prev


# -- dual tensors ---------------------------------------------------------------------------

class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view) and the tangent (or None)."""

    primal: Any
    tangent: Any


def make_dual(tensor, tangent, *, level: int | None = None):
    """A view of ``tensor`` carrying ``tangent`` at the current level (FWDAD-100..102)."""
    if level is None:
        level = FW.level
    if level < 0:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    for what, x in (("primal", tensor), ("tangent", tangent)):
        if not (x.is_floating_point() or x.is_complex()):
            raise ValueError(
                f"Expected {what} to be floating point or complex, but got: {x.dtype}"
            )
    if tangent_of(tangent) is not None:
        raise RuntimeError(
            "Setting a forward grad that itself has a forward gradient at the same level"
            f"{level} is not supported."
        )
    if tangent_of(tensor) is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the "
            f"same level {level} is not supported."
        )
    if tensor._shape != tangent._shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor._shape)} "
            f"while the given forward gradient is of size {list(tangent._shape)}."
        )
    dual = _alias_below(tensor)
    if not same_layout(dual, tangent):
        tangent = laid_out_like(dual, tangent)
    attach(dual, tangent)
    return dual


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)``: a new view of the values, and the tangent object (or None)."""
    if level is None:
        level = FW.level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor)
    return UnpackedDualTensor(_alias_below(tensor), tangent)


def _alias_below(tensor):
    """An alias of ``tensor`` made below the forward layer: a view for reverse mode (the
    gradient flows to ``tensor``) that never derives a tangent from its base."""
    from refimpl._dispatch import autograd_layer
    from refimpl.ops.views import alias

    out = autograd_layer(alias, (tensor,), {})
    out._fw_nondiff = True
    return out


# -- tangents on tensors --------------------------------------------------------------------

def attach(t, tangent) -> None:
    """Store ``tangent`` on ``t`` at the current level."""
    t._fw_grads = tangent
    FW.duals.append(weakref.ref(t))


def tangent_of(x):
    """The tangent of ``x`` at the current level (None if it has none).

    A view without a tangent of its own whose base has one gets the matching view of the
    base's tangent (cached), unless it is a forward non-differentiable view (make_dual,
    unpack_dual) or reinterprets the dtype.
    """
    t = x._fw_grads
    if t is not None or x._fw_nondiff:
        return t
    base = x._base
    if base is None:
        return None
    bt = base._fw_grads
    if bt is None or bt.dtype is not x.dtype or base.dtype is not x.dtype:
        return None
    prev, FW.active = FW.active, False
    try:
        t = bt.as_strided(x._shape, x._stride, x._offset)
    finally:
        FW.active = prev
    attach(x, t)
    return t


def _storage_numel(t) -> int:
    return t._storage.nbytes() // t.dtype.itemsize


def same_layout(primal, tangent) -> bool:
    """Whether ``tangent`` can be stored as given for ``primal`` (FWDAD-102)."""
    if primal._shape != tangent._shape:
        return False
    if primal.numel() == 0:
        return True  # nothing to address: strides and offsets do not matter
    return (primal._stride == tangent._stride and primal._offset == tangent._offset
            and _storage_numel(primal) == _storage_numel(tangent)
            and primal.dtype is tangent.dtype and primal._conj_bit == tangent._conj_bit
            and primal._neg_bit == tangent._neg_bit)


def laid_out_like(primal, tangent):
    """A copy of ``tangent`` with ``primal``'s strides, offset and math-view bits, in a
    storage of ``primal``'s storage size (so every view of the primal has a tangent view)."""
    from refimpl._math_views import set_bits

    buf = set_bits(_zeros_laid_out_like(primal), primal._conj_bit, primal._neg_bit)
    prev, FW.active = FW.active, False
    try:
        buf.copy_(tangent)
    finally:
        FW.active = prev
    return buf


def _zeros_laid_out_like(primal):
    from refimpl.ops.factories import zeros

    prev, FW.active = FW.active, False
    try:
        storage = zeros(_storage_numel(primal), dtype=primal.dtype, device=primal.device)
        return storage.as_strided(primal._shape, primal._stride, primal._offset)
    finally:
        FW.active = prev


def _write_tangent(self, new) -> None:
    """An in-place op changed ``self``: its tangent becomes ``new``, written in place."""
    cur = tangent_of(self)
    if cur is None:
        if new is None:
            return
        base = self._base
        if base is not None and not self._fw_nondiff and base.dtype is self.dtype \
                and base._fw_grads is None:
            attach(base, _zeros_laid_out_like(base))
            cur = tangent_of(self)
        if cur is None:
            attach(self, laid_out_like(self, new))
            return
    prev, FW.active = FW.active, False
    try:
        if new is None:
            cur.zero_()
        else:
            cur.copy_(new)
    finally:
        FW.active = prev


# -- the dispatcher layer -------------------------------------------------------------------

def _input_tangents(args):
    """One tangent per positional argument (a list for a list argument); any found?"""
    from refimpl._tensor import Tensor

    found = False
    tangents = []
    for a in args:
        if isinstance(a, Tensor):
            tg = tangent_of(a)
            found = found or tg is not None
            tangents.append(tg)
        elif isinstance(a, (list, tuple)) and a and any(isinstance(x, Tensor) for x in a):
            seq = [tangent_of(x) if isinstance(x, Tensor) else None for x in a]
            if any(s is not None for s in seq):
                found = True
                tangents.append(seq)
            else:
                tangents.append(None)
        else:
            tangents.append(None)
    return tangents, found


def forward_layer(op, args: tuple, kwargs: dict):
    """Run ``op`` and propagate tangents (see the module docstring)."""
    from refimpl._dispatch import _with_out, autograd_layer, tensors_in
    from refimpl._tensor import Tensor

    tangents, found = _input_tangents(args)
    if kwargs and kwargs.get("out") is not None:
        outs = kwargs["out"]
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        if found or any(tangent_of(o) is not None for o in outs) or any(
                tangent_of(x) is not None for x in tensors_in((), kwargs)):
            raise NotImplementedError(
                f"Trying to use forward AD with {op.name.split('.')[0]}_out that does not "
                "support it because it is an out= function"
            )
        return _with_out(op, args, kwargs)
    if not found or not op.differentiable or not STATE.fw_grad_enabled:
        return autograd_layer(op, args, kwargs)
    writes = op.kind == "inplace" or bool(op.extra.get("writes_input0"))
    rule = op.jvp
    if rule is None and op.kind == "inplace" and op.base is not None:
        rule = op.base.jvp
    src = op.base if op.kind == "inplace" and op.base is not None else op
    if rule is None and (not src.differentiable or src.backward is None):
        # no derivative at all (comparisons, eq_): no tangent, and an in-place op on a
        # dual leaves it a zero tangent
        out = autograd_layer(op, args, kwargs)
        if writes:
            _write_tangent(args[0], None)
        return out
    if rule is None:
        raise NotImplementedError(_NOT_IMPLEMENTED.format(op.name.split(".")[0]))
    from refimpl.autograd._record import OpContext

    if writes:
        self = args[0]
        prev, FW.active = FW.active, False
        try:
            old = self.clone() if self.dtype.category >= 2 else self
        finally:
            FW.active = prev
        out = autograd_layer(op, args, kwargs)
        jargs = (old, *args[1:])
        outs = (self,)
    else:
        out = autograd_layer(op, args, kwargs)
        jargs = args
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
    needs = tuple(tg is not None for tg in tangents)
    room = _arity(rule)
    if room is not None and len(tangents) > room:
        # trailing non-tensor arguments (dims, scalars) have no tangent to pass
        tangents = tangents[:room]
    ctx = OpContext(jargs, kwargs or {}, outs, needs)
    prev, FW.active = FW.active, False
    try:
        res = rule(ctx, *tangents)
    finally:
        FW.active = prev
    if writes:
        if isinstance(res, (tuple, list)):
            res = res[0]
        if op.extra.get("inplace_view"):
            # t_, squeeze_, as_strided_...: the tangent takes the same new geometry
            if res is not None:
                attach(self, _cast(res, self))
        elif self.dtype.category >= 2:
            _write_tangent(self, _cast(res, self))
        return out
    res = res if isinstance(res, (tuple, list)) else (res,)
    diff = op.diff_outputs
    is_view = op.kind == "view"
    for i, (o, tg) in enumerate(zip(outs, res)):
        if tg is None or not isinstance(o, Tensor) or o.dtype.category < 2:
            continue
        if diff is not None and i not in diff:
            continue
        tg = _cast(tg, o)
        if not is_view and not same_layout(o, tg):
            tg = laid_out_like(o, tg)
        attach(o, tg)
        _attach_to_saved_output(o, i, tg)
    return out


def _attach_to_saved_output(out, index: int, tangent) -> None:
    """The node that produced ``out`` may have saved it for backward (as an alias): the
    alias carries the tangent too, so a backward run inside the level (forward over
    reverse) differentiates through the saved value."""
    from refimpl.autograd.saved import SavedVariable

    saved = getattr(out._gfn, "_outs", None) if out._gfn is not None else None
    if not saved:
        return
    for sv in saved:
        if type(sv) is SavedVariable and sv._is_output and sv._output_nr == index \
                and sv._data is not None:
            attach(sv._data, tangent)


_ARITY: dict = {}


def _arity(rule) -> int | None:
    """How many tangents ``rule`` takes positionally (None: any number)."""
    key = id(rule)
    hit = _ARITY.get(key)
    if hit is None or hit[0] is not rule:
        import inspect

        n = None
        try:
            params = list(inspect.signature(rule).parameters.values())[1:]
            if not any(p.kind is p.VAR_POSITIONAL for p in params):
                n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        except (TypeError, ValueError):
            n = None
        hit = (rule, n)
        _ARITY[key] = hit
    return hit[1]


def _cast(tangent, out):
    """The rule's tangent in the output's dtype (a real output keeps the real part)."""
    if tangent is None or tangent.dtype is out.dtype:
        return tangent
    prev, FW.active = FW.active, False
    try:
        if tangent.dtype.category == 3 and out.dtype.category < 3:
            tangent = tangent.real
        return tangent.to(out.dtype)
    finally:
        FW.active = prev


def _install() -> None:
    from refimpl import _dispatch

    _dispatch.FORWARD_LAYER = forward_layer


_install()
