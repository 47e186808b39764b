#!/usr/bin/env bash
# Everything that needs the GPU, in one run: the allocator benchmark, the GPU unit tests,
# and the whole conformance suite on torch (the oracle installed there) and on refimpl.
# Usage (on the GPU machine, repo root): OUT=results_dir bash bench/gpu_suite.sh
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
mkdir -p "$OUT"
python3 bench/bench_allocator.py --out "$OUT/allocator.json" > "$OUT/allocator.log" 2>&1
tail -n 5 "$OUT/allocator.log"
python3 -m pytest tests/gpu -q -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1
tail -n 3 "$OUT/gpu_tests.log"
for target in torch refimpl; do
    python3 -m cli.main run-conformance --target "$target" -j 8 \
        --json "$OUT/conformance_$target.json" > "$OUT/conformance_$target.log" 2>&1
    tail -n 14 "$OUT/conformance_$target.log"
done
