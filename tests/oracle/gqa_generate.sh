#!/usr/bin/env bash
# The model-builder-style int4 GroupQueryAttention LLM (tests/oracle/make_gqa_llm.cpp: MatMulNBits weights, packed QKV,
# rotary, seqlens_k and total_sequence_length computed from attention_mask in the graph) generating tokens against ONNX
# Runtime 1.30 (docs/runtime.md#generate): ctxgen compiles the prefill/decode pair as one --share group, the decode
# once per past length the run needs (--variant pL:past_sequence_length=L,total_sequence_length=L+1, L = 12..18, all
# in one .bin); no GroupQueryAttention, MatMulNBits or normalization may stay on the fallback path; `ctxrun --generate
# 8` must give ONNX Runtime's tokens (bench/generate_ort.js on the source models; at least 3 distinct of the 8, or
# the comparison proves little), every step's logits within rtol 1e-3, atol 1e-4, every decode step's presents
# written in place, and the .bin must keep the 4-bit weights once (its weights within 1.01x the source's
# initializers). For each target (npu-sim, cpu).
# Exits 77 (CTest's skip code) when ONNX Runtime or Node.js is absent, saying why, or fails when CI is set
# (tests/common/skip.sh).
# usage: gqa_generate.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../common/skip.sh"
source "$here/generate_check.sh"
ctx_oracle_setup "$@"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
count=8
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

pair="$work/pair"
if ! "$build/tests/oracle/make_gqa_llm" "$pair" >"$work/sizes.json"; then
  echo "FAIL make_gqa_llm: could not write the pair"
  exit 1
fi
prompt="$pair/prompt.npy"
first="$(node -e 'console.log(require(process.argv[1]).prompt_tokens)' "$work/sizes.json")"
sourceBytes="$(node -e 'console.log(require(process.argv[1]).initializer_bytes)' "$work/sizes.json")"
nbitsBytes="$(node -e 'console.log(require(process.argv[1]).nbits_bytes)' "$work/sizes.json")"

ortGenerate "$pair/prefill.onnx" "$pair/decode.onnx" "$prompt"
distinct="$(node -e 'console.log(new Set(require(process.argv[1]).tokens).size)' "$work/ort.json")"
if [ "$distinct" -lt 3 ]; then
  fail "gqa_llm: ONNX Runtime's tokens are $distinct distinct of $count ($(cat "$work/ort.json")): the weights make" \
    "a degenerate model"
fi

decodeVariants "$first" "past_sequence_length=@P,total_sequence_length=@T"
for target in npu-sim cpu; do
  out="$work/$target"
  if ! "$apps/ctxgen/ctxgen" "$pair/prefill.onnx" "$pair/decode.onnx" --share -o "$out" -q --target "$target" \
      --dim batch_size=1 --dim prefill:sequence_length="$first" --dim decode:sequence_length=1 "${variants[@]}" \
      --json "$work/gen.$target.json" >"$work/gen.$target.log" 2>&1; then
    fail "gqa_llm ctxgen [$target]: $(cat "$work/gen.$target.log")"
    continue
  fi
  # The LLM's ops all compile; only the int64 mask arithmetic and the embedding's Gather may fall back (npu-sim takes
  # no int64).
  stuck="$(node -e '
    const r = require(process.argv[1]);
    const ops = new Set(r.models.flatMap(m => m.fallback.map(f => f.op_type)));
    console.log([...ops].filter(o => /Attention|MatMul|Normalization|Sigmoid|Mul/.test(o)).join(" "))' \
    "$work/gen.$target.json")"
  [ -z "$stuck" ] || fail "gqa_llm [$target]: $stuck stayed on the fallback path"
  # The weights stored once and as the source stores them (MatMulNBits codes 4-bit, not widened: that would make them
  # about 6x): the .bin's weights within 1% of one model's initializers, the whole .bin (with 14 programs) under 1.5x.
  bin="$out/prefill_ctxkit.bin"
  stored="$(node -e 'console.log(require(process.argv[1]).weights.stored_bytes)' "$work/gen.$target.json")"
  if [ "$stored" -gt $((sourceBytes * 101 / 100)) ] || [ "$(stat -c %s "$bin")" -gt $((sourceBytes * 3 / 2)) ]; then
    fail "gqa_llm [$target]: the context binary ($(stat -c %s "$bin") B, $stored B of weights) is over 1.01x the" \
      "source's initializers ($sourceBytes B): weights were widened or stored twice"
  else
    echo "ok   gqa_llm .bin [$target]: $(stat -c %s "$bin") bytes for the prefill and $((count - 1)) decode variants," \
      "$stored of them weights; the source's initializers $sourceBytes bytes ($nbitsBytes of them MatMulNBits)"
  fi
  list="$(IFS=,; echo "${decodes[*]//DIR/$out}")"
  checkGenerate gqa_llm "$target" "$out" "$out/prefill_p${first}_ctx.onnx" "$list" "$prompt" "$count" \
    "$work/ort.json" "$work/ort"
done
[ "$failed" -eq 0 ]
