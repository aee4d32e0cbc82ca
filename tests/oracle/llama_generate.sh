#!/usr/bin/env bash
# The PyTorch corpus's Llama-style prefill/decode pair generating tokens (docs/runtime.md#generate) against ONNX
# Runtime: ctxgen compiles the pair as one --share group, the decode once per past length the run needs
# (--variant pL:past_seq=L, L = 16..22, all in one .bin); `ctxrun --generate 8` runs the greedy loop on the prompt the
# corpus exported with the pair, and bench/generate_ort.js runs the same loop on the source models with ONNX Runtime
# 1.30. Every token must be equal, every step's last-position logits within rtol 1e-3, atol 1e-4, and every decode
# step must write its presents straight into the buffers the next step reads. For each target (npu-sim, cpu). Then
# the errors a user meets: a prompt that is not int64 [1, S], a past length no decode model takes, a decode model
# whose inputs are not the prefill's presents; each must exit 1 and name the file and the value at fault.
# Exits 77 (CTest's skip code) when the corpus or ONNX Runtime is absent or the corpus was exported by another version
# of scripts/export_corpus.py, saying why, or fails when CI is set (tests/common/skip.sh).
# usage: llama_generate.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../common/skip.sh"
source "$here/generate_check.sh"
ctx_oracle_setup "$@"
ctx_require_corpus llama_kv
pair="$corpus/llama_kv"
hash="$(sha256sum "$src/scripts/export_corpus.py" | cut -c1-16)"
recorded="$(node -e 'console.log(require(process.argv[1]).script_hash)' "$pair/meta.json")"
[ "$recorded" = "$hash" ] || ctx_skip "$pair was exported by another version of scripts/export_corpus.py (run" \
  "scripts/export_corpus.sh)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
prompt="$pair/prefill_inputs/input_0.npy"
count=8 first=16
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# ONNX Runtime on the source models, once for both targets.
ortGenerate "$pair/prefill.onnx" "$pair/decode.onnx" "$prompt"

decodeVariants "$first" "past_seq=@P"
for target in npu-sim cpu; do
  out="$work/$target"
  if ! "$apps/ctxgen/ctxgen" "$pair/prefill.onnx" "$pair/decode.onnx" --share -o "$out" -q --target "$target" \
      --dim batch=1 --dim prefill:seq=$first --dim decode:seq=1 "${variants[@]}" >"$work/gen.$target.log" 2>&1; then
    fail "ctxgen [$target]: $(cat "$work/gen.$target.log")"
    continue
  fi
  list="$(IFS=,; echo "${decodes[*]//DIR/$out}")"
  # Every variant compiles the prefill too (identical programs, weights stored once): the first is the prefill.
  checkGenerate llama_kv "$target" "$out" "$out/prefill_p${first}_ctx.onnx" "$list" "$prompt" "$count" \
    "$work/ort.json" "$work/ort"
done

# The errors, on the npu-sim compile: each must exit 1 and its message name what is at fault.
out="$work/npu-sim"
expectError() {
  local what="$1" pattern="$2"
  shift 2
  "$apps/ctxrun/ctxrun" "$@" >"$work/err.out" 2>"$work/err.log"
  local rc=$?
  if [ "$rc" != 1 ]; then
    fail "$what: exit $rc, expected 1: $(cat "$work/err.log")"
  elif ! grep -qF -- "$pattern" "$work/err.log"; then
    fail "$what: the message does not say '$pattern': $(cat "$work/err.log")"
  else
    echo "ok   $what: $(head -n1 "$work/err.log")"
  fi
}
if [ -e "$out/prefill_p${first}_ctx.onnx" ]; then
  all="$(IFS=,; echo "${decodes[*]//DIR/$out}")"
  expectError "a float prompt" "--prompt-ids '$pair/decode_inputs/input_1.npy': the prompt must be int64" \
    "$out/prefill_p${first}_ctx.onnx" --generate 2 --decode "$all" --prompt-ids "$pair/decode_inputs/input_1.npy"
  expectError "one token more than the variants take" "token $count needs a decode model for a past of" \
    "$out/prefill_p${first}_ctx.onnx" --generate $((count + 1)) --decode "$all" --prompt-ids "$prompt"
  expectError "the prefill as the decode" "decode '$out/prefill_p17_ctx.onnx' has no past key/value input" \
    "$out/prefill_p${first}_ctx.onnx" --generate 2 --decode "$out/prefill_p17_ctx.onnx" --prompt-ids "$prompt"
fi
[ "$failed" -eq 0 ]
