#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan), makes seed corpora with our own tools, runs each target.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 300; CI (scripts/test.sh) runs each target briefly
# Environment: CTXKIT_FUZZ_BUILD (default build-fuzz/), CTXKIT_FUZZ_PARALLEL (targets run at once, default 1),
# CTXKIT_FUZZ_TARGETS (a space-separated subset of the targets),
# CTXKIT_BUILD (the normal tree whose ctxgen and samples make the seeds; built there if missing).
# The corpora in $CTXKIT_FUZZ_BUILD/corpus grow from run to run; crashes go to $CTXKIT_FUZZ_BUILD/findings.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

seconds="${1:-300}"
parallel="${CTXKIT_FUZZ_PARALLEL:-1}"
fuzz_build="$CTXKIT_SAN_BUILD"  # CTXKIT_FUZZ_BUILD, default build-fuzz/
read -r -a targets <<<"${CTXKIT_FUZZ_TARGETS:-fuzz_container fuzz_program fuzz_onnx_model fuzz_session fuzz_npy fuzz_tensor_pb fuzz_source_model}"

# libFuzzer comes with clang; the Debian libraries are not instrumented, so coverage covers our code only.
if ! command -v clang++-14 >/dev/null 2>&1; then
  ctxkit_install_packages clang-14 libclang-rt-14-dev || true
fi
if ! command -v clang++-14 >/dev/null 2>&1 || [ ! -f "$(clang++-14 -print-runtime-dir)/libclang_rt.fuzzer-x86_64.a" ]; then
  echo "ctxkit: fuzzing SKIPPED: clang++-14 with libFuzzer not found (apt-get install clang-14 libclang-rt-14-dev)"
  exit 0
fi

# The tree is the one scripts/test.sh also builds the ASan + UBSan test suite in (scripts/common.sh); after that
# stage this build has nothing left to do.
echo "ctxkit: building the fuzz targets in $fuzz_build"
ctxkit_configure_sanitizer_tree
cmake --build "$fuzz_build" -j "$(nproc)" --target "${targets[@]}" extract_programs

# Seeds: the samples, their test data, and what ctxgen makes of them (shared, embedded, external initializers).
ctxgen="$CTXKIT_BUILD/apps/ctxgen/ctxgen"
ctxinspect="$CTXKIT_BUILD/apps/ctxinspect/ctxinspect"
samples="$CTXKIT_BUILD/samples"
if [ ! -x "$ctxgen" ] || [ ! -x "$ctxinspect" ] || [ ! -f "$samples/tiny_cnn.onnx" ]; then
  echo "ctxkit: building ctxgen, ctxinspect and the samples in $CTXKIT_BUILD for the seed corpora"
  [ -f "$CTXKIT_BUILD/CMakeCache.txt" ] || cmake -S "$CTXKIT_ROOT" -B "$CTXKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$CTXKIT_BUILD" -j "$(nproc)" --target ctxgen ctxinspect samples
fi
data="$fuzz_build/fuzz-data"  # the folder relative paths in fuzzed models resolve against
seeds="$fuzz_build/seeds"
rm -rf "$data" "$seeds"
mkdir -p "$data"
for t in fuzz_container fuzz_program fuzz_onnx_model fuzz_session fuzz_npy fuzz_tensor_pb fuzz_source_model; do
  mkdir -p "$seeds/$t" "$fuzz_build/corpus/$t"
