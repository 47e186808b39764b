"""torch's OpInfo database (``op_db``) walked against refimpl: which ops refimpl has, and
how many of their sample inputs, gradients and error inputs agree with torch.

For every OpInfo that applies on the device (it supports one of the dtypes walked), the
op is *present* when refimpl has it under torch's name (``refimpl.<name>``,
``refimpl.nn.functional.<name>``, or a Tensor method). For a present op, up to
``--samples`` sample inputs per dtype are built by torch, converted to refimpl tensors
(same values, dtype and device) and run on both; results agree when dtypes and shapes
are equal and values are close (exact for integers and bools). Gradients: float64
samples of differentiable ops, the gradient of a fixed weighted sum of the floating
outputs with respect to every floating input. Error inputs: refimpl must raise an
exception of torch's type whose message matches torch's regex. A sample on which torch
itself raises is skipped.

One command::

    python bench/opdb_report.py                      # CPU: float32, float64, int64, bool
    python bench/opdb_report.py --device cuda --dtypes float32,float16,bfloat16,int64,bool
    python bench/opdb_report.py --ops 'nn.functional.*,add' -v

It prints one line per op and a JSON summary, written to ``--out`` (default
``bench/results/<device>/opdb_report.json``). It is not part of the default test run
(it takes minutes); ``tests/test_bench_imports.py`` checks that it imports.
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import json
import platform
import re
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._opdb_compare import (
    _DRAWN_GRADS,
    _RANDOM_CHECKS,
    _TIES,
    _UNINITIALISED,
    describe_args,
    explain,
    same,
    same_layout,
    same_up_to_ties,
)

ROOT = Path(__file__).resolve().parent.parent


class _Timeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Timeout


def resolve_jiterator(op):
    """refimpl's jiterator function made from the same code string as torch's OpInfo
    (the ``jiterator_*`` ops are functions a user compiles, not named ops)."""
    from refimpl.cuda import jiterator

    jitted = op.op
    if jitted.return_by_ref:
        return jiterator._create_multi_output_jit_fn(jitted.code_string, jitted.num_outputs,
                                                     **jitted.kwargs_dict)
    return jiterator._create_jit_fn(jitted.code_string, **jitted.kwargs_dict)


def resolve(name: str, variant: str = ""):
    """refimpl's callable for an OpInfo name, or None when refimpl lacks it.

    A property (``T``, ``mH``) becomes a one-argument function; the ``in_place`` variant
    of an op (``normal.in_place``) is the Tensor method ``<name>_`` on a clone, as torch's
    OpInfo calls it."""
    import refimpl
    import refimpl.nn.functional as F

    if variant == "in_place" and hasattr(refimpl.Tensor, name + "_"):
        return lambda self, *a, **k: getattr(self.clone(), name + "_")(*a, **k)
    if isinstance(getattr(refimpl.Tensor, name, None), property):
        return lambda self: getattr(self, name)
    parts = name.split(".")
    if parts[:3] == ["torch", "ops", "aten"] and len(parts) >= 4:  # an aten overload:
        parts = [parts[3]]  # refimpl's function of that name
    if parts[:2] == ["nn", "functional"]:
        return getattr(F, parts[2], None) if len(parts) == 3 else None
    obj = refimpl
    for p in parts:
        obj = getattr(obj, p, None)
        if obj is None:
            break
    if obj is not None and callable(obj):
        return obj
    if len(parts) == 1 and hasattr(refimpl.Tensor, name):
        return lambda self, *a, **k: _method(self, name)(*a, **k)
    if len(parts) == 1:  # an op torch has only as torch.ops.aten.<name>
        try:
            return getattr(refimpl.ops.aten, name).default
        except (NotImplementedError, AttributeError):
            return refimpl.ops.REGISTRY.get(name)
    return None


def _method(self, name: str):
    """``Tensor.<name>`` bound to ``self``. torch's methods are C descriptors that refuse
    any other ``self`` (``Tensor.__radd__(2, t)``); refimpl's Python methods cannot, so the
    refusal is made here with torch's message."""
    import refimpl

    if not isinstance(self, refimpl.Tensor):
        raise TypeError(f"descriptor '{name}' requires a 'torch._C.TensorBase' object but "
                        f"received a '{type(self).__name__}'")
    return getattr(self, name)


