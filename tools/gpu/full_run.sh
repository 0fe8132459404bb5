#!/bin/bash
# Run from the repository root on the GPU machine, with .gpu/ prepared (tools/gpu/README.md).
# One GPU session: build with CUDA, the whole suite, linea's benchmarks, then the PyTorch anchors
# in the same run. Logs go to $OUT; a short table comes last.
#   NO_TESTS=1 / NO_BENCH=1 / NO_ANCHORS=1   skip a part; GTEST_FILTER picks tests
#   ANCHORS=a,b,...                          tools/gpu/anchor.py's measurements to run
#   DECODE=1 / ATTENTION=1                   also `linea bench decode` / `bench attention`
# flash-linear-attention's Triton kernels autotune on their first call of each shape (minutes):
# their results are cached in .gpu/triton_cache, and a copy of it goes to $OUT/triton_cache.tgz
# (unpack it into .gpu/ to carry it to the next run).
set -o pipefail
source .gpu/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C build-gpu -j16 > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -40; exit 1; }
echo "build: $(( $(date +%s) - start )) s"; rm -f $OUT/cmake.log $OUT/build.log $OUT/gpu.txt
export LINEA_NUM_THREADS=16
if [ -z "$NO_TESTS" ]; then
  timeout ${TEST_TIMEOUT:-240} ./build-gpu/tests/linea_tests ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} > $OUT/tests.log 2>&1
  echo "tests rc=$? after $(( $(date +%s) - start )) s"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) \]|tests? from .* ran" $OUT/tests.log | grep -v "^\[  SKIPPED \] [A-Z]" | head -30
  grep -c "^\[       OK \]" $OUT/tests.log | sed 's/^/OK lines: /'
fi
L=./build-gpu/tools/linea
if [ -z "$NO_BENCH" ]; then
  timeout 120 $L bench train --device cuda --repeats 10 --out $OUT/linea_train.jsonl > /dev/null 2>&1; echo "bench train rc=$?"
  timeout 90 $L bench scan --device cuda --what kernel --algorithms chunked --repeats 10 --out $OUT/linea_scan.jsonl > /dev/null 2>&1; echo "bench scan rc=$?"
  [ -n "$DECODE" ] && { timeout 240 $L bench decode --device cuda --threads 16 --out $OUT/linea_decode.jsonl > /dev/null 2>&1; echo "bench decode rc=$?"; }
  [ -n "$ATTENTION" ] && { timeout 60 $L bench attention --device cuda --out $OUT/linea_attention.jsonl > /dev/null 2>&1; echo "bench attention rc=$?"; }
fi
if [ -z "$NO_ANCHORS" ]; then
  mkdir -p .gpu/triton_cache
  export PYTHONPATH=.gpu/fla_src PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.gpu/triton_cache
  timeout ${TORCH_TIMEOUT:-400} python3 tools/gpu/anchor.py ${ANCHORS:-gla_kernel,softmax_eager,softmax_compile,regla_eager,regla_compile} > $OUT/torch.jsonl 2> $OUT/torch.err
  echo "torch rc=$? after $(( $(date +%s) - start )) s"; tail -3 $OUT/torch.err | cut -c1-300
  tar -czf $OUT/triton_cache.tgz -C .gpu triton_cache
fi
echo "== linea"; cat $OUT/linea_*.jsonl 2>/dev/null | cut -c1-230
echo "== torch"; grep -E '"kind": "(train|kernel|kernel_memory|decode_graph)"' $OUT/torch.jsonl 2>/dev/null | cut -c1-230
