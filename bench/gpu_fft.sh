#!/usr/bin/env bash
# The FFT work's GPU checks in one run: the fft conformance area on refimpl and on torch
# (CUDA instances included), the FFT unit tests, the GPU benchmark, and the op_db walk of
# the FFT ops on the GPU. Usage (GPU machine, repo root): OUT=dir bash bench/gpu_fft.sh
set -u
export PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
for target in refimpl torch; do
    timeout 70 python3 -m cli.main run-conformance --target "$target" --area fft -j 6 -v \
        --json "$OUT/conformance_$target.json" > "$OUT/conformance_$target.txt" 2>&1
    grep -E "^(FAILED|ERROR|XPASS)" -A6 "$OUT/conformance_$target.txt" | head -80
    tail -n 3 "$OUT/conformance_$target.txt"
done
timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/test_fft.py 2>&1 | tail -3
timeout 60 python3 bench/bench_gpu_fft.py --out "$OUT/fft.json" > "$OUT/bench.txt" 2>&1
tail -n 40 "$OUT/bench.txt"
timeout 50 python3 bench/opdb_report.py --device cuda --dtypes float32,float16,bfloat16,int64,bool \
    --ops 'fft.*,stft,istft,signal.windows.*' -v --out "$OUT/opdb_cuda.json" \
    > "$OUT/opdb_cuda.txt" 2>&1
grep -v "^ " "$OUT/opdb_cuda.txt" | grep -v " pass " | head -40
