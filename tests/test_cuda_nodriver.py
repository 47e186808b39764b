"""refimpl.cuda on a machine without a GPU or driver: discovery, env parsing, lazy init.

Where torch (a CPU build) exposes the same pure function, it is the oracle.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import warnings

import pytest

import refimpl.cuda as cuda  # noqa: PLR0402 - refimpl also exports a cuda() op
from refimpl.cuda import _device, _driver, _kernels, _lazy, _nvrtc

pytestmark = pytest.mark.skipif(
    _lazy._device_count_impl(fail_if_no_driver=False) > 0, reason="a CUDA driver is present"
)

NO_DRIVER = re.escape(_driver.NO_DRIVER_MESSAGE)


@pytest.fixture
def fresh_lazy(monkeypatch):
    """Lazy-init state of a fresh process, with a fake driver that always succeeds."""
    monkeypatch.setattr(_lazy, "_initialized", False)
    monkeypatch.setattr(_lazy, "_queued_calls", [])
    monkeypatch.setattr(_lazy, "_init_hooks", [])
    monkeypatch.setattr(_lazy, "_lazy_seed_tracker", _lazy._LazySeedTracker())
    monkeypatch.setattr(_lazy, "_cuda_init", lambda: None)
    monkeypatch.setattr(_device, "_cached_device_count", None)
    yield _lazy


# -- availability -------------------------------------------------------------------


def test_is_available_false_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda.is_available() is False
        assert cuda.device_count() == 0
    assert cuda.is_initialized() is False


def test_not_compiled(monkeypatch):
    monkeypatch.setattr(_driver, "bindings_available", lambda: False)
    assert cuda.is_available() is False
    assert cuda.device_count() == 0
    assert cuda.get_arch_list() == []
    with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
        cuda.init()


@pytest.mark.parametrize("call", [
    cuda.init, cuda.current_device, cuda.synchronize, cuda.current_stream,
    cuda.default_stream, cuda.get_device_properties, cuda.get_device_name,
    lambda: cuda.set_device(0), lambda: cuda.Stream(), cuda.mem_get_info,
])
def test_eager_calls_raise_no_driver(call):
    with pytest.raises(RuntimeError, match=f"^{NO_DRIVER}$"):
        call()
    assert cuda.is_initialized() is False


def test_lazy_calls_do_not_initialise():
    assert cuda.is_bf16_supported() is False
    assert cuda.get_arch_list() == []
    assert cuda.get_gencode_flags() == ""
    cuda.set_device(-1)  # negative: a no-op that never initialises
    with cuda.device(-1):
        pass
    with cuda.stream(None):
        pass
    assert cuda.is_initialized() is False


def test_device_of_cpu_object_is_noop():
    class CpuThing:
        is_cuda = False

    ctx = cuda.device_of(CpuThing())
    assert ctx.idx == -1
    with ctx:
        pass


def test_nvml_based_check(monkeypatch):
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    monkeypatch.setattr(_device, "_raw_device_count_nvml", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cuda.is_available() is True
    assert cuda.device_count() == 1


# -- CUDA_VISIBLE_DEVICES -----------------------------------------------------------

VISIBLE_CASES = [
    (None, list(range(64))),
    ("", []),
    ("0", [0]),
    ("5", [5]),
    ("-1", []),
    ("0,1", [0, 1]),
    ("1gpu2,2ampere", [1, 2]),
    (" 2 , 3", [2, 3]),
    ("3,-1,4", [3]),
    ("abc", []),
    ("1,abc,2", [1]),
    ("1,,2", [1]),
    ("0,0", []),
    ("1,2,1", []),
    ("+3", [3]),
    ("-0", [0]),
    ("GPU-abc", ["GPU-abc"]),
    ("GPU-a,GPU-b", ["GPU-a", "GPU-b"]),
    ("GPU-a,1,GPU-b", ["GPU-a"]),
    ("GPU-a,GPU-a", []),
    ("GPU-", ["GPU-"]),
    ("MIG-x,MIG-y", ["MIG-x", "MIG-y"]),
    ("MIG-x,GPU-y", ["MIG-x"]),
]


@pytest.mark.parametrize(("env", "expected"), VISIBLE_CASES)
def test_parse_visible_devices(monkeypatch, env, expected):
    if env is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    assert cuda._parse_visible_devices() == expected


def test_parse_visible_devices_bare_sign_raises(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "+")
    with pytest.raises(ValueError, match="invalid literal for int"):
        cuda._parse_visible_devices()


@pytest.mark.parametrize(("env", "expected"), VISIBLE_CASES + [("+", None), ("0,-", [0])])
def test_parse_visible_devices_matches_torch(monkeypatch, env, expected):
    torch = pytest.importorskip("torch")
    if env is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)

    def outcome(fn):
        try:
            return fn()
        except ValueError as exc:
            return type(exc)

    assert outcome(cuda._parse_visible_devices) == outcome(torch.cuda._parse_visible_devices)


UUIDS = ["GPU-aaaa-1111", "GPU-aaab-2222", "GPU-bbbb-3333"]


@pytest.mark.parametrize(("candidates", "expected"), [
    (["GPU-bbbb"], [2]),
    (["GPU-aaab", "GPU-aaaa"], [1, 0]),
    (["GPU-aaa"], []),            # ambiguous prefix stops the list
    (["GPU-b", "GPU-zz", "GPU-aaaa"], [2]),
    (["GPU-b", "GPU-bbbb-3333"], []),  # the same device twice
    (["GPU-"], []),
])
def test_transform_uuid_to_ordinals(candidates, expected):
    assert cuda._transform_uuid_to_ordinals(candidates, UUIDS) == expected
    torch = pytest.importorskip("torch")
    assert torch.cuda._transform_uuid_to_ordinals(candidates, UUIDS) == expected


@pytest.mark.parametrize(("env", "raw", "expected"), [
    ("5", 1, 0),
    ("0,5", 1, 1),
    ("0,0", 1, 0),
    ("", 1, 0),
    ("1,0", 2, 2),
    (None, 1, 1),
    ("0", 0, 0),
    ("0", -1, -1),
])
def test_device_count_nvml_ordinals(monkeypatch, env, raw, expected):
    if env is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    monkeypatch.setattr(_device, "_raw_device_count_nvml", lambda: raw)
    assert _device._device_count_nvml() == expected


@pytest.mark.parametrize(("env", "expected"), [
    ("GPU-", 1), ("GPU-zzz", 0), ("GPU-bbbb,GPU-aaaa-1", 2), ("MIG-abc", -1),
])
def test_device_count_nvml_uuids(monkeypatch, env, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    monkeypatch.setattr(_device, "_raw_device_uuid_nvml", lambda: ["GPU-aaaa-1111"]
                        if env == "GPU-" else UUIDS)
    assert _device._device_count_nvml() == expected


def test_device_count_nvml_failure_falls_back(monkeypatch):
    def broken():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(_device, "_raw_device_count_nvml", broken)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert _device._device_count_nvml() == -1
    assert cuda.device_count() == 0  # the driver fallback: no driver, no devices


def test_device_count_not_cached_before_init(monkeypatch):
    monkeypatch.setattr(_device, "_raw_device_count_nvml", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cuda.device_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cuda.device_count() == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "32")
    assert cuda.device_count() == 0


def test_nvml_device_index(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert cuda._get_nvml_device_index(1) == 1
    assert cuda._get_nvml_device_index(0) == 3
    with pytest.raises(RuntimeError, match=re.escape("device 2 is not visible "
                                                     "(CUDA_VISIBLE_DEVICES=[3, 1])")):
        cuda._get_nvml_device_index(2)


# -- device indices -----------------------------------------------------------------


def test_get_device_index():
    gdi = cuda._get_device_index
    assert gdi(3) == 3
    assert gdi(-1) == -1
    assert gdi("cuda:1") == 1
    assert gdi(cuda.device(2)) == 2
    assert gdi("cpu", allow_cpu=True) == -1
    assert gdi("cuda", optional=True) is None  # no CUDA: no current device
    with pytest.raises(ValueError, match="^Expected a cuda device, but got: cpu$"):
        gdi("cpu")
    with pytest.raises(ValueError, match="^Expected a cuda or cpu device, but got: meta$"):
        gdi("meta", allow_cpu=True)
    with pytest.raises(ValueError, match=re.escape(
            "Expected a torch.device with a specified index or an integer, but got:cuda")):
        gdi("cuda")
    with pytest.raises(RuntimeError):
        gdi("cuda0")


def test_get_device_index_accepts_torch_devices():
    torch = pytest.importorskip("torch")
    assert cuda._get_device_index(torch.device("cuda", 1)) == 1
    with pytest.raises(ValueError, match="^Expected a cuda device, but got: cpu$"):
        cuda._get_device_index(torch.device("cpu"))


def test_exchange_device_negative_is_noop():
    assert cuda._exchange_device(-1) == -1
    assert cuda._maybe_exchange_device(-1) == -1


# -- lazy init, queued calls, bad fork -------------------------------------------------


def test_queued_calls_run_at_init(fresh_lazy):
    ran = []
    cuda._lazy_call(lambda: ran.append("a"))
    cuda._lazy_call(lambda: ran.append("b"))
    assert ran == []
    assert not cuda.is_initialized()
    cuda.init()
    assert ran == ["a", "b"]
    assert cuda.is_initialized()
    cuda._lazy_call(lambda: ran.append("c"))  # initialised: runs at once
    assert ran == ["a", "b", "c"]


def test_seed_tracker_keeps_latest(fresh_lazy):
    ran = []
    cuda._lazy_call(lambda: ran.append("seed1"), seed=True)
    cuda._lazy_call(lambda: ran.append("all1"), seed_all=True)
    cuda._lazy_call(lambda: ran.append("seed2"), seed=True)
    cuda._lazy_call(lambda: ran.append("other"))
    cuda.init()
    assert ran == ["other", "all1", "seed2"]


def _queue_failing_call():
    cuda._lazy_call(lambda: 1 / 0)


def test_deferred_call_error(fresh_lazy):
    _queue_failing_call()
    with pytest.raises(cuda.DeferredCudaCallError) as info:
        cuda.init()
    msg = str(info.value)
    assert msg.startswith(
        "CUDA call failed lazily at initialization with error: division by zero\n\n"
        "CUDA call was originally invoked at:\n\n")
    assert "_queue_failing_call" in msg and "test_cuda_nodriver.py" in msg
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert not cuda.is_initialized()
    with pytest.raises(cuda.DeferredCudaCallError):  # the queue is kept: it fails again
        cuda.init()
    assert not hasattr(_lazy._tls, "is_initializing")


def test_queued_call_may_reenter_init(fresh_lazy):
    seen = []
    cuda._lazy_call(lambda: seen.append(cuda.init()))
    cuda.init()
    assert seen == [None]
    assert cuda.is_initialized()


def test_init_hooks_run_before_queued_calls(fresh_lazy):
    order = []
    cuda._lazy_call(lambda: order.append("queued"))
    _lazy.register_init_hook(lambda: order.append("hook"))
    cuda.init()
    assert order == ["hook", "queued"]
    _lazy.register_init_hook(lambda: order.append("late"))  # after init: runs at once
    assert order[-1] == "late"


def test_sets_cuda_module_loading(fresh_lazy, monkeypatch):
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    cuda.init()
    assert os.environ["CUDA_MODULE_LOADING"] == "LAZY"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_bad_fork_after_driver_probe():
    cuda.is_available()  # touches the driver: poisons fork, as torch does
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports through the pipe and never returns to pytest
        code = 1
        try:
            ok = cuda._is_in_bad_fork() and not cuda.is_initialized()
            try:
                cuda.current_device()
            except RuntimeError as exc:
                ok = ok and str(exc) == _lazy.BAD_FORK_MESSAGE
            code = 0 if ok else 1
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    result = os.read(read, 1)
    os.waitpid(pid, 0)
    assert result == b"\x00"
    assert not cuda._is_in_bad_fork()  # the parent is unaffected


def test_lazy_init_error_messages(monkeypatch):
    def driver_error(code):
        def raise_it(*_):
            raise _driver.CudaDriverError("cuInit", code, *(_driver._describe(code)))
        return raise_it

    monkeypatch.setattr(_driver, "init", driver_error(100))
    with pytest.raises(RuntimeError, match="^No CUDA GPUs are available$"):
        _lazy._cuda_init()
    monkeypatch.setattr(_driver, "init", driver_error(101))
    with pytest.raises(RuntimeError, match=re.escape(
            "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
            "before calling NumCudaDevices() that might have already set an error? "
            "Error 101: invalid device ordinal")):
        _lazy._cuda_init()
    monkeypatch.setattr(_driver, "init", driver_error(3))
    with pytest.raises(RuntimeError, match="CUDA driver initialization failed"):
        _lazy._cuda_init()


# -- errors, events and streams without a device ---------------------------------------


def test_check_error():
    cuda.check_error(0)
    with pytest.raises(cuda.CudaError, match=r"^out of memory \(2\)$"):
        cuda.check_error(2)
    assert str(cuda.CudaError(101)) == "invalid device ordinal (101)"
    assert issubclass(cuda.CudaError, RuntimeError)
    assert cuda.cudaStatus.SUCCESS == 0 and cuda.cudaStatus.ERROR_NOT_READY == 34


def test_driver_error_names_the_call():
    err = _driver.CudaDriverError("cuMemAlloc", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory")
    assert str(err) == "CUDA error: out of memory (cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY)"
    assert isinstance(err, _driver.AcceleratorError)
    assert isinstance(err, RuntimeError) and err.code == 2
    assert _driver.error_name(101) == "CUDA_ERROR_INVALID_DEVICE"


def test_driver_calls_raise_no_driver():
    with pytest.raises(_driver.DriverNotFoundError, match=NO_DRIVER):
        _driver.device_count()


def test_unrecorded_event():
    ev = cuda.Event()
    assert repr(ev) == "<torch.cuda.Event uninitialized>"
    assert ev.query() is True
    ev.synchronize()
    assert ev.cuda_event == 0 and ev.event_id == 0
    with pytest.raises(ValueError, match=re.escape(
            "Both events must be created with argument 'enable_timing=True'.")):
        ev.elapsed_time(cuda.Event())
    a, b = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    with pytest.raises(ValueError, match=re.escape(
            "Both events must be recorded before calculating elapsed time.")):
        a.elapsed_time(b)


def test_stream_wrapper_without_driver():
    s = cuda.Stream(stream_id=0, device_index=0, device_type=1)
    assert repr(s) == "<torch.cuda.Stream device=cuda:0 cuda_stream=0x0>"
    assert s == cuda.Stream(stream_id=0, device_index=0, device_type=1)
    assert s != cuda.Stream(stream_id=0, device_index=1, device_type=1)
    assert hash(s) == hash(cuda.Stream(stream_id=0, device_index=0, device_type=1))
    assert s.__cuda_stream__() == (0, 0) and s.device_type == 1
    assert str(s.device) == "cuda:0"


# -- kernels: the host-side parts -------------------------------------------------------


@pytest.mark.parametrize(("dtype", "value", "expected"), [
    ("uint8", -1, b"\xff"),
    ("uint8", -1.5, b"\xff"),
    ("int8", 3.7, b"\x03"),
    ("int8", -3.7, b"\xfd"),
    ("int16", 70000, (70000 - 65536).to_bytes(2, "little")),
    ("bool", 2, b"\x01"),
    ("bool", 0.0, b"\x00"),
    ("float16", 1.0, b"\x00\x3c"),
    ("bfloat16", 1.0, b"\x80\x3f"),
    ("float32", 2 + 3j, b"\x00\x00\x00\x40"),
    ("float64", 0.1, struct.pack("<d", 0.1)),
    ("complex64", 1 + 2j, struct.pack("<ff", 1.0, 2.0)),
])
def test_fill_value_conversion(dtype, value, expected):
    assert _kernels._value_bytes(dtype, value) == expected


def test_fill_value_half_rounds_through_float32():
    import numpy as np

    v = 1.0 + 2.0 ** -11 + 2.0 ** -40  # rounds up in float64->float16, ties in float32
    got = np.frombuffer(_kernels._value_bytes("float16", v), np.float16)[0]
    assert got == np.float16(np.float32(v))


@pytest.mark.parametrize(("shape", "strides", "expected"), [
    ([2, 3, 4], [[12, 4, 1]], ([24], [[1]])),
    ([2, 1, 4], [[4, 100, 1]], ([8], [[1]])),
    ([3, 4], [[1, 3]], ([3, 4], [[1, 3]])),
    ([1, 1], [[5, 7]], ([1], [[0]])),
    ([4, 5], [[0, 1]], ([4, 5], [[0, 1]])),
])
def test_coalesce(shape, strides, expected):
    assert _kernels._coalesce(shape, *strides) == expected


def test_coalesce_two_buffers():
    # contiguous source, transposed destination: nothing merges
    assert _kernels._coalesce([2, 3], [1, 2], [3, 1]) == ([2, 3], [[1, 2], [3, 1]])


def test_kernel_sources_cover_every_pair():
    for dst in _kernels.DTYPE_NAMES:
        assert "fill_kernel" in _kernels._fill_source(dst)
        for src in _kernels.DTYPE_NAMES:
            assert "copy_kernel" in _kernels._copy_source(dst, src)
    with pytest.raises(TypeError):
        _kernels._name("float8")


def test_nvrtc_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORCTL_CACHE_DIR", str(tmp_path))
    assert _nvrtc.cache_dir() == tmp_path
    monkeypatch.delenv("TENSORCTL_CACHE_DIR")
    assert _nvrtc.cache_dir().parts[-3:] == (".cache", "tensorctl", "kernels")


def test_import_does_not_touch_driver():
    import subprocess

    code = ("import refimpl.cuda, sys; from refimpl.cuda import _driver; "
            "sys.exit(1 if _driver._init_done else 0)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, check=False)
    assert proc.returncode == 0


def test_stream_wrappers_of_one_stream_are_equal_and_hash_alike():
    # the engine keeps leaf streams in a set: equal wrappers must hash alike, and a
    # stream of another device with the same handle is another stream
    from refimpl.cuda.streams import Stream

    a = Stream(stream_id=5, device_index=0, device_type=1)
    b = Stream(stream_id=5, device_index=0, device_type=1)
    other = Stream(stream_id=5, device_index=1, device_type=1)
    assert a == b and hash(a) == hash(b)
    assert a != other
    assert len({a, b, other}) == 2
