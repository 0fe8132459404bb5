#!/usr/bin/env bash
# Runs the whole test suite: sets up and builds (tools/setup.sh), then runs every GoogleTest
# case through ctest. With --sanitize, does the same in the ASan + UBSan build.
#   bash tools/test.sh              # release build
#   bash tools/test.sh --sanitize   # sanitizer build
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tools/setup.sh" "$@"
printf '\033[1m[linea test]\033[0m running the test suite in %s\n' "$LINEA_BUILD_DIR"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$LINEA_BUILD_DIR" -j "$(nproc 2>/dev/null || echo 2)" --output-on-failure --timeout 900
