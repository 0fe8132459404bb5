#!/bin/bash
# Run from the repository root on the GPU machine, with .gpu/ prepared (tools/gpu/README.md): the
# chunked scan's state passes (cuda/backend.h: ScanStatePass) side by side, in one build.
#   1. build into build-gpu; the scan tests, which run every pass (a hang in a chain shows as
#      the timeout: then rerun one test under compute-sanitizer to see where);
#   2. `linea bench scan --what kernel --state-passes $PASSES` twice, fla's chunk_gla (the anchor)
#      between the two, and at B=1 (8 chains, where a chain's latency shows); per-kernel times
#      under ncu at T = 16k, each of $NCU_PASSES;
#   3. the training step with each of $STEP_PASSES (LINEA_SCAN_STATES), softmax beside it.
# NO_TESTS=1 skips 1's tests, NO_STEP=1 skips 3. Logs go to $OUT; the JSON lines come last.
PASSES=${PASSES:-auto,kernels,chain} NCU_PASSES=${NCU_PASSES:-chain} STEP_PASSES=${STEP_PASSES:-auto}
set -o pipefail
source .gpu/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
start=$(date +%s)
mkdir -p .gpu/triton_cache
export PYTHONPATH=$PWD/.gpu/fla_src PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.gpu/triton_cache
if [ ! -d .gpu/triton_cache/.warm ]; then
  # fla autotunes on its first call of each shape (minutes): let it while the CPUs build.
  (timeout 420 python3 tools/gpu/anchor.py gla_kernel > $OUT/torch_warm.jsonl 2> $OUT/torch_warm.err &&
    mkdir -p .gpu/triton_cache/.warm) &
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C build-gpu -j14 linea_tests linea_cli > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -40; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
export LINEA_NUM_THREADS=12
if [ -z "$NO_TESTS" ]; then
  timeout ${TEST_TIMEOUT:-300} ./build-gpu/tests/linea_tests --gtest_filter='CudaGatedScan*:CliBenchScan*' \
    > $OUT/scan_tests.log 2>&1
  echo "scan tests rc=$? after $(( $(date +%s) - start )) s"
  grep -E "^\[  (FAILED|PASSED)  \]|tests? from .* ran|Failure" $OUT/scan_tests.log | head -30
  grep "\[tf32\]" $OUT/scan_tests.log | grep "state chain" | head -12
fi
wait
L=./build-gpu/tools/linea
scan() { timeout 120 $L bench scan --device cuda --what kernel --algorithms chunked --state-passes $PASSES \
  --repeats 10 --out $OUT/scan_$1.jsonl "${@:2}" > /dev/null 2>&1; echo "bench scan $1 rc=$?"; }
scan 1
timeout 240 python3 tools/gpu/anchor.py gla_kernel > $OUT/torch.jsonl 2> $OUT/torch.err; echo "anchor rc=$?"
scan 2
scan b1 --kernel-batch 1 --lengths 16384
for pass in $NCU_PASSES; do
  LINEA_SCAN_STATES=$pass ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    --log-file $OUT/ncu_$pass.csv $L bench scan --device cuda --what kernel --algorithms chunked --lengths 16384 \
    --repeats 1 > /dev/null 2>&1
  echo "== ncu, $pass, T = 16k: every launch of both gates' warmups and timed calls (total / count = a launch)"
  python3 tools/gpu/kernel_breakdown.py $OUT/ncu_$pass.csv | head -12
done
if [ -z "$NO_STEP" ]; then
  for pass in $STEP_PASSES; do
    LINEA_SCAN_STATES=$pass timeout 150 $L bench train --device cuda --models softmax,regla --repeats 10 \
      --out $OUT/train_$pass.jsonl > /dev/null 2>&1; echo "bench train $pass rc=$?"
  done
fi
tar -czf $OUT/triton_cache.tgz -C .gpu triton_cache
for f in $OUT/scan_*.jsonl $OUT/train_*.jsonl; do echo "== $(basename $f)"; cut -c1-230 $f; done
echo "== fla"; grep -E '"kind": "kernel' $OUT/torch.jsonl | cut -c1-230
echo "total $(( $(date +%s) - start )) s"
