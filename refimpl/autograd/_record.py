"""The autograd layer of the dispatcher: records graph nodes for differentiable ops
(spec: AUTOGRAD-RECORD-*).

``record(op, args, kwargs)`` runs the op below autograd, then attaches an ``OpNode``
to the outputs. The node keeps what the op's ``backward`` formula needs (see
``refimpl/OPS_GUIDE.md``): the arguments, with the tensors the formula reads *saved*
(version-checked, packed by saved-tensor hooks), and the outputs when ``saves`` names
them.

Which inputs are saved: every tensor argument when ``op.saves`` contains
``"inputs"``, narrowed by ``op.extra["save_needs"]`` when given: a dict mapping the
index of an input to the indices of the inputs its gradient reads, so that ``x * y``
with only ``x`` requiring grad saves ``y`` alone. In-place ops save a clone of
``self`` when a formula reads it, since the op overwrites it.

In-place ops (``kind="inplace"`` or ``extra["writes_input0"]``) rewrite the history of
input 0 (``views.rebase_history``: CopySlices when it is a view).
"""

from __future__ import annotations

import weakref

from refimpl._state import STATE
from refimpl.autograd import _flags, views
from refimpl.autograd.graph import GraphNode, grad_accumulator, gradient_edge, node_class
from refimpl.autograd.saved import SavedVariable

# Which inputs each gradient reads, for ops that do not declare extra["save_needs"].
# {input index: indices of the inputs its formula reads}; () = none.
_SAVE_NEEDS = {
    "add": {}, "sub": {}, "neg": {}, "clone": {}, "view": {}, "reshape": {}, "t": {},
    "transpose": {}, "expand": {}, "sum": {}, "mean": {}, "copy_": {}, "fill_": {},
    "_to_copy": {}, "_to_device": {}, "squeeze": {}, "unsqueeze": {}, "permute": {},
    "select": {}, "slice": {}, "narrow": {}, "as_strided": {}, "cat": {}, "stack": {},
    "mul": {0: (1,), 1: (0,)},
    "div": {0: (1,), 1: (0, 1)},
    "mm": {0: (1,), 1: (0,)}, "matmul": {0: (1,), 1: (0,)}, "bmm": {0: (1,), 1: (0,)},
}
# Binary ops whose Python-number operands still get a (None, 0) edge, as in torch.
_SCALAR_EDGE_OPS = frozenset({"add", "sub", "mul", "div", "true_divide", "rsub"})

_FLOAT_CATEGORY = 2


class _WeakArg:
    """A tensor argument the formula does not need the values of: held weakly, so the
    graph does not keep it alive (torch saves nothing for it). If it died, backward
    sees zeros of the same metadata (a correct ``save_needs`` guarantees that only
    gradients nobody asked for read them)."""

    __slots__ = ("meta", "ref")

    def __init__(self, tensor) -> None:
        self.ref = weakref.ref(tensor)
        self.meta = (tensor._shape, tensor.dtype, tensor._storage.device)

    def unpack(self, node=None):
        t = self.ref()
        return t if t is not None else _zeros(self.meta)

    def release(self) -> None:
        """A weak reference keeps nothing alive: there is nothing to release."""


class OpContext:
    """What an op's backward formula reads: ``args``, ``kwargs``, ``outputs``,
    ``needs_input_grad`` (see OPS_GUIDE.md)."""

    __slots__ = ("args", "kwargs", "needs_input_grad", "outputs")

    def __init__(self, args, kwargs, outputs, needs_input_grad) -> None:
        self.args = args
        self.kwargs = kwargs
        self.outputs = outputs
        self.needs_input_grad = needs_input_grad


_LAZY = object()


