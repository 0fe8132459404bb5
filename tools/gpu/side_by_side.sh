#!/bin/bash
# Builds several versions of linea on the GPU machine and benchmarks them side by side, in
# alternating rounds in one session, so that their times compare (docs/benchmarks.md: figures
# from different sessions are not compared). Run from the repository root, with .gpu/ prepared
# (README.md). The versions are the working tree ("tree") and every .gpu/revs/<name>.tar, each
# made on the development machine with `git archive -o .gpu/revs/<name>.tar <revision>`.
#   BENCH     the linea command to time (default: the scan kernel alone, the chain, 4k and 16k)
#   ROUNDS    rounds of the versions in turn (default 2)
#   FLA=1     flash-linear-attention's chunk_gla in the same session (tools/gpu/anchor.py gla_kernel)
#   TESTS     a GoogleTest filter run on every version first (default: the scan's tests)
#   TESTED    the versions they run on (default: all), e.g. TESTED=tree when the others passed
#             before; a name that is none of them (TESTED=none) runs no tests
#   TARGETS   what each version builds (default: linea_tests linea_cli; linea_cli alone with
#             TESTED=none saves most of the build)
# Each version builds in /tmp/side_by_side/<name>; the JSON lines go to $OUT/<name>_<round>.jsonl.
set -o pipefail
source .gpu/env.sh
start=$(date +%s)
default_bench="bench scan --device cuda --what kernel --algorithms chunked --state-passes chain"
BENCH=${BENCH:-$default_bench --lengths 4096,16384 --repeats 10}
TESTS=${TESTS:-*Scan*:*Chain*:*Chunk*}
export PYTHONPATH=.gpu/fla_src PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache
# fla autotunes on its first call of each shape (minutes): while the versions build.
[ -n "$FLA" ] && (python3 tools/gpu/anchor.py gla_kernel > $OUT/fla_warm.jsonl 2> $OUT/fla_warm.err) &
names=(tree)
for tar in .gpu/revs/*.tar; do [ -e "$tar" ] && names+=("$(basename "$tar" .tar)"); done
jobs=$(( 16 / ${#names[@]} )); [ $jobs -lt 2 ] && jobs=2
for name in "${names[@]}"; do
  dir=/tmp/side_by_side/$name
  rm -rf "$dir" && mkdir -p "$dir"
  if [ "$name" != tree ]; then tar -xf ".gpu/revs/$name.tar" -C "$dir"
  elif [ -d .git ]; then git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$dir/"
  else tar --exclude=./.gpu --exclude='./build*' -cf - . | tar -xf - -C "$dir"; fi
  (cd "$dir" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     > build.log 2>&1 && ninja -C build -j$jobs ${TARGETS:-linea_tests linea_cli} >> build.log 2>&1
   echo "$name: build rc=$? after $(( $(date +%s) - start )) s"; grep -E "error|FAILED" build.log | head -5) &
done
wait
for name in ${TESTED:-${names[@]}}; do
  [ -x /tmp/side_by_side/$name/build/tests/linea_tests ] || { echo "$name: no test program, no tests run"; continue; }
  timeout 300 /tmp/side_by_side/$name/build/tests/linea_tests --gtest_filter="$TESTS" > $OUT/${name}_tests.log 2>&1
  echo "$name: tests rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/${name}_tests.log | tr '\n' ' ')"
done
summary() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    keys = [k for k in ("gate", "T", "model") if k in r]
    times = [k for k in ("fwd_bwd_ms", "fwd_ms", "peak_mib", "step_ms", "tok_s", "peak_gib") if k in r]
    print(" ", " ".join(f"{k}={r[k]}" for k in keys + times))' "$1"
}
for round in $(seq 1 ${ROUNDS:-2}); do
  for name in "${names[@]}"; do
    (cd /tmp/side_by_side/$name && ./build/tools/linea $BENCH --out $OUT/${name}_$round.jsonl > /dev/null 2>&1)
    echo "$name, round $round: rc=$?"; summary $OUT/${name}_$round.jsonl
  done
done
if [ -n "$FLA" ]; then
  python3 tools/gpu/anchor.py gla_kernel > $OUT/fla.jsonl 2> $OUT/fla.err
  echo "fla: rc=$?"; grep '"kind": "kernel"' $OUT/fla.jsonl | cut -c1-160
fi
echo "total: $(( $(date +%s) - start )) s"
