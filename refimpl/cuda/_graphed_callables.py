"""``make_graphed_callables``: a callable's forward and backward, each one CUDA graph.

Spec: graphs GRAPH-200. For every callable the steps are:

1. **Warm up** a few iterations on a side stream (forward, and ``autograd.grad`` of
   the outputs that require grad), so that lazily built state (compiled kernels,
   cuBLAS workspaces, cached allocator blocks) exists before capture.
2. **Capture the forward** into a graph: the sample arguments become the *static
   inputs* (their addresses are baked into the graph) and the outputs the *static
   outputs*.
3. **Capture the backward** (callables in reverse order, so that a chain of graphed
   callables can share one memory pool safely): ``autograd.grad`` of the static
   outputs with respect to the static inputs that require grad (user arguments and a
   module's parameters), fed from *static grad outputs*.
4. Return a function that runs an ``autograd.Function`` whose forward copies new
   arguments into the static inputs and replays the forward graph, and whose backward
   copies the incoming gradients into the static grad outputs and replays the
   backward graph. Outputs and gradients are detached views of the static buffers:
   the next call overwrites them, as in torch.

A module-like callable (one with ``parameters()``, ``training`` and ``forward``) keeps
its identity: its ``forward`` is replaced by one that runs the graphs while the module
is in the training state it was graphed in and the original forward otherwise.
All callables share one memory pool (``pool``, or a new ``graph_pool_handle()``).
"""

from __future__ import annotations

from typing import Any

from refimpl.cuda import streams

__all__ = ["make_graphed_callables"]


def _is_module(obj: Any) -> bool:
    return callable(getattr(obj, "parameters", None)) and hasattr(obj, "training") \
        and hasattr(obj, "forward")


def _leaves(args: Any) -> tuple:
    """The tensors of a (nested) tuple/list of arguments, in order."""
    from refimpl._tensor import Tensor

    if isinstance(args, Tensor):
        return (args,)
    if isinstance(args, (tuple, list)):
        return tuple(leaf for a in args for leaf in _leaves(a))
    raise TypeError(
        "In the beta API, sample_args for each callable must contain only Tensors. Other "
        "types are not allowed.")


def _flatten_outputs(outputs: Any) -> tuple[tuple, Any]:
    """(flat tuple of tensors, a spec that rebuilds the structure)."""
    from refimpl._tensor import Tensor

    if isinstance(outputs, Tensor):
        return (outputs,), None
    if isinstance(outputs, (tuple, list)):
        flat, specs = [], []
        for o in outputs:
            f, s = _flatten_outputs(o)
            specs.append((len(f), s))
            flat.extend(f)
        return tuple(flat), (type(outputs), specs)
    raise TypeError(f"graphed callables must return tensors, got {type(outputs).__name__}")


def _unflatten(flat: tuple, spec: Any) -> Any:
    if spec is None:
        return flat[0]
    kind, specs = spec
    out, i = [], 0
    for n, s in specs:
        out.append(_unflatten(flat[i:i + n], s))
        i += n
    return kind(out)


def _check_module(c: Any) -> None:
    hooks = [getattr(c, name, None) for name in
             ("_backward_hooks", "_forward_hooks", "_forward_pre_hooks")]
    if any(h for h in hooks):
        raise AssertionError(
            "Modules must not have hooks registered at the time they are passed. However, "
            "registering hooks on modules after passing them through make_graphed_callables "
            "is allowed.")
    buffers = getattr(c, "buffers", None)
    if callable(buffers) and any(b.requires_grad for b in buffers()):
        raise AssertionError(
            "In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, only "
            "parameters may be trainable. All buffers must have ``requires_grad=False``.")