class _NodeContext:
    """The ``OpContext`` a node's formula gets: saved (version-checked) values are unpacked
    up front, as torch checks them whenever the node runs; arguments and outputs held only
    weakly are unpacked if the formula reads them (most formulas of cheap ops do not)."""

    __slots__ = ("_args", "_node", "_outs", "kwargs", "needs_input_grad")

    def __init__(self, node) -> None:
        self._node = node
        self.kwargs = node._kwargs
        self.needs_input_grad = node._needs
        strong = node._strong
        self._args = node._unpack_args() if strong & 1 else _LAZY
        self._outs = node._unpack_outputs() if strong & 2 else _LAZY

    @property
    def args(self) -> tuple:
        """The op's arguments (tensors as given)."""
        a = self._args
        if a is _LAZY:
            a = self._args = self._node._unpack_args()
        return a

    @property
    def outputs(self):
        """The op's outputs, as a tuple."""
        o = self._outs
        if o is _LAZY:
            o = self._outs = self._node._unpack_outputs()
        return o


class OpNode(GraphNode):
    """The backward node of one call of a registered op."""

    __slots__ = (
        "_args",
        "_kwargs",
        "_layout",
        "_needs",
        "_op",
        "_outs",
        "_released",
        "_saved_at",
        "_strong",
    )
    _builtin = True  # its backward is the op's formula (registered ops have no user ones)

    def _apply(self, grads: list) -> list:
        n_edges = len(self._next)
        if len(grads) == 1:
            if grads[0] is None:
                return [None] * n_edges
        elif all(g is None for g in grads):
            return [None] * n_edges
        op = self._op
        if op.backward is None:
            raise NotImplementedError(f"the derivative for '{op.name}' is not implemented.")
        if self._released:
            from refimpl.autograd.saved import ERR_BACKWARD_TWICE

            raise RuntimeError(ERR_BACKWARD_TWICE)
        if len(grads) > 1 and any(g is None for g in grads):
            # zeros stand for the missing gradients of differentiable outputs only: a
            # non-differentiable output (indices, saved statistics) has none to read
            diff = op.diff_outputs
            grads = [g if g is not None or diff is not None and i not in diff
                     else _fresh_zeros(meta)
                     for i, (g, meta) in enumerate(zip(grads, self._in_meta))]
        res = op.backward(_NodeContext(self), *grads)
        if not isinstance(res, (tuple, list)):
            res = (res,)
        layout = self._layout
        if type(layout) is int:  # the first ``layout`` results are the gradients
            if len(res) == layout:
                return list(res)
            out = list(res[:layout])
            return out + [None] * (layout - len(out))
        return self._flatten(res, n_edges)

    def _unpack_args(self) -> tuple:
        if not self._saved_at:
            return self._args
        args = list(self._args)
        for where in self._saved_at:
            if type(where) is int:
                args[where] = args[where].unpack()
            else:
                i, j = where
                seq = list(args[i])
                seq[j] = seq[j].unpack()
                args[i] = seq
        return tuple(args)

    def _unpack_outputs(self):
        outs = self._outs
        if outs is None:
            return None
        if len(outs) == 1:
            o = outs[0]
            return (o.unpack(self) if isinstance(o, (SavedVariable, _WeakArg)) else o,)
        return tuple(o.unpack(self) if isinstance(o, (SavedVariable, _WeakArg)) else o
                     for o in outs)

    def _flatten(self, res, n_edges: int) -> list:
        out = []
        for (is_list, count), g in zip(self._layout, _padded(res, len(self._layout))):
            if not count:
                continue
            if is_list:
                gs = list(g) if g is not None else [None] * count
                gs += [None] * (count - len(gs))
                out.extend(gs[:count])
            else:
                out.append(g)
        if len(out) != n_edges:
            out = (out + [None] * n_edges)[:n_edges]
        return out

    def _release(self) -> None:
        released = False
        args = self._args
        for where in self._saved_at:
            sv = args[where] if type(where) is int else args[where[0]][where[1]]
            if type(sv) is not _WeakArg:
                sv.release()
                released = True
        if self._outs is not None:
            for o in self._outs:
                if isinstance(o, SavedVariable):
                    o.release()
                    released = True
        if released:
            self._released = True

    def __getattr__(self, name: str):
        # grad_fn._saved_<arg> / _raw_saved_<arg>: introspection of what was saved
        if name.startswith(("_saved_", "_raw_saved_")):
            raw = name.startswith("_raw_saved_")
            key = name[len("_raw_saved_" if raw else "_saved_"):]
            sv = self._saved_by_name(key)
            if sv is not None:
                if raw:
                    return sv
                return sv.unpack(self) if isinstance(sv, SavedVariable) else sv
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _saved_by_name(self, key: str):
        if key == "result" and self._outs is not None:
            return self._outs[0]
        if key.startswith("result") and self._outs is not None and key[6:].isdigit():
            return self._outs[int(key[6:])]
        names = {"self": 0, "other": 1, "exponent": 1}
        pos = names.get(key)
        if pos is not None and pos < len(self._args):
            return self._args[pos]
        return None


