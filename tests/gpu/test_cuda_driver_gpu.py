"""refimpl.cuda on a real GPU: driver layer, devices, streams, events, kernels.

Skipped without a GPU. Where torch with CUDA is importable it is the oracle (devices,
errors, reprs, dtype conversions). ``TENSORCTL_GPU_REPORT=path`` writes a JSON record of
the machine, versions and the facts compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import refimpl.cuda as cuda  # noqa: PLR0402 - refimpl also exports a cuda() op
from refimpl.cuda import _device_source, _driver, _kernels, _nvrtc

pytestmark = pytest.mark.skipif(not cuda.is_available(), reason="needs a CUDA GPU")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT: dict[str, object] = {}

try:
    import torch

    HAS_TORCH = torch.cuda.is_available()
except ImportError:  # pragma: no cover - the GPU image has torch
    torch = None
    HAS_TORCH = False

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch with CUDA")


def teardown_module() -> None:
    path = os.environ.get("TENSORCTL_GPU_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(REPORT, f, indent=1, default=str)


# -- helpers ------------------------------------------------------------------------


def np_dtype(name: str):
    return _kernels._DTYPES[name][3]


def upload(arr: np.ndarray) -> int:
    arr = np.ascontiguousarray(arr)
    ptr = _driver.mem_alloc(0, max(arr.nbytes, 16))
    _driver.memcpy_htod_async(0, ptr, arr.ctypes.data, arr.nbytes, 0)
    _driver.stream_synchronize(0, 0)
    return ptr


def download(ptr: int, count: int, name: str) -> np.ndarray:
    out = np.empty(count, dtype=np_dtype(name))
    cuda.synchronize()
    _driver.memcpy_dtoh_async(0, out.ctypes.data, ptr, out.nbytes, 0)
    _driver.stream_synchronize(0, 0)
    return out


def torch_dtype(name: str):
    return getattr(torch, name)


def to_torch(arr: np.ndarray, name: str):
    if name == "bfloat16":
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(arr.copy())


def from_torch(t, name: str) -> np.ndarray:
    if name == "bfloat16":
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "fcV" or a.dtype == ml_dtypes.bfloat16:
        if a.dtype in (np.float16, ml_dtypes.bfloat16):
            a, b = a.astype(np.float32), b.astype(np.float32)
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


# -- devices ------------------------------------------------------------------------


def test_basics():
    cuda.init()
    assert cuda.is_initialized()
    assert cuda.device_count() >= 1
    assert cuda.current_device() == 0
    cuda.set_device(0)
    with cuda.device(0):
        assert cuda.current_device() == 0
    cuda.synchronize()
    free, total = cuda.mem_get_info()
    assert 0 < free <= total
    REPORT["device"] = cuda.get_device_name()
    REPORT["driver_version"] = _driver.driver_version()
    REPORT["nvrtc_version"] = _driver.nvrtc_version()
    REPORT["arch_list"] = cuda.get_arch_list()
    REPORT["nvrtc_target"] = _nvrtc.target(0)


@needs_torch
def test_properties_match_torch():
    ours, theirs = cuda.get_device_properties(0), torch.cuda.get_device_properties(0)
    REPORT["torch"] = torch.__version__
    REPORT["torch_props_repr"] = repr(theirs)
    fields = [f for f in dir(theirs) if not f.startswith("_") and not callable(getattr(theirs, f))]
    mismatch = {}
    for f in fields:
        mine = getattr(ours, f, "<missing>")
        if str(mine) != str(getattr(theirs, f)):
            mismatch[f] = (mine, getattr(theirs, f))
    REPORT["props_mismatch"] = mismatch
    assert repr(ours) == repr(theirs)
    for f in ("name", "major", "minor", "total_memory", "multi_processor_count",
              "L2_cache_size"):
        assert getattr(ours, f) == getattr(theirs, f), f
    assert str(ours.uuid) == str(theirs.uuid)
    assert cuda.get_device_capability() == torch.cuda.get_device_capability()
    assert cuda.get_device_name(0) == torch.cuda.get_device_name(0)
    assert cuda.is_bf16_supported() == torch.cuda.is_bf16_supported()
    assert cuda.mem_get_info(0)[1] == torch.cuda.mem_get_info(0)[1]


@needs_torch
def test_errors_match_torch():
    bad = cuda.device_count()
    with pytest.raises(RuntimeError) as theirs:
        torch.cuda.set_device(bad)
    with pytest.raises(cuda.AcceleratorError) as ours:
        cuda.set_device(bad)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(cuda.AcceleratorError), cuda.device(bad):
        pass
    assert cuda.current_device() == 0
    with pytest.raises(AssertionError, match="^Invalid device id$"):
        cuda.get_device_properties(bad)
    with pytest.raises(AssertionError, match="^Invalid peer device id$"):
        cuda.can_device_access_peer(0, bad)
    assert cuda.can_device_access_peer(0, 0) is torch.cuda.can_device_access_peer(0, 0)
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.cuda._utils._get_device_index("cuda0", optional=True)


# -- streams and events -------------------------------------------------------------


@needs_torch
def test_stream_facts_match_torch():
    assert repr(cuda.default_stream()) == repr(torch.cuda.default_stream())
    assert repr(cuda.current_stream()) == "<torch.cuda.Stream device=cuda:0 cuda_stream=0x0>"
    assert cuda.Stream.priority_range() == torch.cuda.Stream.priority_range()
    REPORT["priority_range"] = cuda.Stream.priority_range()
    REPORT["driver_priority_range"] = _driver.stream_priority_range(0)
    for p in (-100, -2, -1, 0, 1, 5):
        assert cuda.Stream(priority=p).priority == torch.cuda.Stream(priority=p).priority, p
    s = cuda.Stream()
    assert s.cuda_stream != 0
    assert re.fullmatch(r"<torch.cuda.Stream device=cuda:0 cuda_stream=0x[0-9a-f]+>", repr(s))
    again = cuda.Stream(stream_id=s.stream_id, device_index=s.device_index,
                        device_type=s.device_type)
    assert again == s and hash(again) == hash(s)
    assert s != cuda.default_stream()
    ev = cuda.Event()
    ev.record()
    assert re.fullmatch(r"<torch.cuda.Event 0x[0-9a-f]+>", repr(ev))


def test_stream_pool_round_robin():
    handles = [cuda.Stream().cuda_stream for _ in range(64)]
    assert len(set(handles)) == 32
    assert handles[:32] == handles[32:]


def test_event_timing_and_query():
    cpm = cuda.get_cycles_per_ms()
    REPORT["cycles_per_ms"] = cpm
    assert cpm > 1e5
    s = cuda.Stream()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    with cuda.stream(s):
        start.record()
        cuda._sleep(int(cpm * 50))
        end.record()
        assert not s.query()
        assert not end.query()
    end.synchronize()
    assert end.query() and s.query()
    ms = start.elapsed_time(end)
    REPORT["sleep_50ms_measured"] = ms
    assert 25 < ms < 500
    with pytest.raises(ValueError, match="enable_timing=True"):
        cuda.Event().elapsed_time(end)


@needs_torch
def test_cycles_per_ms_close_to_torch():
    # torch's test utility (common_utils.get_cycles_per_ms) needs expecttest; this is
    # the same measurement through torch's own _sleep and events.
    vals = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        vals.append(1_000_000 / start.elapsed_time(end))
    theirs = sum(sorted(vals)[2:8]) / 6
    REPORT["torch_cycles_per_ms"] = theirs
    assert 0.5 < cuda.get_cycles_per_ms() / theirs < 2


def _busy_fill(s1, a: int, n: int, value: int) -> None:
    with cuda.stream(s1):
        cuda._sleep(int(cuda.get_cycles_per_ms() * 100))
        _kernels.fill(a, "int32", [n], [1], value)


@pytest.mark.parametrize("how", ["wait_stream", "wait_event", "none"])
def test_cross_stream_ordering(how):
    n = 1 << 20
    a, b = upload(np.zeros(n, np.int32)), upload(np.zeros(n, np.int32))
    s1, s2 = cuda.Stream(), cuda.Stream()
    _busy_fill(s1, a, n, 7)
    if how == "wait_stream":
        s2.wait_stream(s1)
    elif how == "wait_event":
        s2.wait_event(s1.record_event())
    with cuda.stream(s2):
        _kernels.copy(b, "int32", [1], a, "int32", [1], [n])
    s2.synchronize()
    got = download(b, n, "int32")
    if how == "none":  # the copy ran while s1 was still asleep
        assert (got == 0).all()
    else:
        assert (got == 7).all()
    _driver.mem_free(0, a)
    _driver.mem_free(0, b)


def test_stream_context_and_set_stream():
    s = cuda.Stream()
    assert cuda.current_stream() == cuda.default_stream()
    with cuda.stream(s):
        assert cuda.current_stream() == s
        with cuda.stream(None):
            assert cuda.current_stream() == s
    assert cuda.current_stream() == cuda.default_stream()
    with s:
        assert cuda.current_stream() == s
    cuda.set_stream(s)
    assert cuda.current_stream() == s
    cuda.set_stream(cuda.default_stream())


def test_current_stream_is_per_thread():
    s1, s2 = cuda.Stream(), cuda.Stream()
    cuda.set_stream(s1)
    seen = {}

    def worker():
        seen["initial"] = cuda.current_stream()
        cuda.set_stream(s2)
        seen["after"] = cuda.current_stream()
        ptr = _driver.mem_alloc(0, 1 << 20)  # the thread made the primary context current
        _kernels.fill(ptr, "float32", [1 << 18], [1], 1.5)
        seen["value"] = download(ptr, 4, "float32")
        _driver.mem_free(0, ptr)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    try:
        assert seen["initial"] == cuda.default_stream()
        assert seen["after"] == s2
        assert cuda.current_stream() == s1
        assert (seen["value"] == 1.5).all()
    finally:
        cuda.set_stream(cuda.default_stream())


def test_external_stream():
    handle = _driver.stream_create(0, 0)
    try:
        ext = cuda.ExternalStream(handle)
        assert ext.cuda_stream == handle and ext.device_index == 0
        with cuda.stream(ext):
            cuda._sleep(1000)
        ext.synchronize()
        assert ext.query()
        assert cuda.get_stream_from_external(handle) == ext
    finally:
        _driver.stream_destroy(0, handle)


def test_ipc_event_across_processes():
    ev = cuda.Event(interprocess=True)
    handle = ev.ipc_handle()
    assert isinstance(handle, bytes) and len(handle) == 64
    s = cuda.Stream()
    with cuda.stream(s):
        cuda._sleep(int(cuda.get_cycles_per_ms() * 200))
        ev.record()
    code = ("import sys, refimpl.cuda as c; e = c.Event.from_ipc_handle(0, "
            f"bytes.fromhex('{handle.hex()}')); e.synchronize(); sys.exit(0 if e.query() else 3)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    s.synchronize()


# -- kernels ------------------------------------------------------------------------

STRICT = [0, 1, 2, 3, 7, 100, 127, -1, -2, -100, 0.5, 2.5, -2.5, 0.1, 1 / 3]
EDGE = [1000.7, -1000.7, 70000.0, 3e9, -3e9, 1e20, float("inf"), float("-inf"),
        float("nan"), 65504.0, 65520.0, 3.4e38, 2.0**40 + 1, 2.0**62, -(2.0**63)]


def _source_array(values, name: str) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals = np.array(values, dtype=np.float64)
        if name.startswith("complex"):
            return (vals + 1j * vals[::-1]).astype(np_dtype(name))
        if name == "bool":
            return vals != 0
        if name in ("float16", "bfloat16", "float32", "float64"):
            return vals.astype(np_dtype(name))
        return np.array([int(v) if np.isfinite(v) and abs(v) < 2**63 else 0 for v in vals]) \
            .astype(np_dtype(name))


def _convert_ours(src_np: np.ndarray, src: str, dst: str) -> np.ndarray:
    n = src_np.size
    sp = upload(src_np)
    dp = _driver.mem_alloc(0, max(n * np.dtype(np_dtype(dst)).itemsize, 16))
    _kernels.copy(dp, dst, [1], sp, src, [1], [n])
    out = download(dp, n, dst)
    _driver.mem_free(0, sp)
    _driver.mem_free(0, dp)
    return out


@needs_torch
@pytest.mark.parametrize("src", _kernels.DTYPE_NAMES)
@pytest.mark.parametrize("dst", _kernels.DTYPE_NAMES)
def test_copy_conversion_matches_torch(src, dst):
    for label, values in (("strict", STRICT), ("edge", EDGE)):
        src_np = _source_array(values, src)
        ours = _convert_ours(src_np, src, dst)
        theirs = from_torch(to_torch(src_np, src).cuda().to(torch_dtype(dst)).cpu(), dst)
        if label == "strict":
            assert same(ours, theirs), (src, dst, src_np, ours, theirs)
        elif not same(ours, theirs):
            bad = [i for i in range(len(values)) if not same(ours[i:i + 1], theirs[i:i + 1])]
            REPORT.setdefault("edge_mismatch", {})[f"{src}->{dst}"] = [
                (str(src_np[i]), str(ours[i]), str(theirs[i])) for i in bad]


def test_strided_copies():
    base = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    src = upload(base)
    cases = {
        "permute": (base.transpose(2, 0, 1), (6, 4, 5), [1, 30, 6], 0),
        "slice_step": (base[1:, ::2, 1::3], (3, 3, 2), [30, 12, 3], 31),
        "broadcast": (np.broadcast_to(base[0, 0], (3, 6)), (3, 6), [0, 1], 0),
    }
    for name, (ref, shape, strides, offset) in cases.items():
        n = int(np.prod(shape))
        dst = _driver.mem_alloc(0, n * 8)
        _kernels.copy(dst, "float64", [int(np.prod(shape[i + 1:])) for i in range(len(shape))],
                      src, "float32", strides, list(shape), src_offset=offset)
        got = download(dst, n, "float64").reshape(shape)
        assert np.array_equal(got, ref.astype(np.float64)), name
        _driver.mem_free(0, dst)
    # a transposed destination
    dst = upload(np.zeros(30, np.int16))
    _kernels.copy(dst, "int16", [1, 5], src, "float32", [6, 1], [5, 6])
    assert np.array_equal(download(dst, 30, "int16").reshape(6, 5), base[0].T.astype(np.int16))
    _driver.mem_free(0, dst)
    _driver.mem_free(0, src)


def test_eight_dims_and_more():
    base = np.arange(2**9, dtype=np.int32)
    src = upload(base)
    dst = _driver.mem_alloc(0, base.nbytes)
    shape = [2] * 8
    strides = [2 ** (7 - k) for k in range(8)][::-1]  # reversed: nothing coalesces
    _kernels.copy(dst, "int32", [2 ** (7 - k) for k in range(8)], src, "int32", strides, shape)
    ref = np.lib.stride_tricks.as_strided(base, shape, [s * 4 for s in strides])
    assert np.array_equal(download(dst, 256, "int32").reshape(shape), ref)
    with pytest.raises(ValueError, match="at most 8 dimensions"):
        _kernels.copy(dst, "int32", [2 ** (8 - k) for k in range(9)], src, "int32",
                      [2 ** k for k in range(9)], [2] * 9)
    _driver.mem_free(0, src)
    _driver.mem_free(0, dst)


@needs_torch
@pytest.mark.parametrize("name", _kernels.DTYPE_NAMES)
@pytest.mark.parametrize("value", [0, 1, -1, 2.5, -0.0, True, 1 + 2j, 300])
def test_fill_matches_torch(name, value):
    if isinstance(value, complex) and not name.startswith("complex"):
        pytest.skip("torch refuses a complex fill of a real tensor")
    try:
        ref = from_torch(torch.empty(10, dtype=torch_dtype(name), device="cuda")
                         .fill_(value).cpu(), name)
    except RuntimeError:
        pytest.skip("torch refuses this value for this dtype")
    dense = upload(np.zeros(10, np_dtype(name)))
    _kernels.fill(dense, name, [10], [1], value)
    assert same(download(dense, 10, name), ref)
    strided = upload(np.zeros(10, np_dtype(name)))
    _kernels.fill(strided, name, [2, 2], [5, 2], value, offset=1)
    got = download(strided, 10, name)
    mask = np.zeros(10, bool)
    mask[[1, 3, 6, 8]] = True
    assert same(got[mask], ref[mask]) and same(got[~mask], np.zeros(6, np_dtype(name)))
    _driver.mem_free(0, dense)
    _driver.mem_free(0, strided)


def test_nvrtc_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORCTL_CACHE_DIR", str(tmp_path))
    source = 'extern "C" __global__ void k(int* p) { *p = ' + str(os.getpid()) + '; }'
    key, image = _nvrtc.compile_source(source, 0)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].name.startswith(key)

    def no_compile(*_a, **_k):
        raise AssertionError("compiled again despite the disk cache")

    monkeypatch.setattr(_driver, "nvrtc_compile", no_compile)
    assert _nvrtc.compile_source(source, 0) == (key, image)
    ptr = upload(np.zeros(1, np.int32))
    fn = _nvrtc.get_function(source, "k", 0)
    import ctypes

    _driver.launch(0, fn, (1, 1, 1), (1, 1, 1), [ctypes.c_uint64(ptr)], 0)
    assert download(ptr, 1, "int32")[0] == os.getpid()
    _driver.mem_free(0, ptr)


def test_nvrtc_compile_error_has_log():
    with pytest.raises(_driver.NvrtcError, match="NVRTC_ERROR_COMPILATION"):
        _driver.nvrtc_compile("this is not CUDA", "bad.cu", ["--std=c++17"], cubin=False)


def test_driver_errors_name_the_call():
    with pytest.raises(_driver.CudaDriverError,
                       match=r"^CUDA error: invalid device ordinal "
                             r"\(cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE\)$"):
        _driver._call("cuDeviceGet", 999)
    with pytest.raises(_driver.CudaDriverError, match="cuMemAlloc failed: "
                                                      "CUDA_ERROR_OUT_OF_MEMORY"):
        _driver.mem_alloc(0, 1 << 55)


# -- the allocator's segment source -----------------------------------------------------


def test_device_segment_source():
    src = _device_source.DeviceSegmentSource(0)
    ptr = src.allocate(1 << 20)
    assert ptr
    assert src.allocate(1 << 55) is None
    free, total = src.mem_get_info()
    assert 0 < free <= total
    s = cuda.Stream()
    with cuda.stream(s):
        cuda._sleep(int(cuda.get_cycles_per_ms() * 50))
    ev = src.record_event(s.cuda_stream)
    assert src.event_done(ev) is False
    src.synchronize_event(ev)
    assert src.event_done(ev) is True
    src.release_event(ev)
    assert src.record_event(0) == ev  # events are reused
    src.free(ptr, 1 << 20)


def test_allocator_gets_device_source_at_init():
    from refimpl.cuda import _allocator

    cuda.init()
    assert _allocator.has_segment_source_factory()
    alloc = _allocator.get_device_allocator(0)
    ptr = alloc.raw_alloc(1 << 20)
    _kernels.fill(ptr, "uint8", [1 << 20], [1], 3)
    assert (download(ptr, 16, "uint8") == 3).all()
    alloc.raw_delete(ptr)
    before = cuda.memory_allocated()
    ptr = cuda.caching_allocator_alloc(1 << 20)  # through memory's hooks into this package
    assert cuda.memory_allocated() == before + (1 << 20)
    cuda.caching_allocator_delete(ptr)
    assert cuda.memory_allocated() == before
    assert cuda.mem_get_info()[1] == _driver.device_total_memory(0)


def test_launch_overheads_report():
    import time

    def per_call_us(fn, n=2000):
        fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        cuda.synchronize()
        return (time.perf_counter() - t0) / n * 1e6

    ptr = _driver.mem_alloc(0, 1 << 12)
    REPORT["overhead_us"] = {
        "current_stream": per_call_us(cuda.current_stream),
        "current_device": per_call_us(cuda.current_device),
        "fill_memset_4KiB": per_call_us(lambda: _kernels.fill(ptr, "float32", [1024], [1], 0)),
        "fill_kernel_4KiB": per_call_us(lambda: _kernels.fill(ptr, "float32", [512], [2], 1.5)),
        "copy_kernel_2KiB": per_call_us(
            lambda: _kernels.copy(ptr, "float32", [2], ptr + 4, "float32", [2], [256])),
        "event_record_query": per_call_us(lambda: cuda.Event().record() or None),
    }
    _driver.mem_free(0, ptr)


# -- processes: env, lazy init, fork ----------------------------------------------------

_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    if sys.argv[1] == "torch":
        import torch.cuda as c
    else:
        import refimpl.cuda as c
    out = {"count": c.device_count(), "avail": c.is_available()}
    try:
        c.init()
        out["init"] = "ok"
    except Exception as e:
        out["init"] = f"{type(e).__name__}: {e}"
out["warnings"] = sorted({str(x.message).split(" (Triggered")[0] for x in w})
print(json.dumps(out))
"""


