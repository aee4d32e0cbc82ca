#!/usr/bin/env bash
# ONNX Runtime as the oracle: compiles the bundled samples (the QDQ CNN and transformer block among them) and the whole development corpus (CORPUS.md §2: PP-OCR
# det/rec/cls, four silero VAD variants and another package's three, three openwakeword heads) with ctxgen for each target (npu-sim and cpu),
# runs them with ctxrun on seeded random inputs, runs the SOURCE models with ONNX Runtime 1.30 on the same input
# bytes, and requires ctxrun's outputs to match (rtol 1e-3, atol 1e-5). Exits 77 (CTest's skip code) when the
# assets are absent, saying why, or fails when CI is set (tests/common/skip.sh).
# The sample transformer with a symbolic sequence length is compiled for three shape variants into one .bin, and
# each variant is compared the same way. Four linear Resize models must match bit for bit.
# usage: ort_oracle.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/skip.sh"
build="$1" cache="$2" src="$3"
ort="$cache/onnxruntime-node-1.30.0/node_modules"
source "$src/bench/sample_models.sh"  # where the npm models are: $ocr, $vad, $vadWeb, $oww
for need in "$ort/onnxruntime-node/package.json" "$ocr" "$vad" "$vadWeb" "$oww"; do
  if [ ! -e "$need" ]; then
    ctx_skip "$need is missing (run scripts/fetch_test_assets.sh; it needs Node.js, npm and the npm registry)"
  fi
done
if ! command -v node >/dev/null; then
  ctx_skip "Node.js is not installed"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
