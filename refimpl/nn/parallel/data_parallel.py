"""``nn.DataParallel``: one module run on several GPUs of this process (torch's semantics).

A forward scatters the tensor inputs along ``dim`` into one chunk per device, replicates
the module onto those devices (each replica's parameters are copies made by ops the
autograd graph records, so their gradients flow back to the original parameters), runs
the replicas on one thread per device, each with the caller's grad mode and autocast
state and the device current, and gathers the outputs onto ``output_device``. With one
device the module runs directly on the inputs moved there; without CUDA it is a plain
call. Thread-local state that torch does not carry into the replica threads (saved-tensor
hooks, for one) is not carried here either.
"""

from __future__ import annotations

import threading
import warnings
from itertools import chain
from typing import Any

from refimpl._tensor import Tensor
from refimpl.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_index(d) -> int:
    from refimpl._device import as_device

    if isinstance(d, int):
        return d
    dev = as_device(d)
    if dev.index is None:
        from refimpl import cuda

        return cuda.current_device()
    return dev.index


def _check_balance(device_ids: list[int]) -> None:
    """torch's warning when one GPU has under 75% of another's memory or cores."""
    from refimpl import cuda

    props = [cuda.get_device_properties(i) for i in device_ids]
    for values in ([p.total_memory for p in props], [p.multi_processor_count for p in props]):
        lo = min(range(len(values)), key=values.__getitem__)
        hi = max(range(len(values)), key=values.__getitem__)
        if values[lo] / values[hi] < 0.75:
            warnings.warn(
                f"There is an imbalance between your GPUs. You may want to exclude GPU "
                f"{device_ids[lo]} which has less than 75% of the memory or cores of GPU "
                f"{device_ids[hi]}. You can do so by setting the device_ids argument to "
                "DataParallel, or by setting the CUDA_VISIBLE_DEVICES environment variable.",
                stacklevel=3)
            return


def _scatter(obj, devices: list[int], dim: int) -> list:
    """``obj`` split for each device: tensors chunked along ``dim`` (fewer chunks than
    devices when the dim is short), containers recursed, other objects shared."""
    if isinstance(obj, Tensor):
        chunks = obj.chunk(len(devices), dim)
        return [c.to(f"cuda:{d}") for c, d in zip(chunks, devices)]
    if isinstance(obj, tuple) and obj and hasattr(obj, "_fields"):
        return [type(obj)(*parts) for parts in zip(*(_scatter(o, devices, dim) for o in obj))]
    if isinstance(obj, (tuple, list)) and obj:
        return [type(obj)(parts) for parts in zip(*(_scatter(o, devices, dim) for o in obj))]
    if isinstance(obj, dict) and obj:
        keys = list(obj)
        return [type(obj)(zip(keys, parts))
                for parts in zip(*(_scatter(obj[k], devices, dim) for k in keys))]
    return [obj for _ in devices]


def scatter_kwargs(inputs: tuple, kwargs: dict, devices: list[int], dim: int = 0):
    """Scattered ``(inputs, kwargs)`` per device, padded so both have one entry each."""
    scattered = _scatter(inputs, devices, dim) if inputs else []
    kw = _scatter(kwargs, devices, dim) if kwargs else []
    if len(scattered) < len(kw):
        scattered.extend(() for _ in range(len(kw) - len(scattered)))
    elif len(kw) < len(scattered):
        kw.extend({} for _ in range(len(scattered) - len(kw)))
    return tuple(scattered), tuple(kw)


def replicate(module: Module, devices: list[int]) -> list[Module]:
    """One shallow copy of ``module`` (and its submodules) per device, whose parameters and
    buffers are copies on that device recorded by autograd (the first device's are the
    module's own tensors when they already live there)."""
    modules = list(module.modules())
    params = list(module.parameters())
    buffers = list(module.buffers())
    copies = []
    for d in devices:
        target = f"cuda:{d}"
        p_copy = {id(p): p.to(target) for p in params}
        b_copy = {id(b): b.to(target).detach() if b.device.index != d else b for b in buffers}
        made: dict[int, Module] = {}
        for m in modules:
            replica = m.__new__(type(m))
            replica.__dict__ = m.__dict__.copy()
            replica._parameters = {k: None if p is None else p_copy[id(p)]
                                   for k, p in m._parameters.items()}
            replica._buffers = {k: None if b is None else b_copy.get(id(b), b)
                                for k, b in m._buffers.items()}
            replica._modules = dict(m._modules)
            replica._is_replica = True
            made[id(m)] = replica
        for replica in made.values():
            replica._modules = {k: None if c is None else made[id(c)]
                                for k, c in replica._modules.items()}
        copies.append(made[id(module)])
    return copies


