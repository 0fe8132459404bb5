#!/usr/bin/env bash
# The main job: sets up and builds linea (tools/setup.sh), then trains the default model (a small
# ReGLA language model on the fortunes corpus, on the CPU, a few minutes on 2 cores) and prints
# its validation and test perplexity and a generated sample. Each run gets its own directory under
# runs/, so an earlier run is never overwritten. Extra arguments go to `linea train`
# (`bash tools/main_job.sh --help` lists them).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Only the command line and the libraries it links: the tests are built by tools/test.sh.
LINEA_SETUP_TARGET=linea_cli source "$root/tools/setup.sh"
out="$root/runs/main-job-$(date +%Y%m%d-%H%M%S)"
printf '\033[1m[linea]\033[0m linea train --out %s %s\n' "$out" "$*"
"$LINEA_BUILD_DIR/tools/linea" train --out "$out" "$@"
printf '\n\033[1m[linea]\033[0m the run is in %s; try:\n' "$out"
printf '  %s generate --checkpoint %s --prompt "The " --tokens 200\n' "$LINEA_BUILD_DIR/tools/linea" "$out"
printf '  %s plot %s --out %s/curves.png\n' "$LINEA_BUILD_DIR/tools/linea" "$out" "$out"