done
mkdir -p "$fuzz_build/findings"
# Each variant compiles its own copy of a sample, so that every output has its own name in the one folder.
cp "$samples"/*.onnx "$data/"
cp "$data/tiny_cnn.onnx" "$data/cnn_cpu.onnx"
cp "$data/tiny_cnn.onnx" "$data/cnn_embedded.onnx"
cp "$data/tiny_decode.onnx" "$data/decode_external.onnx"
cp "$data/tiny_cnn.onnx" "$data/cnn_weightless.onnx"
(
  cd "$data"
  "$ctxgen" tiny_prefill.onnx,tiny_decode.onnx --share -q
  "$ctxgen" tiny_cnn.onnx -q
  "$ctxgen" cnn_cpu.onnx --target cpu -q
  "$ctxgen" cnn_embedded.onnx --embed-mode 1 -q
  "$ctxgen" decode_external.onnx --external-initializers-file weights.data -q
  "$ctxgen" cnn_weightless.onnx --weightless -q
)
cp "$data"/*.bin "$seeds/fuzz_container/"
"$fuzz_build/tests/fuzz/extract_programs" "$seeds/fuzz_program" "$data"/*.bin >/dev/null
for m in "$data"/*.onnx; do
  cp "$m" "$seeds/fuzz_onnx_model/"
  cp "$m" "$seeds/fuzz_session/"
  cp "$m" "$seeds/fuzz_source_model/"
done
n=0
for f in "$samples"/*/test_data_set_0/*.pb; do n=$((n + 1)); cp "$f" "$seeds/fuzz_tensor_pb/$n.pb"; done
for f in "$samples"/*/test_data_set_0/*.npy; do n=$((n + 1)); cp "$f" "$seeds/fuzz_npy/$n.npy"; done
# Small .npy files of every element type the reader knows, in each format version.
npy_seed() {  # FILE MAJOR DESCR SHAPE DATA_BYTES
  local dict="{'descr': '$3', 'fortran_order': False, 'shape': $4, }"
  if [ "$2" = 1 ]; then
    printf '\x93NUMPY\x01\x00%b' "$(printf '\\x%02x\\x00' $((${#dict} + 1)))" >"$1"
  else
    printf '\x93NUMPY\x0%d\x00%b' "$2" "$(printf '\\x%02x\\x00\\x00\\x00' $((${#dict} + 1)))" >"$1"
  fi
  printf '%s\n' "$dict" >>"$1"
  head -c "$5" /dev/urandom >>"$1"
}
n=0
for spec in "<f4 4" "<f8 8" "<f2 2" "<i8 8" "<i4 4" "<i2 2" "|i1 1" "|u1 1" "<u2 2" "<u4 4" "<u8 8" "|b1 1"; do
  read -r descr width <<<"$spec"
  n=$((n + 1))
  npy_seed "$seeds/fuzz_npy/gen$n.npy" 1 "$descr" "(2, 3)" $((6 * width))
  npy_seed "$seeds/fuzz_npy/gen${n}s.npy" $((n % 2 + 2)) "$descr" "()" "$width"
done
# The ONNX node tests, when present beside the project, add every op's attributes, subgraphs, element types
# and tensor files; a few small ones compiled by ctxgen give small containers and programs.
node_tests="$CTXKIT_ROOT/../shared/onnx-node-tests/node"
if [ -d "$node_tests" ]; then
  for d in "$node_tests"/*/; do
    name="$(basename "$d")"
    [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$seeds/fuzz_onnx_model/$name.onnx"
    [ -f "$d/test_data_set_0/input_0.pb" ] && cp "$d/test_data_set_0/input_0.pb" "$seeds/fuzz_tensor_pb/$name.pb"
  done
  for name in test_add test_relu test_matmul_2d test_gemm_all_attributes test_conv_with_strides_padding \
    test_maxpool_2d_pads test_batchnorm_example test_softmax_axis_1 test_transpose_default test_concat_2d_axis_0 \
    test_reshape_reduced_dims test_gather_0 test_resize_upsample_scales_linear test_lstm_defaults \
    cpu:test_lstm_with_peepholes cpu:test_gru_seq_length cpu:test_gridsample_bicubic \
    cpu:test_deform_conv_with_mask_bias cpu:test_tfidfvectorizer_tf_uniandbigrams_skip5 \
    cpu:test_tensorscatter_circular; do
    # cpu:NAME compiles for the cpu target, whose programs hold the ops npu-sim leaves to the fallback path (LSTM,
    # GridSample, ...): programs with every typed attribute family.
    target=npu-sim
    if [ "${name#cpu:}" != "$name" ]; then target=cpu name="${name#cpu:}"; fi
    [ -f "$node_tests/$name/model.onnx" ] || continue
    cp "$node_tests/$name/model.onnx" "$data/$name.onnx"
    (cd "$data" && "$ctxgen" "$name.onnx" --target "$target" -q 2>/dev/null) || continue
    cp "$data/${name}_ctx.onnx" "$seeds/fuzz_session/"
    cp "$data/${name}_ctx.onnx" "$seeds/fuzz_onnx_model/"
    cp "$data/${name}_ctxkit.bin" "$seeds/fuzz_container/" 2>/dev/null || true
    "$fuzz_build/tests/fuzz/extract_programs" "$seeds/fuzz_program" "$data/${name}_ctxkit.bin" >/dev/null 2>&1 || true
  done
fi
# A weightless context whose programs derive weights at load (docs/weight-sharing.md#derived-weights): DeepLabV3 of
# the PyTorch corpus, when present, gives a container of source references and programs with load-time Slice (the
# ASPP's pruned taps), Cast and Mul ops.
deeplab="$CTXKIT_ROOT/.cache/corpus-torch/deeplabv3_mobilenet_v3_large/model.onnx"
if [ -f "$deeplab" ]; then
  cp "$deeplab" "$data/deeplab_weightless.onnx"
  if (cd "$data" && "$ctxgen" deeplab_weightless.onnx --weightless --target cpu --dim batch=1 -q); then
    cp "$data/deeplab_weightless_ctxkit.bin" "$seeds/fuzz_container/"
    "$fuzz_build/tests/fuzz/extract_programs" "$seeds/fuzz_program" "$data/deeplab_weightless_ctxkit.bin" >/dev/null
  fi
fi
# What ctxgen writes must load (docs/bad-input.md#what-ctxgen-writes-loads): every model compiled for the seeds is
# loaded as ctxrun loads it.
if ! verified="$("$ctxinspect" --verify "$data"/*_ctx.onnx 2>&1)"; then
  echo "$verified" >&2
  echo "ctxkit: ctxgen wrote a seed model that does not load (the problems above)" >&2
  exit 1
fi
for t in "${targets[@]}"; do echo "ctxkit: $t: $(ls "$seeds/$t" | wc -l) seeds"; done

# Runs one target; its log holds libFuzzer's final statistics.
run_target() {
  local t="$1"
  CTXKIT_FUZZ_DATA_DIR="$data" \
    ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1" \
    "$fuzz_build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=200000 \
      -print_final_stats=1 -artifact_prefix="$fuzz_build/findings/$t-" \
      "$fuzz_build/corpus/$t" "$seeds/$t" >"$fuzz_build/$t.log" 2>&1
}

echo "ctxkit: running ${#targets[@]} fuzz targets for ${seconds} s each, $parallel at a time"
declare -A status
pending=("${targets[@]}")
while [ ${#pending[@]} -gt 0 ]; do
  batch=("${pending[@]:0:$parallel}")
  pending=("${pending[@]:$parallel}")
  pids=()
  for t in "${batch[@]}"; do
    run_target "$t" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    if wait "${pids[$i]}"; then status[${batch[$i]}]=ok; else status[${batch[$i]}]=FAILED; fi
  done
done

failed=0
printf '%-18s %12s %8s %8s  %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  log="$fuzz_build/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  corpus=$(ls "$fuzz_build/corpus/$t" | wc -l)
  printf '%-18s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "${status[$t]}"
  if [ "${status[$t]}" != ok ]; then
    failed=1
    echo "---- $t: end of $log" >&2
    tail -n 40 "$log" >&2
    # A CI clone may not outlive its log: small reproducers go into the log too (base64 -d recovers them).
    for f in "$fuzz_build/findings/$t"-*; do
      [ -f "$f" ] || continue
      echo "---- $t: reproducer $f ($(wc -c <"$f") bytes)" >&2
      if [ "$(wc -c <"$f")" -le 65536 ]; then base64 -w 120 "$f" >&2; fi
    done
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "ctxkit: fuzzing found problems; reproducers are in $fuzz_build/findings" >&2
  exit 1
fi
echo "ctxkit: fuzzing found no crash, leak or undefined behaviour"