def _probe(target: str, env_value: str) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=env_value, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", _PROBE, target], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_torch
@pytest.mark.parametrize("env_value", ["", "5", "-1", "GPU-zzz", "GPU-", "0,0", "0,5", "0",
                                       "UUID", "MIG-x"])
def test_visible_devices_match_torch(env_value):
    if env_value == "UUID":
        env_value = "GPU-" + str(cuda.get_device_properties(0).uuid)[:8]
    ours, theirs = _probe("refimpl", env_value), _probe("torch", env_value)
    REPORT.setdefault("visible_devices", {})[env_value] = {"refimpl": ours, "torch": theirs}
    assert ours == theirs


def test_import_does_not_init_driver():
    code = ("import refimpl.cuda as c; from cuda.bindings import driver as d; "
            "print(int(d.cuDeviceGetCount()[0]), c.device_count(), c.is_initialized())")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.stdout.split() == ["3", str(cuda.device_count()), "False"], proc.stderr


def test_deferred_error_real_init():
    code = (
        "import refimpl.cuda as c\n"
        "c._lazy_call(lambda: 1 / 0)\n"
        "for _ in range(2):\n"
        "    try:\n        c.init()\n"
        "    except c.DeferredCudaCallError as e:\n        print(str(e).splitlines()[0])\n"
        "print(c.is_initialized())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    line = "CUDA call failed lazily at initialization with error: division by zero"
    assert proc.stdout.splitlines() == [line, line, "False"], proc.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_after_init_is_bad_fork():
    cuda.init()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                cuda.current_device()
            except RuntimeError as exc:
                code = 0 if "Cannot re-initialize CUDA in forked subprocess" in str(exc) else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    result = os.read(read, 1)
    os.waitpid(pid, 0)
    assert result == b"\x00"