passed=0 failed=0
# compare NAME CTX MODEL OUT [ctxrun args...]: runs CTX with ctxrun on seeded random inputs and the source MODEL with
# ONNX Runtime on the same bytes, and requires the outputs to match. With bound=INPUT=V (CTX compiled with --set),
# ONNX Runtime gets that input's value besides the inputs CTX takes.
compare() {
  local name="$1" ctx="$2" model="$3" out="$4"
  shift 4
  if ! "$apps/ctxrun/ctxrun" "$ctx" "$@" --seed 7 --save-inputs "$out/in" >"$out/run.log" 2>&1; then
    echo "FAIL $name: ctxrun: $(cat "$out/run.log")"; failed=$((failed + 1)); return
  fi
  if ! ORT_GRAPH_OPTIMIZATION="${ortLevel:-all}" NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$out/in" \
      "$out/ort" 1 ${bound:+1 0 "$bound"} >"$out/ort.log" 2>&1; then
    echo "FAIL $name: onnxruntime: $(cat "$out/ort.log")"; failed=$((failed + 1)); return
  fi
  if "$apps/ctxrun/ctxrun" "$ctx" --inputs "$out/in" --expected "$out/ort" "${tolerance[@]}" >"$out/cmp.log" 2>&1; then
    echo "ok   $name: $(grep -h 'max |diff|' "$out/cmp.log" | tr '\n' ' ')"; passed=$((passed + 1))
  elif [ -n "${exact:-}" ] && ! grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo 2>/dev/null; then
    # ONNX Runtime's int8 GEMM on an x86 CPU without VNNI adds u8 x s8 products in saturating 16-bit pairs (MLAS's
    # AVX2 kernel), so its QDQ results there can be off by whole quantization steps. ctxrun must then match the
    # sample's independently computed outputs ($exact), and must differ from ONNX Runtime on them too.
    local ortExact="$out/ort_exact"
    mkdir -p "$ortExact"
    if ! "$apps/ctxrun/ctxrun" "$ctx" --inputs "$exact" --expected "$exact" >"$out/exact.log" 2>&1; then
      echo "FAIL $name: $(cat "$out/cmp.log"); and against the exact outputs: $(cat "$out/exact.log")"
      failed=$((failed + 1))
    elif NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$exact" "$ortExact" 1 >"$out/ort_exact.log" 2>&1 &&
      "$apps/ctxrun/ctxrun" "$ctx" --inputs "$exact" --expected "$ortExact" "${tolerance[@]}" >/dev/null 2>&1; then
      echo "FAIL $name: $(cat "$out/cmp.log") (on the exact inputs ONNX Runtime agrees with ctxrun, so the difference on random inputs is not explained)"
      failed=$((failed + 1))
    else
      echo "ok   $name: matches the exact outputs ($(grep -h 'max |diff|' "$out/exact.log" | tr '\n' ' ')); ONNX" \
        "Runtime does not on this CPU (no VNNI: saturating int8 pairs)"
      passed=$((passed + 1))
    fi
  else
    echo "FAIL $name: $(cat "$out/cmp.log")"; failed=$((failed + 1))
  fi
}
# check NAME MODEL TARGET [ctxgen shape args...] [-- ctxrun-only args...]: one model on one target.
check() {
  local name="$1" model="$2" target="$3"
  shift 3
  local shapes=() runOnly=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do shapes+=("$1"); shift; done
  [ $# -gt 0 ] && shift && runOnly=("$@")
  local out="$work/$name.$target"
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "$model" -o "$out" -q --target "$target" "${shapes[@]}" >"$out/gen.log" 2>&1; then
    echo "FAIL $name [$target]: ctxgen: $(cat "$out/gen.log")"; failed=$((failed + 1)); return
  fi
  compare "$name [$target]" "$out/$(basename "${model%.onnx}")_ctx.onnx" "$model" "$out" "${shapes[@]}" "${runOnly[@]}"
}
# checkBound NAME MODEL TARGET ASSIGNMENT [ctxgen shape args...]: MODEL compiled with --set ASSIGNMENT (the input
# becomes a constant, and an If on it is replaced by its branch): no If may stay on the fallback path, and the
# compiled model must match ONNX Runtime running the source model with that input value.
checkBound() {
  local name="$1" model="$2" target="$3" assignment="$4"
  shift 4
  local out="$work/$name.bound.$target"
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "$model" -o "$out" -q --target "$target" --set "$assignment" "$@" --json "$out/gen.json" \
      >"$out/gen.log" 2>&1; then
    echo "FAIL $name --set [$target]: ctxgen: $(cat "$out/gen.log")"; failed=$((failed + 1)); return
  fi
  if grep -q '"op_type": "If"' "$out/gen.json"; then
    echo "FAIL $name --set [$target]: an If stayed on the fallback path: $(grep -A2 '"fallback"' "$out/gen.json")"
    failed=$((failed + 1)); return
  fi
  bound="$assignment" compare "$name --set $assignment [$target]" "$out/$(basename "${model%.onnx}")_ctx.onnx" "$model" \
    "$out" "$@"
}
# Shape variants: the transformer block with a symbolic sequence length compiled for lengths 1, 16 and 64 in one
# run (one .bin); each variant runs without bindings (its _ctx.onnx carries the static shapes) and must match ONNX
# Runtime running the symbolic source model at that length.
checkVariants() {
  local target="$1" model="$work/symbolic/tiny_prefill_seq.onnx"
  local out="$work/variants.$target"
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "$model" -o "$out" -q --target "$target" --variant seq=1 --variant seq=16 \
      --variant seq=64 >"$out/gen.log" 2>&1; then
    echo "FAIL variants [$target]: ctxgen: $(cat "$out/gen.log")"; failed=$((failed + 1)); return
  fi
  for variant in seq1 seq16 seq64; do
    mkdir -p "$out/$variant"
    compare "tiny_prefill_$variant [$target]" "$out/tiny_prefill_seq_${variant}_ctx.onnx" "$model" "$out/$variant"
  done
}
mkdir -p "$work/symbolic"
if ! "$build/tests/oracle/make_symbolic" "$build/samples/tiny_prefill.onnx" "$work/symbolic/tiny_prefill_seq.onnx"; then
  echo "FAIL variants: could not write the symbolic-length model"; failed=$((failed + 1))
fi
tolerance=()  # ctxrun's defaults: rtol 1e-3, atol 1e-5
vadShapes=(--shape input=1x512 --shape state=2x1x128)
# Float16 models (tests/oracle/make_fp16.cpp): half-precision versions of the CNN and the transformer block, and a
# float16 graph with a float32 island written with explicit Casts and float16 Resize, Softmax and LayerNormalization.
# npu-sim computes float16 in float16 (every op's result rounded, as ONNX defines) while ONNX Runtime's CPU EP computes
# in float32 between the Casts it inserts: a few float16 steps apart, compared at rtol 1e-2, atol 5e-3. cpu computes
# float16 in float32 between ops as ONNX Runtime does (docs/target-json.md, float16_compute): see checkHalf.
halfModels="$work/half"
mkdir -p "$halfModels"
for stem in tiny_cnn tiny_prefill; do
  if ! "$build/tests/oracle/make_fp16" "$build/samples/$stem.onnx" "$halfModels/${stem}_fp16.onnx"; then
    echo "FAIL ${stem}_fp16: could not write the float16 model"; failed=$((failed + 1))
  fi
done
# The transformer block with its float16 roundings made explicit where ONNX Runtime 1.30 rounds: after the ops it runs
# with its own float16 kernels (the first LayerNormalization, which reads the graph input; the second, whose input it
# rounds too) and before the Reshape -> Transpose chains it runs in float16 (q, k, v and the attention context).
if ! "$build/tests/oracle/make_fp16" "$build/samples/tiny_prefill.onnx" "$halfModels/tiny_prefill_fp16_ort_rounding.onnx" \
    --round ln1 attn/q_add attn/k_add attn/v_add attn/context residual1:ln2 ln2; then
  echo "FAIL tiny_prefill_fp16_ort_rounding: could not write the float16 model"; failed=$((failed + 1))
fi
if ! "$build/tests/oracle/make_fp16" --explicit-casts "$halfModels/fp16_explicit_casts.onnx"; then
  echo "FAIL fp16_explicit_casts: could not write the model"; failed=$((failed + 1))
fi
# checkHalf TARGET: the float16 models. On cpu: the CNN (its BatchNormalization folded into float16 weights as ONNX
# Runtime folds it), the explicit-Cast graph and the transformer block with ONNX Runtime's roundings made explicit match
# at the default tolerance, and the explicit-Cast graph's output `rounded` (the float32 island's result, rounded by its
# Cast to float16) bit for bit: ctxkit rounds exactly there and nowhere before. The plain transformer block is compared
# at atol 2e-3 (one float16 step at its outputs' size): ONNX Runtime rounds where it runs LayerNormalization, Reshape
# and Transpose with its float16 kernels, ctxkit does not.
checkHalf() {
  local target="$1"
  if [ "$target" != cpu ]; then
    tolerance=(--rtol 1e-2 --atol 5e-3)
    check tiny_cnn_fp16 "$halfModels/tiny_cnn_fp16.onnx" "$target"
    check tiny_prefill_fp16 "$halfModels/tiny_prefill_fp16.onnx" "$target"
    check fp16_explicit_casts "$halfModels/fp16_explicit_casts.onnx" "$target"
    tolerance=()
    return
  fi
  tolerance=()
  check tiny_cnn_fp16 "$halfModels/tiny_cnn_fp16.onnx" "$target"
  check tiny_prefill_fp16_ort_rounding "$halfModels/tiny_prefill_fp16_ort_rounding.onnx" "$target"
  check fp16_explicit_casts "$halfModels/fp16_explicit_casts.onnx" "$target"
  local out="$work/fp16_explicit_casts.$target"
  if [ -f "$out/ort/output_1.npy" ] &&
    "$apps/ctxrun/ctxrun" "$out/fp16_explicit_casts_ctx.onnx" --inputs "$out/in" --output-dir "$out/ours" -q \
      >/dev/null 2>&1; then
    # Output 1 is 1 x 4 x 12 x 12 float16 values: the last 1152 bytes of each .npy.
    if cmp -s <(tail -c 1152 "$out/ours/output_1.npy") <(tail -c 1152 "$out/ort/output_1.npy"); then
      echo "ok   fp16_explicit_casts [$target]: output 'rounded' equal to ONNX Runtime's bit for bit"
      passed=$((passed + 1))
    else
      echo "FAIL fp16_explicit_casts [$target]: output 'rounded' differs from ONNX Runtime's"; failed=$((failed + 1))
    fi
  else
    echo "FAIL fp16_explicit_casts [$target]: no outputs to compare bit for bit"; failed=$((failed + 1))
  fi
  tolerance=(--rtol 1e-3 --atol 2e-3)
  check tiny_prefill_fp16 "$halfModels/tiny_prefill_fp16.onnx" "$target"
  tolerance=()
}
# QDQ in the forms other quantizers write (tests/oracle/make_qdq_forms.cpp): fuse-qdq must take every group (no float
# Conv, Gemm or MatMul may stay), and the integer results must match ONNX Runtime's to one output step (0.05).
qdqForms="$work/qdq_forms.onnx"
if ! "$build/tests/oracle/make_qdq_forms" "$qdqForms"; then
  echo "FAIL qdq_forms: could not write the model"; failed=$((failed + 1))
fi
# dumpOps NAME MODEL TARGET OUT: compiles MODEL into OUT with its programs printed to OUT/ops.log; on failure says so.
dumpOps() {
  local name="$1" model="$2" target="$3" out="$4"
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "$model" -o "$out" -q --target "$target" --dump-after emit-program >"$out/ops.log" 2>&1;
  then
    echo "FAIL $name [$target]: ctxgen: $(cat "$out/ops.log")"; failed=$((failed + 1)); return 1
  fi
}
checkQdqForms() {
  local target="$1" out="$work/qdq_forms_ops.$target"
  dumpOps qdq_forms "$qdqForms" "$target" "$out" || return
  local integer float
  integer=$(grep -cE '= QLinear(Conv|MatMul)\(' "$out/ops.log")
  float=$(grep -cE '= (Conv|Gemm|MatMul)\(' "$out/ops.log")
  if [ "$integer" -ne 4 ] || [ "$float" -ne 0 ]; then
    echo "FAIL qdq_forms [$target]: $integer integer and $float float products (expected 4 and 0): $(cat "$out/ops.log")"
    failed=$((failed + 1)); return
  fi
  tolerance=(--rtol 0 --atol 0.0501)
  check qdq_forms "$qdqForms" "$target"
  tolerance=()
}
# Weight-only quantized forms (tests/oracle/make_qdq_weights.cpp: DequantizeLinear of int8, uint8 and int4 weights, per
# tensor and per channel, into float MatMul, MatMul + Add, Transpose + MatMul, Gather, Conv and ConvTranspose): every
# DequantizeLinear is compiled as a load-time op (run once at load), the context binary stays under 1.5x the weights'
# quantized bytes (float32 copies would make it about 4.5x), and the outputs match ONNX Runtime's. ONNX Runtime runs at
# its basic optimization level here: from its extended level on it runs a float MatMul on a DequantizeLinear weight as
# an integer product of its input rounded to 8 bits, which is about 1e-2 away from the model's float product (ctxkit
# computes the float product; at the basic level the two agree exactly).
qdqWeights="$work/qdq_weights.onnx"
if ! qdqWeightBytes="$("$build/tests/oracle/make_qdq_weights" "$qdqWeights")"; then
  echo "FAIL qdq_weights: could not write the model"; failed=$((failed + 1))
fi
checkQdqWeights() {
  local target="$1" out="$work/qdq_weights_ops.$target"
  dumpOps qdq_weights "$qdqWeights" "$target" "$out" || return
  local atLoad
  atLoad=$(grep -cE '%[0-9]+:float32\[[0-9x]+\]load(:[^ ]*)? = DequantizeLinear\(' "$out/ops.log")
  if [ "$atLoad" -ne 7 ]; then
    echo "FAIL qdq_weights [$target]: $atLoad DequantizeLinear ops at load (expected 7): $(cat "$out/ops.log")"
    failed=$((failed + 1)); return
  fi
  ortLevel=basic check qdq_weights "$qdqWeights" "$target"
  local bin="$work/qdq_weights.$target/qdq_weights_ctxkit.bin"
  if [ ! -f "$bin" ] || [ "$(stat -c %s "$bin")" -gt $((qdqWeightBytes * 3 / 2)) ]; then
    echo "FAIL qdq_weights [$target]: the context binary ($(stat -c %s "$bin" 2>/dev/null) B) is over 1.5x the" \
      "weights' quantized bytes ($qdqWeightBytes B): weights were widened"
    failed=$((failed + 1)); return
  fi
  # Shared with --share: a second model with the same weights adds its program, not a second copy of the weights.
  local shared="$work/qdq_weights_share.$target"
  mkdir -p "$shared/models"
  cp "$qdqWeights" "$shared/models/qdq_a.onnx" && cp "$qdqWeights" "$shared/models/qdq_b.onnx"
  if ! "$apps/ctxgen/ctxgen" "$shared/models/qdq_a.onnx,$shared/models/qdq_b.onnx" --share -o "$shared" -q \
      --target "$target" >"$shared/gen.log" 2>&1; then
    echo "FAIL qdq_weights --share [$target]: ctxgen: $(cat "$shared/gen.log")"; failed=$((failed + 1)); return
  fi
  if [ "$(stat -c %s "$shared/qdq_a_ctxkit.bin")" -gt $(($(stat -c %s "$bin") + 16384)) ]; then
    echo "FAIL qdq_weights --share [$target]: the shared binary ($(stat -c %s "$shared/qdq_a_ctxkit.bin") B) holds" \
      "the weights twice (one model's: $(stat -c %s "$bin") B)"
    failed=$((failed + 1)); return
  fi
  mkdir -p "$shared/run"
  ortLevel=basic compare "qdq_weights --share, second model [$target]" "$shared/qdq_b_ctx.onnx" "$qdqWeights" \
    "$shared/run"
}
# Linear Resize computed as ONNX Runtime computes it (docs/runtime.md#numerics): equal bit for bit on four scale and
# coordinate forms (bench/make_kernel_models.cpp).
kernelModels="$work/kernel_models"
if ! "$build/tests/kernels/make_kernel_models" "$kernelModels" resize_linear >/dev/null; then
  echo "FAIL resize_linear: could not write the models"; failed=$((failed + 1))
fi
# Depthwise Convs of odd geometry (strides, dilation, asymmetric pads, 3x5 to 9x9 kernels, widths around the vector
# widths, row counts not a multiple of four, fused activations; bench/make_kernel_models.cpp).
if ! "$build/tests/kernels/make_kernel_models" "$kernelModels" dwodd >/dev/null; then
  echo "FAIL dwodd: could not write the models"; failed=$((failed + 1))
fi
# GridSample in every mode, padding and align_corners at a constant grid holding points far outside, NaN and
# infinities (bench/make_kernel_models.cpp): ONNX Runtime reads a non-finite grid value as -1.
if ! "$build/tests/kernels/make_kernel_models" "$kernelModels" gridsample >/dev/null; then
  echo "FAIL gridsample: could not write the models"; failed=$((failed + 1))
fi
# Einsum as batched GEMMs (attention forms, broadcast "...", permuted outputs) and by direct summation (a diagonal, a
# label summed out of one operand; bench/make_kernel_models.cpp).
if ! "$build/tests/kernels/make_kernel_models" "$kernelModels" einsum >/dev/null; then
  echo "FAIL einsum: could not write the models"; failed=$((failed + 1))
fi
# ONNX Runtime's com.microsoft transformer ops and MatMulNBits forms (tests/oracle/make_transformer_contrib.cpp): every
# node compiled (no fallback node on either target), outputs as ONNX Runtime's CPU EP computes them, 4-bit weights kept.
contrib="$work/transformer_contrib.onnx" nbits="$work/matmul_nbits.onnx"
if ! "$build/tests/oracle/make_transformer_contrib" "$contrib" "$nbits"; then
  echo "FAIL transformer_contrib: could not write the model"; failed=$((failed + 1))
fi
# GroupQueryAttention forms (tests/oracle/make_attention_contrib.cpp): prefill and decode, packed and separate QKV.
# With them, ONNX Runtime's BERT-style MultiHeadAttention, Attention and EmbedLayerNormalization forms.
gqa="$work/gqa.onnx" ropeQuant="$work/rope_quant.onnx" gqaTotal="$work/gqa_total_input.onnx"
bertAttention="$work/bert_attention.onnx"
if ! "$build/tests/oracle/make_attention_contrib" "$gqa" "$ropeQuant" "$gqaTotal" "$bertAttention"; then
  echo "FAIL gqa: could not write the model"; failed=$((failed + 1))
fi
checkContrib() {
  local target="$1" model
  for model in "$contrib" "$nbits" "$gqa" "$ropeQuant" "$bertAttention"; do
    local stem
    stem="$(basename "${model%.onnx}")"
    check "$stem" "$model" "$target"
    local ctx="$work/$stem.$target/${stem}_ctx.onnx"
    if [ -f "$ctx" ] && ! "$apps/ctxrun/ctxrun" "$ctx" --json | grep -q '"fallback_nodes": 0'; then
      echo "FAIL $stem [$target]: nodes stayed on the fallback path: $("$apps/ctxrun/ctxrun" "$ctx" --json)"
      failed=$((failed + 1))
    fi
  done
  # A GroupQueryAttention whose total_sequence_length is a graph input: planned for past + 1 present rows, it runs with
  # that total and refuses another one (a total that asked for more rows would otherwise be written past the buffers).
  local tout="$work/gqa_total.$target"
  mkdir -p "$tout"
  if ! "$apps/ctxgen/ctxgen" "$gqaTotal" -o "$tout" -q --target "$target" >"$tout/gen.log" 2>&1; then
    echo "FAIL gqa_total_input [$target]: ctxgen: $(cat "$tout/gen.log")"; failed=$((failed + 1))
  elif ! "$apps/ctxrun/ctxrun" "$tout/gqa_total_input_ctx.onnx" --set gqa_t_total=8 -q >"$tout/run.log" 2>&1; then
    echo "FAIL gqa_total_input [$target]: the planned total failed: $(cat "$tout/run.log")"; failed=$((failed + 1))
  elif "$apps/ctxrun/ctxrun" "$tout/gqa_total_input_ctx.onnx" --set gqa_t_total=12 -q >"$tout/run.log" 2>&1 ||
    ! grep -q "needs present buffers of 12 rows" "$tout/run.log"; then
    echo "FAIL gqa_total_input [$target]: a total of 12 was not refused as it should be: $(cat "$tout/run.log")"
    failed=$((failed + 1))
  fi
  # MatMulNBits weights stay as stored: the context binary stays under 1.5x the source model (its codes widened to
  # float32 would make it about 4x; the rest is alignment, the program and the header).
  local bin="$work/matmul_nbits.$target/matmul_nbits_ctxkit.bin"
  if [ -f "$bin" ] && [ "$(stat -c %s "$bin")" -gt $(($(stat -c %s "$nbits") * 3 / 2)) ]; then
    echo "FAIL matmul_nbits [$target]: the context binary ($(stat -c %s "$bin") B) is over 1.5x the source" \
      "model ($(stat -c %s "$nbits") B): weights were widened"
    failed=$((failed + 1))
  fi
}
for target in npu-sim cpu; do
  checkContrib "$target"
  tolerance=(--rtol 0 --atol 0)
  for m in resize_linear_x2 resize_linear_odd resize_linear_down resize_linear_asym; do
    check "$m" "$kernelModels/$m.onnx" "$target"
  done
  tolerance=()
  for m in "$kernelModels"/dwodd_*.onnx "$kernelModels"/gridsample_*.onnx "$kernelModels"/einsum_*.onnx; do
    check "$(basename "${m%.onnx}")" "$m" "$target"
  done
  checkQdqForms "$target"
  checkQdqWeights "$target"
  check tiny_prefill "$build/samples/tiny_prefill.onnx" "$target"
  check tiny_decode "$build/samples/tiny_decode.onnx" "$target"
  check tiny_cnn "$build/samples/tiny_cnn.onnx" "$target"
  exact="$build/samples/tiny_qdq_cnn/test_data_set_0" check tiny_qdq_cnn "$build/samples/tiny_qdq_cnn.onnx" "$target"
  exact="$build/samples/tiny_qdq_prefill/test_data_set_0" \
    check tiny_qdq_prefill "$build/samples/tiny_qdq_prefill.onnx" "$target"
  check ppocr_cls "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$target" --shape x=1x3x48x192
  check ppocrv4_rec "$ocr/ch_PP-OCRv4_rec_infer.onnx" "$target" --shape x=1x3x48x320
  check ppocrv4_det "$ocr/ch_PP-OCRv4_det_infer.onnx" "$target" --shape x=1x3x320x320
  # The sample rate selects silero's 16 kHz branch (an If on the `sr` input's value): both runtimes get 16000.
  check silero_vad "$vad/silero_vad.onnx" "$target" "${vadShapes[@]}" -- --set sr=16000
  check silero_vad_16k_op15 "$vad/silero_vad_16k_op15.onnx" "$target" "${vadShapes[@]}" -- --set sr=16000
  check silero_vad_op18_ifless "$vad/silero_vad_op18_ifless.onnx" "$target" "${vadShapes[@]}" -- --set sr=16000
  check silero_vad_half "$vad/silero_vad_half.onnx" "$target" "${vadShapes[@]}"
  # Another package's Silero detectors (v5, v6: STFT as a Conv, an If on the sample rate; legacy: LSTM h and c).
  check vadweb_silero_v5 "$vadWeb/silero_vad_v5.onnx" "$target" "${vadShapes[@]}" -- --set sr=16000
  check vadweb_silero_v6 "$vadWeb/silero_vad_v6.onnx" "$target" "${vadShapes[@]}" -- --set sr=16000
  check vadweb_silero_legacy "$vadWeb/silero_vad_legacy.onnx" "$target" --shape input=1x512 --dim batch=1 -- \
    --set sr=16000
  checkBound silero_vad "$vad/silero_vad.onnx" "$target" sr=16000 "${vadShapes[@]}"
  checkBound silero_vad_16k_op15 "$vad/silero_vad_16k_op15.onnx" "$target" sr=16000 "${vadShapes[@]}"
  checkBound silero_vad_op18_ifless "$vad/silero_vad_op18_ifless.onnx" "$target" sr=16000 "${vadShapes[@]}"
  checkBound vadweb_silero_v5 "$vadWeb/silero_vad_v5.onnx" "$target" sr=16000 "${vadShapes[@]}"
  checkBound vadweb_silero_v6 "$vadWeb/silero_vad_v6.onnx" "$target" sr=16000 "${vadShapes[@]}"
  checkBound silero_vad_8k "$vad/silero_vad.onnx" "$target" sr=8000 --shape input=1x256 --shape state=2x1x128
  checkVariants "$target"
  check hello_deepa "$oww/hello_deepa.onnx" "$target"
  check hello_deepa_old "$oww/hello_deepa_old.onnx" "$target"
  check namaste_deepa "$oww/namaste_deepa.onnx" "$target"
  checkHalf "$target"
done
echo "onnxruntime oracle: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
