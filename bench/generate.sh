#!/usr/bin/env bash
# Generation benchmark (not a test) on two prefill/decode pairs: the PyTorch corpus's Llama-style pair (llama_kv,
# standard ops) and the model-builder-style int4 GroupQueryAttention LLM of tests/oracle/make_gqa_llm.cpp (gqa_llm:
# MatMulNBits, GroupQueryAttention with rotary, the attention-mask arithmetic in the graph). For each, ctxkit (`ctxrun
# --generate`, the pair compiled with --share, the decode once per past length) vs ONNX Runtime 1.30 running the same
# greedy loop on the source models (bench/generate_ort.js), at 1 and 2 threads: time to first token, decode tokens/s
# (medians of ITERS generations in one process each), load time of the pair (ctxkit: both sessions with every
# variant; ORT: both session creations), the .bin's bytes vs the source's (llama_kv: both model files; gqa_llm: the
# initializers of one model, its MatMulNBits weights 4-bit), and whether the tokens agree. A pair whose material is
# missing (the corpus, the make_gqa_llm test program) is left out, saying so.
# Writes generate.json and generate.md to OUT_DIR and prints the tables. bench/suite.sh runs it as its last section.
# usage: bench/generate.sh [TOKENS] [ITERS] [OUT_DIR]   (default 16 tokens, 20 generations, build/bench-generate)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
count="${1:-16}" iters="${2:-20}"
out="${3:-$build/bench-generate}"
ort="$cache/onnxruntime-node-1.30.0/node_modules"
apps="$build/apps"
if [ ! -e "$ort/onnxruntime-node/package.json" ]; then
  echo "bench: the generation benchmark needs ONNX Runtime in $cache (scripts/fetch_test_assets.sh)" >&2
  exit 1
fi
rm -rf "$out" && mkdir -p "$out"

# benchPair NAME PREFILL DECODE PROMPT FIRST SOURCE_BYTES VARIANT [CTXGEN_ARGS...]: one pair's record into
# OUT_DIR/NAME.json. VARIANT is the decode's --variant bindings for a past of @P tokens (@T: @P + 1).
benchPair() {
  local name="$1" prefill="$2" decode="$3" prompt="$4" first="$5" sourceBytes="$6" variant="$7"
  shift 7
  local variants=() decodes=() past binding
  for ((past = first; past < first + count - 1; ++past)); do
    binding="${variant//@P/$past}"
    variants+=(--variant "p$past:${binding//@T/$((past + 1))}")
    decodes+=("$out/$name/decode_p${past}_ctx.onnx")
  done
  "$apps/ctxgen/ctxgen" "$prefill" "$decode" --share -o "$out/$name" -q "$@" "${variants[@]}" \
    --json "$out/$name.gen.json"
  local list rec ours theirs threads
  list="$(IFS=,; echo "${decodes[*]}")"
  rec="{\"name\": \"$name\", \"tokens\": $count, \"prompt_tokens\": $first, \"iters\": $iters"
  rec+=", \"bin_bytes\": $(stat -c %s "$out/$name/prefill_ctxkit.bin"), \"source_bytes\": $sourceBytes"
  rec+=", \"variants\": $((count - 1))"
  for threads in 1 2; do
    echo "bench: $name generate, $threads thread(s)" >&2
    ours="$("$apps/ctxrun/ctxrun" "$out/$name/prefill_p${first}_ctx.onnx" --generate "$count" --decode "$list" \
      --prompt-ids "$prompt" --iters "$iters" --threads "$threads" --json --output-dir "$out/$name.ours_t$threads" |
      python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')"
    theirs="$(NODE_PATH="$ort" node "$root/bench/generate_ort.js" "$prefill" "$decode" "$prompt" "$count" \
      "$out/$name.ort_t$threads" "$threads" "$iters")"
    rec+=", \"ctxkit_t$threads\": $ours, \"ort_t$threads\": $theirs"
  done
  echo "$rec}" >"$out/$name.json"
}

