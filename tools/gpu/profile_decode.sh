#!/bin/bash
# Run from the repository root on the GPU machine after a build into build-gpu (full_run.sh):
# the kernels of one decoding step of the standard model replayed from its CUDA graph, in launch
# order with their ncu times, then summed by kernel (LETTER=R by default, batch BATCH=1). ncu
# times each kernel alone, so the sum leaves out what a replay spends between kernels; compare it
# with bench decode's ms_per_step. The raw CSV goes to $OUT. KERNEL=regex adds one kernel in detail
# (at the end of this file).
set -o pipefail
LETTER=${LETTER:-R} BATCH=${BATCH:-1}
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_decode_$LETTER.csv \
  ./build-gpu/tools/linea bench decode --device cuda --letters $LETTER --contexts 16 --batches $BATCH \
  --decode-tokens 2 --repeats 1 > $OUT/bench_decode_$LETTER.jsonl 2>&1
nodes=$(grep -o "\"decode_b${BATCH}_graph_nodes\":[0-9]*" $OUT/bench_decode_$LETTER.jsonl | cut -d: -f2)
echo "== $LETTER, batch $BATCH: the last replayed step ($nodes graph nodes)"
python3 tools/gpu/kernel_breakdown.py $OUT/ncu_decode_$LETTER.csv 1 $nodes

# With KERNEL=regex (say KERNEL=linear_step): ncu's detailed view of one launch of that kernel in
# the decoding loop (after SKIP=30 earlier ones), where its warps stall and, by source line, the
# stall samples (the sass source page: the cuda one carries no samples in its CSV).
if [ -n "$KERNEL" ]; then
  ncu --clock-control none --kernel-name "regex:$KERNEL" --launch-skip ${SKIP:-30} --launch-count 1 \
    --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section SourceCounters --import-source no -o $OUT/decode_kernel -f \
    ./build-gpu/tools/linea bench decode --device cuda --letters $LETTER --contexts 64 --batches $BATCH \
    --decode-tokens 8 --repeats 1 > $OUT/profile_decode_kernel.log 2>&1
  echo "== $KERNEL: ncu rc=$?"
  ncu --import $OUT/decode_kernel.ncu-rep --print-summary none --page details 2>/dev/null |
    grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Stall" | head -40
  ncu --import $OUT/decode_kernel.ncu-rep --page source --csv --print-source sass > $OUT/decode_kernel_source.csv 2>&1
  python3 tools/gpu/top_source_lines.py $OUT/decode_kernel_source.csv ${TOP:-40}
fi
