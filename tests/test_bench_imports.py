"""Every benchmark module imports cleanly, without doing any work.

CI has no GPU and never runs the benchmarks, so a benchmark that no longer imports (a
renamed helper, a removed module) would otherwise go unnoticed until someone runs it on
a GPU machine. Each module is imported in a fresh interpreter, so what one import does
to the process (environment variables, ``sys.path``) cannot hide another's failure, and
the import must print nothing and write nothing: the benchmarks do their work under
``if __name__ == "__main__":`` only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def _tree_state(folder: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_there_are_benchmarks_to_import() -> None:
    assert "bench_allocator" in MODULES and len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_module_imports_without_running(module: str) -> None:
    before = _tree_state(BENCH)
    proc = subprocess.run(
        [sys.executable, "-c", f"import bench.{module}"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"import bench.{module} failed:\n{proc.stderr}"
    assert proc.stdout == "", f"import bench.{module} printed:\n{proc.stdout}"
    assert proc.stderr == "", f"import bench.{module} wrote to stderr:\n{proc.stderr}"
    assert _tree_state(BENCH) == before, f"import bench.{module} wrote files under bench/"
