#!/usr/bin/env bash
# The FFT work's GPU checks in one run: a smoke transform, the fft conformance area on
# refimpl and on torch (CUDA instances included), the GPU benchmark, the FFT unit tests
# and the op_db walk of the FFT ops on the GPU.
# Usage (GPU machine, repo root): OUT=dir bash bench/gpu_fft.sh
set -u
export PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 30 python3 -c "
import numpy as np, refimpl as t
from refimpl.cuda import _cufft
x = t.arange(8, dtype=t.float32, device='cuda').to(t.complex64)
print('cufft', _cufft.version(), t.fft.fft(x).cpu().numpy().round(3))
"
conf() {
    timeout "$2" python3 -m cli.main run-conformance --target "$1" --area fft -j 6 -v \
        --json "$OUT/conformance_$1.json" > "$OUT/conformance_$1.txt" 2>&1
    grep -E "^(FAILED|ERROR|XPASS)" -A6 "$OUT/conformance_$1.txt" | head -80
    tail -n 2 "$OUT/conformance_$1.txt"
}
conf refimpl 55
timeout 45 python3 bench/bench_gpu_fft.py --out "$OUT/fft.json" > "$OUT/bench.txt" 2>&1
grep -A3 '"ratios\|error\|Error' "$OUT/bench.txt" | head -30
conf torch 55
timeout 20 python3 -m pytest -q -x -p no:cacheprovider tests/test_fft.py 2>&1 | tail -3
timeout 45 python3 bench/opdb_report.py --device cuda --dtypes float32,float16,bfloat16,int64,bool \
    --ops 'fft.*,stft,istft,signal.windows.*' -v --out "$OUT/opdb_cuda.json" 2>&1 \
    | grep -v "^ " | grep -v " pass " | head -40
