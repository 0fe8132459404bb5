#!/usr/bin/env bash
# The main job: sets up and builds linea (tools/setup.sh), then checks every differentiable op's
# gradient against finite differences (`linea gradcheck`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tools/setup.sh"
printf '\033[1m[linea]\033[0m linea gradcheck: every op against float64 finite differences\n'
"$LINEA_BUILD_DIR/tools/linea" gradcheck
