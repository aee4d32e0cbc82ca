#!/usr/bin/env bash
# Sourced by the generate oracles (llama_generate.sh, gqa_generate.sh): the decode variants a run needs, ONNX Runtime's
# run of the greedy loop and one compiled pair's `ctxrun --generate` against it. Needs $apps, $here, $src, $ort, $work,
# $count and fail() in the caller.

# decodeVariants FIRST BINDING: sets `variants` to the ctxgen --variant arguments pL:BINDING for each past length L
# from FIRST on that COUNT tokens need (@P in BINDING: L, @T: L + 1), and `decodes` to their decode_pL_ctx.onnx
# files under the placeholder folder DIR.
decodeVariants() {
  local first="$1" binding="$2" past b
  variants=() decodes=()
  for ((past = first; past < first + count - 1; ++past)); do
    b="${binding//@P/$past}"
    variants+=(--variant "p$past:${b//@T/$((past + 1))}")
    decodes+=("DIR/decode_p${past}_ctx.onnx")
  done
}

# ortGenerate PREFILL DECODE PROMPT: bench/generate_ort.js's COUNT tokens into $work/ort.json and $work/ort; exits 1
# when ONNX Runtime fails.
ortGenerate() {
  if ! NODE_PATH="$ort" node "$src/bench/generate_ort.js" "$1" "$2" "$3" "$count" "$work/ort" >"$work/ort.json" \
      2>"$work/ort.log"; then
    echo "FAIL onnxruntime: $(cat "$work/ort.log")"
    exit 1
  fi
}

# checkGenerate NAME TARGET OUT PREFILL_CTX DECODE_LIST PROMPT COUNT ORT_JSON ORT_DIR: runs `ctxrun PREFILL_CTX
# --generate COUNT --decode DECODE_LIST --prompt-ids PROMPT` into OUT, then requires every token equal, every step's
# logits within rtol 1e-3, atol 1e-4 and every decode step's presents written in place; prints one ok or FAIL line.
checkGenerate() {
  local name="$1" target="$2" out="$3" prefill="$4" list="$5" prompt="$6" count="$7" ortJson="$8" ortDir="$9"
  "$apps/ctxrun/ctxrun" "$prefill" --generate "$count" --decode "$list" --prompt-ids "$prompt" \
    --output-dir "$out/ours" --json >"$out/ours.json" 2>"$out/run.log"
  local rc=$? line inPlace
  if [ "$rc" != 0 ] && ! grep -q '"ok"' "$out/ours.json"; then
    fail "$name ctxrun --generate [$target] exit $rc: $(cat "$out/run.log")"
    return 1
  fi
  if ! line="$(node "$here/generate_compare.js" "$out/ours.json" "$out/ours" "$ortJson" "$ortDir" 1e-3 1e-4)"; then
    fail "$name generate [$target]: $line"
    return 1
  fi
  inPlace="$(node -e 'console.log(require(process.argv[1]).presents_in_place)' "$out/ours.json")"
  if [ "$inPlace" != $((count - 1)) ]; then
    fail "$name generate [$target]: $inPlace of $((count - 1)) decode steps wrote their presents in place: $line"
    return 1
  fi
  echo "ok   $name generate [$target]: $line"
}
