"""The CUDA compute benchmark: pointwise, reductions and matrix products in one report.

Runs ``bench_gpu_pointwise.py``, ``bench_gpu_reduce.py`` and ``bench_gpu_matmul.py``
(each measures refimpl against torch in the same process, GPU time from CUDA events,
median of at least 20 samples after warm-up) on this machine, one after the other,
and merges their JSON into one report with the goals of the CUDA compute work:

* 2^28-element float32 add and mul, a broadcast add, float16 and bfloat16 add:
  at least 0.9x torch's bandwidth;
* sum over 2^28 float32: at least 0.85x; softmax over (8192, 8192): at least 0.7x;
* 8192^3 float32 and bfloat16 matmul: at least 0.95x torch's TFLOP/s;
* a one-element CUDA add: at most 3x torch's host time.

Usage on the GPU machine: ``PYTHONPATH=. python3 bench/bench_gpu_ops.py --out F``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("pointwise", "reduce", "matmul")


def _run(part: str, folder: Path) -> dict:
    out = folder / f"{part}.json"
    subprocess.run([sys.executable, str(HERE / f"bench_gpu_{part}.py"), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _goals(reports: dict) -> list[dict]:
    """Each goal with the measured ratio and whether it is met."""
    rows = []
    pointwise = reports["pointwise"]
    for name, case in pointwise["cases"].items():
        ratio = case["refimpl_over_torch_bandwidth"]
        rows.append({"case": name, "measure": "bandwidth ratio", "ratio": ratio,
                     "goal": ">= 0.9", "met": ratio >= 0.9})
    host = pointwise["host_one_element_add"]
    ratio = host.get("refimpl_over_torch", host.get("ratio"))
    if ratio is not None:
        rows.append({"case": "one-element add", "measure": "host time ratio", "ratio": ratio,
                     "goal": "<= 3", "met": ratio <= 3})
    for case in reports["reduce"]["cases"]:
        if "goal_ratio" in case:
            rows.append({"case": case["case"], "measure": "bandwidth ratio",
                         "ratio": case["ratio_gb_per_s"], "goal": f">= {case['goal_ratio']}",
                         "met": case["ratio_gb_per_s"] >= case["goal_ratio"]})
    for case in reports["matmul"]["cases"]:
        if case["m"] == case["k"] == case["n"] == 8192 and case["batch"] == 1:
            rows.append({"case": case["case"], "measure": "TFLOP/s ratio",
                         "ratio": case["ratio_tflops"], "goal": ">= 0.95",
                         "met": case["ratio_tflops"] >= 0.95})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        reports = {part: _run(part, Path(tmp)) for part in PARTS}
    report = {"benchmark": "gpu_ops", "goals": _goals(reports), **reports}
    text = json.dumps(report, indent=2)
    for row in report["goals"]:
        print(f"{row['case']:<32} {row['measure']:<16} {row['ratio']:.3f}  goal {row['goal']:<6}"
              f" {'met' if row['met'] else 'MISSED'}")
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