def _padded(res, n: int):
    res = tuple(res)
    if len(res) < n:
        res = res + (None,) * (n - len(res))
    return res


# Stand-ins for dead weakly held arguments, by (shape, dtype): zero-stride views of one
# zero element, shared on the CPU (only gradients nobody asked for read them; see
# _WeakArg); on CUDA each stand-in has its own zero element.
_ZEROS_CACHE: dict = {}


def _zeros(meta):
    shape, dtype, device = meta
    if device.type == "cpu":
        key = (shape, dtype)
        z = _ZEROS_CACHE.get(key)
        if z is None:
            if len(_ZEROS_CACHE) > 512:
                _ZEROS_CACHE.clear()
            import numpy as np

            one = _tensor_cls()._from_array(np.zeros(1, dtype.np), dtype)
            z = _tensor_cls()._make(one._storage, shape, (0,) * len(shape), 0, dtype)
            _ZEROS_CACHE[key] = z
        return z
    if device.type == "cuda":
        # one zero element seen through zero strides, allocated and cleared only if a
        # kernel reads it (most formulas read the shape alone); nothing is cached, since
        # a kept block would show in the memory statistics
        global _TENSOR_MEMORY
        if _TENSOR_MEMORY is None:
            from refimpl.cuda import _tensor_memory as _TENSOR_MEMORY
        storage = _TENSOR_MEMORY.lazy_zeros(dtype.itemsize, device)
        return _tensor_cls()._make(storage, shape, (0,) * len(shape), 0, dtype)
    return _fresh_zeros(meta)


def _fresh_zeros(meta):
    """A new zero-filled tensor (the engine may hand these to users as gradients)."""
    shape, dtype, device = meta
    if device.type == "cpu":
        import numpy as np

        return _tensor_cls()._from_array(np.zeros(shape, dtype.np), dtype)
    from refimpl.ops.factories import zeros

    return zeros(shape, dtype=dtype, device=device)


_TENSOR = None
_TENSOR_MEMORY = None  # refimpl.cuda._tensor_memory, bound on the first CUDA zeros
_PLAIN: set = set()  # refimpl._tensor.PLAIN, bound with _TENSOR
_BELOW = None


def _below():
    """refimpl._dispatch.below_autograd (bound on first use: the dispatcher imports us)."""
    global _BELOW
    from refimpl._dispatch import below_autograd

    _BELOW = below_autograd
    return _BELOW


def _tensor_cls():
    global _TENSOR, _PLAIN
    if _TENSOR is None:
        from refimpl._tensor import PLAIN, Tensor

        _TENSOR, _PLAIN = Tensor, PLAIN
    return _TENSOR


def _is_tensor(x) -> bool:
    return isinstance(x, _TENSOR or _tensor_cls())


def _edge_of(a):
    """(requires_grad, edge) of a tensor argument (fast path for non-views)."""
    if a._view_meta is None:
        fn = a._gfn
        if fn is not None:
            return True, (fn, a._output_nr)
        if a._rg:
            return True, (grad_accumulator(a), 0)
        return False, None
    rg = a.requires_grad
    return rg, (gradient_edge(a) if rg else None)


