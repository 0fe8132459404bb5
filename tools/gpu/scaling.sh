#!/usr/bin/env bash
# The data-parallel scaling figures (docs/benchmarks.md, "Several GPUs"): the standard training
# step (softmax and ReGLA, 16 sequences per GPU) on 1 GPU and on each count in GPUS, over NCCL's
# fastest transport, then as two "hosts" of half the GPUs each on this machine with NCCL forced
# onto its socket transport. Prints linea bench train's JSON lines and a markdown table
# (tokens/s, speed-up and efficiency against one GPU's plain step, the one a run without --gpus
# takes, and the step's share lost to the all-reduce). tools/gpu/scaling_figure.py draws the
# JSON lines.
#
#   bash tools/gpu/scaling.sh                # GPUS="1 2 4 8" up to the GPUs present
#   GPUS="1 2" PRECISION=bf16 bash tools/gpu/scaling.sh
#   NO_SOCKET=1 bash tools/gpu/scaling.sh    # without the two-"host" socket run
#
# Expects build-gpu/ (tools/gpu/full_run.sh builds it). NCCL_NVLS_ENABLE stays 0 (linea sets it).
set -euo pipefail
LINEA=${LINEA:-./build-gpu/tools/linea}
PRECISION=${PRECISION:-fp32}
present=$(nvidia-smi -L | wc -l)
GPUS=${GPUS:-"1 2 4 8"}
out=${OUT:-/tmp}/scaling.jsonl
: > "$out"
port=29500
for n in $GPUS; do
  [ "$n" -le "$present" ] || continue
  port=$((port + 1))
  echo "== $n GPU(s)" >&2
  "$LINEA" bench train --gpus "$n" --master 127.0.0.1:$port --precision "$PRECISION" \
    | sed "s/}$/, \"transport\": \"default\"}/" >> "$out"
done
# Two "hosts" on one machine: half the GPUs each, NCCL on sockets over the loopback.
half=$((present / 2))
if [ "$half" -ge 1 ] && [ -z "${NO_SOCKET:-}" ]; then
  port=$((port + 1))
  echo "== 2 hosts x $half GPU(s) over sockets" >&2
  export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo
  second=$(seq -s, "$half" $((2 * half - 1)))
  first=$(seq -s, 0 $((half - 1)))
  CUDA_VISIBLE_DEVICES=$second "$LINEA" bench train --gpus "$half" --nnodes 2 --node-rank 1 \
    --master 127.0.0.1:$port --precision "$PRECISION" > /dev/null &
  CUDA_VISIBLE_DEVICES=$first "$LINEA" bench train --gpus "$half" --nnodes 2 --node-rank 0 \
    --master 127.0.0.1:$port --precision "$PRECISION" \
    | sed "s/}$/, \"transport\": \"socket\"}/" >> "$out"
  wait
fi
cat "$out"
python3 - "$out" "$(dirname "$0")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
from scaling_figure import plain_tok_s
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
one = plain_tok_s(rows)
print("\n| model | GPUs | transport | tokens/s | speed-up | efficiency | share lost to all-reduce |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    up = r["tok_s"] / one[r["model"]] if r["model"] in one else float("nan")
    share = r.get("comm_share", 0.0)
    print(f'| {r["model"]} | {r["gpus"]} | {r["transport"]} | {r["tok_s"]:,.0f} | {up:.3f}x | {up / r["gpus"]:.3f} | {share:.1%} |')
PY
