"""Entry point of the ``tensorctl`` command: a click group that gathers the subcommands.

Each subcommand lives in its own module (``cli/conformance.py``, ``cli/memstats.py``)
and holds no logic of its own beyond argument handling and presentation.
"""

from __future__ import annotations

import click

from cli import conformance as _conformance
from cli import memstats as _memstats


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tensorctl")
def cli() -> None:
    """tensorctl: PyTorch runtime semantics, implemented and checked."""


for _command in (*_conformance.COMMANDS, *_memstats.COMMANDS):
    cli.add_command(_command)


def main() -> None:
    """Run the command line (the ``tensorctl`` console script)."""
    cli(prog_name="tensorctl")


if __name__ == "__main__":
    main()
