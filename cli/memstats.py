"""``tensorctl memstats``: look at CUDA caching-allocator memory, from snapshots or live runs.

Forms:

* ``tensorctl memstats FILE [--json] [--html PATH]`` (shorthand of ``memstats show``):
  summarise a snapshot pickle written by ``torch.cuda.memory._dump_snapshot`` or
  refimpl's ``_dump_snapshot``;
* ``tensorctl memstats run SCRIPT [ARGS]...``: run a script under refimpl with
  history recording, then show the allocator at exit (or at the OOM that ended it);
* ``tensorctl memstats replay FILE [settings]``: replay a snapshot's history through
  refimpl's allocator on a simulated device (no GPU needed). The replay under the
  recorded settings comes first and must end with exactly the snapshot's segments
  (it says so, or names the first divergence; exit status 1 when it does not); a
  what-if (``--capacity``, ``--alloc-conf``...) follows, with the trace event where it
  departs from the recorded run. A step trace from ``bench/record_alloc_trace.py``
  is checked figure by figure.

Profiler statistics (ops, kernels, memory of a run or of a torch trace) are the
``tensorctl profile`` command (cli/profile.py), registered with these commands.

Unreadable, truncated, hostile or wrongly shaped files produce one line on stderr
and exit status 2; nothing in them is executed. The logic lives in
``refimpl.cuda._memviz``, ``_memviz_html`` and ``_replay``.
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from cli import profile as _profile_cli
from refimpl.cuda import _memviz, _replay, _replay_snapshot
from refimpl.cuda._allocator_config import parse_allocator_settings
from refimpl.cuda._allocator_stats import format_size

__all__ = ["COMMANDS", "memstats"]

_FRAGMENTATION_HELP = (
    "Internal fragmentation: allocated bytes beyond the requested bytes (rounding). "
    "External fragmentation: free bytes inside reserved segments that sit in free blocks "
    "unable to serve the target request (too small, or in the other pool: requests up to "
    "1 MiB use small segments); the target is the largest failed request, or the largest "
    "live allocation when nothing failed."
)


def _fail(message: str) -> NoReturn:
    click.echo(f"tensorctl memstats: {message}", err=True)
    sys.exit(2)


class _MemstatsGroup(click.Group):
    """A group where ``memstats FILE`` means ``memstats show FILE``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_MemstatsGroup)
def memstats() -> None:
    """Inspect CUDA caching-allocator memory: snapshots, live runs, replays.

    \b
    tensorctl memstats FILE [--json] [--html PATH]
    tensorctl memstats run SCRIPT [ARGS]...
    tensorctl memstats replay FILE [--capacity SIZE] [settings]
    """


def _console() -> Console:
    return Console(highlight=False, width=max(Console().width, 110))


def _segment_table(segments: list[dict[str, Any]], limit: int = 200) -> Table:
    table = Table(title="Segments (# allocated, + pending free, . free)")
    for column in ("address", "pool", "stream", "size", "allocated", "blocks", "map"):
        table.add_column(column, justify="right" if column in ("size", "allocated") else "left")
    for segment in segments[:limit]:
        allocated = sum(
            b["size"] for b in segment["blocks"] if b["state"] == "active_allocated"
        )
        table.add_row(
            f"{segment['address']:#x}",
            str(segment["segment_type"]),
            str(segment["stream"]),
            format_size(segment["total_size"]),
            format_size(allocated),
            str(len(segment["blocks"])),
            _memviz.segment_bar(segment, 40),
        )
    if len(segments) > limit:
        table.caption = f"{len(segments) - limit} more segments not shown"
    return table


def _summary_table(summary: dict[str, Any], title: str) -> Table:
    frag = summary["fragmentation"]
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    blocks = summary["blocks"]
    for name, value in (
        ("segments", str(summary["segments"])),
        ("reserved", format_size(summary["reserved_bytes"])),
        ("allocated", format_size(summary["allocated_bytes"])),
        ("requested", format_size(summary["requested_bytes"])),
        ("active", format_size(summary["active_bytes"])),
        ("blocks allocated / pending / free",
         f"{blocks['active_allocated']} / {blocks['active_pending_free']} / {blocks['inactive']}"),
        ("internal fragmentation",
         f"{format_size(frag['internal_bytes'])} ({frag['internal_ratio']:.1%})"),
        ("external fragmentation",
         f"{format_size(frag['external_bytes'])} ({frag['external_ratio']:.1%} of free)"),
        ("  measured against",
         f"{frag['target_request']} {format_size(frag['target_request_bytes'])}"),
        ("largest free block", format_size(frag["largest_free_block"])),
        ("history entries", str(summary["trace_entries"])),
    ):
        table.add_row(name, value)
    return table


