"""``tensorctl profile``: profiler statistics of a refimpl run or of a saved trace.

Forms:

* ``tensorctl profile run SCRIPT [ARGS]...``: run a script under
  ``refimpl.profiler.profile`` (CPU ops, GPU kernels when CUDA is usable, memory),
  print the ops by self time, kernel time and memory totals, write the Chrome trace
  (``--trace``, default ``<script>.pt.trace.json``), and show the caching allocator's
  view of the same run when the script used CUDA;
* ``tensorctl profile FILE`` (shorthand of ``profile show FILE``): summarise a Chrome
  trace JSON written by torch's profiler (``export_chrome_trace``,
  ``tensorboard_trace_handler``, ``.json`` or ``.json.gz``) or by refimpl's, the same way.

A file that is not a usable trace gives one line on stderr and exit status 2. The
summaries are computed by ``refimpl.profiler._summary``.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from refimpl.profiler import _summary
from refimpl.profiler._events import format_memory, format_time

__all__ = ["COMMANDS", "profile"]


def _fail(message: str) -> NoReturn:
    click.echo(f"tensorctl profile: {message}", err=True)
    sys.exit(2)


class _ProfileGroup(click.Group):
    """A group where ``profile FILE`` means ``profile show FILE``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ProfileGroup)
def profile() -> None:
    """Profiler statistics: ops by self time, GPU kernel time, memory.

    \b
    tensorctl profile FILE [--json] [--row-limit N]
    tensorctl profile run SCRIPT [ARGS]...
    """


def _console() -> Console:
    return Console(highlight=False, width=max(Console().width, 140))


def _ops_table(summary: dict[str, Any], title: str, row_limit: int) -> Table:
    table = Table(title=title)
    with_memory = any(r["cpu_memory"] or r["device_memory"] for r in summary["rows"])
    columns = ["Name", "Self CPU %", "Self CPU", "CPU total", "# of Calls", "Self CUDA",
               "CUDA total"] + (["CPU Mem", "CUDA Mem"] if with_memory else [])
    for column in columns:
        if column == "Name":
            table.add_column(column, overflow="fold", min_width=24)
        else:
            table.add_column(column, justify="right", no_wrap=True)
    total = summary["self_cpu_total_us"]
    for row in summary["rows"][:row_limit if row_limit >= 0 else None]:
        share = f"{row['self_cpu_us'] * 100.0 / total:.2f}%" if total else "NaN"
        cells = [Text(row["name"]), share, format_time(row["self_cpu_us"]),
                 format_time(row["cpu_total_us"]), str(row["calls"]),
                 format_time(row["self_device_us"]), format_time(row["device_total_us"])]
        if with_memory:
            cells += [format_memory(row["cpu_memory"]), format_memory(row["device_memory"])]
        table.add_row(*cells)
    shown = len(summary["rows"]) if row_limit < 0 else min(row_limit, len(summary["rows"]))
    table.caption = (f"Self CPU time total: {format_time(total)}; self CUDA time total: "
                     f"{format_time(summary['self_device_total_us'])}; {shown} of "
                     f"{len(summary['rows'])} rows")
    return table


def _memory_table(memory: dict[str, dict[str, int]]) -> Table:
    table = Table(title="Memory seen by the profiler")
    for column in ("", "allocations", "allocated", "frees", "freed", "net", "peak"):
        table.add_column(column, justify="left" if not column else "right")
    for kind, label in (("cpu", "CPU"), ("device", "CUDA")):
        m = memory[kind]
        table.add_row(label, str(m["allocations"]), format_memory(m["allocated_bytes"]),
                      str(m["frees"]), format_memory(m["freed_bytes"]),
                      format_memory(m["net_bytes"]), format_memory(m["peak_bytes"]))
    return table


@profile.command("show")
@click.argument("file", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--row-limit", type=int, default=30, show_default=True,
              help="Rows of the ops table (-1: all).")
def show(file: str, as_json: bool, row_limit: int) -> None:
    """Summarise the Chrome trace JSON FILE (torch's or refimpl's profiler)."""
    try:
        trace = _summary.load_trace(file)
    except _summary.TraceError as exc:
        _fail(f"{file}: {exc}")
    summary = _summary.summarize_trace(trace)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    console = _console()
    console.print(_ops_table(summary, f"Trace {file} ({summary['events']} events)", row_limit))
    console.print(_memory_table(summary["memory"]))


def _cuda_usable() -> bool:
    from refimpl import cuda

    try:
        return cuda.is_available()
    except RuntimeError:
        return False


@profile.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--trace", "trace_path", type=click.Path(),
              help="Where to write the Chrome trace (default: <script>.pt.trace.json).")
@click.option("--sort-by", default="self_cpu_time_total", show_default=True,
              help="Column of the printed key-averages table.")
@click.option("--row-limit", type=int, default=30, show_default=True,
              help="Rows of the ops table (-1: all).")
@click.option("--record-shapes", is_flag=True, help="Record input shapes.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.argument("script", type=click.Path())
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(trace_path: str | None, sort_by: str, row_limit: int, record_shapes: bool,
        as_json: bool, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT under refimpl's profiler; print its statistics and write its trace."""
    from refimpl import profiler

    if not os.path.isfile(script):
        _fail(f"{script}: no such file")
    activities = [profiler.ProfilerActivity.CPU]
    if _cuda_usable():
        activities.append(profiler.ProfilerActivity.CUDA)
    trace_path = trace_path or os.path.splitext(os.path.basename(script))[0] + ".pt.trace.json"
    saved_argv = sys.argv
    sys.argv = [script, *args]
    status, ending = 0, "exited normally"
    prof = profiler.profile(activities=activities, record_shapes=record_shapes,
                            profile_memory=True)
    try:
        with prof:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        ending = f"exited with status {status}"
    except Exception as exc:  # noqa: BLE001 - the script's own error ends the run
        status, ending = 1, f"raised {type(exc).__name__}: {exc}"
    finally:
        sys.argv = saved_argv
    try:
        prof.export_chrome_trace(trace_path)
    except OSError as exc:
        _fail(f"cannot write {trace_path}: {exc.strerror or exc}")
    summary = _summary.summarize_profile(prof)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        sys.exit(status)
    console = _console()
    console.print(f"{script} {ending}; trace written to {trace_path}", markup=False)
    try:
        averages = sorted(prof.key_averages(),
                          key=lambda a: getattr(a, sort_by.replace("cuda", "device")),
                          reverse=True)
    except AttributeError:
        _fail(f"--sort-by: unknown column {sort_by!r} (e.g. self_cpu_time_total, "
              "cpu_time_total, self_cuda_time_total, count)")
    order = {a.key: i for i, a in enumerate(averages)}
    summary["rows"].sort(key=lambda r: order.get(r["name"], len(order)))
    console.print(_ops_table(summary, f"Profile of {script}", row_limit))
    console.print(_memory_table(summary["memory"]))
    _print_allocator(console)
    sys.exit(status)


def _print_allocator(console: Console) -> None:
    """The caching allocator's statistics of every device the run used."""
    from refimpl.cuda import _allocator

    allocators = _allocator.device_allocators()
    if not allocators:
        console.print("The run made no CUDA allocation (no caching-allocator view).")
        return
    from refimpl.cuda import memory

    for index in allocators:
        console.print(memory.memory_summary(index), markup=False, end="")


COMMANDS = [profile]
