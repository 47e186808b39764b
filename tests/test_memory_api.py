"""refimpl.cuda.memory, the torch.cuda.memory functions, on simulated devices (spec: cuda_memory).

Also the allocator settings parser, checked against torch 2.13's own parser where
the CPU build of torch has it (the device-generic keys).
"""

from __future__ import annotations

import collections
import json
import pickle
import warnings
from types import SimpleNamespace

import pytest

from refimpl.cuda import _allocator, _allocator_config, memory
from refimpl.cuda._allocator import AddressSpaceSource
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._errors import OutOfMemoryError

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@pytest.fixture
def clean_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA runtime registered; every module-level state restored afterwards."""
    monkeypatch.setattr(_allocator, "_factory", None)
    monkeypatch.setattr(_allocator, "_allocators", {})
    monkeypatch.setattr(_allocator, "_history_settings", None)
    monkeypatch.setattr(_allocator, "_global_oom_observers", [])
    monkeypatch.setattr(_allocator_config, "_config", _allocator_config.AllocatorConfig())
    for name in ("_current_device", "_current_stream", "_lazy_init_hook",
                 "_is_initialized_hook", "_device_count"):
        monkeypatch.setattr(memory, name, None)


@pytest.fixture
def sources(clean_state: None) -> dict[int, AddressSpaceSource]:
    """Two simulated 80 GiB devices."""
    devices = {0: AddressSpaceSource(80 * GiB), 1: AddressSpaceSource(80 * GiB, base=0x7E0000000000)}
    _allocator.set_segment_source_factory(devices.__getitem__)
    return devices


# -- before CUDA is initialised --------------------------------------------------------------


def test_statistics_before_initialisation_read_as_torch(clean_state: None) -> None:
    assert memory.memory_stats() == {}
    assert memory.memory_stats_as_nested_dict() == {}
    assert memory.memory_allocated() == 0
    assert memory.max_memory_reserved() == 0
    assert memory.memory_snapshot() == []
    memory.empty_cache()
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver on your system"):
        memory.caching_allocator_alloc(1)
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver"):
        memory.reset_peak_memory_stats()  # the current device is asked for: CUDA initialises
    with pytest.raises(RuntimeError, match=r"^Invalid device argument 0: did you call init\?$"):
        memory.reset_peak_memory_stats(0)


# -- allocation through the public API --------------------------------------------------------


def test_caching_allocator_alloc_of_one_byte_costs_512(sources: dict) -> None:
    before = memory.memory_allocated()
    ptr = memory.caching_allocator_alloc(1)
    assert memory.memory_allocated() == before + 512
    memory.caching_allocator_delete(ptr)
    assert memory.memory_allocated() == before
    with pytest.raises(RuntimeError, match=r"^invalid device pointer: 0x10$"):
        memory.caching_allocator_delete(0x10)


def test_stream_and_device_arguments(sources: dict) -> None:
    stream = SimpleNamespace(cuda_stream=0xABC0)
    ptr = memory.caching_allocator_alloc(4096, device="cuda:1", stream=stream)
    assert memory.memory_allocated(1) == 4096
    assert memory.memory_allocated("cuda:0") == 0
    assert memory.memory_allocated(SimpleNamespace(type="cuda", index=1)) == 4096
    (segment,) = memory.memory_snapshot()
    assert (segment["device"], segment["stream"]) == (1, 0xABC0)
    memory.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="Invalid type for stream argument"):
        memory.caching_allocator_alloc(1, stream="s")
    with pytest.raises(ValueError, match=r"^Expected a cuda device, but got: cpu$"):
        memory.memory_allocated("cpu")
    with pytest.raises(RuntimeError, match=r"^Invalid device string: 'cuda0'$"):
        memory.memory_allocated("cuda0")


def test_hooks_select_device_and_stream(sources: dict) -> None:
    memory.set_current_device_hook(lambda: 1)
    memory.set_current_stream_hook(lambda device: 0x1000 + device)
    memory.set_device_count_hook(lambda: 2)
    ptr = memory.caching_allocator_alloc(100)
    assert memory.memory_allocated() == memory.memory_allocated(1) == 512
    assert memory.memory_snapshot()[0]["stream"] == 0x1001
    memory.caching_allocator_delete(ptr)
    with pytest.raises(RuntimeError, match="Invalid device argument 5"):
        memory.memory_stats(5)


def test_memory_stats_is_torch_flat_sorted_dict(sources: dict) -> None:
    memory.caching_allocator_alloc(3 * MiB)
    stats = memory.memory_stats()
    assert isinstance(stats, collections.OrderedDict)
    assert list(stats) == sorted(stats)
    assert len(stats) == 122
    assert stats["allocated_bytes.all.current"] == 3 * MiB
    assert stats["reserved_bytes.large_pool.current"] == 20 * MiB
    assert stats["max_split_size"] == -1
    nested = memory.memory_stats_as_nested_dict()
    assert nested["segment"]["large_pool"]["current"] == 1


def test_peak_resets_and_deprecated_names(sources: dict) -> None:
    ptr = memory.caching_allocator_alloc(5 * MiB)
    memory.caching_allocator_delete(ptr)
    assert memory.max_memory_allocated() == 5 * MiB
    memory.reset_peak_memory_stats()
    assert memory.max_memory_allocated() == 0
    assert memory.max_memory_reserved() == 20 * MiB
    with pytest.warns(FutureWarning, match="reset_max_memory_allocated now calls"):
        memory.reset_max_memory_allocated()
    with pytest.warns(FutureWarning, match="renamed to `torch.cuda.memory_reserved`"):
        assert memory.memory_cached() == 20 * MiB
    memory.reset_accumulated_memory_stats()
    assert memory.memory_stats()["allocated_bytes.all.allocated"] == 0
    memory.empty_cache()
    assert memory.memory_reserved() == 0


def test_memory_summary_matches_torch_layout(sources: dict, monkeypatch: pytest.MonkeyPatch):
    torch_memory = pytest.importorskip("torch.cuda.memory")
    ptrs = [memory.caching_allocator_alloc(s) for s in (1, 3 * MiB, 900 * MiB, 1000, 2 * GiB)]
    memory.caching_allocator_delete(ptrs[2])
    stats = memory.memory_stats()
    monkeypatch.setattr(torch_memory, "memory_stats", lambda device=None: stats)
    monkeypatch.setattr(torch_memory, "_get_device_index", lambda device, optional=False: 0)
    assert memory.memory_summary() == torch_memory.memory_summary()
    assert memory.memory_summary(abbreviated=True) == torch_memory.memory_summary(abbreviated=True)


def test_per_process_memory_fraction(sources: dict) -> None:
    with pytest.raises(TypeError, match=r"^Invalid type for fraction argument, must be `float`$"):
        memory.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match=r"^Invalid fraction value: 1\.5\. Allowed range: 0~1$"):
        memory.set_per_process_memory_fraction(1.5)
    assert memory.get_per_process_memory_fraction() == 1.0
    memory.set_per_process_memory_fraction(0.25)
    assert memory.get_per_process_memory_fraction() == 0.25
    with pytest.raises(OutOfMemoryError, match=r"20\.00 GiB allowed; "):
        memory.caching_allocator_alloc(21 * GiB)


def test_out_of_memory_observer_is_notified(sources: dict) -> None:
    seen = []
    memory._attach_out_of_memory_observer(lambda *args: seen.append(args))
    with pytest.raises(OutOfMemoryError):
        memory.caching_allocator_alloc(1024**4)
    assert seen == [(0, 1024**4, 80 * GiB, 80 * GiB)]
    assert memory.memory_stats()["num_ooms"] == 1


def test_mem_get_info_and_backend(sources: dict) -> None:
    # list_gpu_processes is NVML's (tests/test_nvml.py), whatever the segment source
    memory.caching_allocator_alloc(1)
    assert memory.mem_get_info() == (80 * GiB - 2 * MiB, 80 * GiB)
    assert memory.get_allocator_backend() == "native"


def test_set_allocator_settings_applies_now(sources: dict) -> None:
    with pytest.warns(FutureWarning, match="_set_allocator_settings is deprecated"):
        memory._set_allocator_settings("max_split_size_mb:1024")
    with pytest.raises(OutOfMemoryError):
        memory.caching_allocator_alloc(1024**4)
    settings = memory._snapshot()["allocator_settings"]
    assert settings["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:1024"
    assert settings["max_split_size"] == 1024 * MiB
    assert settings["roundup_power2_divisions"]["1"] == 0
    assert len(settings["roundup_power2_divisions"]) == 16


# -- history, snapshots ---------------------------------------------------------------------


def test_record_memory_history_validates_its_arguments(sources: dict) -> None:
    with pytest.raises(RuntimeError, match=r"^expected state to be 'state', 'all', or None$"):
        memory._record_memory_history("some")
    with pytest.raises(RuntimeError, match="expected context to be 'state', 'alloc', 'all', or None"):
        memory._record_memory_history("all", context="every")
    with pytest.raises(RuntimeError, match=r"^expected stacks to be 'python', or 'all'$"):
        memory._record_memory_history("all", stacks="cpp")


@pytest.mark.parametrize("context", ["alloc", "all", "state"])
def test_memory_plots_free_stack(sources: dict, context: str) -> None:
    try:
        memory.empty_cache()
        memory._record_memory_history(context=context)
        box = []

        def thealloc() -> None:
            box.append(memory.caching_allocator_alloc(48))

        def thefree() -> None:
            memory.caching_allocator_delete(box.pop())

        thealloc()
        thefree()
        text = json.dumps(memory._snapshot())
        assert ("thefree" in text) == (context == "all")
        assert ("thealloc" in text) == (context != "state")
    finally:
        memory._record_memory_history(None)


def test_memory_plots_history_context(sources: dict) -> None:
    box = []

    def should_capture1() -> None:
        box.append(memory.caching_allocator_alloc(64))

    def should_not_capture() -> None:
        box.append(memory.caching_allocator_alloc(48))

    def should_capture2() -> None:
        box.append(memory.caching_allocator_alloc(64))

    try:
        memory._record_memory_history(context="all", stacks="python")
        should_capture1()
        memory._record_memory_history(context=None)
        should_not_capture()
        memory._record_memory_history(context="all", stacks="python")
        should_capture2()
        text = json.dumps(memory._snapshot())
        assert "should_capture1" in text
        assert "should_not_capture" not in text
        assert "should_capture2" in text
    finally:
        memory._record_memory_history(None)


@pytest.mark.parametrize("context", ["alloc", "all", "state"])
def test_memory_plots_free_segment_stack(sources: dict, context: str) -> None:
    try:
        memory.empty_cache()
        memory._record_memory_history(context=context)
        memory.caching_allocator_delete(memory.caching_allocator_alloc(48))
        memory.empty_cache()
        text = json.dumps(memory._snapshot())
        assert ("empty_cache" in text) == (context == "all")
    finally:
        memory._record_memory_history(None)


def test_history_applies_to_devices_created_later(sources: dict) -> None:
    memory._record_memory_history("all", context=None)
    memory.caching_allocator_alloc(100, device=1)
    snapshot = memory._snapshot()
    assert [len(t) for t in snapshot["device_traces"]] == [0, 2]
    assert snapshot["device_traces"][1][1]["action"] == "alloc"
    assert set(snapshot) == {"segments", "device_traces", "allocator_settings",
                             "external_annotations"}
    memory._record_memory_history(None)


def test_dump_snapshot_writes_a_plain_pickle(sources: dict, tmp_path) -> None:
    memory._record_memory_history("all")
    memory.caching_allocator_alloc(311 * 411 * 4)
    path = tmp_path / "snap.pickle"
    memory._dump_snapshot(str(path))
    memory._record_memory_history(None)
    data = pickle.loads(path.read_bytes())
    (segment,) = data["segments"]
    assert segment["blocks"][0]["requested_size"] == 511284
    assert str(128 * 128 * 4) not in json.dumps(data)
    assert [e["action"] for e in data["device_traces"][0]] == ["segment_alloc", "alloc"]


def test_legacy_boolean_history_signature(sources: dict) -> None:
    memory._record_memory_history(True, trace_alloc_max_entries=10, trace_alloc_record_context=True)
    memory.caching_allocator_alloc(100)
    assert len(memory._snapshot()["device_traces"][0]) == 2
    memory._record_memory_history(False)
    assert memory._snapshot()["device_traces"][0] == []


# -- the settings parser -----------------------------------------------------------------------

GENERIC_SETTINGS = [
    "max_split_size_mb:1024", "max_split_size_mb:10", "max_split_size_mb", "max_split_size_mb:abc",
    "max_split_size_mb:-1", "max_split_size_mb:1024:5", "max_split_size_mb=1024",
    "max_split_size_mb:99999999999999999999", "max_split_size_mb:1.5", "max_split_size_mb:20",
    " max_split_size_mb : 100 ", "max_split_size_mb:100 max", "",
    "roundup_power2_divisions:4", "roundup_power2_divisions:3", "roundup_power2_divisions:0",
    "roundup_power2_divisions:1", "roundup_power2_divisions:[256:8,512:2,>:1]",
    "roundup_power2_divisions:[256:8,512:2", "roundup_power2_divisions:[]",
    "roundup_power2_divisions:[3:4]", "roundup_power2_divisions:[256:3]",
    "roundup_power2_divisions:[>:4]", "roundup_power2_divisions:[256:8;512:2]",
    "garbage_collection_threshold:0.5", "garbage_collection_threshold:1.5",
    "garbage_collection_threshold:0", "garbage_collection_threshold:abc",
    "garbage_collection_threshold:1e-3", "expandable_segments:False", "expandable_segments:maybe",
    "expandable_segments:true", "max_non_split_rounding_mb:30", "max_non_split_rounding_mb:10",
    "pinned_use_background_threads:True", "pinned_use_background_threads:1",
    "max_split_size_mb:64,garbage_collection_threshold:0.7,roundup_power2_divisions:[>:2]",
]


def _outcome(fn, text: str) -> tuple[str, str]:
    try:
        fn(text)
    except Exception as exc:  # noqa: BLE001 - the outcome is what is compared
        return type(exc).__name__, str(exc)
    return "ok", ""


@pytest.mark.parametrize("text", GENERIC_SETTINGS)
def test_settings_parser_agrees_with_torch(text: str) -> None:
    torch = pytest.importorskip("torch")
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:
        pytest.skip("this torch has no device-generic allocator settings parser")
    theirs = _outcome(setter, text)
    ours = _outcome(parse_allocator_settings, text)
    assert ours[0] == theirs[0], (ours, theirs)
    assert ours[1] in theirs[1], (ours, theirs)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("foo:1", ValueError, r"^Unrecognized key 'foo' in CUDA allocator config\.$"),
        (",max_split_size_mb:100", ValueError, r"^Unrecognized key ',' in CUDA allocator config"),
        ("backend:bogus", ValueError, "^Unknown allocator backend, options are native and cuda"),
        ("backend:cudaMallocAsync", NotImplementedError, "cudaMallocAsync"),
        ("expandable_segments:True", NotImplementedError, "expandable_segments"),
        ("pinned_num_register_threads:3", ValueError,
         r"^Number of register threads has to be power of 2, got 3$"),
        ("pinned_num_register_threads:256", ValueError,
         r"^Number of register threads should be less than or equal to 128, got 256$"),
        ("per_process_memory_fraction:2", ValueError,
         r"^per_process_memory_fraction is invalid, set it in \[0\.0, 1\.0\]$"),
        ("release_lock_on_cudamalloc:yes", ValueError, "Expected 'True' or 'False' at index 2"),
        ("pinned_reserve_segment_size_mb:0", ValueError, "has to be greater than 0"),
    ],
)
def test_cuda_settings_errors(text: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        parse_allocator_settings(text)


def test_cuda_settings_values_and_resets() -> None:
    cfg = parse_allocator_settings(
        "backend:native,pinned_use_cuda_host_register:True,pinned_num_register_threads:8,"
        "release_lock_on_cudamalloc:True,max_split_size_mb:64"
    )
    assert (cfg.pinned_use_cuda_host_register, cfg.pinned_num_register_threads) == (True, 8)
    assert cfg.release_lock_on_cudamalloc and cfg.max_split_size == 64 * MiB
    again = parse_allocator_settings("roundup_power2_divisions:[256:8,>:2]", cfg)
    assert again.max_split_size == _allocator_config.SIZE_MAX  # reset by every parse
    assert again.pinned_num_register_threads == 8  # kept
    assert again.roundup_power2_divisions == [8] * 9 + [2] * 7


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_allocator_config, "_config", None)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    assert _allocator_config.get_config().max_split_size == 128 * MiB
    monkeypatch.setattr(_allocator_config, "_config", None)
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:256")
    assert _allocator_config.get_config().max_split_size == 256 * MiB


def test_release_lock_on_cudamalloc_still_allocates(sources: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        memory._set_allocator_settings("release_lock_on_cudamalloc:True")
    ptr = memory.caching_allocator_alloc(30 * MiB)
    memory.caching_allocator_delete(ptr)
    _allocator.get_device_allocator(0).check_invariants()
