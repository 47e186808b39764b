"""A snapshot replay under its recorded settings ends with exactly torch's segments.

The ``torch-2.11.0-h100-*.pickle.gz`` fixtures are real ``torch.cuda.memory._snapshot()``
results, recorded on an H100 by ``bench/record_torch_snapshot.py`` (training runs with
``empty_cache()`` calls, a side stream with ``record_stream``, both pools; ``capped``
under a memory fraction with OOMs, cache releases inside ``malloc`` and garbage
collection; ``ring`` with a history that begins mid-run). The others are the older
snapshot fixtures (``torch-2.11.0-h200.pickle`` from an H200).
"""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.memstats import memstats
from refimpl.cuda import _memviz
from refimpl.cuda._replay_snapshot import compare_segments, recorded_config, replay_snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots"
H100 = sorted(FIXTURES.glob("torch-2.11.0-h100-*.pickle.gz"))
REAL = [*H100, FIXTURES / "torch-2.11.0-h200.pickle", FIXTURES / "torch_synthetic.pickle"]


def load(path: Path) -> dict:
    return _memviz.load_snapshot(str(path))


def invoke(*args: str):
    return CliRunner().invoke(memstats, list(args))


def test_the_h100_fixtures_are_there_and_exercise_what_they_claim() -> None:
    assert [p.name.split("-")[-1] for p in H100] == ["capped.pickle.gz", "ring.pickle.gz",
                                                     "train.pickle.gz"]
    for path in H100:
        assert path.stat().st_size < 2_000_000
    actions = {p.name: Counter(e["action"] for e in load(p)["device_traces"][0]) for p in H100}
    train, capped = actions[H100[2].name], actions[H100[0].name]
    assert train["segment_free"] > 0 and train["alloc"] > 1000
    assert capped["oom"] > 0 and capped["segment_free"] > 100
    streams = {e["stream"] for e in load(H100[2])["device_traces"][0]}
    assert len(streams) == 2