def _write_html(path: str, snapshot: dict[str, Any], summary: dict[str, Any], title: str) -> None:
    from refimpl.cuda._memviz_html import render_html

    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_html(snapshot, summary, title))
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


@memstats.command("show", epilog=_FRAGMENTATION_HELP)
@click.argument("file", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--html", "html_path", type=click.Path(),
              help="Write a self-contained page with the segment map and the timeline.")
def show(file: str, as_json: bool, html_path: str | None) -> None:
    """Summarise the snapshot pickle FILE (torch's or refimpl's _dump_snapshot)."""
    try:
        snapshot = _memviz.load_snapshot(file)
    except _memviz.SnapshotError as exc:
        _fail(f"{file}: {exc}")
    summary = _memviz.summarize(snapshot)
    if html_path:
        _write_html(html_path, snapshot, summary, f"Memory snapshot {file}")
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    console = _console()
    console.print(_summary_table(summary, f"Snapshot {file}"))
    console.print(_segment_table(snapshot["segments"]))
    if html_path:
        console.print(f"wrote {html_path}")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2,
          "mib": 1024**2, "g": 1024**3, "gb": 1000**3, "gib": 1024**3, "t": 1024**4,
          "tb": 1000**4, "tib": 1024**4}


def _parse_size(text: str) -> int:
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        _fail(f"--capacity: cannot read {text!r} as a size (examples: 80GiB, 512MiB, 1e9 is not)")
    return int(float(match.group(1)) * _UNITS[unit])


def _replay_step_trace(file: str, data: dict[str, Any]) -> None:
    try:
        mismatches = _replay.replay_step_trace(data)
    except (KeyError, TypeError, ValueError) as exc:
        _fail(f"{file}: not a usable step trace ({type(exc).__name__}: {exc})")
    runs = len(data.get("runs", []))
    steps = sum(len(r.get("steps", [])) for r in data.get("runs", []))
    if not mismatches:
        click.echo(f"{file}: {runs} runs, {steps} steps: every figure matches")
        return
    for mismatch in mismatches[:50]:
        click.echo(str(mismatch))
    click.echo(f"{file}: {len(mismatches)} figures differ over {runs} runs, {steps} steps")
    sys.exit(1)


@memstats.command("replay", epilog=_FRAGMENTATION_HELP)
@click.argument("file", type=click.Path())
@click.option("--capacity", help="Simulated device size (e.g. 80GiB); unbounded by default.")
@click.option("--max-split-size-mb", type=int, help="Allocator setting max_split_size_mb.")
@click.option("--roundup-power2-divisions", type=int,
              help="Allocator setting roundup_power2_divisions.")
@click.option("--garbage-collection-threshold", type=float,
              help="Allocator setting garbage_collection_threshold (needs --capacity).")
@click.option("--alloc-conf", default="", help="A full PYTORCH_CUDA_ALLOC_CONF string.")
@click.option("--device", type=int, default=0, show_default=True, help="Which device's history.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable report.")
def replay(
    file: str,
    capacity: str | None,
    max_split_size_mb: int | None,
    roundup_power2_divisions: int | None,
    garbage_collection_threshold: float | None,
    alloc_conf: str,
    device: int,
    as_json: bool,
) -> None:
    """Replay the history of snapshot FILE (.pickle or .pickle.gz) through refimpl's allocator.

    The replay under the recorded settings comes first and must end with exactly the
    snapshot's segments. Settings or --capacity add a what-if replay: named settings
    replace the recorded ones, the others keep their recorded values.
    """
    try:
        with open(file, "rb") as f:
            raw = f.read()
    except OSError as exc:
        _fail(f"{file}: cannot read it ({exc.strerror or exc})")
    if raw.lstrip()[:1] == b"{":
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            _fail(f"{file}: not valid JSON ({exc})")
        _replay_step_trace(file, data)
        return
    try:
        snapshot = _memviz.load_snapshot_bytes(raw)
    except _memviz.SnapshotError as exc:
        _fail(f"{file}: {exc}")
    try:
        recorded_config = _replay_snapshot.recorded_config(snapshot)
    except (TypeError, ValueError, NotImplementedError) as exc:
        _fail(f"{file}: its allocator settings cannot be replayed ({exc})")
    settings = [s for s in (alloc_conf.strip(),) if s]
    if max_split_size_mb is not None:
        settings.append(f"max_split_size_mb:{max_split_size_mb}")
    if roundup_power2_divisions is not None:
        settings.append(f"roundup_power2_divisions:{roundup_power2_divisions}")
    if garbage_collection_threshold is not None:
        if capacity is None:
            _fail("--garbage-collection-threshold needs --capacity (it acts on a memory cap)")
        settings.append(f"garbage_collection_threshold:{garbage_collection_threshold}")
    conf = ",".join(settings)
    what_if = bool(conf) or capacity is not None
    config = None
    if conf:
        try:
            config = parse_allocator_settings(conf, recorded_config)
        except (ValueError, RuntimeError, IndexError, NotImplementedError) as exc:
            _fail(f"allocator settings {conf!r}: {exc}")
        # named keys replace the recorded ones; the others keep their recorded values
        _keep_recorded(config, recorded_config, conf)
    size = _parse_size(capacity) if capacity is not None else None
    fidelity = _replay_snapshot.replay_snapshot(snapshot, device=device)
    result = fidelity
    if what_if:
        result = _replay_snapshot.replay_snapshot(
            snapshot, config or recorded_config, size, device,
            set_fraction=garbage_collection_threshold is not None, causes=fidelity.causes,
        )
    report = _replay_report(fidelity, result, conf, recorded_config, size, what_if)
    recorded_segments = [s for s in snapshot["segments"] if s.get("device", device) == device]
    report["snapshot"] = {
        "segments": len(recorded_segments),
        "reserved": sum(s.get("total_size", 0) for s in recorded_segments),
        "allocated": sum(s.get("allocated_size", 0) for s in recorded_segments),
    }
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        _print_replay(file, fidelity, result, report, what_if)
    if not fidelity.reproduces:
        sys.exit(1)


