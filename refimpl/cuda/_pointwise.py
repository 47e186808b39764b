"""Elementwise CUDA kernels generated from one scalar expression per op.

An op states its computation once, as a CUDA C expression over its operands ``a``,
``b``, ``c``, ``d`` (in the order given) and named scalar parameters, for example
``"a + alpha * b"`` or ``"exp(a)"``. :func:`pointwise` (or a reusable
:class:`Elementwise`) turns it into NVRTC kernels for the dtypes at hand and runs
them on the current stream of the output's device::

    out = pointwise("a + alpha * b", [x, y], D.float32, params={"alpha": (2, D.float32)})

Semantics (those of torch's TensorIterator):

* operands broadcast to the output shape; each is converted to its *compute dtype*
  (``compute=``, default the output dtype) before the expression runs; float16 and
  bfloat16 compute in float (an operand of another dtype joining a float16 op is
  rounded to float16 first) and round to nearest even on store; integers wrap;
* Python scalars and 0-dim CPU tensors are kernel arguments, converted on the host;
* the result of the expression is cast to the output dtype (``Cvt``, see the prelude).

Layouts: when every tensor operand has the output's shape and contiguous strides,
the kernel walks flat memory, with 128-bit vector loads and stores when every
pointer is aligned: below 2**31 elements each thread handles one vector at a 32-bit
offset, with no loop (the cheapest kernel for small tensors), beyond that a 64-bit
grid-stride loop; otherwise a strided kernel computes each operand's offset from
the linear index, after dimensions of size 1 are dropped and neighbours that are
contiguous in every operand are merged (32-bit index math with multiply-shift
division when offsets fit, 64-bit otherwise). One source holds all layouts of one
(expression, dtypes) combination, so each combination compiles once per machine
(``_nvrtc`` keeps the image on disk) and loads once per process.

Host cost: a launch plan per (operand dtypes and kinds, compute dtypes, output dtype)
holds the function handles and a prebuilt parameter buffer per thread, so a call
packs a few values into it and launches (see ``bench/bench_gpu_pointwise.py``).
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, contiguous_strides
from refimpl.cuda import _driver, _nvrtc, streams
from refimpl.cuda._kernels import _coalesce as merge_dims
from refimpl.cuda._pointwise_prelude import PRELUDE

MAX_DIMS = 8
MAX_OPERANDS = 4
_BLOCK = 256
# contiguous operands of fewer elements than this take the 32-bit kernels: one
# thread per (vector of) element(s), blocks of _BLOCK32 threads, as torch launches
_SMALL_INDEX = 1 << 31
_BLOCK32 = 128
_UNROLL = 4  # elements per thread in the strided kernels
_LAYOUTS_PER_PLAN = 256  # strided layouts remembered per plan (the layout cache's bound)
_NAMES = "abcd"

# dtype name -> (storage C type, compute C type, compute numpy dtype, compute size/align)
_TYPES: dict[str, tuple[str, str, Any, int]] = {
    "bool": ("bool", "bool", np.bool_, 1),
    "uint8": ("u8", "u8", np.uint8, 1),
    "int8": ("i8", "i8", np.int8, 1),
    "int16": ("short", "short", np.int16, 2),
    "int32": ("int", "int", np.int32, 4),
    "int64": ("i64", "i64", np.int64, 8),
    "float16": ("h16", "float", np.float32, 4),
    "bfloat16": ("bf16", "float", np.float32, 4),
    "float32": ("float", "float", np.float32, 4),
    "float64": ("double", "double", np.float64, 8),
    "complex64": ("c64", "c64", np.complex64, 8),
    "complex128": ("c128", "c128", np.complex128, 16),
}
_REDUCED = ("float16", "bfloat16")


def supports(dtype: D.dtype) -> bool:
    """Whether generated kernels can read and write ``dtype``."""
    return dtype.name in _TYPES


# -- host-side values -------------------------------------------------------------------

_scalar_cache: dict = {}


def _scalar_bytes(x, as_dtype: D.dtype) -> bytes:
    """A scalar operand or parameter as the bytes of its compute type.

    Python scalars convert straight to the compute type (integers wrap, as torch's
    casts of wrapped numbers); a 0-dim CPU tensor of another dtype joining a
    float16/bfloat16 op is rounded to that dtype first, like a tensor operand.
    """
    if isinstance(x, Tensor):
        arr = x._np
        if x.dtype is not as_dtype and as_dtype.name in _REDUCED:
            arr = arr.astype(as_dtype.np)
        return _convert(arr, as_dtype)
    key = (type(x), x, as_dtype.name)
    cached = _scalar_cache.get(key)
    if cached is None:
        if type(x) is int and not -(2**63) <= x < 2**64:
            raise OverflowError("int too big to convert")
        cached = _convert(np.asarray(x), as_dtype)
        if len(_scalar_cache) > 4096:
            _scalar_cache.clear()
        _scalar_cache[key] = cached
    return cached


def _convert(arr: np.ndarray, as_dtype: D.dtype) -> bytes:
    cdt = np.dtype(_TYPES[as_dtype.name][2])
    with np.errstate(all="ignore"):
        if arr.dtype.kind == "c" and cdt.kind != "c":
            arr = arr.real
        if arr.dtype.kind == "f" and cdt == np.uint8:
            arr = arr.astype(np.int64)  # a float reaches uint8 through int64, as in torch
        return np.asarray(arr).astype(cdt).tobytes()


def _magic(d: int) -> tuple[int, int]:
    """(multiplier, shift) with ``n // d == (umulhi(n, m) + n) >> s`` for ``n < 2**31``."""
    s = 0
    while (1 << s) < d:
        s += 1
    return ((1 << 32) * ((1 << s) - d)) // d + 1, s


