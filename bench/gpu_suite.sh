#!/usr/bin/env bash
# Everything that needs the GPU, in one run: the whole conformance suite on refimpl and on
# torch (the oracle installed there, CUDA instances of device-generic cases included), the
# GPU unit tests that exercise whole programs, and the GPU benchmarks.
# Usage (on the GPU machine, repo root): OUT=results_dir bash bench/gpu_suite.sh
#   GPU_SUITE_FULL=1 also runs every per-op GPU test (pointwise, reductions, indexing:
#   several thousand cases, about 15 minutes) and the seed-size allocator fuzz.
#   GPU_SUITE_BENCHES picks the benchmarks (default "ops graphs indexing allocator"; also
#   fft, linalg, train; "none" runs none). GPU_SUITE_OPDB=SECONDS also walks torch's op_db on the GPU
#   (bench/opdb_report.py) for at most that long.
# nvmath-python (cuBLAS) is installed from .whl/ when the wheels were carried there.
set -u
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on shared multi-GPU hosts
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
mkdir -p "$OUT"
LOG="$OUT/suite.log"
: > "$LOG"
for target in refimpl torch; do
    python3 -m cli.main run-conformance --target "$target" -j 14 \
        --json "$OUT/conformance_$target.json" > "$OUT/conformance_$target.txt" 2>&1
    grep -E "^(FAILED|ERROR) " "$OUT/conformance_$target.txt" | tee -a "$LOG"
    tail -n 14 "$OUT/conformance_$target.txt" | tee -a "$LOG"
    cat "$OUT/conformance_$target.txt" >> "$LOG"
    rm "$OUT/conformance_$target.txt"
done
tests=(tests/gpu/test_cuda_mlp_gpu.py tests/gpu/test_cuda_no_cpu_compute_gpu.py
       tests/gpu/test_cuda_driver_gpu.py tests/gpu/test_cuda_tensors_gpu.py
       tests/gpu/test_cuda_blas_gpu.py tests/gpu/test_cuda_random_gpu.py)
# the whole-program tests of the newer areas, where present (graphs RNG, two GPUs,
# profiler, nn.functional, training), and the device-side assert checks
for f in tests/gpu/test_cuda_graph_rng_gpu.py tests/gpu/test_multi_gpu_gpu.py \
         tests/gpu/test_profiler_gpu.py tests/gpu/test_nn_functional_gpu.py \
         tests/gpu/test_train_models_gpu.py tests/gpu/test_linalg_factor_gpu.py \
         tests/gpu/test_cuda_linalg_spectral_gpu.py tests/gpu/test_amp_gpu.py \
         tests/gpu/test_optim_cuda_update_gpu.py tests/gpu/test_cuda_host_paths_gpu.py \
         tests/gpu/test_norm_kernels_gpu.py tests/gpu/test_pool_loss_kernels_gpu.py \
         tests/gpu/test_conv_kernels_gpu.py tests/gpu/test_attention_kernels_gpu.py \
         tests/gpu/test_softmax_backward_gpu.py tests/gpu/test_gelu_backward_gpu.py \
         tests/gpu/test_lazy_zeros_gpu.py; do
    [ -f "$f" ] && tests+=("$f")
done
tests+=("tests/gpu/test_cuda_indexing_gpu.py::test_index_out_of_range_is_a_device_side_assert"
        "tests/gpu/test_cuda_indexing_gpu.py::test_in_range_indices_need_no_assert"
        "tests/gpu/test_cuda_indexing_gpu.py::test_recorded_checks_raise_at_the_next_sync")
if [ "${GPU_SUITE_FULL:-0}" = 1 ]; then
    tests=(tests/gpu)
fi
python3 -m pytest "${tests[@]}" -q -p no:cacheprovider >> "$LOG" 2>&1
grep -E "passed|failed" "$LOG" | tail -n 1
for bench in ${GPU_SUITE_BENCHES:-ops graphs indexing allocator}; do
    case "$bench" in
        none) ;;
        ops) python3 bench/bench_gpu_ops.py --out "$OUT/gpu_ops.json" 2>&1 | tee -a "$LOG" ;;
        allocator)
            python3 bench/bench_allocator.py --loops 5000 --out "$OUT/allocator.json" >> "$LOG" 2>&1
            grep -E '"(empty|ratio)' "$OUT/allocator.json" | head -n 20 | tee -a "$LOG" ;;
        train) python3 bench/bench_train.py --device cuda --out "$OUT/train.json" >> "$LOG" 2>&1 ;;
        *) python3 "bench/bench_gpu_$bench.py" --out "$OUT/gpu_$bench.json" >> "$LOG" 2>&1 ;;
    esac
done
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ] \
        && [ -f bench/bench_multi_gpu.py ]; then
    python3 bench/bench_multi_gpu.py --out "$OUT/multi_gpu.json" 2>&1 | tee -a "$LOG"
fi
if [ -n "${GPU_SUITE_OPDB:-}" ]; then
    # GPU_SUITE_OPDB_SHARDS processes (default 1) share the walk, each on every N-th op;
    # per-op lines (with failure reasons) go to opdb_cuda.txt as the walk goes, so a walk
    # cut short by the time limit still tells what it saw
    shards="${GPU_SUITE_OPDB_SHARDS:-1}"
    mkdir -p /tmp/opdb
    for k in $(seq 1 "$shards"); do
        timeout "$GPU_SUITE_OPDB" python3 bench/opdb_report.py --device cuda -v \
            --dtypes float32,float16,bfloat16,int64,bool \
            --samples "${GPU_SUITE_OPDB_SAMPLES:-20}" --shard "$k/$shards" \
            --out "/tmp/opdb/shard$k.json" > "/tmp/opdb/shard$k.txt" 2>&1 &
    done
    wait
    cat /tmp/opdb/shard*.txt > "$OUT/opdb_cuda.txt"
    python3 bench/opdb_report.py --merge /tmp/opdb/shard*.json --out "$OUT/opdb_cuda.json" \
        | grep -A4 '"agreement"' | tee -a "$LOG"
    grep -cE " (pass|FAIL) " "$OUT/opdb_cuda.txt" | sed 's/^/op_db ops walked on cuda: /' | tee -a "$LOG"
fi
echo "suite done" | tee -a "$LOG"
