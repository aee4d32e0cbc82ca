#!/usr/bin/env bash
# The EPContext promise measured inside ONNX Runtime (not a test): for the samples, the npm models and the exporter
# corpus (.cache/corpus-torch: PyTorch exports, outside the development corpus) that need no bound input values, ORT
# 1.30 session creation on ctxgen's _ctx.onnx with ctxkit's plugin EP against ORT's CPU EP on the source model (while
# another session on the model lives, with which ctxkit shares the loaded context, and alone: ep.share_ep_contexts=0),
# session creation + first run (alone), and run latency ORT + ctxkit against ORT's CPU EP and against ctxrun on the
# same compiled model. Every row also checks ORT + ctxkit's outputs against ORT's CPU EP (max |diff|). Writes
# ort_ep.md to OUT_DIR.
# usage: bench/ort_ep.sh [N] [OUT_DIR]   (N session creations per model, 4N runs; default 10, build/bench-ort-ep)
# A model whose source is above 20 MB is measured with N/3 (at least 3): its ORT CPU EP creations and runs dominate.
# CTXKIT_ORT_EP_ONLY=samples|corpus measures one part only; CTXKIT_ORT_EP_MODELS=GLOB picks corpus models by name.
# ORT's telemetry (a SQLite write and fsync per session creation, whatever the EP:
# docs/ort-ep.md#real-models-and-onnx-runtimes-telemetry) is off for both sides; CTXKIT_ORT_TELEMETRY=1 keeps it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
n="${1:-10}"
out="${2:-$build/bench-ort-ep}"
CTXKIT_CACHE="$cache" "$root/scripts/fetch_test_assets.sh" >/dev/null
apps="$build/apps"
app="$build/samples/ort_app/ctxkit_ort_app"
ep="${CTXKIT_EP:-$(cd "$build/lib/ort_ep" && pwd)/libctxkit_ep.so}"  # CTXKIT_EP: another build of the EP to compare
if [ ! -x "$app" ] || [ ! -f "$ep" ]; then
  echo "bench/ort_ep.sh: needs libctxkit_ep.so and ctxkit_ort_app in $build (built when ORT's headers are fetched)" >&2
  exit 1
fi
. "$root/bench/sample_models.sh"
rm -rf "$out" && mkdir -p "$out/work"
table="$out/ort_ep.md"
{
  echo "| model | session creation ORT + ctxkit shared / alone / ORT CPU EP (ms) | ratio shared / alone | creation + first run ORT + ctxkit alone / ORT CPU EP (ms) | ratio | run ORT + ctxkit / ctxrun / ORT CPU EP (ms) | max abs diff |"
  echo "|---|---|---|---|---|---|---|"
} >"$table"
ratios=()
alone=()
first=()
corpusRatios=()
corpusAlone=()
corpusFirst=()
failed=()
telemetry=(--disable-telemetry)
if [ "${CTXKIT_ORT_TELEMETRY:-0}" = 1 ]; then telemetry=(); fi