def coalesce(shape: Sequence[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours contiguous in every operand.

    Returns (sizes, strides per operand), innermost dimension first.
    """
    sizes, per_operand = merge_dims(list(shape), *strides)
    return sizes[::-1], [st[::-1] for st in per_operand]


def expanded_strides(t: Tensor, shape: tuple) -> list[int]:
    """``t``'s strides broadcast to ``shape`` (zero on broadcast dimensions)."""
    lead = len(shape) - len(t._shape)
    out = [0] * lead
    for size, st, target in zip(t._shape, t._stride, shape[lead:]):
        out.append(0 if size == 1 and target != 1 else st)
    return out


def broadcast_shape(shapes: Sequence[tuple]) -> tuple:
    """The broadcast of several shapes (torch's error on a mismatch)."""
    out: tuple = ()
    for s in shapes:
        if s == out:
            continue
        n = max(len(out), len(s))
        a, b = (1,) * (n - len(out)) + out, (1,) * (n - len(s)) + s
        dims = []
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y and x != 1 and y != 1:
                raise RuntimeError(
                    f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                    f"non-singleton dimension {i}")
            dims.append(y if x == 1 else x)
        out = tuple(dims)
    return out


# -- source generation ---------------------------------------------------------------------


class _Field:
    __slots__ = ("align", "code", "decl", "name")

    def __init__(self, name: str, decl: str, code: str, align: int) -> None:
        self.name, self.decl, self.code, self.align = name, decl, code, align


def _scalar_field(name: str, dtype: D.dtype) -> _Field:
    ctype, size = _TYPES[dtype.name][1], _TYPES[dtype.name][3]
    return _Field(name, f"{ctype} {name};", f"{size}s", size)


class _Plan:
    """The kernels and argument layout of one (expression, operand signature)."""

    def __init__(self, kernel: Elementwise, sig: tuple, compute: tuple, out: D.dtype,
                 params: tuple) -> None:
        self.kernel = kernel
        self.sig, self.compute = sig, compute
        tensor_ops = [i for i, s in enumerate(sig) if s is not None]
        self.tensor_ops = tensor_ops
        self.nptr = len(tensor_ops) + 1  # the output is pointer 0
        fields = [_Field("o_", f"{_TYPES[out.name][0]}* o_;", "Q", 8),
                  _Field("n_", "i64 n_;", "q", 8)]
        for i in tensor_ops:
            fields.append(_Field(f"p{i}_", f"const {_TYPES[sig[i].name][0]}* p{i}_;", "Q", 8))
        for i, s in enumerate(sig):
            if s is None:
                fields.append(_scalar_field(f"s{i}_", compute[i]))
        for pname, pdt in zip(kernel.params, params):
            fields.append(_scalar_field(pname, pdt))
        canonical = [f.name for f in fields]
        fields.sort(key=lambda f: -f.align)  # no interior padding
        order = [f.name for f in fields]
        # the call packs values in canonical order; perm maps them to the struct order
        self.perm = None if order == canonical else [canonical.index(n) for n in order]
        size = sum(struct.calcsize(f.code) for f in fields)
        align = max(f.align for f in fields)
        self.head_size = -(-size // align) * align
        self.head = struct.Struct("<" + "".join(f.code for f in fields))
        itemsizes = [out.itemsize] + [sig[i].itemsize for i in tensor_ops]
        self.vec = 16 // max(itemsizes)
        self.vec_bytes = [self.vec * s for s in itemsizes]
        self.meta32 = struct.Struct(f"<i{3 * MAX_DIMS}I{self.nptr * MAX_DIMS}i")
        self.meta64 = struct.Struct(f"<q{(1 + self.nptr) * MAX_DIMS}q")
        self.source = self._source(fields, sig, compute, out, params)
        self.functions: dict[int, tuple[int, ...]] = {}
        self.buffers: dict[int, tuple] = {}
        # strided launches by layout: (shape, out strides, (shape, strides) per operand)
        # -> (packed meta bytes, kernel slot, grid); shapes and strides decide all three
        self.strided: dict[tuple, tuple[bytes, int, int]] = {}

    def _source(self, fields, sig, compute, out, params) -> str:
        k = self.kernel
        outs = _TYPES[out.name][0]
        head = "struct Head {\n" + "".join(f"  {f.decl}\n" for f in fields) + "};\n"
        meta = (f"struct Meta32 {{ int ndim; unsigned sizes[{MAX_DIMS}]; unsigned magic[{MAX_DIMS}];"
                f" unsigned shift[{MAX_DIMS}]; int strides[{self.nptr}][{MAX_DIMS}]; }};\n"
                f"struct Meta64 {{ i64 ndim; i64 sizes[{MAX_DIMS}];"
                f" i64 strides[{self.nptr}][{MAX_DIMS}]; }};\n")
        args = ", ".join(f"{_TYPES[compute[i].name][1]} {_NAMES[i]}" for i in range(len(sig)))
        pdecl = "".join(f"  const {_TYPES[pdt.name][1]} {p} = h.{p};\n"
                        for p, pdt in zip(k.params, params))
        fn = (f"DI auto op_fn(const Head& h{', ' if args else ''}{args}) {{\n{pdecl}"
              f"  return ({k.expr});\n}}\n")

        def load(i: int, raw: str) -> str:
            if sig[i] is None:
                return f"h.s{i}_"
            src, as_ = sig[i].name, compute[i].name
            ct = _TYPES[as_][1]
            if src != as_ and as_ in _REDUCED:
                return f"Cvt<{ct}>::f(Cvt<{_TYPES[as_][0]}>::f({raw}))"
            return f"Cvt<{ct}>::f({raw})"

        ptr_index = {i: j + 1 for j, i in enumerate(self.tensor_ops)}

        def call(raws: dict[int, str]) -> str:
            loads = ", ".join(load(i, raws.get(i, "")) for i in range(len(sig)))
            return f"Cvt<{outs}>::f(op_fn(h{', ' if loads else ''}{loads}))"

        packs = "".join(
            f"    Pack<{_TYPES[sig[i].name][0]}, V> x{i} = "
            f"*(const Pack<{_TYPES[sig[i].name][0]}, V>*)(h.p{i}_ + base);\n"
            for i in self.tensor_ops)
        contig = (
            "template<int V> DI void contig(const Head& h) {\n"
            "  i64 nv = h.n_ / V, step = (i64)gridDim.x * blockDim.x;\n"
            "  i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  for (i64 v = first; v < nv; v += step) {\n"
            "    i64 base = v * V;\n" + packs +
            f"    Pack<{outs}, V> o;\n"
            "    #pragma unroll\n"
            "    for (int k = 0; k < V; ++k) o.v[k] = "
            + call({i: f"x{i}.v[k]" for i in self.tensor_ops}) + ";\n"
            f"    *(Pack<{outs}, V>*)(h.o_ + base) = o;\n"
            "  }\n"
            "  i64 t = nv * V + first;\n"
            "  if (t < h.n_) h.o_[t] = " + call({i: f"h.p{i}_[t]" for i in self.tensor_ops})
            + ";\n}\n"
            f"extern \"C\" __global__ void k_vec(Head h) {{ contig<{self.vec}>(h); }}\n"
            "extern \"C\" __global__ void k_one(Head h) { contig<1>(h); }\n")
        small = (
            "template<int V> DI void contig32(const Head& h) {\n"
            "  const unsigned n = (unsigned)h.n_;\n"
            "  const unsigned base = (blockIdx.x * blockDim.x + threadIdx.x) * V;\n"
            "  if (base + V <= n) {\n" + packs +
            f"    Pack<{outs}, V> o;\n"
            "    #pragma unroll\n"
            "    for (int k = 0; k < V; ++k) o.v[k] = "
            + call({i: f"x{i}.v[k]" for i in self.tensor_ops}) + ";\n"
            f"    *(Pack<{outs}, V>*)(h.o_ + base) = o;\n"
            "    return;\n"
            "  }\n"
            "  #pragma unroll\n"
            "  for (int k = 0; k < V; ++k) {\n"
            "    const unsigned t = base + k;\n"
            "    if (t < n) h.o_[t] = " + call({i: f"h.p{i}_[t]" for i in self.tensor_ops})
            + ";\n  }\n}\n"
            f"extern \"C\" __global__ void __launch_bounds__({_BLOCK32}) k_vec32(Head h) "
            f"{{ contig32<{self.vec}>(h); }}\n"
            f"extern \"C\" __global__ void __launch_bounds__({_BLOCK32}) k_one32(Head h) "
            "{ contig32<1>(h); }\n")
        strided32 = (
            "extern \"C\" __global__ void k_s32(Head h, Meta32 m) {\n"
            f"  unsigned i0 = blockIdx.x * (blockDim.x * {_UNROLL}) + threadIdx.x;\n"
            "  #pragma unroll\n"
            f"  for (int u = 0; u < {_UNROLL}; ++u) {{\n"
            "    unsigned i = i0 + u * blockDim.x;\n"
            "    if (i >= (unsigned)h.n_) return;\n"
            f"    int o[{self.nptr}];\n"
            "    #pragma unroll\n"
            f"    for (int j = 0; j < {self.nptr}; ++j) o[j] = 0;\n"
            "    unsigned r = i;\n"
            "    #pragma unroll\n"
            f"    for (int d = 0; d < {MAX_DIMS}; ++d) {{\n"
            "      if (d == m.ndim) break;\n"
            "      unsigned q = (__umulhi(r, m.magic[d]) + r) >> m.shift[d];\n"
            "      int c = (int)(r - q * m.sizes[d]); r = q;\n"
            "      #pragma unroll\n"
            f"      for (int j = 0; j < {self.nptr}; ++j) o[j] += c * m.strides[j][d];\n"
            "    }\n"
            "    h.o_[o[0]] = "
            + call({i: f"h.p{i}_[o[{ptr_index[i]}]]" for i in self.tensor_ops}) + ";\n"
            "  }\n}\n")
        strided64 = (
            "extern \"C\" __global__ void k_s64(Head h, Meta64 m) {\n"
            "  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < h.n_;"
            " i += (i64)gridDim.x * blockDim.x) {\n"
            f"    i64 o[{self.nptr}];\n"
            f"    for (int j = 0; j < {self.nptr}; ++j) o[j] = 0;\n"
            "    i64 r = i;\n"
            "    for (int d = 0; d < m.ndim; ++d) {\n"
            "      i64 q = r / m.sizes[d], c = r - q * m.sizes[d]; r = q;\n"
            f"      for (int j = 0; j < {self.nptr}; ++j) o[j] += c * m.strides[j][d];\n"
            "    }\n"
            "    h.o_[o[0]] = "
            + call({i: f"h.p{i}_[o[{ptr_index[i]}]]" for i in self.tensor_ops}) + ";\n"
            "  }\n}\n")
        pack = ("template<class T, int V> struct __align__(sizeof(T) * V) Pack "
                "{ T v[V]; };\n")
        return (f"// {k.name}\n" + PRELUDE + k.prelude + pack + head + meta + fn + contig + small
                + strided32 + strided64)

    def function_handles(self, device: int) -> tuple[int, ...]:
        fns = self.functions.get(device)
        if fns is None:
            fns = load_functions(self.source, ("k_vec", "k_one", "k_s32", "k_s64", "k_vec32",
                                               "k_one32"), device)
            self.functions[device] = fns
        return fns

    def buffers_for_thread(self) -> tuple:
        """(head buffer, meta buffer, params of contiguous kernels, params of strided)."""
        tid = threading.get_ident()
        bufs = self.buffers.get(tid)
        if bufs is None:
            head = ctypes.create_string_buffer(self.head_size)
            meta = ctypes.create_string_buffer(max(self.meta32.size, self.meta64.size))
            one = (ctypes.c_void_p * 1)(ctypes.addressof(head))
            two = (ctypes.c_void_p * 2)(ctypes.addressof(head), ctypes.addressof(meta))
            bufs = (head, meta, ctypes.addressof(one), ctypes.addressof(two), one, two)
            self.buffers[tid] = bufs
        return bufs


def load_functions(source: str, names: Sequence[str], device: int) -> tuple[int, ...]:
    """Handles of the kernels ``names`` of ``source`` on ``device``.

    A kernel first used inside a graph capture is loaded then: loading (the module and,
    with the driver's lazy loading, each function) runs in the relaxed capture mode,
    so that it neither is captured nor invalidates a capture in the global mode.
    """
    old = _driver.exchange_capture_mode("relaxed")
    try:
        return tuple(_nvrtc.get_function(source, name, device) for name in names)
    finally:
        _driver.exchange_capture_mode(old)


def compile_check(expr: str, sig: Sequence[D.dtype | None], compute: Sequence[D.dtype],
                  out: D.dtype, params: Sequence[tuple[str, D.dtype]] = (),
                  arch: str = "sm_90") -> bytes:
    """Compile the kernels of one combination with NVRTC only (no device needed)."""
    k = Elementwise(expr, name="check", params=tuple(p for p, _ in params))
    plan = _Plan(k, tuple(sig), tuple(compute), out, tuple(d for _, d in params))
    return _driver.nvrtc_compile(plan.source, "check.cu",
                                 [*_nvrtc._OPTIONS, f"--gpu-architecture={arch}"], cubin=True)


# -- the entry points ------------------------------------------------------------------------


class Elementwise:
    """A reusable elementwise kernel: one expression, any dtypes and layouts.

    ``expr`` names the operands ``a``, ``b``, ``c``, ``d`` and the parameters in
    ``params`` (scalar kernel arguments given per call); ``prelude`` is device code
    placed before it (functions the expression calls). Plans (compiled kernels,
    argument layouts) are cached on the object, so keep one per op.
    """

    def __init__(self, expr: str, name: str = "pointwise", params: tuple = (),
                 prelude: str = "") -> None:
        self.expr, self.name, self.params = expr, name, tuple(params)
        self.prelude = prelude  # device code the expression calls (jiterator functions)
        self.plans: dict = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Elementwise {self.name}: {self.expr}>"

    def __call__(self, inputs: Sequence, out_dtype: D.dtype, *,
                 compute: D.dtype | Sequence[D.dtype] | None = None,
                 params: Sequence = (), shape: tuple | None = None,
                 out: Tensor | None = None) -> Tensor:
        """Run the expression over ``inputs``; returns ``out`` or a fresh contiguous tensor.

        ``params`` are ``(value, dtype)`` pairs in the order of the constructor's
        ``params``; each value converts to its dtype's compute type. ``out`` (a CUDA
        tensor of the broadcast shape, any dtype) is written in place; it must not
        partially overlap an input.
        """
        if compute is None:
            compute = out_dtype
        return self.run(inputs, out_dtype, compute, tuple(params), shape, out)

    def run(self, inputs: Sequence, out_dtype: D.dtype, compute, params: tuple,
            shape: tuple | None, out: Tensor | None) -> Tensor:
        """``__call__`` with positional arguments (the per-op hot path)."""
        # the plan key, built flat while the operands are classified:
        # (output dtype, compute dtype(s), operand count, operand dtypes or None, param dtypes)
        n_in = len(inputs)
        key = [out_dtype if out is None else out.dtype,
               compute if type(compute) is D.dtype else tuple(compute), n_in]
        tensors = []
        dev = None
        for x in inputs:
            if isinstance(x, Tensor):
                d = x._storage.device
                if d.type == "cuda":
                    key.append(x.dtype)
                    tensors.append(x)
                    if dev is None:
                        dev = d
                    continue
                if x._shape:
                    raise RuntimeError(
                        "Expected all tensors to be on the same device, but found at least "
                        f"two devices, cuda and {d}!")
            key.append(None)
        if params:
            key.extend([p[1] for p in params])
        if out is not None:
            dev = out._storage.device
            out_dtype = out.dtype  # the expression's result is cast to out's own dtype
        if dev is None:
            raise RuntimeError(f"{self.name}: no CUDA tensor among the operands")
        if shape is None:
            shape = broadcast_shape([t._shape for t in tensors])
        key = tuple(key)
        plan = self.plans.get(key)
        if plan is None:
            plan = self._new_plan(key)
        if out is None:
            out = Tensor._empty(shape, out_dtype, dev)
            ostride = out._stride
            contiguous = True
        else:
            ostride = out._stride
            contiguous = ostride == contiguous_strides(shape)
        n = math.prod(shape)
        if n == 0:
            return out
        index = dev.index
        if contiguous:
            for t in tensors:
                if t._shape != shape or t._stride != ostride:
                    contiguous = False
                    break
        ptrs = [out._storage._data.ptr + out._offset * out.dtype.itemsize]
        for t in tensors:
            ptrs.append(t._storage._data.ptr + t._offset * t.dtype.itemsize)
        values = [ptrs[0], n, *ptrs[1:]]
        if len(tensors) != n_in:
            sig, compute = plan.sig, plan.compute
            for i, x in enumerate(inputs):
                if sig[i] is None:
                    values.append(_scalar_bytes(x, compute[i]))
        for pval, pdt in params:
            values.append(_scalar_bytes(pval, pdt))
        bufs = plan.buffers.get(threading.get_ident())
        if bufs is None:
            bufs = plan.buffers_for_thread()
        perm = plan.perm
        plan.head.pack_into(bufs[0], 0, *(values if perm is None else [values[j] for j in perm]))
        fns = plan.functions.get(index)
        if fns is None:
            fns = plan.function_handles(index)
        stream = streams.current_stream_handle(index)
        if contiguous:
            vec = plan.vec
            if vec > 1 and n >= vec:
                for p, b in zip(ptrs, plan.vec_bytes):
                    if p % b:
                        vec = 1
                        break
            else:
                vec = 1
            if n < _SMALL_INDEX:  # one thread per vector, 32-bit offsets, no loop
                _driver.launch_1d(index, fns[4] if vec > 1 else fns[5],
                                  -(-n // (vec * _BLOCK32)), _BLOCK32, bufs[2], stream)
            elif vec > 1:
                _driver.launch_1d(index, fns[0], min(-(-(n // vec) // _BLOCK), 1 << 30), _BLOCK,
                                  bufs[2], stream)
            else:
                _driver.launch_1d(index, fns[1], min(-(-n // _BLOCK), 1 << 30), _BLOCK,
                                  bufs[2], stream)
            return out
        self._launch_strided(plan, fns, index, stream, out, tensors, shape, n, bufs[1],
                             bufs[3])
        return out

    def _new_plan(self, key: tuple) -> _Plan:
        out_dtype, compute, n_in = key[:3]
        sig, pdts = key[3:3 + n_in], key[3 + n_in:]
        compute = (compute,) * n_in if type(compute) is D.dtype else compute
        with self._lock:
            plan = self.plans.get(key)
            if plan is None:
                for dt in (*compute, out_dtype, *pdts, *(s for s in sig if s)):
                    if dt.name not in _TYPES:
                        raise NotImplementedError(
                            f"refimpl has no CUDA kernel for '{self.name}' on {dt}")
                plan = _Plan(self, sig, compute, out_dtype, pdts)
                self.plans[key] = plan
        return plan

    def _launch_strided(self, plan: _Plan, fns, index: int, stream: int, out: Tensor,
                        tensors: list, shape: tuple, n: int, meta, params: int) -> None:
        key = (shape, out._stride, *[(t._shape, t._stride) for t in tensors])
        layout = plan.strided.get(key)
        if layout is None:
            layout = self._strided_layout(plan, out, tensors, shape, n)
            if len(plan.strided) < _LAYOUTS_PER_PLAN:
                plan.strided[key] = layout
        data, slot, grid = layout
        ctypes.memmove(meta, data, len(data))
        _driver.launch_1d(index, fns[slot], grid, _BLOCK, params, stream)

    def _strided_layout(self, plan: _Plan, out: Tensor, tensors: list, shape: tuple,
                        n: int) -> tuple[bytes, int, int]:
        """(packed Meta32 or Meta64, kernel slot 2 or 3, grid) of a strided launch."""
        strides = [list(out._stride)] + [expanded_strides(t, shape) for t in tensors]
        sizes, cstrides = coalesce(shape, strides)
        if len(sizes) > MAX_DIMS:
            raise NotImplementedError(
                f"refimpl's CUDA elementwise kernels take at most {MAX_DIMS} dimensions after "
                f"coalescing, got {len(sizes)} for '{self.name}'")
        pad = [0] * (MAX_DIMS - len(sizes))
        span = max(sum((s - 1) * abs(st) for s, st in zip(sizes, op)) for op in cstrides)
        if n < 2**31 and span < 2**31:
            magic = [_magic(s) for s in sizes]
            flat = [v for op in cstrides for v in (*op, *pad)]
            data = plan.meta32.pack(len(sizes), *sizes, *pad, *[m for m, _ in magic], *pad,
                                    *[s for _, s in magic], *pad, *flat)
            return data, 2, -(-n // (_BLOCK * _UNROLL))
        flat = [v for op in cstrides for v in (*op, *pad)]
        data = plan.meta64.pack(len(sizes), *sizes, *pad, *flat)
        return data, 3, min(-(-n // _BLOCK), 1 << 20)


_kernels: dict = {}


def pointwise(expr: str, inputs: Sequence, out_dtype: D.dtype, *,
              compute: D.dtype | Sequence[D.dtype] | None = None,
              params: dict[str, tuple[Any, D.dtype]] | None = None,
              shape: tuple | None = None, out: Tensor | None = None,
              name: str = "pointwise") -> Tensor:
    """Evaluate ``expr`` elementwise on the GPU (see the module docstring).

    ``inputs``: CUDA tensors, 0-dim CPU tensors or Python scalars, named ``a``..``d``
    in ``expr``. ``params``: ``{"alpha": (value, dtype)}`` named scalar arguments.
    Returns ``out`` (written in place) or a fresh tensor of ``out_dtype``.
    """
    if len(inputs) > MAX_OPERANDS:
        raise ValueError(f"pointwise takes at most {MAX_OPERANDS} operands")
    names = tuple(params) if params else ()
    key = (expr, names)
    k = _kernels.get(key)
    if k is None:
        k = _kernels.setdefault(key, Elementwise(expr, name, names))
    return k.run(inputs, out_dtype, out_dtype if compute is None else compute,
                 tuple(params.values()) if params else (), shape, out)


def is_cuda_tensor(x) -> bool:
    """Whether ``x`` is a tensor on a CUDA device."""
    return isinstance(x, Tensor) and x._storage.device.type == "cuda"

