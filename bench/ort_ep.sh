#!/usr/bin/env bash
# The EPContext promise measured inside ONNX Runtime (not a test): for the samples and the corpus models that need no
# bound input values, ORT 1.30 session creation on ctxgen's _ctx.onnx with ctxkit's plugin EP against ORT's CPU EP on
# the source model (while another session on the model lives, with which ctxkit shares the loaded context, and alone:
# ep.share_ep_contexts=0), session creation + first run (alone), and run latency ORT + ctxkit against ORT's CPU EP and
# against ctxrun on the same compiled model.
# Every row also checks ORT + ctxkit's outputs against ORT's CPU EP (max |diff|). Writes ort_ep.md to OUT_DIR.
# usage: bench/ort_ep.sh [N] [OUT_DIR]   (N session creations per model, 4N runs; default 10, build/bench-ort-ep)
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
ocr="$cache/models/ocr-models-1.4.2/package/assets"
vad="$cache/models/silero-vad-1.0.3/package/weights"
oww="$cache/models/openwakeword-js-0.1.27/package/models"
rm -rf "$out" && mkdir -p "$out/work"
table="$out/ort_ep.md"
{
  echo "| model | session creation ORT + ctxkit shared / alone / ORT CPU EP (ms) | ratio shared / alone | creation + first run ORT + ctxkit alone / ORT CPU EP (ms) | ratio | run ORT + ctxkit / ctxrun / ORT CPU EP (ms) | max abs diff |"
  echo "|---|---|---|---|---|---|---|"
} >"$table"
ratios=()
alone=()
first=()

# row NAME MODEL [--shape INPUT=AxB ...]
row() {
  local name="$1" model="$2"
  shift 2
  local w="$out/work/$name"
  mkdir -p "$w"
  echo "bench: $name" >&2
  "$apps/ctxgen/ctxgen" "$model" -o "$w" -q "$@"
  local ctx="$w/$(basename "${model%.onnx}")_ctx.onnx"
  local report
  report="$("$app" "$ctx" --ep-library "$ep" --device npu --source "$model" --bench "$n" --threads 1 "$@")"
  local diff createCtx createCpu ratio createAlone ratioAlone firstCtx firstCpu ratioFirst runCtx runCpu runCtxrun
  diff="$(sed -n 's/^max |diff| vs ORT.s CPU EP on the source: //p' <<<"$report")"
  read -r createCtx createCpu ratio < <(sed -n 's/^session creation.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP on the source \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2 \3/p' <<<"$report")
  read -r createAlone ratioAlone < <(sed -n 's/^session creation unshared.*: ctxkit \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2/p' <<<"$report")
  read -r firstCtx firstCpu ratioFirst < <(sed -n 's/^creation + first run.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP on the source \([0-9.e+-]*\) ms, ratio \([0-9.e+-]*\)x/\1 \2 \3/p' <<<"$report")
  read -r runCtx runCpu < <(sed -n 's/^run (median.*: ctxkit \([0-9.e+-]*\) ms, ORT CPU EP \([0-9.e+-]*\) ms/\1 \2/p' <<<"$report")
  runCtxrun="$("$apps/ctxrun/ctxrun" "$ctx" --iters $((4 * n)) --threads 1 --json |
    python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["median_ms"])')"
  printf '| %s | %.2f / %.2f / %.2f | %.1fx / %.1fx | %.2f / %.2f | %.1fx | %.3f / %s / %.3f | %s |\n' "$name" \
    "$createCtx" "$createAlone" "$createCpu" "$ratio" "$ratioAlone" "$firstCtx" "$firstCpu" "$ratioFirst" \
    "$runCtx" "$runCtxrun" "$runCpu" "$diff" >>"$table"
  ratios+=("$ratio")
  alone+=("$ratioAlone")
  first+=("$ratioFirst")
}

samples="$build/samples"
row tiny_prefill "$samples/tiny_prefill.onnx"
row tiny_decode "$samples/tiny_decode.onnx"
row tiny_cnn "$samples/tiny_cnn.onnx"
row tiny_qdq_cnn "$samples/tiny_qdq_cnn.onnx"
row ppocr_cls "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" --shape x=1x3x48x192
row ppocrv4_rec "$ocr/ch_PP-OCRv4_rec_infer.onnx" --shape x=1x3x48x320
row ppocrv4_det "$ocr/ch_PP-OCRv4_det_infer.onnx" --shape x=1x3x640x640
# The other silero variants take a sample rate input whose value picks the branch; the app feeds random values.
row silero_vad_half "$vad/silero_vad_half.onnx" --shape input=1x512 --shape state=2x1x128
for m in hello_deepa hello_deepa_old namaste_deepa; do row "$m" "$oww/$m.onnx"; done

geomean() { python3 -c 'import math, sys; v = [float(x) for x in sys.argv[1:]]; print("%.1f" % math.exp(sum(map(math.log, v)) / len(v)))' "$@"; }
echo "" >>"$table"
echo "Session creation, ORT + ctxkit on the _ctx.onnx vs ORT's CPU EP on the source (geomean): $(geomean "${ratios[@]}")x faster with another session on the model alive, $(geomean "${alone[@]}")x alone; creation + first run alone $(geomean "${first[@]}")x." >>"$table"
cat "$table"
