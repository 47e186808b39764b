"""The fused max pooling / NLL loss CUDA kernels without a GPU: their source compiles with
NVRTC into every kernel the launchers name, and the launchers pass the geometry the
kernels expect (strides, window, reduction; the launch itself is recorded, not run).
Also the CPU side of the fused ops: which inputs take them, and an empty batch. And the
packed launch layouts of these kernels and of the attention and softmax kernels against
the kernels' parameters as NVRTC compiles them."""

from __future__ import annotations

import ctypes
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

import refimpl as t
import refimpl.nn.functional as F
from refimpl import _dtype as D
from refimpl.cuda import _pool_loss_kernels as K
from refimpl.ops import nn_loss_kernel, nn_pool_kernel

torch = pytest.importorskip("torch")


def test_the_source_compiles_into_every_kernel_the_launchers_name(nvrtc_compile):
    ptx = nvrtc_compile(K._SOURCE, "pool_loss.cu", "compute_90", cubin=False).decode()
    entries = {line.split(".entry ")[1].split("(")[0] for line in ptx.splitlines()
               if ".entry " in line}
    want = {f"{kind}_{suffix}" for kind in ("pool_fwd", "pool_bwd")
            for suffix in ("f32", "f64", "f16", "bf16")}
    want |= {f"{kind}_{suffix}" for kind in ("nll_fwd", "nll_bwd") for suffix in ("f32", "f64")}
    assert entries == want


@pytest.fixture
def recorded(monkeypatch):
    """Launches recorded as (kernel name, items, args, block, grid), the geometry (the
    last argument, passed as the C struct's bytes) read back into its ctypes struct; CPU
    tensors stand in for CUDA ones (pointers become the storage offsets, 0 for None)."""
    calls: list = []

    def launch(name, like, items, fmt, *args, block=K._BLOCK, grid=None):
        struct = K._Pool if name.startswith("pool") else K._Nll
        assert fmt == (K._POOL_FMT if struct is K._Pool else K._NLL_FMT)
        assert isinstance(args[-1], bytes) and len(args[-1]) == ctypes.sizeof(struct)
        geometry = struct.from_buffer_copy(args[-1])
        calls.append((name, items, (*args[:-1], geometry), block, grid))

    monkeypatch.setattr(K, "_launch", launch)
    monkeypatch.setattr(K, "_ptr", lambda x: 0 if x is None else x._offset)
    return calls


def test_nll_launch_passes_the_strides_of_a_transposed_input(recorded):
    x = t.zeros(7, 5).t()  # (5, 7): rows 1 apart, classes 5 apart
    y = t.tensor([[0, 9], [3, 9], [6, 9], [2, 9], [1, 9]])[:, 0]
    w = t.ones(7, 2)[:, 1]
    loss, total = K.nll_loss(x, y, w, "mean", -100)
    assert tuple(loss.shape) == () and tuple(total.shape) == ()
    (name, _, args, block, grid), = recorded
    g = args[-1]
    assert (name, block, grid) == ("nll_fwd_f32", 512, 1)
    assert (g.n, g.classes, g.ignore, g.xs0, g.xs1, g.ts, g.ws, g.reduction) == (
        5, 7, -100, 1, 5, 2, 2, 2)
    assert args[2] == 1  # the weight's offset: column 1
    grad = t.ones(10)[::2]  # stride 2
    K.nll_loss_backward(t.ones(()), x, y, None, total, "sum", 3)
    K.nll_loss_backward(grad, x, y, None, total, "none", 3)
    sums, nones = recorded[1][2][-1], recorded[2][2][-1]
    assert (sums.gs, sums.reduction, sums.ignore, sums.ws) == (0, 1, 3, 0)
    assert (nones.gs, nones.reduction) == (2, 0)
    assert recorded[1][1] == 35  # one thread per gradient element


def test_nll_launch_of_an_unbatched_input(recorded):
    K.nll_loss(t.zeros(6), t.tensor(2), None, "none", -100)
    g = recorded[0][2][-1]
    assert (g.n, g.classes, g.xs0, g.xs1, g.ts, g.reduction) == (1, 6, 0, 1, 0, 0)