def to_refimpl(x, device: str, storages: dict | None = None):
    """A torch value (tensors, dtypes, devices, containers) as its refimpl counterpart;
    a tensor keeps its ``requires_grad``, its strides and storage offset, and tensors
    that share a torch storage share one refimpl storage (an out= aliasing an input)."""
    import torch

    import refimpl as t

    storages = {} if storages is None else storages
    if isinstance(x, torch.Tensor) and ("id", id(x)) in storages:
        return storages[("id", id(x))]  # one tensor passed twice: one refimpl tensor
    if isinstance(x, torch.Tensor) and x.device.type == "meta":  # metadata only
        return t.empty(tuple(x.shape), dtype=getattr(t, str(x.dtype).removeprefix("torch.")),
                       device="meta")
    if isinstance(x, torch.Tensor):
        device = "cpu" if x.device.type == "cpu" else device  # a CPU tensor stays there
        arr = x.detach().cpu().resolve_conj().resolve_neg()
        # the layout (storage size, offset, strides) is read from the tensor itself: a CUDA
        # tensor's host copy holds only its own elements (a lazily conjugated or negated
        # tensor is read through its resolved copy)
        lay = arr if x.is_conj() or x.is_neg() else x.detach()
        # keyed by the torch tensor's own storage: a CUDA tensor's host copy is a temporary
        # whose address a later copy may reuse
        key = (x.device, x.untyped_storage().data_ptr(), x.dtype) if arr.numel() else None
        whole = lay.untyped_storage().nbytes() == lay.numel() * lay.element_size()
        if arr.dim() > 64:  # more dims than numpy holds: refimpl's view of the flat data
            r = _plain(arr.contiguous().reshape(-1), device).as_strided(
                tuple(arr.shape), arr.contiguous().stride(), 0)
        elif key is None or key not in storages and lay.is_contiguous() and whole and \
                not lay.storage_offset():
            r = _plain(arr, device)
            if key is not None:
                storages[key] = r.detach()  # later tensors of this storage view it
        else:
            if key not in storages:
                n = lay.untyped_storage().nbytes() // lay.element_size()
                storages[key] = _plain(lay.as_strided((n,), (1,), 0).cpu(), device)
            r = storages[key].as_strided(tuple(lay.shape), lay.stride(), lay.storage_offset())
        if x.requires_grad:
            r.requires_grad_(True)
            if not x.is_leaf:  # an intermediate (a clone an in-place op writes): one here too
                r = r.clone()
        storages[("id", id(x))] = r
        return r
    if isinstance(x, torch.dtype):
        return getattr(t, str(x).removeprefix("torch."))
    if isinstance(x, torch.device):
        return t.device(str(x))
    if isinstance(x, torch.memory_format):
        return getattr(t, str(x).removeprefix("torch."))
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)):
        return type(x)(to_refimpl(v, device, storages) for v in x)
    if isinstance(x, dict):
        return {k: to_refimpl(v, device, storages) for k, v in x.items()}
    if isinstance(x, torch.nn.Module):
        return _module(x, device)
    if isinstance(x, torch.Generator):
        raise TypeError("a torch Generator has no refimpl counterpart")
    if callable(x) and hasattr(x, "__name__") and getattr(x, "__module__", "").startswith("torch"):
        # a torch function passed as an argument (a distance function): refimpl's own
        found = resolve(("nn.functional." if "functional" in x.__module__ else "")
                        + x.__name__)
        if found is None:
            raise TypeError(f"refimpl has no {x.__module__}.{x.__name__}")
        return found
    return x


def _plain(arr, device: str):
    """A contiguous refimpl copy of the contiguous-or-not CPU torch tensor ``arr``."""
    import torch

    import refimpl as t

    if arr.dtype is torch.bfloat16:
        return t.tensor(arr.float().numpy(), device=device).to(t.bfloat16)
    return t.tensor(arr.numpy(), device=device)


