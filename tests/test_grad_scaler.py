"""GradScaler's fused ops and the sync debug level on the CPU, compared with torch where torch
can run them (its CPU kernels); the CUDA kernels are compiled with NVRTC when it is present
(running them is tests/gpu/test_amp_gpu.py's job)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import refimpl as t
from refimpl.cuda import _sync_debug

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(15)


def grads_with_infs(lib, dtype: str, layout: str, inject: str | None):
    """One gradient of ``dtype`` with ``layout`` (contiguous, transposed, sliced), holding
    an inf or NaN at [2, 1] when ``inject`` says so; same values for both libraries."""
    arr = (RNG.integers(-50, 50, size=(6, 5)) * 8.0).astype(np.float64)
    if inject:
        arr[2, 1] = np.inf if inject == "inf" else np.nan
    base = lib.tensor(arr.tolist(), dtype=getattr(lib, dtype))
    if layout == "transposed":
        return lib.tensor(arr.T.tolist(), dtype=getattr(lib, dtype)).t()
    if layout == "sliced":
        wide = lib.zeros((6, 9), dtype=getattr(lib, dtype))
        wide[:, 2:7] = base
        return wide[:, 2:7]
    return base


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("inject", [None, "inf", "nan"])
def test_unscale_matches_torch(dtype, layout, inject):
    results = []
    for lib in (t, torch):
        state = RNG.bit_generator.state
        grads = [grads_with_infs(lib, dtype, layout, inject), grads_with_infs(lib, "float32",
                                                                             "contiguous", None)]
        RNG.bit_generator.state = state
        found = lib.zeros(())
        lib._amp_foreach_non_finite_check_and_unscale_(grads, found, lib.full((), 0.125))
        results.append(([np.asarray(g.double().tolist()) for g in grads], found.item(),
                        [g._version for g in grads]))
    (ours, our_found, our_versions), (theirs, their_found, their_versions) = results
    assert our_found == their_found == (1.0 if inject else 0.0)
    assert our_versions == their_versions
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_update_scale_matches_torch_over_random_sequences():
    flags = RNG.choice([0.0, 0.0, 0.0, 1.0, np.nan], size=200)
    for growth, backoff, interval in ((2.0, 0.5, 3), (1.3, 0.7, 1), (65536.0, 0.125, 2)):
        seqs = []
        for lib in (t, torch):
            scale = lib.full((), 3.7)
            tracker = lib.zeros((), dtype=lib.int32)
            seq = []
            for f in flags:
                lib._amp_update_scale_(scale, tracker, lib.full((), float(f)), growth, backoff,
                                       interval)
                seq.append((scale.item(), tracker.item()))
            seqs.append(seq)
        assert seqs[0] == seqs[1]


def test_meta_update_checks_and_returns_self():
    s = t.empty((), device="meta")
    assert t._amp_update_scale_(s, t.empty((), dtype=t.int32, device="meta"),
                                t.empty((), device="meta"), 2.0, 0.5, 1) is s
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor."):
        t._amp_update_scale_(s, t.empty((), device="meta"), t.empty((), device="meta"),
                             2.0, 0.5, 1)


def test_version_counters_move_as_in_torch():
    for lib in (t, torch):
        g, found = lib.ones(3), lib.zeros(())
        lib._amp_foreach_non_finite_check_and_unscale_([g], found, lib.full((), 0.5))
        scale, tracker = lib.ones(()), lib.zeros((), dtype=lib.int32)
        lib._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 1)
        assert [g._version, found._version, scale._version, tracker._version] == [0, 0, 1, 0]
        assert g.tolist() == [0.5, 0.5, 0.5]


class _Opt:
    """The optimizer protocol GradScaler relies on (param_groups and step)."""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state: dict = {}
        self.steps = 0

    def step(self):
        self.steps += 1


def test_scaler_pickles_numbers_not_tensors_and_resumes():
    s = t.amp.GradScaler("cpu", init_scale=32.0, growth_interval=2)
    p = t.ones(2, requires_grad=True)
    opt = _Opt([p])
    s.scale(p.sum()).backward()
    s.step(opt)
    s.update()
    copy = pickle.loads(pickle.dumps(s))
    assert copy._scale is None and copy.get_scale() == 32.0
    assert copy._get_growth_tracker() == 1
    p.grad = t.ones(2)
    copy.scale(t.ones(1))
    copy.step(opt)
    copy.update()
    assert copy.get_scale() == 64.0 and copy._get_growth_tracker() == 0
    assert opt.steps == 2


def test_unscale_reciprocal_is_rounded_once_from_float64():
    scale = 3.0
    s = t.amp.GradScaler("cpu", init_scale=scale)
    p = t.ones(1, requires_grad=True)
    s.scale(t.ones(1))
    p.grad = t.full((1,), 7.0)
    s.unscale_(_Opt([p]))
    expected = np.float32(7.0) * np.float32(1.0 / scale)
    assert p.grad.item() == float(expected)


# -- sync debug level (no GPU needed: the module's own rules) ---------------------------------

@pytest.fixture
def level():
    yield
    _sync_debug.set_mode(0)


def test_levels_and_their_effects(level):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _sync_debug.set_mode("warn")
    assert _sync_debug.get_mode() == 1
    with pytest.warns(UserWarning, match="^called a synchronizing CUDA operation$"):
        _sync_debug.check()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sync_debug.check_copy(non_blocking=True)  # a non-blocking copy is never checked
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _sync_debug.set_mode(2)
    with pytest.raises(RuntimeError, match="^called a synchronizing CUDA operation$"):
        _sync_debug.check_copy(non_blocking=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _sync_debug.set_mode("default")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sync_debug.check()


def test_invalid_levels(level):
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        _sync_debug.set_mode("loud")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for bad in (True, 1.0, None):
            with pytest.raises(RuntimeError, match="^invalid argument to set_sync_debug_mode$"):
                _sync_debug.set_mode(bad)
        for bad in (-1, 3):
            with pytest.raises(RuntimeError, match="expected one of 0,1,2"):
                _sync_debug.set_mode(bad)
        _sync_debug.set_mode(np.int64(1))
    assert _sync_debug.get_mode() == 1


def test_prototype_warning_once_unless_warn_always(level, monkeypatch):
    monkeypatch.setattr(_sync_debug, "_prototype_warned", False)
    with warnings.catch_warnings(record=True) as first:
        warnings.simplefilter("always")
        _sync_debug.set_mode(0)
        _sync_debug.set_mode(0)
    assert [str(w.message) for w in first] == [_sync_debug._PROTOTYPE]
    assert _sync_debug._PROTOTYPE.startswith("Synchronization debug mode is a prototype")
    t.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            _sync_debug.set_mode(0)
    finally:
        t.set_warn_always(False)
    assert len(again) == 1


# -- the CUDA kernels compile (NVRTC only, no GPU) ----------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", None])
def test_cuda_kernels_compile(dtype, nvrtc_compile):
    from refimpl.cuda import _amp_kernels

    source = _amp_kernels.update_source() if dtype is None else _amp_kernels.unscale_source(dtype)
    assert len(nvrtc_compile(source, "amp.cu")) > 0


def test_cuda_launch_arguments_describe_the_strided_gradient(monkeypatch):
    """What the unscale and update launches pass to the driver (no GPU: the launch is
    recorded): a transposed gradient keeps its strides, the factors travel as doubles."""
    from refimpl.cuda import _amp_kernels, _driver, _nvrtc

    launches = []
    monkeypatch.setattr(_nvrtc, "get_function", lambda source, name, dev: (name, source))
    monkeypatch.setattr(_driver, "launch", lambda *a: launches.append(a))
    monkeypatch.setattr(_amp_kernels, "device_index", lambda x: 0)
    monkeypatch.setattr(_amp_kernels, "ptr", lambda x: 4096 + x.storage_offset())
    monkeypatch.setattr(_amp_kernels, "stream", lambda dev: 7)
    g = t.zeros((300, 4), dtype=t.float16).t()[:, 1:]
    _amp_kernels.unscale_(g, t.zeros(()), t.ones(()))
    dev, (name, source), grid, block, args, stream = launches[0]
    meta = args[1]
    assert (dev, name, stream, block) == (0, "unscale", 7, (256, 1, 1))
    assert "typedef unsigned short T;" in source and "typedef float A;" in source
    assert grid == (5, 1, 1)  # 1196 elements in blocks of 256
    assert (meta.n, meta.ndim) == (4 * 299, 2)
    assert list(meta.sizes[:2]) == [4, 299] and list(meta.dst_strides[:2]) == [1, 4]
    assert args[0].value == 4096 + g.storage_offset()
    scale, tracker = t.ones(()), t.zeros((), dtype=t.int32)
    _amp_kernels.update_scale_(scale, tracker, t.zeros(()), 2.0, 0.5, 2000)
    dev, (name, _), grid, block, args, stream = launches[1]
    assert (name, grid, block) == ("update_scale", (1, 1, 1), (1, 1, 1))
    assert [type(a).__name__ for a in args] == [
        "c_ulong", "c_ulong", "c_ulong", "c_double", "c_double", "c_int"]
    assert (args[3].value, args[4].value, args[5].value) == (2.0, 0.5, 2000)


# -- a CPU argument of the CUDA kernels (no GPU: CUDA tensors stood in for) ---------------------

_UNSCALE, _UPDATE = "_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"


@pytest.mark.parametrize("case, named, on, common, method", [
    ("found_inf_cpu", "found_inf", "cpu", "cuda:0", _UNSCALE),
    ("inv_scale_cpu", "inv_scale", "cpu", "cuda:0", _UNSCALE),
    ("empty_list", "inv_scale", "cuda:0", "cpu", _UNSCALE),
    ("scale_cpu", "growth_tracker", "cuda:0", "cpu", _UPDATE),
])
def test_cuda_kernels_name_the_argument_on_another_device(case, named, on, common, method):
    """The device check of torch's CUDA wrappers comes first (torch 2.11's messages on an
    H200 for the first, second and last); the stand-ins carry only a CUDA device."""
    from types import SimpleNamespace

    from refimpl.ops import amp_ops

    cuda = SimpleNamespace(device=t.device("cuda", 0))
    with pytest.raises(RuntimeError) as info:
        if case == "found_inf_cpu":
            amp_ops._unscale_cuda([cuda], t.zeros(()), cuda)
        elif case == "inv_scale_cpu":
            amp_ops._unscale_cuda([cuda], cuda, t.ones(()))
        elif case == "empty_list":
            amp_ops._unscale_cuda([], t.zeros(()), cuda)
        else:
            amp_ops._update_cuda(t.ones(()), cuda, cuda, 2.0, 0.5, 1)
    assert str(info.value) == (
        f"Expected all tensors to be on the same device, but got {named} is on {on}, different "
        f"from other tensors on {common} (when checking argument in method wrapper_CUDA__{method})")