def _layout_and_edges(op, args, scalar_edges=None):
    """(layout, edges, needs): the flat edges, whether each argument requires grad, and the
    layout, per positional argument (is_list, number of gradient slots). The layout comes
    compact, as an int ``k``, when the arguments are ``k`` single tensors followed only by
    arguments without a gradient (the usual signature): the formula's first ``k`` results
    are the gradients, and no other argument holds a tensor."""
    Tensor = _TENSOR or _tensor_cls()
    if scalar_edges is None:
        scalar_edges = _op_info(op)[1]
    n = len(args)
    if n == 2:
        # the common binary call (tensor op tensor, tensor op number): no lists to flatten
        # (any Tensor subclass would take the same steps below; PLAIN is the quick test)
        a, b = args
        if type(a) in _PLAIN:
            ta = type(b)
            if ta in _PLAIN:
                ra, ea = _edge_of(a)
                rb, eb = _edge_of(b)
                return 2, (ea, eb), (ra, rb)
            if ta is float or ta is int:
                ra, ea = _edge_of(a)
                if scalar_edges:
                    return 2, (ea, None), (ra, False)
                return 1, (ea,), (ra, False)
    if n > 2 and not scalar_edges and type(args[0]) in _PLAIN:
        # a tensor and then only ints (view, reshape, permute, transpose, narrow, ...)
        for x in args[1:]:
            if type(x) is not int:
                break
        else:
            ra, ea = _edge_of(args[0])
            rest = _INT_TAILS.get(n)
            if rest is None:
                rest = _INT_TAILS[n] = (False,) * (n - 1)
            return 1, (ea,), (ra, *rest)
    layout = []
    edges = []
    needs = []
    for i, a in enumerate(args):
        ta = type(a)
        if ta in _PLAIN:
            rg, edge = _edge_of(a)
            layout.append(_ONE)
            edges.append(edge)
            needs.append(rg)
            continue
        if ta is list or ta is tuple:
            for x in a:  # a tensor among them? (sizes and strides are ints)
                if type(x) is not int and isinstance(x, Tensor):
                    break
            else:
                layout.append(_NONE)
                needs.append(False)
                continue
            layout.append((True, len(a)))
            flags = []
            for x in a:
                if isinstance(x, Tensor):
                    rg, edge = _edge_of(x)
                else:
                    rg, edge = False, None
                edges.append(edge)
                flags.append(rg)
            needs.append(any(flags))
        elif isinstance(a, Tensor):
            rg, edge = _edge_of(a)
            layout.append(_ONE)
            edges.append(edge)
            needs.append(rg)
        elif scalar_edges and i < 2 and isinstance(a, (int, float, complex, bool)):
            layout.append(_ONE)
            edges.append(None)
            needs.append(False)
        else:
            layout.append(_NONE)
            needs.append(False)
    k = 0
    while k < n and layout[k] is _ONE:
        k += 1
    for entry in layout[k:]:
        if entry is not _NONE:
            return tuple(layout), tuple(edges), tuple(needs)
    return k, tuple(edges), tuple(needs)


_ONE = (False, 1)
_NONE = (False, 0)
_INT_TAILS: dict = {}  # argument count -> the needs of the ints of tensor-then-ints
# id(op) -> (op, scalar_edges, save rule or None, node class)
_OP_INFO: dict = {}


def _op_info(op):
    info = _OP_INFO.get(id(op))
    if info is None or info[0] is not op:
        rule = op.extra.get("save_needs")
        if rule is None:
            rule = _SAVE_NEEDS.get(op.base.name if op.base is not None else op.name)
        cls = node_class(op.node, OpNode)
        scalar_edges = bool(op.name in _SCALAR_EDGE_OPS or op.extra.get("scalar_edges"))
        writes = op.kind == "inplace" or bool(op.extra.get("writes_input0"))
        info = (op, scalar_edges, rule, cls, writes, "inputs" in op.saves,
                "outputs" in op.saves, {})
        _OP_INFO[id(op)] = info
    return info