def _module(x, device: str):
    """refimpl.nn's counterpart of a parameterless torch module (a distance function
    passed as an argument), with the same settings."""
    import refimpl.nn as rnn

    cls = getattr(rnn, type(x).__name__, None)
    if cls is None:
        raise TypeError(f"refimpl.nn has no {type(x).__name__}")
    m = cls()
    for k, v in vars(x).items():
        if not k.startswith("_") and isinstance(v, (bool, int, float, str, type(None))):
            setattr(m, k, v)
    return m.to(device)


def _flat_tensors(x) -> list:
    if isinstance(x, (list, tuple)):
        return [v for e in x for v in _flat_tensors(e)]
    return [x] if hasattr(x, "requires_grad") and hasattr(x, "shape") else []


def _grads(mod, fn, args: list, kwargs: dict):
    """Gradients of a fixed weighted sum of the floating outputs with respect to every
    tensor argument that requires grad (None when there is nothing to differentiate)."""
    out = fn(*args, **kwargs)
    leaves = [a for a in _flat_tensors([args, list(kwargs.values())]) if a.requires_grad]
    outs = [o for o in _flat_tensors(out) if o.requires_grad]
    if not leaves or not outs:
        return None
    total = None
    for i, o in enumerate(outs):
        w = np.cos(np.arange(o.numel()) + i).reshape(tuple(o.shape))
        wt = mod.tensor(w, dtype=o.dtype, device=o.device)
        s = (o * wt).sum()
        total = s if total is None else total + s
    got = mod.autograd.grad(total, leaves, allow_unused=True)
    return [mod.zeros_like(a) if g is None else g for a, g in zip(leaves, got)]


def _processed(sample):
    """The sample's ``output_process_fn_grad``: what torch's own tests compare and
    differentiate (for example ``abs`` of eigenvectors and singular vectors, which are
    defined only up to sign or phase and so differ between LAPACK builds)."""
    post = getattr(sample, "output_process_fn_grad", None)
    return post if post is not None else (lambda out: out)


def _then(post, func):
    """``func`` followed by ``post``."""
    return lambda *a, **k: post(func(*a, **k))


def capture(op, sample, name: str, on_call=None) -> tuple:
    """The call of the function named ``name`` that torch's OpInfo callable makes on
    ``sample``: ``(function, args, kwargs)``, or the OpInfo callable with the sample's
    own arguments when no such call is seen.

    OpInfos often wrap the function in a lambda that reorders or completes its arguments
    (``embedding``'s takes the weight first); a torch function mode sees the call the
    wrapper makes, so refimpl's function gets exactly torch's arguments. ``on_call(args,
    kwargs)`` runs just before that call (to convert the arguments before torch's call
    changes them).
    """
    import torch
    from torch.overrides import TorchFunctionMode

    if name.startswith("masked."):
        # torch.masked's functions are Python functions a mode does not see (it would
        # record the torch.sum/amax they call): the OpInfo passes the sample as it is
        return op, [sample.input, *sample.args], dict(sample.kwargs)
    last = name.split(".")[-1]
    seen: list = []

    class Capture(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            called = getattr(func, "__name__", "")
            if isinstance(func, torch._ops.OpOverload):  # aten.<op>.<overload>
                called = called.split(".")[0]
            if not seen and called in (last, f"linalg_{last}"):
                if on_call is not None:  # before the call: an out= it resizes is seen unchanged
                    on_call(list(args), dict(kwargs))
                seen.append((func, list(args), dict(kwargs)))
            return func(*args, **kwargs)

    # torch's Python-level functions (svd_lowrank...) reach a mode only for tensor
    # subclasses: the call is seen by standing in for torch.<name> meanwhile
    plain = getattr(torch, last, None) if len(name.split(".")) == 1 else None
    if plain is not None and not inspect.isfunction(plain):
        plain = None

    def stand_in(*args, **kwargs):
        if not seen:
            seen.append((plain, list(args), dict(kwargs)))
        return plain(*args, **kwargs)

    if plain is not None:
        setattr(torch, last, stand_in)
    try:
        with Capture():
            op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001, S110 - error inputs raise here; the call is still seen
        pass
    finally:
        if plain is not None:
            setattr(torch, last, plain)
    return seen[0] if seen else (op, [sample.input, *sample.args], dict(sample.kwargs))


_RANDOM = object()

def _deterministic(func, args, kwargs):
    """torch's result, or ``_RANDOM`` when two runs under different seeds differ (a
    random op such as dropout: its bits cannot match another generator's)."""
    import torch

    torch.manual_seed(0)
    first = func(*args, **kwargs)
    torch.manual_seed(1)
    second = func(*args, **kwargs)
    return first if _torch_equal(first, second) else _RANDOM


def _torch_equal(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a.detach(), b.detach()) or (a.detach().isnan() == b.detach().isnan())
            .all() and torch.equal(a.detach().nan_to_num(), b.detach().nan_to_num()))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            _torch_equal(x, y) for x, y in zip(a, b))
    return True


