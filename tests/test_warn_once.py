"""Warnings torch gives once per process (TORCH_WARN_ONCE) are given once by refimpl too:
checked in fresh interpreters, against torch where it is installed."""

import subprocess
import sys

import pytest

PROGRAM = """
import warnings
import {mod} as t
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = t.ones(2, 2)
    t.chain_matmul(a, a)
    t.chain_matmul(a, a, a)
print(sum("chain_matmul is deprecated" in str(w.message) for w in caught))
"""


@pytest.mark.parametrize("mod", ["refimpl", "torch"])
def test_chain_matmul_deprecation_warns_once(mod):
    if mod == "torch":
        pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(mod=mod)], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "1"