def _grad(outputs: tuple, inputs: tuple, grad_outputs: tuple, allow_unused: bool):
    import refimpl as t

    return t.autograd.grad(outputs=outputs, inputs=inputs, grad_outputs=grad_outputs,
                           only_inputs=True, allow_unused=allow_unused)


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """Graphed versions of ``callables`` (one callable or a tuple of them).

    ``sample_args`` holds, per callable, a tuple of tensors shaped like the arguments
    of later calls. Returns the graphed callable(s): same signature, autograd-aware,
    with forward and backward each replayed from a CUDA graph.
    """
    import refimpl as t
    from refimpl.cuda.graphs import CUDAGraph, graph, graph_pool_handle

    if t.is_autocast_enabled("cuda") and t.is_autocast_cache_enabled():
        # cached weight casts made during capture would live in the graph's pool and be
        # reused by later eager code after the graph's memory is replayed over
        raise RuntimeError("make_graphed_callables does not support the autocast caching. "
                           "Please set `cache_enabled=False`.")
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    flat_args = []
    for c, args in zip(callables, sample_args):
        if _is_module(c):
            _check_module(c)
        flat_args.append(_leaves(args))
    params = [tuple(c.parameters()) if _is_module(c) else () for c in callables]
    surfaces = [flat_args[i] + params[i] for i in range(len(callables))]
    mempool = graph_pool_handle() if pool is None else pool

    t.cuda.synchronize()
    with streams.stream(streams.Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs, _ = _flatten_outputs(func(*args))
                needs = tuple(o for o in outputs if o.requires_grad)
                if needs:
                    _grad(needs, tuple(i for i in surface if i.requires_grad),
                          tuple(t.empty_like(o) for o in needs), allow_unused_input)
    t.cuda.synchronize()

    fwd_graphs = [CUDAGraph() for _ in callables]
    bwd_graphs = [CUDAGraph() for _ in callables]
    static_outputs, output_specs = [], []
    for func, args, fwd in zip(callables, sample_args, fwd_graphs):
        with graph(fwd, pool=mempool):
            outputs = func(*args)
        flat, spec = _flatten_outputs(outputs)
        static_outputs.append(flat)
        output_specs.append(spec)

    static_grad_outputs: list = [None] * len(callables)
    static_grad_inputs: list = [None] * len(callables)
    for i in reversed(range(len(callables))):
        grad_outs = tuple(t.empty_like(o) if o.requires_grad else None
                          for o in static_outputs[i])
        needs = tuple(o for o in static_outputs[i] if o.requires_grad)
        grads = None
        if needs:
            with graph(bwd_graphs[i], pool=mempool):
                grads = _grad(needs, tuple(x for x in surfaces[i] if x.requires_grad),
                              tuple(g for g in grad_outs if g is not None), allow_unused_input)
        # one slot per static input: the gradient, or None where none is needed
        padded, k = [], 0
        for x in surfaces[i]:
            if x.requires_grad and grads is not None:
                padded.append(grads[k])
                k += 1
            else:
                padded.append(None)
        static_grad_outputs[i] = grad_outs
        static_grad_inputs[i] = tuple(padded)

    graphed = []
    for i, func in enumerate(callables):
        fn = _graphed_function(fwd_graphs[i], bwd_graphs[i], params[i], len(flat_args[i]),
                               output_specs[i], surfaces[i], static_outputs[i],
                               static_grad_outputs[i], static_grad_inputs[i])
        if _is_module(func):
            func.forward = _module_forward(func, func.training, fn, func.forward)
            graphed.append(func)
        else:
            graphed.append(fn)
    return graphed[0] if single else tuple(graphed)


def _graphed_function(fwd, bwd, module_params: tuple, n_user_args: int, spec: Any,
                      surface: tuple, outputs: tuple, grad_outputs: tuple,
                      grad_inputs: tuple):
    """The autograd-aware replaying function of one graphed callable."""
    import refimpl as t
    from refimpl.autograd import once_differentiable

    class Graphed(t.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            # only user arguments can be new tensors; parameters are the captured ones
            for i in range(n_user_args):
                if surface[i].data_ptr() != inputs[i].data_ptr():
                    surface[i].copy_(inputs[i])
            fwd.replay()
            return tuple(o.detach() for o in outputs)

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            for static, grad in zip(grad_outputs, grads):
                if static is not None and grad is not None \
                        and static.data_ptr() != grad.data_ptr():
                    static.copy_(grad)
            bwd.replay()
            return tuple(g.detach() if g is not None else None for g in grad_inputs)

    def run(*user_args):
        out = Graphed.apply(*(_leaves(user_args) + module_params))
        return _unflatten(out, spec)

    return run


def _module_forward(module: Any, graphed_training: bool, graphed: Any, original: Any):
    def forward(*user_args):
        # the graphs hold the training-mode computation they were captured in
        if module.training == graphed_training:
            return graphed(*user_args)
        return original(*user_args)

    return forward
