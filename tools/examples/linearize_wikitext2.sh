#!/bin/bash
# The worked example of docs/linearize.md: a softmax model trained on WikiText-2 (word level),
# then linearized into ReGLA (RRRR) and into the hybrid SRSR, with and without stage 1 (attention
# transfer), each fine-tuned in full or with LoRA; beside them a ReGLA and a softmax model trained
# from scratch on as many tokens as the softmax pretraining and the fine-tuning together.
#
#   DATA=path/to/wikitext-2 DEVICE=cuda bash tools/examples/linearize_wikitext2.sh OUT_DIR
#
# DATA holds train.txt, valid.txt and test.txt. LINEA names the binary (default build/tools/linea).
# PRE, FT and TRANSFER set the steps of the pretraining, the fine-tuning and stage 1; the model
# (4 layers, width 256, 4 heads of 64) and the batches (32 x 256 tokens) are fixed below. At the
# default steps it takes a few minutes on an H100/H200; on a CPU, lower the steps a great deal.
# The table (Markdown) is printed at the end and written to OUT_DIR/table.md.
set -euo pipefail
out=${1:?usage: linearize_wikitext2.sh OUT_DIR}
linea=${LINEA:-build/tools/linea}
data=${DATA:?set DATA to a folder with train.txt, valid.txt and test.txt}
device=${DEVICE:-cuda}
pre=${PRE:-1500} ft=${FT:-500} transfer=${TRANSFER:-200}
mkdir -p "$out"

quiet=(--sample-tokens 0 --eval-every 0 --save-every 1000000 --log-every 100)
model=(--data "$data" --tokenizer word --cache-dir none --d-model ${WIDTH:-256} --heads 4 --batch ${BATCH:-32} --seq ${SEQ:-256}
       --lr 2e-3 --warmup ${WARMUP:-100} --device "$device" --seed 0)
run() {  # name, then the command's arguments; its output goes to OUT_DIR/name.txt
  local name=$1; shift
  echo "== $name: linea $*" | cut -c1-200
  local start=$(date +%s)
  "$linea" "$@" > "$out/$name.txt" 2>&1 || { tail -20 "$out/$name.txt"; exit 1; }
  echo "   $(( $(date +%s) - start )) s; $(grep -E '^test loss' "$out/$name.txt")"
}

run softmax train "${model[@]}" "${quiet[@]}" --model SSSS --steps "$pre" --out "$out/softmax"
for pattern in RRRR SRSR; do
  linearize=(linearize --checkpoint "$out/softmax" --model "$pattern" --steps "$ft" --warmup ${FT_WARMUP:-50} "${quiet[@]}")
  run "$pattern-copy-full" "${linearize[@]}" --out "$out/$pattern-copy-full"
  run "$pattern-transfer-full" "${linearize[@]}" --transfer-steps "$transfer" --out "$out/$pattern-transfer-full"
  run "$pattern-copy-lora" "${linearize[@]}" --lora-rank 8 --out "$out/$pattern-copy-lora"
  run "$pattern-transfer-lora" "${linearize[@]}" --transfer-steps "$transfer" --lora-rank 8 \
      --out "$out/$pattern-transfer-lora"
done
run regla-scratch train "${model[@]}" "${quiet[@]}" --model RRRR --steps $((pre + ft)) --out "$out/regla-scratch"
run softmax-scratch train "${model[@]}" "${quiet[@]}" --model SSSS --steps $((pre + ft)) --out "$out/softmax-scratch"

python3 "$(dirname "$0")/linearize_table.py" "$out" "$pre" "$ft" "$transfer" | tee "$out/table.md"
