#!/usr/bin/env bash
# Sets up and builds linea on a Debian machine with the C++ toolchain.
#   1. installs the Debian packages linea needs that are missing (apt-get, as root or via sudo);
#   2. configures and builds with CMake into build/ (or build-asan/ with --sanitize): everything,
#      or only $LINEA_SETUP_TARGET and what it needs when that is set.
# Other scripts source this; run it alone to just build:  bash tools/setup.sh [--sanitize]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) ;;
  esac
done

say() { printf '\033[1m[linea setup]\033[0m %s\n' "$*"; }

# Debian packages: compiler and build tools, OpenBLAS (CPU GEMM), nlohmann-json (header-only: JSON
# configs, logs and checkpoints), GoogleTest, libpng (plots) and fortunes (the default training
# corpus: English text that needs no network).
packages=(g++ cmake ninja-build pkg-config libopenblas-dev nlohmann-json3-dev libgtest-dev libpng-dev fortunes)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing missing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then apt_get=(apt-get); elif command -v sudo >/dev/null; then apt_get=(sudo apt-get);
  else
    echo "linea setup: need root to run: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${apt_get[@]}" update -qq
  "${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "all Debian packages present: ${packages[*]}"
fi

jobs=$(nproc 2>/dev/null || echo 2)
if ((sanitize)); then
  # CUDA stays off here: ASan and the CUDA runtime do not mix without special options, and the
  # CUDA sources are compiled by the normal build.
  build_dir="$root/build-asan"
  say "configuring the AddressSanitizer + UndefinedBehaviorSanitizer build in $build_dir"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINEA_SANITIZE=ON -DLINEA_CUDA=OFF >/dev/null
else
  build_dir="$root/build"
  say "configuring the release build in $build_dir (CUDA: on if nvcc is found)"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
# LINEA_SETUP_TARGET (set by tools/main_job.sh: linea_cli) builds one target and what it needs;
# unset, everything, the tests included.
if [ -n "${LINEA_SETUP_TARGET:-}" ]; then
  say "building $LINEA_SETUP_TARGET with $jobs jobs"
  cmake --build "$build_dir" -j "$jobs" --target "$LINEA_SETUP_TARGET"
else
  say "building everything with $jobs jobs"
  cmake --build "$build_dir" -j "$jobs"
fi
export LINEA_BUILD_DIR="$build_dir"
say "built $build_dir/tools/linea"
