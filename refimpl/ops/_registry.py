"""The op registry: every op is declared once, as one ``OpDef``.

An ``OpDef`` carries everything the runtime knows about an op:

``meta``
    ``meta(*args, **kwargs) -> TensorSpec | tuple[TensorSpec, ...]``: output shape,
    dtype and device from input metadata alone. Fake tensors run only this. For view
    ops it returns a ``ViewSpec`` (shape, stride, storage offset) instead.
``cpu`` / ``cuda``
    Kernels with the op's own Python signature. A CPU kernel returns numpy arrays of
    the output dtype (the dispatcher wraps them); a CUDA kernel returns tensors.
``backward``
    ``backward(ctx, *grad_outputs) -> tuple`` of one gradient per tensor input (None
    where there is none), written in refimpl ops so that double backward works.
    ``ctx.inputs``/``ctx.args``/``ctx.kwargs``/``ctx.outputs`` hold what it needs.
``jvp``
    The forward-mode rule, ``jvp(ctx, *input_tangents) -> output tangent(s)``.
``kind``
    ``"compute"`` (fresh outputs), ``"view"`` (aliases input 0), ``"inplace"`` (writes
    input 0 through the ``base`` op's kernels), ``"factory"`` (no tensor inputs).
``node``
    The autograd node name torch uses (``AddBackward0``); derived from the name
    when not given.
``extra["layout"]``
    ``layout(shape, args, kwargs) -> strides | None``: the strides of the fresh output
    when they are not row-major (elementwise ops follow their inputs, ``clone`` keeps
    its input's; see ``refimpl/_memory_format.py``). Kernels produce that layout; the
    meta and fake kernels read it to give the same strides.

The dispatcher (``refimpl/_dispatch.py``) is the only caller of the kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class TensorSpec(NamedTuple):
    """Metadata of a fresh output: what a meta function returns (row-major unless
    ``stride`` is given; the dispatcher fills it from the op's ``layout`` rule)."""

    shape: tuple
    dtype: Any
    device: Any
    stride: tuple | None = None


class ViewSpec(NamedTuple):
    """Metadata of a view output: the aliasing of input 0's storage.

    ``dtype`` is set by views that reinterpret the bytes (``view(dtype)``, ``real``).
    """

    shape: tuple
    stride: tuple
    offset: int
    dtype: Any = None


@dataclass(eq=False)
class OpDef:
    """One op: its name, metadata rule, kernels and derivative rules."""

    name: str
    meta: Callable | None = None
    cpu: Callable | None = None
    cuda: Callable | None = None
    backward: Callable | None = None
    jvp: Callable | None = None
    kind: str = "compute"
    base: OpDef | None = None
    node: str | None = None
    differentiable: bool = True
    # Indices of the outputs that are differentiable (None: all of them).
    diff_outputs: tuple | None = None
    # What backward needs kept alive ("inputs", "outputs" or both); the autograd layer
    # saves only these and checks their versions.
    saves: tuple = ("inputs",)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.node is None:
            camel = "".join(p[:1].upper() + p[1:] for p in self.name.strip("_").split("_"))
            self.node = f"{camel}Backward0"

    def __repr__(self) -> str:
        return f"<op {self.name}>"

    def __call__(self, *args, **kwargs):
        return _dispatch()(self, args, kwargs)


REGISTRY: dict[str, OpDef] = {}
_dispatch_fn = None


def _dispatch():
    """refimpl._dispatch.dispatch (imported on first use: the dispatcher imports this module)."""
    global _dispatch_fn
    if _dispatch_fn is None:
        from refimpl._dispatch import dispatch as _dispatch_fn
    return _dispatch_fn


def defop(name: str, **fields) -> OpDef:
    """Declare an op once and register it; returns the OpDef (callable like the op)."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already defined")
    op = OpDef(name, **fields)
    REGISTRY[name] = op
    return op


def get(name: str) -> OpDef:
    """Look an op up by name."""
    return REGISTRY[name]
