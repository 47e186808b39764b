"""The generated CUDA autocast cases (conformance/cases/autocast/op_lists_cuda.yaml) run on
the CPU with CUDA's op lists installed as the CPU's, so refimpl's autocast layer, the
composites' policies and the sample calls are checked without a GPU. The cases themselves
run on CUDA against torch (the oracle) on the GPU."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import yaml

import refimpl
from refimpl.amp import _op_lists
from refimpl.ops import amp_list_ops

CASES = pathlib.Path(__file__).parent.parent / "conformance/cases/autocast/op_lists_cuda.yaml"


@pytest.fixture
def cuda_lists_on_cpu(monkeypatch):
    for per_device in _op_lists.POLICIES.values():
        monkeypatch.setitem(per_device, "cpu", per_device["cuda"])
    monkeypatch.setitem(_op_lists.BANNED, "cpu", _op_lists.BANNED["cuda"])
    monkeypatch.setitem(_op_lists.DECOMPOSED, "cpu", _op_lists.DECOMPOSED["cuda"])
    monkeypatch.setattr(amp_list_ops, "_cuda_only", lambda name, input: None)
    # native_layer_norm's statistics are float32 for half inputs on CUDA only (its
    # accumulation type there): simulate the CUDA rule too
    from refimpl.ops import nn_aten

    monkeypatch.setattr(nn_aten, "_stat_dtype", lambda input: refimpl.float32 if input.dtype in (
        refimpl.float16, refimpl.bfloat16) else input.dtype)


def _cases():
    return [c for c in yaml.safe_load(CASES.read_text())["cases"] if "banned" not in c["id"]]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["id"])
def test_generated_case_on_cpu_with_cuda_lists(cuda_lists_on_cpu, case):
    program = case["program"].replace('t.autocast("cuda"', 't.autocast("cpu"')
    rng = np.random.default_rng(0)
    ns = {"t": refimpl, "np": np, "device": "cpu"}
    for name in ("a", "b"):
        ns[name] = refimpl.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    exec(program, ns)  # noqa: S102 - the case's own program, as the runner runs it
    expected = next(e["equals"] for e in case["expect"] if e.get("value") == "dtypes")
    assert ns["dtypes"] == expected
    assert ns["differ"] == []


def test_banned_on_cpu_with_cuda_lists(cuda_lists_on_cpu):
    x = refimpl.rand(4, 4)
    with refimpl.autocast("cpu", dtype=refimpl.float16), \
            pytest.raises(RuntimeError, match="unsafe to autocast"):
        refimpl.nn.functional.binary_cross_entropy(x, x)
