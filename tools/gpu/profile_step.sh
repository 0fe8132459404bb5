#!/bin/bash
# Run from the repository root on the GPU machine after a build into build-gpu (full_run.sh):
# the ncu kernel-time breakdown of training steps of the standard model with fewer layers
# (MODEL=softmax|regla, LAYERS=2 by default, PRECISION=fp32|bf16; two steps are profiled, the
# first fills the allocator's pools). The table goes to stdout, the raw CSV to $OUT.
set -o pipefail
MODEL=${MODEL:-regla} LAYERS=${LAYERS:-2} PRECISION=${PRECISION:-fp32}
ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_${MODEL}_$PRECISION.csv \
  ./build-gpu/tools/linea bench train --device cuda --models $MODEL --layers $LAYERS --precision $PRECISION --warmup 0 --repeats 1 > /dev/null 2>&1
echo "== $MODEL, $LAYERS layers, $PRECISION, per step (2 steps profiled)"
python3 tools/gpu/kernel_breakdown.py $OUT/ncu_${MODEL}_$PRECISION.csv 2
