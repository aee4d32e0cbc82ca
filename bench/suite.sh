#!/usr/bin/env bash
# The benchmark suite (not a test): for the samples and every development-corpus model, side by side with ONNX
# Runtime 1.30 in the same run on the same inputs: load vs ORT session creation, first run, median and p90 latency at
# 1 and 2 threads (ORT with spinning off, and with it on at 2 threads), load + first run vs ORT session creation + first
# run (time to first result) and each first run over its median, peak memory, and two sessions sharing one
# .bin vs one. Writes suite.json, suite.md (a table of ratios, ctxkit / ORT) and suite.svg (a chart) to OUT_DIR.
# The PyTorch corpus (scripts/export_corpus.sh, in the cache) is included when it has been exported, on its own seeded
# inputs; its two detectors run at most 20 iterations (a run takes 0.1-0.4 s). Its LLM pair and the int4
# GroupQueryAttention pair of tests/oracle/make_gqa_llm.cpp also generate tokens, ctxkit vs ONNX Runtime on the same
# greedy loop (bench/generate.sh, into OUT_DIR/generate).
# usage: bench/suite.sh [ITERS] [OUT_DIR]   (default 50 iterations, build/bench-suite; needs a build and npm assets)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
iters="${1:-50}"
out="${2:-$build/bench-suite}"
ort="$cache/onnxruntime-node-1.30.0/node_modules"
CTXKIT_CACHE="$cache" "$root/scripts/fetch_test_assets.sh" >/dev/null
apps="$build/apps"
. "$root/bench/sample_models.sh"
rm -rf "$out" && mkdir -p "$out/work"
results="$out/results.jsonl"
: >"$results"

compact() { python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))'; }

peakKb() {  # COMMAND...: runs it, prints its peak resident set in KiB on fd 3, its stdout on stdout
  local t
  t="$(mktemp)"
  /usr/bin/time -f "%M" -o "$t" "$@"
  cat "$t" >&3
  rm -f "$t"
}

# bench NAME MODEL [ctxgen/ctxrun shape args...] [-- ctxrun-only args...]
# With bind=INPUT=V, ctxgen binds that input at compile time (--set) and ONNX Runtime is given its value; with
# inputs=DIR, both run on DIR's input_<i>.npy instead of seeded random inputs; runs=N overrides ITERS.
bench() {
  local name="$1" model="$2"
  shift 2
  local shapes=() runOnly=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do shapes+=("$1"); shift; done
  [ $# -gt 0 ] && shift && runOnly=("$@")
  local w="$out/work/$name"
  mkdir -p "$w"
  echo "bench: $name" >&2
  "$apps/ctxgen/ctxgen" "$model" -o "$w" -q "${shapes[@]}" ${bind:+--set "$bind"}
  local ctx="$w/$(basename "${model%.onnx}")_ctx.onnx"
  if [ -n "${inputs:-}" ]; then
    cp -r "$inputs" "$w/in"
  else
    "$apps/ctxrun/ctxrun" "$ctx" "${shapes[@]}" "${runOnly[@]}" --seed 7 --save-inputs "$w/in" >/dev/null
  fi
  local iters="${runs:-$iters}"
  local rec="{\"model\": \"$name\""
  for threads in 1 2; do
    local kb ctxJson
    ctxJson="$(peakKb "$apps/ctxrun/ctxrun" "$ctx" --inputs "$w/in" --iters "$iters" --threads "$threads" --json 3>"$w/kb" |
      compact)"
    kb="$(cat "$w/kb")"
    rec+=", \"ctxkit_t$threads\": $ctxJson, \"ctxkit_t${threads}_peak_kb\": $kb"
    for spin in 0 1; do
      [ "$threads" = 1 ] && [ "$spin" = 1 ] && continue
      local ortJson
      ortJson="$(NODE_PATH="$ort" peakKb node "$root/bench/run_ort.js" "$model" "$w/in" "$w/ort" "$iters" "$threads" "$spin" ${bind:+"$bind"} \
        3>"$w/kb")"
      rec+=", \"ort_t${threads}_spin$spin\": $ortJson, \"ort_t${threads}_spin${spin}_peak_kb\": $(cat "$w/kb")"
    done
  done
  local two
  two="$(peakKb "$apps/ctxrun/ctxrun" "$ctx" --inputs "$w/in" --sessions 2 --json 3>"$w/kb" | compact)"
  rec+=", \"ctxkit_two_sessions\": $two, \"ctxkit_two_sessions_peak_kb\": $(cat "$w/kb")}"
  echo "$rec" >>"$results"
}

each_sample_model bench
# The sample rate bound at compile time: an If on it becomes its 16 kHz branch, compiled like the rest.
for v in silero_vad silero_vad_16k_op15 silero_vad_op18_ifless; do
  bind=sr=16000 bench "$v" "$vad/$v.onnx" --shape input=1x512 --shape state=2x1x128
done
for v in silero_vad_v5 silero_vad_v6; do
  bind=sr=16000 bench "vadweb_$v" "$vadWeb/$v.onnx" --shape input=1x512 --shape state=2x1x128
done

# The PyTorch corpus, each graph with the bindings and inputs exported with it.
torchCorpus="$cache/corpus-torch"
if [ -d "$torchCorpus" ]; then
  helper="$root/tests/oracle/torch_corpus.js"
  mapfile -t graphs < <(node "$helper" graphs "$torchCorpus")
  for g in "${graphs[@]}"; do
    name="${g%%/*}" graph=model
    [ "$name" != "$g" ] && graph="${g#*/}"
    dir="$torchCorpus/$name" data="$dir/inputs"
    [ "$graph" != model ] && data="$dir/${graph}_inputs"
    mapfile -t bindings < <(node "$helper" args "$torchCorpus" "$g")
    n="$iters"
    [ "$(node "$helper" compare "$torchCorpus" "$g")" = detections ] && [ "$n" -gt 20 ] && n=20
    runs="$n" inputs="$data" bench "${g//\//_}" "$dir/$graph.onnx" "${bindings[@]}"
  done
else
  echo "bench: $torchCorpus is missing: the PyTorch corpus is left out (run scripts/export_corpus.sh)" >&2
fi

python3 "$root/bench/suite_report.py" "$results" "$out"

# Generation on two LLM pairs, the corpus's and the int4 GroupQueryAttention one of tests/oracle/make_gqa_llm.cpp (time
# to first token, decode tokens/s, load of the pair, .bin bytes): a section of its own, in OUT_DIR/generate
# (bench/generate.sh), which leaves out a pair whose material is missing.
echo
CTXKIT_BUILD="$build" CTXKIT_CACHE="$cache" "$root/bench/generate.sh" 16 "$iters" "$out/generate"
