#!/usr/bin/env bash
# The profiler's GPU checks in one run: the GPU profiler benchmark (tables, traces and
# overhead of refimpl and torch), the profiler unit tests, the profiler conformance cases
# on both targets, and tensorctl profile on a CUDA script and on torch's trace.
# Usage (on the GPU machine, repo root, PYTHONPATH set): OUT=dir bash bench/gpu_profiler.sh
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
LOG="$OUT/gpu_profiler.log"
: > "$LOG"
python3 bench/bench_gpu_profiler.py --out "$OUT" >> "$LOG" 2>&1
echo "bench rc=$?" >> "$LOG"
python3 -m pytest -q -p no:cacheprovider tests/test_cli_profile.py tests/test_profiler.py \
    tests/gpu/test_profiler_gpu.py >> "$LOG" 2>&1
echo "pytest rc=$?" >> "$LOG"
for target in refimpl torch; do
    python3 -m cli.main run-conformance --target "$target" -k profil >> "$LOG" 2>&1
    echo "cases $target rc=$?" >> "$LOG"
done
SCRIPT=/tmp/profile_gpu_script.py
printf 'import refimpl as t\nx = t.ones(1 << 16, device="cuda", requires_grad=True)\nfor _ in range(3):\n    (x * 2 + 1).relu().sum().backward()\n' > "$SCRIPT"
python3 -m cli.main profile run --trace /tmp/cli_run.pt.trace.json "$SCRIPT" >> "$LOG" 2>&1
echo "cli run rc=$?" >> "$LOG"
python3 -m cli.main profile "$OUT/torch.pt.trace.json" --row-limit 12 >> "$LOG" 2>&1
echo "cli show rc=$?" >> "$LOG"
grep -E "rc=|passed|failed|kernels" "$LOG"