def test_pool_launches_pass_the_window_and_walk_every_element(recorded):
    x = t.zeros(2, 3, 11, 10)
    values, idx = K.max_pool2d(x, [3, 2], [2, 1], [1, 0], [2, 1], [5, 9])
    assert tuple(values.shape) == (2, 3, 5, 9) and idx.dtype is t.int64
    K.max_pool2d_backward(t.zeros(2, 3, 5, 9), x, idx, [3, 2], [2, 1], [1, 0], [2, 1])
    (fwd, n_out, a, _, _), (bwd, n_in, b, _, _) = recorded
    assert (fwd, n_out, bwd, n_in) == ("pool_fwd_f32", 270, "pool_bwd_f32", 660)
    for g in (a[-1], b[-1]):
        assert (g.planes, g.h, g.w, g.oh, g.ow) == (6, 11, 10, 5, 9)
        assert (g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw) == (3, 2, 2, 1, 1, 0, 2, 1)
    K.max_pool2d(t.zeros(0, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], [4, 4])
    assert len(recorded) == 2  # nothing to launch for an empty batch


def test_which_inputs_take_the_fused_ops():
    assert nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4))
    assert not nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4, dtype=t.float16))  # CUDA only
    assert not nn_pool_kernel.use_fused(t.zeros(1, 2, 4, 4, dtype=t.int32))
    x, y = t.zeros(3, 4), t.tensor([0, 1, 2])
    assert nn_loss_kernel.use_fused(x, y, t.ones(4))
    assert not nn_loss_kernel.use_fused(x, y, t.ones(5))  # one weight per class only


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2,
                                                      "padding": 1}])
def test_max_pool2d_of_an_empty_batch(kw):
    x = t.zeros(0, 3, 9, 8, requires_grad=True)
    tx = torch.zeros(0, 3, 9, 8, requires_grad=True)
    v, i = F.max_pool2d(x, return_indices=True, **kw)
    tv, ti = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    assert tuple(v.shape) == tuple(tv.shape) and tuple(i.shape) == tuple(ti.shape)
    assert i.dtype is t.int64
    assert v.grad_fn.name() == tv.grad_fn.name()
    v.sum().backward()
    tv.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 9, 8)
    np.testing.assert_array_equal(np.asarray(x.grad._np), tx.grad.numpy())


# -- launch layouts against the kernels' parameters -----------------------------------
#
# The CUDA launchers of this module and of the attention and softmax modules pack plain
# values by a format (``_driver.launch_packed``); on a GPU the first launch of a kernel
# compares the format's sizes with the kernel's own parameters. Here NVRTC's PTX gives
# those parameters (each ``.entry``'s ``.param`` list: the sizes ``cuFuncGetParamInfo``
# reports), and every launch the launchers make is recorded instead of run.

_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\s+\w+(?:\[(\d+)\])?")