# row NAME MODEL [ctxgen's bindings: --shape INPUT=AxB, --dim SYM=V ...]
row() {
  local name="$1" model="$2"
  shift 2
  local bindings=("$@")
  local w="$out/work/$name" n="$n"
  if [ "$(stat -c %s "$model")" -gt $((20 << 20)) ]; then n=$((n / 3 > 3 ? n / 3 : 3)); fi
  mkdir -p "$w"
  echo "bench: $name" >&2
  local ctx="$w/$(basename "${model%.onnx}")_ctx.onnx" report appArgs=()
  while [ $# -gt 0 ]; do  # ctxgen takes every binding; the app only the input shapes (it reads the others' result)
    if [ "$1" = --shape ]; then appArgs+=("$1" "$2"); fi
    shift $(($# > 1 ? 2 : 1))
  done
  # The app exits with 3 when the outputs cannot be compared (their shapes differ) after timing: the row is kept.
  local rc=0
  if "$apps/ctxgen/ctxgen" "$model" -o "$w" -q "${bindings[@]}" >"$w/ctxgen.log" 2>&1; then
    report="$("$app" "$ctx" --ep-library "$ep" --device npu --source "$model" --bench "$n" --threads 1 \
      "${appArgs[@]}" "${telemetry[@]}" 2>"$w/app.log")" || rc=$?
  else
    rc=1
  fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "| $name | failed: $(tail -n 1 "$w/ctxgen.log" "$w/app.log" 2>/dev/null | grep -v '^==>' | tr '\n|' '  ') | | | | | |" >>"$table"
    failed+=("$name")
    return
  fi
  local diff createCtx createCpu ratio createAlone ratioAlone firstCtx firstCpu ratioFirst runCtx runCpu runCtxrun
  diff="$(sed -n 's/^max |diff| vs ORT.s CPU EP on the source: //p' <<<"$report")"
  read -r createCtx createCpu ratio < <(sed -n 's/^session creation.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP on the source \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2 \3/p' <<<"$report")
  read -r createAlone ratioAlone < <(sed -n 's/^session creation unshared.*: ctxkit \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2/p' <<<"$report")
  read -r firstCtx firstCpu ratioFirst < <(sed -n 's/^creation + first run.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP on the source \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2 \3/p' <<<"$report")
  read -r runCtx runCpu < <(sed -n 's/^run (median.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP \([0-9.e+-]*\) ms/\1 \2/p' <<<"$report")
  runCtxrun="$("$apps/ctxrun/ctxrun" "$ctx" --iters $((4 * n)) --threads 1 --json |
    python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["median_ms"])')" || runCtxrun="failed"
  printf '| %s | %.2f / %.2f / %.2f | %.1fx / %.1fx | %.2f / %.2f | %.1fx | %.3f / %s / %.3f | %s |\n' "$name" \
    "$createCtx" "$createAlone" "$createCpu" "$ratio" "$ratioAlone" "$firstCtx" "$firstCpu" "$ratioFirst" \
    "$runCtx" "$runCtxrun" "$runCpu" "$diff" >>"$table"
  ratios+=("$ratio")
  alone+=("$ratioAlone")
  first+=("$ratioFirst")
  if [ "$part" = corpus ]; then
    corpusRatios+=("$ratio")
    corpusAlone+=("$ratioAlone")
    corpusFirst+=("$ratioFirst")
  fi
}

only="${CTXKIT_ORT_EP_ONLY:-}"
part=samples
if [ "$only" != corpus ]; then
  each_sample_model row
fi

# The exporter corpus, compiled with the bindings its meta.json records. The app feeds seeded random floats, so the
# models with integer inputs whose values matter (token ids, lengths: bert, conformer, llama_kv) are skipped.
part=corpus
skipped=()
if [ "$only" != samples ]; then
  for dir in "$cache"/corpus-torch/${CTXKIT_ORT_EP_MODELS:-*}/; do
    name="$(basename "$dir")"
    if [ ! -f "$dir/model.onnx" ] || ! python3 -c 'import sys
for f in sys.argv[1:]:
    if b"<f4" not in open(f, "rb").read(128): sys.exit(1)' "$dir"/inputs/*.npy; then
      skipped+=("$name")
      continue
    fi
    mapfile -t bindings < <(python3 -c 'import json, sys; print("".join(a + "\n" for a in json.load(open(sys.argv[1]))["graphs"]["model"]["args"]), end="")' "$dir/meta.json")
    row "$name" "$dir/model.onnx" "${bindings[@]}"
  done
fi

geomean() { python3 -c 'import math, sys; v = [float(x) for x in sys.argv[1:]]; print("%.1f" % math.exp(sum(map(math.log, v)) / len(v)))' "$@"; }
echo "" >>"$table"
if [ ${#telemetry[@]} -gt 0 ]; then echo "ORT's telemetry off (both sides)." >>"$table"; else echo "ORT's telemetry on (both sides)." >>"$table"; fi
echo "Session creation, ORT + ctxkit on the _ctx.onnx vs ORT's CPU EP on the source (geomean of ${#ratios[@]} rows): $(geomean "${ratios[@]}")x faster with another session on the model alive, $(geomean "${alone[@]}")x alone; creation + first run alone $(geomean "${first[@]}")x." >>"$table"
if [ ${#corpusRatios[@]} -gt 0 ]; then
  echo "" >>"$table"
  echo "The exporter corpus alone (${#corpusRatios[@]} rows; skipped for inputs whose values matter: ${skipped[*]:-none}): $(geomean "${corpusRatios[@]}")x shared, $(geomean "${corpusAlone[@]}")x alone; creation + first run alone $(geomean "${corpusFirst[@]}")x." >>"$table"
fi
[ ${#failed[@]} -eq 0 ] || echo "Failed rows (logs in $out/work): ${failed[*]}" >>"$table"
cat "$table"
[ ${#failed[@]} -eq 0 ]
