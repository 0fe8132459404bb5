#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds (tools/setup.sh), then runs every GoogleTest
# case through ctest. With --sanitize, does the same in the ASan + UBSan build. The release run
# then installs linea into build/install and builds and runs examples/ against that package.
#   bash tools/test.sh              # release build
#   bash tools/test.sh --sanitize   # sanitizer build
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tools/setup.sh" "$@"
printf '\033[1m[linea test]\033[0m running the test suite in %s\n' "$LINEA_BUILD_DIR"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# ctest pads each progress line with dots to its longest test name: one space
# is enough, also before "***Skipped" or "***Failed", which follow the dots directly. pipefail
# keeps ctest's exit status.
ctest --test-dir "$LINEA_BUILD_DIR" -j "$(nproc 2>/dev/null || echo 2)" --output-on-failure --timeout 900 |
  sed -E '/^ *[0-9]+\/[0-9]+ Test +#/ s/ \.{2,} ?/ /'
if [[ "$LINEA_BUILD_DIR" != *asan* ]]; then
  prefix="$LINEA_BUILD_DIR/install"
  printf '\033[1m[linea test]\033[0m installing into %s, then building examples/ against it\n' "$prefix"
  cmake --install "$LINEA_BUILD_DIR" --prefix "$prefix" >/dev/null
  cmake -S "$root/examples" -B "$LINEA_BUILD_DIR/examples" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$LINEA_BUILD_DIR/examples" >/dev/null
  "$LINEA_BUILD_DIR/examples/taste"
fi
