#!/bin/bash
# Run from the repository root on the GPU machine, with .gpu/ prepared (tools/gpu/README.md).
# One GPU session: build with CUDA, the whole suite, linea's benchmarks, then the PyTorch anchors
# in the same run. Logs go to $OUT; a short table comes last.
set -o pipefail
source .gpu/env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C build-gpu -j16 > $OUT/build.log 2>&1 || { grep -E "error|FAILED" $OUT/build.log | head -40; exit 1; }
echo "build: $(( $(date +%s) - start )) s"; rm -f $OUT/cmake.log $OUT/build.log $OUT/gpu.txt
export LINEA_NUM_THREADS=16
timeout ${TEST_TIMEOUT:-170} ./build-gpu/tests/linea_tests ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} > $OUT/tests.log 2>&1
echo "tests rc=$? after $(( $(date +%s) - start )) s"
grep -E "^\[  (FAILED|PASSED|SKIPPED) \]|tests? from .* ran" $OUT/tests.log | grep -v "^\[  SKIPPED \] [A-Z]" | head -30
grep -c "^\[       OK \]" $OUT/tests.log | sed 's/^/OK lines: /'
L=./build-gpu/tools/linea
[ -n "$NO_BENCH" ] && exit 0
timeout 90 $L bench train --device cuda --repeats 10 --out $OUT/linea_train.jsonl 2>&1 | tail -3; echo "bench train rc=$?"
timeout 60 $L bench attention --device cuda --out $OUT/linea_attention.jsonl 2>&1 | tail -3; echo "bench attention rc=$?"
export PYTHONPATH=.gpu/fla_src PYTHONUNBUFFERED=1
timeout ${TORCH_TIMEOUT:-400} python3 .gpu/anchor.py ${ANCHORS:-sdpa,softmax_eager,softmax_compile,regla_eager} > $OUT/torch.jsonl 2> $OUT/torch.err
echo "torch rc=$? after $(( $(date +%s) - start )) s"; tail -5 $OUT/torch.err | cut -c1-300
echo "== linea"; cut -c1-200 $OUT/linea_train.jsonl $OUT/linea_attention.jsonl
echo "== torch"; grep -E '"kind": "(train|kernel)"' $OUT/torch.jsonl | cut -c1-220
