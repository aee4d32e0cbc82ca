#!/usr/bin/env bash
# Dynamically quantized nets against ONNX Runtime (docs/runtime.md#numerics): graphs of the PyTorch corpus rewritten
# as ONNX Runtime's dynamic quantizer writes them (tests/oracle/make_dynamic_quant.cpp: DynamicQuantizeLinear +
# ConvInteger / MatMulInteger + Cast + Mul [+ Add]), with the float result of the last quantized op exposed as an extra
# output. For each target (npu-sim, cpu) every graph must compile to one partition with no fallback node, its program
# must hold one integer op per quantized op (no float Conv or MatMul in their place; products of two activations stay
# float, as the quantizer leaves them), the context binary must stay within 1.1x the quantized model's bytes (float
# copies of the weights would make it about 3.5x), and the outputs must match ONNX Runtime's at ctxrun's default
# tolerances. On the CNNs ("exact") the exposed result of the quantized pipeline must also equal ONNX Runtime's bit for
# bit: every DynamicQuantizeLinear, ConvInteger and the float ops between them (Resize, HardSwish, HardSigmoid,
# pooling, all correctly rounded) round as ONNX Runtime rounds, through 20 to 66 quantized layers. The transformers
# ("close") are not held to that: their float ops between quantized layers (Erf, LayerNormalization's sums) differ from
# ONNX Runtime's in the last ulp, so a DynamicQuantizeLinear scale can differ by one ulp; whether the exposed result is
# exact is printed. They run against ONNX Runtime's basic optimization level: from its extended level on it fuses
# MatMulInteger + Cast + Mul + Add into MatMulIntegerToFloat, which rounds the scale-and-bias step once where the graph
# rounds twice. The quantizer's other MatMul weight forms run on them: per-channel int8 weights (BERT) and per-channel
# uint8 weights with non-zero zero points (wav2vec2).
# Exits 77 (CTest's skip code) when the corpus or ONNX Runtime is absent, saying why, or fails when CI is set
# (tests/common/skip.sh).
# usage: dynamic_quant.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../common/skip.sh"
ctx_oracle_setup "$@"
# Each case: a corpus model, exact (bit for bit) or close (default tolerances), make_dynamic_quant's weight-form flags.
cases=("resnet18 exact" "mobilenet_v3_small exact" "lraspp_mobilenet_v3_large exact" "wav2vec2 close"
  "bert close --per-channel" "wav2vec2 close --per-channel --uint8-weights")
ctx_require_corpus resnet18 mobilenet_v3_small lraspp_mobilenet_v3_large wav2vec2 bert
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

for c in "${cases[@]}"; do
  read -r m exactness flags <<<"$c"
  form="${flags//--/}" form="${form// /_}"
  key="$m$form"
  mkdir -p "$work/$key"
  dq="$work/$key/${m}_dq.onnx" inputs="$corpus/$m/inputs" m_label="$m${form:+ ($form)}"
  # shellcheck disable=SC2086 # flags are words
  if ! made="$("$build/tests/oracle/make_dynamic_quant" "$corpus/$m/model.onnx" "$dq" --expose $flags 2>&1)"; then
    fail "$m_label: make_dynamic_quant: $made"; continue
  fi
  read -r _ convs _ matmuls _ kept _ _ _ exposed <<<"$made"
  mapfile -t bindings < <(node -e 'for (const a of Object.values(require(process.argv[1]).graphs)[0].args) console.log(a)' \
    "$corpus/$m/meta.json")
  level=all
  [ "$exactness" = close ] && level=basic
  if ! ORT_GRAPH_OPTIMIZATION=$level NODE_PATH="$ort" node "$src/bench/run_ort.js" "$dq" "$inputs" "$work/$key.ort" 1 \
      >"$work/$key.ort.log" 2>&1; then
    fail "$m_label: onnxruntime: $(cat "$work/$key.ort.log")"; continue
  fi
  for target in npu-sim cpu; do
    out="$work/$key.$target" name="${m}_dq${form:+ $form} [$target]"
    if ! "$apps/ctxgen/ctxgen" "$dq" "${bindings[@]}" -o "$out" --target "$target" --dump-after emit-program \
        >"$out.log" 2>&1; then
      fail "$name: ctxgen: $(cat "$out.log")"; continue
    fi
    summary="$(grep -E ' nodes: ' "$out.log")"
    integer=$(grep -cE '= (ConvInteger|MatMulInteger)\(' "$out.log")
    float=$(grep -cE '= (Conv|MatMul)\(' "$out.log")
    bin="$(stat -c %s "$out/${m}_dq_ctxkit.bin" 2>/dev/null || echo 0)" source="$(stat -c %s "$dq")"
    if ! grep -qE ' in 1 partition, 0 fallback' <<<"$summary"; then
      fail "$name: not one partition without fallback nodes: $summary"
    elif [ "$integer" -ne $((convs + matmuls)) ] || [ "$float" -ne "$kept" ]; then
      fail "$name: $integer integer and $float float Conv/MatMul ops in the program (expected $((convs + matmuls)) and" \
        "$kept, the products of two activations)"
    elif [ "$bin" -gt $((source * 11 / 10)) ]; then
      fail "$name: the context binary ($bin B) is over 1.1x the quantized model ($source B): weights were widened"
    elif ! "$apps/ctxrun/ctxrun" "$out/${m}_dq_ctx.onnx" --inputs "$inputs" --expected "$work/$key.ort" \
        >"$out.run" 2>&1; then
      fail "$name: $(cat "$out.run")"
    else
      "$apps/ctxrun/ctxrun" "$out/${m}_dq_ctx.onnx" --inputs "$inputs" --expected "$work/$key.ort" --rtol 0 --atol 0 \
        >"$out.exact" 2>&1
      exact_note="$(grep -c ': match' "$out.exact") of $(grep -cE "^output [0-9]+ " "$out.exact") outputs exact"
      if grep -qF "'$exposed': match (max |diff| 0)" "$out.exact"; then
        echo "ok   $name: $convs ConvInteger + $matmuls MatMulInteger, $summary; .bin $bin B for a $source B model;" \
          "the quantized pipeline's result equals ONNX Runtime's ($level) bit for bit: $exact_note"
      elif [ "$exactness" = close ]; then
        echo "ok   $name: $convs ConvInteger + $matmuls MatMulInteger, $summary; .bin $bin B for a $source B model;" \
          "matches ONNX Runtime ($level) at the default tolerances, $exact_note"
      else
        fail "$name: the quantized pipeline's result '$exposed' differs from ONNX Runtime's: $(grep -F "'$exposed'" \
          "$out.exact")"
      fi
    fi
  done
done
[ "$failed" -eq 0 ]