_SETTING_KEYS = {
    "max_split_size_mb": "max_split_size",
    "roundup_power2_divisions": "roundup_power2_divisions",
    "garbage_collection_threshold": "garbage_collection_threshold",
}


def _keep_recorded(config: Any, recorded: Any, conf: str) -> None:
    """A parse resets the three rounding/split/GC keys; those the what-if does not name
    go back to the recorded values."""
    named = {part.split(":", 1)[0].strip() for part in conf.split(",")}
    for key, attr in _SETTING_KEYS.items():
        if key not in named:
            value = getattr(recorded, attr)
            setattr(config, attr, list(value) if isinstance(value, list) else value)
    config.roundup_enabled = any(d > 1 for d in config.roundup_power2_divisions)


def _fidelity_line(fidelity: Any) -> str:
    if fidelity.reproduces:
        line = (
            f"replay reproduces the snapshot: {len(fidelity.segments)} segments, "
            f"{format_size(fidelity.final_reserved)} reserved, "
            f"{format_size(fidelity.final_allocated)} allocated"
        )
    else:
        where = f" (first divergence: {fidelity.divergence})" if fidelity.divergence else ""
        line = f"replay does not reproduce the snapshot: {fidelity.final_mismatch}{where}"
    if not fidelity.history_complete:
        line += (
            "\n  the history begins mid-run; "
            + ("its starting state was rebuilt from the snapshot"
               if fidelity.initial_error is None
               else f"its starting state could not be rebuilt ({fidelity.initial_error})")
        )
    return line


def _replay_figures(result: Any) -> dict[str, Any]:
    frag = _memviz.fragmentation({"segments": result.segments}, result.failed_requests)
    return {
        "mode": result.mode,
        "allocs": result.allocs,
        "frees": result.frees,
        "unmatched_frees": result.unmatched_frees,
        "preexisting_blocks": result.preexisting,
        "pending_frees": result.pending_frees,
        "segment_releases_replayed": result.releases_replayed,
        "empty_cache_calls": result.empty_cache_calls,
        "ooms": result.ooms,
        "alloc_retries": result.alloc_retries,
        "peak_reserved": result.peak_reserved,
        "peak_allocated": result.peak_allocated,
        "final_reserved": result.final_reserved,
        "final_allocated": result.final_allocated,
        "final_segments": len(result.segments),
        "peak_segments": result.segments_peak,
        "fragmentation": frag,
        "divergence": result.divergence.as_dict() if result.divergence else None,
    }


def _replay_report(fidelity: Any, result: Any, conf: str, recorded_config: Any,
                   size: int | None, what_if: bool) -> dict[str, Any]:
    return {
        "settings": conf,
        "recorded_settings": recorded_config.last_allocator_settings,
        "capacity": size,
        "recorded": result.recorded,
        "fidelity": {
            "reproduces": fidelity.reproduces,
            "text": _fidelity_line(fidelity),
            "mismatch": fidelity.final_mismatch,
            "divergence": fidelity.divergence.as_dict() if fidelity.divergence else None,
            "history_complete": fidelity.history_complete,
            "initial_state_error": fidelity.initial_error,
            "segments": len(fidelity.segments),
            "reserved": fidelity.final_reserved,
            "allocated": fidelity.final_allocated,
        },
        "what_if": what_if,
        "replay": _replay_figures(result),
    }