def _save_positions(op, needs, info=None) -> set | None:
    """Indices of the positional args to save (None: every tensor argument)."""
    if info is None:
        info = _op_info(op)
    cache = info[7]
    if needs in cache:  # None is a valid cached answer, so no .get()
        return cache[needs]
    if not info[5]:
        keep = frozenset()
    elif info[2] is None:
        keep = None
    else:
        keep = frozenset(j for i, need in enumerate(needs) if need
                         for j in info[2].get(i, ()))
    cache[needs] = keep
    return keep


def _new_node(op, edges, in_meta, cls=None) -> OpNode:
    if cls is None:
        cls = _op_info(op)[3]
    node = cls.__new__(cls)
    node._init_node(edges, in_meta)
    node._op = op
    node._released = False
    return node


def _save_args(node, op, args, needs, layout, self_clone=None, info=None) -> None:
    """Save (or hold weakly) the tensor arguments. ``layout`` (of _layout_and_edges) tells
    where they are: the first ``layout`` arguments when it is an int, else the entries
    that are not ``_NONE`` (a list entry is a list holding tensors)."""
    keep = _save_positions(op, needs, info)
    Tensor = _TENSOR or _tensor_cls()
    saved_args = list(args)
    saved_at = []
    # bit 1 of _strong: an argument is saved (not just weakly held); bit 2 is set by the
    # caller when outputs are saved
    strong = 0
    compact = type(layout) is int
    for i, a in enumerate(args[:layout] if compact else args):
        if not compact and layout[i] is _NONE:
            continue
        ta = type(a)
        if keep is not None and i not in keep:
            if ta in _PLAIN or isinstance(a, Tensor):
                saved_args[i] = _WeakArg(a)
                saved_at.append(i)
            continue
        if ta in _PLAIN or isinstance(a, Tensor):
            src = self_clone if (i == 0 and self_clone is not None) else a
            saved_args[i] = SavedVariable(src)
            saved_at.append(i)
            strong = 1
        elif ta is list or ta is tuple:  # (the layout says it holds a tensor)
            seq = list(a)
            for j, x in enumerate(seq):
                if isinstance(x, Tensor):
                    seq[j] = SavedVariable(x)
                    saved_at.append((i, j))
            saved_args[i] = seq
            strong = 1
    node._args = tuple(saved_args)
    node._saved_at = tuple(saved_at)
    node._strong = strong


def _needs_self_value(op, needs) -> bool:
    keep = _save_positions(op, needs)
    return keep is None or 0 in keep


