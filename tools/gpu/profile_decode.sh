#!/bin/bash
# Run from the repository root on the GPU machine after a build into build-gpu (full_run.sh):
# the kernels of one decoding step of the standard model replayed from its CUDA graph, in launch
# order with their ncu times, then summed by kernel (LETTER=R by default, batch BATCH=1). ncu
# times each kernel alone, so the sum leaves out what a replay spends between kernels; compare it
# with bench decode's ms_per_step. The raw CSV goes to $OUT.
set -o pipefail
LETTER=${LETTER:-R} BATCH=${BATCH:-1}
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_decode_$LETTER.csv \
  ./build-gpu/tools/linea bench decode --device cuda --letters $LETTER --contexts 16 --batches $BATCH \
  --decode-tokens 2 --repeats 1 > $OUT/bench_decode_$LETTER.jsonl 2>&1
nodes=$(grep -o "\"decode_b${BATCH}_graph_nodes\":[0-9]*" $OUT/bench_decode_$LETTER.jsonl | cut -d: -f2)
echo "== $LETTER, batch $BATCH: the last replayed step ($nodes graph nodes)"
python3 tools/gpu/kernel_breakdown.py $OUT/ncu_decode_$LETTER.csv 1 $nodes