pairs=()
llama="$cache/corpus-torch/llama_kv"
if [ -e "$llama/meta.json" ]; then
  first="$(node -e 'const p = require(process.argv[1]); console.log(p.graphs.prefill.args.find(a => a.startsWith("seq=")).slice(4))' \
    "$llama/meta.json")"
  benchPair llama_kv "$llama/prefill.onnx" "$llama/decode.onnx" "$llama/prefill_inputs/input_0.npy" "$first" \
    $(($(stat -c %s "$llama/prefill.onnx") + $(stat -c %s "$llama/decode.onnx"))) "past_seq=@P" \
    --dim batch=1 --dim "prefill:seq=$first" --dim decode:seq=1
  pairs+=(llama_kv)
else
  echo "bench: $llama is missing: llama_kv is left out (run scripts/export_corpus.sh)" >&2
fi
if [ -x "$build/tests/oracle/make_gqa_llm" ]; then
  "$build/tests/oracle/make_gqa_llm" "$out/gqa_llm_src" >"$out/gqa_llm_src.json"
  first="$(node -e 'console.log(require(process.argv[1]).prompt_tokens)' "$out/gqa_llm_src.json")"
  benchPair gqa_llm "$out/gqa_llm_src/prefill.onnx" "$out/gqa_llm_src/decode.onnx" "$out/gqa_llm_src/prompt.npy" \
    "$first" "$(node -e 'console.log(require(process.argv[1]).initializer_bytes)' "$out/gqa_llm_src.json")" \
    "past_sequence_length=@P,total_sequence_length=@T" \
    --dim batch_size=1 --dim "prefill:sequence_length=$first" --dim decode:sequence_length=1
  pairs+=(gqa_llm)
else
  echo "bench: $build/tests/oracle/make_gqa_llm is missing: gqa_llm is left out (configure with" \
    "-DCTXKIT_BUILD_TESTS=ON)" >&2
fi
[ "${#pairs[@]}" -gt 0 ] || { echo "bench: no pair to generate with" >&2; exit 1; }

python3 - "$out" "${pairs[@]}" <<'EOF'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
what = {"llama_kv": "source models {} bytes, each holding the weights",
        "gqa_llm": "source initializers {} bytes in each model, MatMulNBits weights 4-bit"}
report, md = {}, []
for name in names:
    r = json.load(open(f"{out}/{name}.json"))
    rows = []
    for t in (1, 2):
        c, o = r[f"ctxkit_t{t}"], r[f"ort_t{t}"]
        rows.append({"threads": t, "ctxkit_ttft_ms": c["ttft_ms"], "ort_ttft_ms": o["ttft_ms"],
                     "ctxkit_tokens_per_s": c["tokens_per_s"], "ort_tokens_per_s": o["tokens_per_s"],
                     "ctxkit_load_ms": c["load_ms"], "ort_load_ms": o["load_ms"],
                     "tokens_match": c["tokens"] == o["tokens"], "presents_in_place": c["presents_in_place"]})
    summary = {k: r[k] for k in ("bin_bytes", "source_bytes", "tokens", "prompt_tokens", "iters", "variants")}
    report[name] = {"rows": rows, "summary": summary}
    md += [f"{name}: prompt of {r['prompt_tokens']} tokens, {r['tokens']} generated, medians of {r['iters']} "
           f"generations; one .bin of {r['bin_bytes']} bytes for the prefill and {r['variants']} decode variants "
           f"({what[name].format(r['source_bytes'])})",
           "",
           "| threads | time to first token ctxkit / ORT (ms) | decode tokens/s ctxkit / ORT | ratio | load of the pair "
           "ctxkit / ORT (ms) | tokens equal | presents in place |",
           "|---|---|---|---|---|---|---|"]
    for x in rows:
        md.append(f"| {x['threads']} | {x['ctxkit_ttft_ms']:.3f} / {x['ort_ttft_ms']:.3f} | "
                  f"{x['ctxkit_tokens_per_s']:.0f} / {x['ort_tokens_per_s']:.0f} | "
                  f"{x['ctxkit_tokens_per_s'] / x['ort_tokens_per_s']:.2f} | "
                  f"{x['ctxkit_load_ms']:.2f} / {x['ort_load_ms']:.1f} | {'yes' if x['tokens_match'] else 'NO'} | "
                  f"{x['presents_in_place']} of {r['tokens'] - 1} |")
    md.append("")
json.dump(report, open(f"{out}/generate.json", "w"), indent=2)
open(f"{out}/generate.md", "w").write("\n".join(md))
print("\n".join(md))
EOF