def record(op, args, kwargs):
    """Run ``op`` below autograd and attach a graph node to its outputs."""
    below_autograd = _BELOW or _below()
    info = _OP_INFO.get(id(op))
    if info is None or info[0] is not op:
        info = _op_info(op)
    if info[4]:
        return _record_inplace(op, args, kwargs)
    is_view = op.kind == "view"
    if not STATE.grad_enabled:
        return _untracked_view(op, args, kwargs) if is_view else \
            below_autograd(op, args, kwargs)
    if is_view and args and _is_tensor(args[0]) and args[0]._is_inference:
        # a view of an inference tensor is an alias with no history (INFER-010/016)
        return below_autograd(op, args, kwargs)
    layout, edges, needs = _layout_and_edges(op, args, info[1])
    if not any(needs):
        if is_view:
            return _untracked_view(op, args, kwargs)
        return below_autograd(op, args, kwargs)
    out = below_autograd(op, args, kwargs)
    Tensor = _TENSOR or _tensor_cls()
    if type(out) is Tensor or isinstance(out, Tensor):
        outs = (out,)
        in_meta = ((out._shape, out.dtype, out._storage.device),)
    else:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        metas = []
        for o in outs:
            metas.append((o._shape, o.dtype, o.device) if isinstance(o, Tensor)
                         else ((), None, None))
        in_meta = tuple(metas)
    diff = op.diff_outputs
    node = _new_node(op, edges, in_meta, info[3])
    node._layout = layout
    node._needs = needs
    node._kwargs = kwargs
    _save_args(node, op, args, needs, layout, None, info)
    src = args[0] if is_view else None
    multi = is_view and not isinstance(out, Tensor)
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor) or o.dtype.category < _FLOAT_CATEGORY:
            continue
        if diff is not None and i not in diff:
            continue
        o._gfn = node
        o._output_nr = i
        if is_view and o._view_meta is not None:
            _set_view_creation(o, src, multi)
            if _flags.view_replay_enabled:
                _set_replay(o, op, args, kwargs, i if multi else None)
    if info[6]:
        saved = []
        for i, o in enumerate(outs):
            saved.append(SavedVariable(o, is_output=True, output_nr=i)
                         if isinstance(o, Tensor) and o._gfn is node else o)
        node._outs = tuple(saved)
        node._strong |= 2
    elif len(outs) == 1 and isinstance(out, Tensor):
        node._outs = (_WeakArg(out),)
    else:
        node._outs = tuple([_WeakArg(o) if isinstance(o, Tensor) else o for o in outs])
    return out


def _untracked_view(op, args, kwargs):
    """A view op that records no node (no input requires grad, or grad mode is off): its
    outputs still learn how they were made (several views at once, or a view of a view
    made in no_grad/inference mode), which decides what in-place ops may do to them."""
    out = (_BELOW or _below())(op, args, kwargs)
    multi = isinstance(out, (tuple, list))
    outs = out if multi else (out,)
    for o in outs:
        if _is_tensor(o) and o._view_meta is not None:
            _set_view_creation(o, args[0] if args else None, multi)
    return out


def _set_view_creation(view, src, multi: bool) -> None:
    meta = view._view_meta
    if multi:
        meta.creation = views.MULTI_OUTPUT_NODE
    src_meta = src._view_meta if _is_tensor(src) else None
    if src_meta is not None and src_meta.creation != views.DEFAULT:
        meta.creation = src_meta.creation
    meta.attr_version = view._version_counter.version


def _set_replay(view, op, args, kwargs, index) -> None:
    src = args[0]
    src_meta = src._view_meta if _is_tensor(src) else None
    if src_meta is not None and src._base is not None:
        if src_meta.replay is None:
            return
        steps = src_meta.replay
    else:
        steps = ()
    view._view_meta.replay = steps + ((op, tuple(args[1:]), dict(kwargs or {}), index),)


def _record_inplace(op, args, kwargs):
    below_autograd = _BELOW or _below()
    self = args[0]
    if self._is_inference and op.extra.get("inplace_view"):
        # in-place view ops check inference tensors before the leaf rule (as torch)
        from refimpl._dispatch import check_inplace_allowed

        check_inplace_allowed(self)
    layout, edges, needs = _layout_and_edges(op, args)
    if not any(needs):
        return below_autograd(op, args, kwargs)
    views.check_inplace(self)
    self_clone = None
    if "inputs" in op.saves and _needs_self_value(op, needs):
        from refimpl.ops.copy import clone

        self_clone = clone(self)
    out = below_autograd(op, args, kwargs)
    node = _new_node(op, edges, ((self._shape, self.dtype, self.device),))
    node._layout = layout
    node._needs = needs
    node._kwargs = kwargs
    _save_args(node, op, args, needs, layout, self_clone)
    node._outs = (_WeakArg(self),)
    views.rebase_history(self, node)
    if "outputs" in op.saves:
        if self._view_meta is not None:
            node._outs = (SavedVariable(self),)
        else:
            node._outs = (SavedVariable(self, is_output=True),)
        node._strong |= 2
    return out