def _figures(segments: list[dict]) -> list[tuple]:
    """(address, size, allocated bytes) per segment, counted from the blocks."""
    return sorted(
        (s["address"], s["total_size"],
         sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated"))
        for s in segments
    )


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_replay_under_recorded_settings_reproduces_the_snapshot(path: Path) -> None:
    snapshot = load(path)
    result = replay_snapshot(snapshot)
    assert result.mode == "recorded"
    assert result.divergence is None
    assert result.final_mismatch is None and result.reproduces
    # checked here without compare_segments: count, sizes and allocated bytes per segment
    assert _figures(result.segments) == _figures(snapshot["segments"])
    assert result.final_reserved == sum(s["total_size"] for s in snapshot["segments"])
    blocks = sorted((b["address"], b["size"], b["state"])
                    for s in snapshot["segments"] for b in s["blocks"])
    assert blocks == sorted((b["address"], b["size"], b["state"])
                            for s in result.segments for b in s["blocks"])


def test_empty_cache_releases_are_what_makes_the_replay_match() -> None:
    snapshot = load(H100[2])  # train
    trace = snapshot["device_traces"][0]
    releases = [e for e in trace if e["action"] == "segment_free"]
    assert releases and all(any(f["name"] == "empty_cache" for f in e["frames"])
                            for e in releases)
    # the same history without its releases ends with other segments than torch's
    stripped = copy.deepcopy(snapshot)
    stripped["device_traces"][0] = [e for e in trace if e["action"] != "segment_free"]
    result = replay_snapshot(stripped)
    assert not result.reproduces and result.divergence is not None
    assert result.final_reserved != sum(s["total_size"] for s in snapshot["segments"])


def test_recorded_settings_come_from_the_snapshot() -> None:
    config = recorded_config(load(H100[0]))  # capped
    assert config.max_split_size == 64 << 20
    assert config.garbage_collection_threshold == 0.6
    assert config.roundup_power2_divisions == [4] * 16 and config.roundup_enabled
    default = recorded_config(load(H100[2]))
    assert default.max_split_size > 1 << 62 and not default.roundup_enabled


def test_a_history_that_begins_mid_run_is_rebuilt() -> None:
    result = replay_snapshot(load(H100[1]))  # ring: 700 entries of a longer run
    assert not result.history_complete and result.initial_error is None
    assert result.preexisting > 0 and result.reproduces


def test_releases_without_stacks_are_classified_by_the_replay() -> None:
    snapshot = load(H100[2])
    with_frames = replay_snapshot(snapshot).causes
    for entry in snapshot["device_traces"][0]:
        entry["frames"] = []
    result = replay_snapshot(snapshot)
    assert result.reproduces and result.causes == with_frames
    assert replay_snapshot(snapshot, capacity=80 << 30).divergence is None


def test_a_tampered_snapshot_is_not_reproduced() -> None:
    snapshot = load(H100[2])
    segment = next(s for s in snapshot["segments"] if len(s["blocks"]) > 1)
    block = next(b for b in segment["blocks"] if b["state"] == "active_allocated")
    block["state"] = "inactive"
    result = replay_snapshot(snapshot)
    assert not result.reproduces
    assert f"{segment['address']:#x}" in result.final_mismatch
    assert compare_segments(snapshot["segments"], snapshot["segments"]) is None


def test_a_tampered_trace_names_its_first_divergence() -> None:
    snapshot = load(H100[2])
    trace = snapshot["device_traces"][0]
    index = [i for i, e in enumerate(trace) if e["action"] == "alloc"][300]
    old = trace[index]["addr"]
    trace[index]["addr"] = old + 512
    for entry in trace[index + 1:]:
        if entry.get("addr") == old:
            entry["addr"] = old + 512
    result = replay_snapshot(snapshot)
    assert result.divergence is not None and result.divergence.index == index
    assert f"placed it at {old:#x}" in str(result.divergence)


def test_a_what_if_reports_where_it_departs() -> None:
    snapshot = load(H100[0])  # capped: torch released cache under its memory cap
    result = replay_snapshot(snapshot, capacity=80 << 30)
    assert result.mode == "what-if"
    div = result.divergence
    assert div is not None
    trace = snapshot["device_traces"][0]
    # the first release torch made for a request is where an uncapped device parts ways
    first_own_release = next(i for i, c in enumerate(result.causes) if c == "allocator")
    assert first_own_release < div.index
    assert all(trace[i]["action"] != "segment_free" or result.causes[i] != "empty_cache"
               for i in range(first_own_release))


# -- the command line ---------------------------------------------------------------------


def test_cli_states_reproduction_before_the_what_if() -> None:
    path = str(H100[2])
    result = invoke("replay", path)
    assert result.exit_code == 0, result.output
    assert "replay reproduces the snapshot: 21 segments, 266.00 MiB reserved" in result.output
    result = invoke("replay", path, "--capacity", "256MiB")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.index("replay reproduces the snapshot") < text.index("What-if replay")
    assert "departs from the recorded run at event" in " ".join(text.split())
    same = invoke("replay", path, "--capacity", "80GiB")
    assert "the what-if follows the recorded run to the end" in same.output


def test_cli_json_has_both_replays() -> None:
    report = json.loads(invoke("replay", str(H100[0]), "--max-split-size-mb", "100",
                               "--json").output)
    assert report["fidelity"]["reproduces"] is True
    assert report["snapshot"]["segments"] == report["fidelity"]["segments"] == 17
    assert report["recorded_settings"].startswith("max_split_size_mb:64")
    assert report["what_if"] is True and report["replay"]["mode"] == "what-if"
    assert report["replay"]["divergence"]["index"] >= 0


def test_cli_exit_1_when_the_snapshot_is_not_reproduced(tmp_path: Path) -> None:
    snapshot = load(H100[2])
    snapshot["segments"].pop()
    path = tmp_path / "tampered.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps(snapshot)))
    result = invoke("replay", str(path))
    assert result.exit_code == 1
    assert "replay does not reproduce the snapshot" in result.output


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_cli_corrupt_compressed_snapshot_is_one_line_exit_2(tmp_path: Path, damage: str) -> None:
    raw = H100[2].read_bytes()
    data = raw[: len(raw) // 2] if damage == "truncate" else raw[:10] + b"\0" * 64 + raw[74:]
    path = tmp_path / "bad.pickle.gz"
    path.write_bytes(data)
    result = invoke("replay", str(path))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "gzip" in result.output


def test_cli_unreplayable_settings_are_one_line_exit_2(tmp_path: Path) -> None:
    snapshot = load(H100[2])
    snapshot["allocator_settings"]["expandable_segments"] = True
    path = tmp_path / "expandable.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    result = invoke("replay", str(path))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "expandable" in result.output