def _print_replay(file: str, fidelity: Any, result: Any, report: dict[str, Any],
                  what_if: bool) -> None:
    console = _console()
    recorded_settings = report["recorded_settings"] or "defaults"
    console.print(f"{file} under its recorded settings ({recorded_settings}):", markup=False)
    console.print(_fidelity_line(fidelity), markup=False)
    if what_if:
        conf = report["settings"] or "the recorded settings"
        capacity = report["capacity"]
        device_text = format_size(capacity) if capacity is not None else "an unbounded device"
        title = f"What-if replay of {file}: {conf} on {device_text}"
    else:
        title = f"Replay of {file} (recorded settings: {recorded_settings})"
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("recorded by torch", justify="right")
    table.add_column("what-if replay" if what_if else "refimpl replay", justify="right")
    frag = report["replay"]["fragmentation"]
    recorded = result.recorded
    for name, before, after in (
        ("history entries", str(recorded["events"]), f"{result.allocs} allocs, {result.frees} frees"),
        ("peak allocated", format_size(recorded["requested_peak"]) + " requested",
         format_size(result.peak_allocated)),
        ("peak reserved", format_size(recorded["reserved_delta_peak"]) + " (growth)",
         format_size(result.peak_reserved)),
        ("OOMs", str(recorded["ooms"]), str(result.ooms)),
        ("alloc retries", "-", str(result.alloc_retries)),
        ("final segments", str(report["snapshot"]["segments"]), str(len(result.segments))),
        ("final reserved", format_size(report["snapshot"]["reserved"]),
         format_size(result.final_reserved)),
        ("final allocated", format_size(report["snapshot"]["allocated"]),
         format_size(result.final_allocated)),
        ("internal fragmentation (end)", "-", format_size(frag["internal_bytes"])),
        ("external fragmentation (end)", "-",
         f"{format_size(frag['external_bytes'])} ({frag['external_ratio']:.1%} of free)"),
    ):
        table.add_row(name, before, after)
    console.print(table)
    if what_if:
        if result.divergence is None:
            console.print("the what-if follows the recorded run to the end", markup=False)
        else:
            console.print(f"the what-if departs from the recorded run at {result.divergence}",
                          markup=False)
    if result.unmatched_frees:
        console.print(f"{result.unmatched_frees} frees had no matching allocation.")


@memstats.command(
    "run",
    epilog=_FRAGMENTATION_HELP,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--simulate", is_flag=True,
              help="Use a simulated device (no GPU): only the allocator APIs work.")
@click.option("--capacity", default="80GiB", show_default=True,
              help="Size of the simulated device.")
@click.option("--snapshot", "snapshot_path", type=click.Path(),
              help="Also write the final snapshot pickle here.")
@click.argument("script", type=click.Path())
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(
    simulate: bool, capacity: str, snapshot_path: str | None, script: str, args: tuple[str, ...]
) -> None:
    """Run SCRIPT under refimpl with allocator history, then show memory at exit or OOM."""
    import refimpl.cuda  # noqa: F401 - lets the CUDA layer register its hooks
    from refimpl.cuda import memory
    from refimpl.cuda._errors import OutOfMemoryError

    if simulate:
        memory.simulate_devices(_parse_size(capacity))
    try:
        memory._record_memory_history("all", context="all", stacks="python", max_entries=100_000)
    except (RuntimeError, AssertionError) as exc:
        _fail(f"CUDA is not usable here ({exc}); --simulate runs on a simulated device")
    saved_argv = sys.argv
    sys.argv = [script, *args]
    status, ending = 0, "exited normally"
    try:
        runpy.run_path(script, run_name="__main__")
    except OutOfMemoryError as exc:
        status, ending = 1, "stopped by an out-of-memory error"
        click.echo(f"OutOfMemoryError: {exc}", err=True)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        ending = f"exited with status {status}"
    except FileNotFoundError as exc:
        _fail(f"{script}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - the script's own error ends the run
        status, ending = 1, f"raised {type(exc).__name__}: {exc}"
    finally:
        sys.argv = saved_argv
    snapshot = memory._snapshot()
    memory._record_memory_history(None)
    if snapshot_path:
        _dump(snapshot, snapshot_path)
    console = _console()
    console.print(f"{script} {ending}")
    summary = _memviz.summarize(snapshot)
    devices = summary["devices"] or [memory._current_device_index()]
    for index in devices:
        console.print(memory.memory_summary(index), markup=False, end="")
    console.print(_segment_table(snapshot["segments"]))
    console.print(_summary_table(summary, "Fragmentation"))
    sys.exit(status)


def _dump(snapshot: dict[str, Any], path: str) -> None:
    import pickle

    try:
        with open(path, "wb") as f:
            pickle.dump(snapshot, f)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


# ``tensorctl profile`` (profiler statistics, cli/profile.py) registers with these
COMMANDS = [memstats, _profile_cli.profile]
