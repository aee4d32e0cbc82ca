#!/usr/bin/env bash
# Generation benchmark (not a test) on the PyTorch corpus's Llama-style prefill/decode pair: ctxkit (`ctxrun
# --generate`, the pair compiled with --share, the decode once per past length) vs ONNX Runtime 1.30 running the same
# greedy loop on the source models (bench/generate_ort.js), at 1 and 2 threads: time to first token, decode tokens/s
# (medians of ITERS generations in one process each), load time of the pair (ctxkit: both sessions with every
# variant; ORT: both session creations), the .bin's bytes vs the source weights, and whether the tokens agree.
# Writes generate.json and generate.md to OUT_DIR and prints the table. bench/suite.sh runs it as its last section.
# usage: bench/generate.sh [TOKENS] [ITERS] [OUT_DIR]   (default 16 tokens, 20 generations, build/bench-generate)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
count="${1:-16}" iters="${2:-20}"
out="${3:-$build/bench-generate}"
ort="$cache/onnxruntime-node-1.30.0/node_modules"
pair="$cache/corpus-torch/llama_kv"
apps="$build/apps"
if [ ! -e "$pair/meta.json" ] || [ ! -e "$ort/onnxruntime-node/package.json" ]; then
  echo "bench: the generation benchmark needs $pair (scripts/export_corpus.sh) and ONNX Runtime in $cache" >&2
  exit 1
fi
rm -rf "$out" && mkdir -p "$out"
prompt="$pair/prefill_inputs/input_0.npy"
first="$(node -e 'const p = require(process.argv[1]); console.log(p.graphs.prefill.args.find(a => a.startsWith("seq=")).slice(4))' \
  "$pair/meta.json")"
variants=() decodes=()
for ((past = first; past < first + count - 1; ++past)); do
  variants+=(--variant "p$past:past_seq=$past")
  decodes+=("$out/ctx/decode_p${past}_ctx.onnx")
done
"$apps/ctxgen/ctxgen" "$pair/prefill.onnx" "$pair/decode.onnx" --share -o "$out/ctx" -q --dim batch=1 \
  --dim "prefill:seq=$first" --dim decode:seq=1 "${variants[@]}" --json "$out/gen.json"
list="$(IFS=,; echo "${decodes[*]}")"
rec="{\"tokens\": $count, \"prompt_tokens\": $first, \"iters\": $iters"
rec+=", \"bin_bytes\": $(stat -c %s "$out/ctx/prefill_ctxkit.bin")"
rec+=", \"source_bytes\": $(( $(stat -c %s "$pair/prefill.onnx") + $(stat -c %s "$pair/decode.onnx") ))"
rec+=", \"variants\": $((count - 1))"
for threads in 1 2; do
  echo "bench: llama_kv generate, $threads thread(s)" >&2
  ours="$("$apps/ctxrun/ctxrun" "$out/ctx/prefill_p${first}_ctx.onnx" --generate "$count" --decode "$list" \
    --prompt-ids "$prompt" --iters "$iters" --threads "$threads" --json --output-dir "$out/ours_t$threads" |
    python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')"
  theirs="$(NODE_PATH="$ort" node "$root/bench/generate_ort.js" "$pair/prefill.onnx" "$pair/decode.onnx" "$prompt" \
    "$count" "$out/ort_t$threads" "$threads" "$iters")"
  rec+=", \"ctxkit_t$threads\": $ours, \"ort_t$threads\": $theirs"
done
echo "$rec}" >"$out/results.json"
python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/results.json"))
rows = []
for t in (1, 2):
    c, o = r[f"ctxkit_t{t}"], r[f"ort_t{t}"]
    rows.append({"threads": t, "ctxkit_ttft_ms": c["ttft_ms"], "ort_ttft_ms": o["ttft_ms"],
                 "ctxkit_tokens_per_s": c["tokens_per_s"], "ort_tokens_per_s": o["tokens_per_s"],
                 "ctxkit_load_ms": c["load_ms"], "ort_load_ms": o["load_ms"],
                 "tokens_match": c["tokens"] == o["tokens"], "presents_in_place": c["presents_in_place"]})
summary = {"bin_bytes": r["bin_bytes"], "source_bytes": r["source_bytes"], "tokens": r["tokens"],
           "prompt_tokens": r["prompt_tokens"], "iters": r["iters"], "variants": r["variants"]}
json.dump({"rows": rows, "summary": summary}, open(f"{out}/generate.json", "w"), indent=2)
md = [f"llama_kv: prompt of {r['prompt_tokens']} tokens, {r['tokens']} generated, medians of {r['iters']} generations; "
      f"one .bin of {r['bin_bytes']} bytes for the prefill and {r['variants']} decode variants "
      f"(source models {r['source_bytes']} bytes, each holding the weights)",
      "",
      "| threads | time to first token ctxkit / ORT (ms) | decode tokens/s ctxkit / ORT | ratio | load of the pair "
      "ctxkit / ORT (ms) | tokens equal | presents in place |",
      "|---|---|---|---|---|---|---|"]
for x in rows:
    md.append(f"| {x['threads']} | {x['ctxkit_ttft_ms']:.3f} / {x['ort_ttft_ms']:.3f} | {x['ctxkit_tokens_per_s']:.0f} / "
              f"{x['ort_tokens_per_s']:.0f} | {x['ctxkit_tokens_per_s'] / x['ort_tokens_per_s']:.2f} | "
              f"{x['ctxkit_load_ms']:.2f} / {x['ort_load_ms']:.1f} | {'yes' if x['tokens_match'] else 'NO'} | "
              f"{x['presents_in_place']} of {r['tokens'] - 1} |")
open(f"{out}/generate.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
EOF