def _reseeds(op) -> bool:
    """Whether the OpInfo's callable seeds torch's generator itself (``wrapper_set_seed``):
    its values are then the same on every run, but still bits of torch's generator."""
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def _fresh(x):
    """A deep copy (tensors sharing storage still share it): error inputs of one OpInfo
    share tensors, and torch resizes an out= before it raises, so each call gets its own."""
    import copy

    try:
        return copy.deepcopy(x)
    except Exception:  # noqa: BLE001 - not copyable (a generator, a view of a grad tensor)
        return x


def run_op(op, fn, dtypes, device: str, limit: int, timeout: float) -> dict:
    """Forward, gradient and error-input results of one OpInfo."""
    import torch

    import refimpl as t

    res = {"forward": [0, 0], "grad": [0, 0], "errors": [0, 0], "failures": [], "random": 0}
    supported = op.supported_dtypes(device)

    def guarded(kind: str, work) -> None:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            ok = work()
        except _Timeout:
            ok, why = False, "timeout"
        except Exception as e:  # noqa: BLE001 - a refimpl failure is a result
            ok, why = False, f"{type(e).__name__}: {str(e)[:120]}"
        else:
            ok, why = ok if isinstance(ok, tuple) else (ok, "mismatch")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        res[kind][1] += 1
        res[kind][0] += bool(ok)
        if not ok and len(res["failures"]) < 5:
            res["failures"].append(f"{kind}: {why}")

    def samples_of(dtype, grad: bool) -> list:
        try:
            return list(op.sample_inputs(device, dtype, requires_grad=grad))[:limit]
        except Exception:  # noqa: BLE001 - torch's own sample generator failed
            return []

    for dname in dtypes:
        dtype = getattr(torch, dname)
        if dtype not in supported:
            continue
        for s in samples_of(dtype, False):
            func, args, kwargs = capture(op, s, op.name)
            try:
                expected = _deterministic(func, args, kwargs)
            except Exception:  # noqa: BLE001, S112 - torch refuses this sample: skipped
                continue
            if expected is _RANDOM or (_reseeds(op) and op.name not in _RANDOM_CHECKS):
                res["random"] += 1
                continue


            post = _processed(s)

            def forward(args=args, kwargs=kwargs, expected=expected, post=post,
                        dname=dname):
                rargs, rkwargs = to_refimpl((args, kwargs), device)
                got = fn(*rargs, **rkwargs)
                if op.name in _UNINITIALISED:
                    return same_layout(got, expected)
                if op.name in _RANDOM_CHECKS:
                    return same_layout(got, expected) and _RANDOM_CHECKS[op.name](got, rargs)
                if op.name in _TIES and not kwargs.get("stable"):
                    if same_up_to_ties(op.name, args, kwargs, got, expected):
                        return True
                    return False, (f"mismatch up to ties, {dname} "
                                   f"{describe_args(args, kwargs)}: {explain(got, expected)}")
                got, expected = post(got), post(expected)
                if same(got, expected):
                    return True
                return False, (f"mismatch, {dname} {describe_args(args, kwargs)}: "
                               f"{explain(got, expected)}")
            guarded("forward", forward)
        if dname != "float64" or not op.supports_autograd:
            continue
        for s in samples_of(dtype, True):
            if op.name in _DRAWN_GRADS:  # another generator's draws: other gradients
                res["random"] += 1
                continue
            func, args, kwargs = capture(op, s, op.name)
            post = _processed(s)
            try:
                want = _grads(torch, _then(post, func), args, kwargs)
                if _deterministic(func, args, kwargs) is _RANDOM:
                    continue
            except Exception:  # noqa: BLE001, S112 - torch cannot differentiate this sample
                continue
            if want is None:
                continue

            def gradient(args=args, kwargs=kwargs, want=want, post=post):
                got = _grads(t, _then(post, fn), *to_refimpl((args, kwargs), device))
                return same(got, want)
            guarded("grad", gradient)
    try:
        errors = list(op.error_inputs(device))[:limit]
    except Exception:  # noqa: BLE001 - no error inputs for this op
        errors = []
    for ei in errors:
        frozen: list = []

        def freeze(a, k, frozen=frozen):
            try:
                frozen.append(to_refimpl((a, k), device))
            except Exception as e:  # noqa: BLE001 - reported when the error input runs
                frozen.append(e)

        sample = _fresh(ei.sample_input)
        _, args, kwargs = capture(op, sample, op.name, freeze)
        try:
            positional, named = _fresh(([sample.input, *sample.args], sample.kwargs))
            op(*positional, **named)
        except Exception as e:  # noqa: BLE001 - torch's exception is what refimpl must match
            if not (isinstance(e, ei.error_type) and re.search(ei.error_regex, str(e))):
                continue  # torch raises something else here: the error input is stale
        else:
            continue  # torch itself does not raise: nothing to match

        def error(ei=ei, args=args, kwargs=kwargs, frozen=frozen):
            if frozen and isinstance(frozen[0], Exception):
                raise frozen[0]
            rargs, rkwargs = frozen[0] if frozen else to_refimpl((args, kwargs), device)
            want = f"torch: {ei.error_type.__name__} /{ei.error_regex[:60]}/"
            try:
                fn(*rargs, **rkwargs)
            except Exception as e:  # noqa: BLE001 - the exception is the result
                kind = type(e).__name__.lstrip("_")
                if (isinstance(e, ei.error_type) or kind == ei.error_type.__name__) and \
                        re.search(ei.error_regex, str(e)):
                    return True
                return False, f"raised {kind}: {str(e)[:90]} ({want})"
            return False, f"no error raised ({want}) for {describe_args(args, kwargs)}"
        guarded("errors", error)
    return res