def parallel_apply(modules: list[Module], inputs: tuple, kwargs: tuple,
                   devices: list[int]) -> list:
    """Run each replica on its inputs on its device's thread (the first in this thread when
    there is only one); an exception in a replica is raised here."""
    from refimpl import autocast, cuda, is_autocast_enabled, is_grad_enabled, set_grad_enabled

    grad_enabled = is_grad_enabled()
    autocast_enabled = is_autocast_enabled("cuda")
    results: list[Any] = [None] * len(modules)
    errors: list[BaseException | None] = [None] * len(modules)

    def work(i: int) -> None:
        try:
            with set_grad_enabled(grad_enabled), cuda.device(devices[i]), \
                    autocast("cuda", enabled=autocast_enabled):
                results[i] = modules[i](*inputs[i], **kwargs[i])
        except BaseException as e:  # noqa: BLE001 (re-raised by the caller)
            errors[i] = e

    if len(modules) == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(modules))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def gather(outputs: list, target_device: int | str, dim: int = 0):
    """The replicas' outputs joined on ``target_device``: tensors concatenated along
    ``dim`` (0-dim ones stacked, with torch's warning), containers recursed."""
    from refimpl.ops.shape import cat

    first = outputs[0]
    if isinstance(first, Tensor):
        target = "cpu" if target_device == -1 else f"cuda:{_device_index(target_device)}"
        if all(o.dim() == 0 for o in outputs):
            warnings.warn("Was asked to gather along dimension 0, but all input tensors were "
                          "scalars; will instead unsqueeze and return a vector.", stacklevel=3)
            outputs = [o.unsqueeze(0) for o in outputs]
        return cat([o.to(target) for o in outputs], dim)
    if first is None:
        return None
    if isinstance(first, dict):
        if not all(len(first) == len(o) for o in outputs):
            raise ValueError("All dicts must have the same number of keys")
        return type(first)((k, gather([o[k] for o in outputs], target_device, dim))
                           for k in first)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(gather(list(parts), target_device, dim) for parts in zip(*outputs)))
    return type(first)(gather(list(parts), target_device, dim) for parts in zip(*outputs))


class DataParallel(Module):
    """Data parallelism over the GPUs ``device_ids`` (all visible ones by default)."""

    def __init__(self, module: Module, device_ids=None, output_device=None,
                 dim: int = 0) -> None:
        super().__init__()
        from refimpl import cuda

        self.module = module
        self.dim = dim
        if not cuda.is_available():
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = list(range(cuda.device_count()))
        if not device_ids:
            raise RuntimeError("no available devices were found")
        if output_device is None:
            output_device = device_ids[0]
        self.device_ids = [_device_index(d) for d in device_ids]
        self.output_device = _device_index(output_device)
        from refimpl._device import device

        self.src_device_obj = device("cuda", self.device_ids[0])
        _check_balance(self.device_ids)
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        return _run(self.module, inputs, kwargs, self.device_ids, self.output_device, self.dim)


def _run(module: Module, inputs: tuple, kwargs: dict, device_ids: list[int],
         output_device: int, dim: int):
    """One data-parallel forward: scatter, replicate, apply, gather (one device: a call)."""
    from refimpl._device import device

    src = device("cuda", device_ids[0])
    for tensor in chain(module.parameters(), module.buffers()):
        if tensor.device != src:
            raise RuntimeError(
                f"module must have its parameters and buffers on device {src} "
                f"(device_ids[0]) but found one of them on device: {tensor.device}")
    inputs, module_kwargs = scatter_kwargs(inputs, kwargs, device_ids, dim)
    if not inputs and not module_kwargs:
        inputs, module_kwargs = ((),), ({},)
    if len(device_ids) == 1:
        return module(*inputs[0], **module_kwargs[0])
    devices = device_ids[:len(inputs)]
    replicas = replicate(module, devices)
    outputs = parallel_apply(replicas, inputs, module_kwargs, devices)
    return gather(outputs, output_device, dim)


def data_parallel(module: Module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """The functional form of :class:`DataParallel` (one forward; the module stays where
    it is)."""
    from refimpl import cuda

    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    if not cuda.is_available():
        return module(*inputs, **(module_kwargs or {}))
    ids = [_device_index(d) for d in (device_ids or range(cuda.device_count()))]
    out = _device_index(ids[0] if output_device is None else output_device)
    return _run(module, inputs, module_kwargs or {}, ids, out, dim)