def _entries(ptx: str) -> dict[str, list[tuple[str, int]]]:
    """Each kernel of the PTX with its parameters as (PTX type class, size in bytes)."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, re.DOTALL):
        out[m.group(1)] = [(kind, int(bits) // 8 * int(count or 1))
                           for kind, bits, count in _PTX_PARAM.findall(m.group(2))]
    return out


class _DeviceTensor:
    """What the softmax launchers read of a CUDA tensor: shape, strides, dtype and an
    address (no data)."""

    def __init__(self, shape, dtype):
        self._shape, self.dtype, self.device, self._offset = tuple(shape), dtype, "cuda", 0
        self._stride = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
        self._storage = SimpleNamespace(device=SimpleNamespace(index=0),
                                        _data=SimpleNamespace(ptr=1 << 20, device_index=0))

    @classmethod
    def _empty(cls, shape, dtype, device):
        return cls(shape, dtype)

    def numel(self) -> int:
        return math.prod(self._shape)


@pytest.fixture
def packed_launches(monkeypatch):
    """Every ``_driver.launch_packed`` call as (source, kernel, fmt, values, name): the
    kernel loaders hand out (source, kernel) as the function handle."""
    from refimpl.cuda import _attention_kernels as A
    from refimpl.cuda import _driver, _nvrtc, _pointwise, streams
    from refimpl.cuda import _reduce_softmax as RS
    from refimpl.cuda import _softmax_backward as SB

    launches: list = []

    def launch_packed(ordinal, function, grid, block, fmt, values, stream, shared_mem=0,
                      name="kernel"):
        launches.append((*function, fmt, tuple(values), name))

    def load(source, names, index):
        return [(source, name) for name in names]

    monkeypatch.setattr(_driver, "launch_packed", launch_packed)
    for module in (K, A, SB, _pointwise):  # (each binds load_functions)
        monkeypatch.setattr(module, "load_functions", load)
    monkeypatch.setattr(_nvrtc, "get_function", lambda source, name, dev: (source, name))
    monkeypatch.setattr(streams, "current_stream_handle", lambda index: 0)
    for module in (K, A, SB):  # no fake handle cached, none of a real GPU run used
        monkeypatch.setattr(module, "_functions", {})
    for module in (K, A):
        monkeypatch.setattr(module, "_ptr", lambda x: 0 if x is None else 4096 + x._offset)
    for module in (SB, RS):
        monkeypatch.setattr(module, "Tensor", _DeviceTensor)
    return launches


def test_launch_layouts_match_the_kernel_parameters(packed_launches, nvrtc_compile,
                                                    monkeypatch):
    from refimpl.cuda import _attention_kernels as A
    from refimpl.cuda import _driver
    from refimpl.cuda import _reduce_softmax as RS
    from refimpl.cuda import _softmax_backward as SB

    # pooling in every dtype, NLL in both of its dtypes, forward and backward
    for dtype in (t.float32, t.float64, t.float16, t.bfloat16):
        x = t.zeros(2, 3, 6, 5, dtype=dtype)
        _, idx = K.max_pool2d(x, [2, 2], [2, 1], [1, 0], [1, 1], [4, 4])
        K.max_pool2d_backward(t.zeros(2, 3, 4, 4, dtype=dtype), x, idx, [2, 2], [2, 1],
                              [1, 0], [1, 1])
    for dtype in (t.float32, t.float64):
        x, y = t.zeros(4, 5, dtype=dtype), t.tensor([0, 1, 2, 3])
        _, total = K.nll_loss(x, y, t.ones(5, dtype=dtype), "mean", -100)
        K.nll_loss_backward(t.ones((), dtype=dtype), x, y, None, total, "mean", -100)
    # attention through bmm_small (with a mask, and causal), both of its dtypes
    monkeypatch.setattr(A, "SMALL_MACS", 1 << 40)
    for dtype in (t.float32, t.float64):
        q = t.zeros(2, 3, 4, 5, dtype=dtype)
        for mask, causal in ((t.ones(4, 4, dtype=t.bool), False), (None, True)):
            _, w = A.forward(q, q, q, mask, 0.5, causal)
            A.backward(q, q, q, q, w, 0.5, [True, True, True])
    # the softmax derivatives; softmax's row kernel (registers or not) and line kernel
    for dtype in (D.float32, D.float64):
        for log in (False, True):
            y = _DeviceTensor((3, 7), dtype)
            SB.backward(y, y, log)
    RS.softmax(_DeviceTensor((3, 100), D.float32), 1, False)
    RS.softmax(_DeviceTensor((3, 100_000), D.float16), 1, True)
    RS.softmax(_DeviceTensor((100, 3), D.float64), 0, False)

    compiled: dict[str, dict] = {}
    launched: dict[str, set] = {}
    for source, kernel, fmt, values, name in packed_launches:
        if source not in compiled:
            ptx = nvrtc_compile(source, "layout.cu", "compute_90", cubin=False).decode()
            compiled[source] = _entries(ptx)
        launched.setdefault(source, set()).add(kernel)
        params = compiled[source][kernel]
        codes = _driver._param_codes(fmt)
        layout = _driver.param_layout(fmt)
        where = f"{kernel} launched with '{fmt}'"
        assert name == kernel, where  # the name a mismatch on the GPU reports
        assert layout.sizes == [size for _, size in params], (where, params)
        # floats where the kernel takes floats (a size alone would pass 'i' for 'f')
        assert [c in ("f", "d") for c in codes] == [kind == "f" for kind, _ in params], where
        assert len(values) == len(codes), where
        for code, value in zip(codes, values):  # struct pads or cuts a wrong byte count
            if code.endswith("s"):
                assert isinstance(value, bytes) and len(value) == int(code[:-1]), where
        layout.struct.pack(*values)  # and every value fits its code
    for module in (K, A, SB):  # every kernel of these sources was launched and checked
        assert launched[module._SOURCE] == set(compiled[module._SOURCE]), module.__name__
    softmax = set().union(*(names for s, names in launched.items() if RS._BODY in s))
    assert softmax == {"row_kernel", "lines"}  # (a source per dtype and variant)