def _ensure_expecttest() -> None:
    """torch's test internals import ``expecttest`` for their TestCase base class only;
    where it is not installed (the GPU machine), a stand-in with unittest's TestCase lets
    ``op_db`` load. The walk uses no expect-test feature."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        import unittest

        sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase,
                                                          ACCEPT=False)


def main(argv=None) -> int:
    """Walk op_db, print per-op results and a JSON summary."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtypes", default="float32,float64,int64,bool")
    p.add_argument("--samples", type=int, default=20, help="samples per op and dtype")
    p.add_argument("--ops", default="",
                   help="comma-separated OpInfo names (shell patterns) to walk")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per sample")
    p.add_argument("--shard", default="",
                   help="K/N: walk only every N-th op starting at the K-th (1-based), so N "
                        "processes can share one walk")
    p.add_argument("--merge", nargs="+", default=[], metavar="JSON",
                   help="combine the summaries of a sharded walk into one (--out)")
    p.add_argument("--out", default="")
    p.add_argument("-v", "--verbose", action="store_true", help="print failure reasons")
    opts = p.parse_args(argv)
    if opts.merge:
        return merge_shards([Path(f) for f in opts.merge], Path(opts.out) if opts.out else None)
    try:
        shard_k, shard_n = _parse_shard(opts.shard)
    except ValueError as exc:
        p.error(str(exc))

    import torch

    _ensure_expecttest()
    from torch.testing._internal.common_methods_invocations import op_db

    import refimpl

    # torch's convolutions on CUDA default to TF32 (cudnn.allow_tf32), a precision mode
    # whose rounding is cuDNN's own; refimpl's convolutions compute in float32, so the walk
    # compares against torch's float32 convolutions
    torch._C._set_cudnn_allow_tf32(False)  # torch's test utilities freeze the flag itself
    refimpl.backends.cudnn.allow_tf32 = False
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")
    dtypes = [d for d in opts.dtypes.split(",") if d]
    wanted = {o for o in opts.ops.split(",") if o}
    started = time.time()
    ops, missing = {}, []
    for index, op in enumerate(op_db):
        if index % shard_n != shard_k - 1:
            continue
        if wanted and not any(fnmatch.fnmatchcase(op.name, w) for w in wanted):
            continue
        if not any(getattr(torch, d) in op.supported_dtypes(opts.device) for d in dtypes):
            continue
        key = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        fn = resolve_jiterator(op) if op.name.startswith("jiterator_") else resolve(
            op.name, op.variant_test_name)
        if fn is None:
            missing.append(key)
            print(f"{key:48s} missing")
            continue
        r = run_op(op, fn, dtypes, opts.device, opts.samples, opts.timeout)
        ops[key] = r
        cols = "  ".join(f"{k} {r[k][0]}/{r[k][1]}" for k in ("forward", "grad", "errors"))
        ok = all(r[k][0] == r[k][1] for k in ("forward", "grad", "errors"))
        print(f"{key:48s} {'pass' if ok else 'FAIL'}  {cols}", flush=True)
        if opts.verbose and not ok:
            for f in r["failures"]:
                print(f"    {f}")
    machine = {"python": platform.python_version(), "platform": platform.platform(),
               "torch": torch.__version__, "refimpl": getattr(refimpl, "__version__", "")}
    summary = summarise(ops, missing, machine=machine, device=opts.device, dtypes=dtypes,
                        samples=opts.samples, seconds=time.time() - started)
    summary["cudnn_allow_tf32"] = False
    if opts.shard:
        summary["shard"] = opts.shard
    out = Path(opts.out) if opts.out else ROOT / "bench" / "results" / opts.device / \
        "opdb_report.json"
    if opts.out or not (wanted or opts.shard):  # a partial walk is kept only where asked
        _write_summary(summary, out)
    else:
        _print_brief(summary)
    return 0


