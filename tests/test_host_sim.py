"""bench/host_sim.py: refimpl's CUDA host path on a machine without a GPU.

The simulated driver stands in for ``cuda.bindings.driver`` (host memory, kernels
compiled by NVRTC but never run), so these tests run the CUDA paths' Python in CI. Each
runs in a fresh interpreter: installing the simulator replaces the process's driver.
Skipped where NVRTC is unavailable (the kernels are still compiled).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _needs_nvrtc(nvrtc_compile) -> None:
    """Skip (with the reason) where the bindings or NVRTC are missing."""


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_a_simulated_cuda_training_step_runs_and_launches_kernels() -> None:
    out = subprocess.run([sys.executable, "bench/host_sim.py", "--kind", "cnn", "--steps", "3",
                          "--calls"], cwd=ROOT, capture_output=True, text=True, timeout=240,
                         check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    # "cnn/test simulated cuda: 1.0 ms per step unprofiled, 4730 Python calls and 26
    # launches per step"
    words = out.stdout.split()
    launches = int(words[words.index("launches") - 1])
    calls = int(words[words.index("Python") - 1])
    assert launches > 10 and calls > 1000, out.stdout


def test_memsets_and_copies_are_real_in_the_simulator() -> None:
    # fills that are memsets (ones of one element, backward's implicit gradient, among
    # them) and copies move real bytes in the simulator; kernels do not run
    out = _run("""
        import sys
        sys.path.insert(0, ".")
        from bench import host_sim
        sim = host_sim.install()
        import refimpl
        one = refimpl.ones((), device="cuda")
        zeros = refimpl.zeros(5, dtype=refimpl.float64, device="cuda")
        back = refimpl.tensor([1.5, -2.0, 3.25], device="cuda").cpu()
        print(one.item(), zeros.cpu().tolist(), back.tolist(), sim.launches)
    """)
    assert out.split() == ["1.0", "[0.0,", "0.0,", "0.0,", "0.0,", "0.0]", "[1.5,", "-2.0,",
                           "3.25]", "0"], out


def test_an_unsimulated_driver_call_says_which() -> None:
    out = _run("""
        import sys
        sys.path.insert(0, ".")
        from bench import host_sim
        sim = host_sim.install()
        try:
            sim.cuGraphLaunch(0, 0)
        except NotImplementedError as exc:
            print(exc)
    """)
    assert out.strip() == "the simulated driver has no cuGraphLaunch"