def _parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N); ``""`` is the whole walk, (1, 1)."""
    if not text:
        return 1, 1
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: expected K/N with 1 <= K <= N")
    return k, n


def summarise(ops: dict, missing: list, *, machine: dict, device: str, dtypes: list,
              samples: int, seconds: float) -> dict:
    """The JSON summary of a walk: totals, agreement fractions, per-op results."""
    totals = {k: [sum(r[k][0] for r in ops.values()), sum(r[k][1] for r in ops.values())]
              for k in ("forward", "grad", "errors")}
    applicable = len(ops) + len(missing)
    return {
        "machine": machine, "device": device, "dtypes": dtypes, "samples_per_dtype": samples,
        "seconds": round(seconds, 1),
        "applicable_ops": applicable, "present_ops": len(ops),
        "present_fraction": round(len(ops) / applicable, 4) if applicable else None,
        "ops_all_passing": sum(all(r[k][0] == r[k][1] for k in totals) for r in ops.values()),
        "random_samples_skipped": sum(r["random"] for r in ops.values()),
        "totals": totals,
        "agreement": {k: round(v[0] / v[1], 4) if v[1] else None for k, v in totals.items()},
        "missing": sorted(missing),
        "ops": ops,
    }


def merge_shards(paths: list[Path], out: Path | None) -> int:
    """Combine the summaries of ``--shard`` walks into the summary of the whole walk."""
    parts = []
    for path in paths:
        try:
            parts.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"opdb_report: cannot read shard summary {path}: {exc}", file=sys.stderr)
            return 2
    ops, missing = {}, []
    for part in parts:
        ops.update(part["ops"])
        missing.extend(part["missing"])
    first = parts[0]
    summary = summarise(ops, missing, machine=first["machine"], device=first["device"],
                        dtypes=first["dtypes"], samples=first["samples_per_dtype"],
                        seconds=max(part["seconds"] for part in parts))
    summary["shards"] = len(parts)
    summary["cudnn_allow_tf32"] = first.get("cudnn_allow_tf32")
    _write_summary(summary, out or ROOT / "bench" / "results" / first["device"] /
                   "opdb_report.json")
    return 0


def _write_summary(summary: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    _print_brief(summary)


def _print_brief(summary: dict) -> None:
    brief = {k: v for k, v in summary.items() if k not in ("ops", "missing")}
    print(json.dumps(brief, indent=1, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
