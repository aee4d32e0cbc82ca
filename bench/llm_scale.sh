#!/usr/bin/env bash
# Shape variants at LLM scale (issue 11 item 7): writes a synthetic LLM (bench/make_llm.cpp: 1 GiB of float32
# weights in external data, symbolic sequence length by default), times `cp` of its files, compiles it for three
# variants (seq 1, 128, 512) in one ctxgen run and reports: .bin bytes / unique weight bytes, ctxgen's peak
# anonymous memory (RssAnon sampled from /proc) and peak RSS, ctxgen's wall time vs cp's (and vs the disk's time to
# write the copy back, the floor for a durable writer); then runs every variant
# with ctxrun and ONNX Runtime (bench/run_ort.js on the source model) on the same seeded inputs and compares them.
# usage: bench/llm_scale.sh [WORK_DIR] [LAYERS HIDDEN FF]   (CTXKIT_BUILD selects the build folder, default build/)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${CTXKIT_BUILD:-$src/build}"
work="${1:-$(mktemp -d)}"
shape=("${@:2}")
ort="$src/.cache/onnxruntime-node-1.30.0/node_modules"
cmake --build "$build" --target make_llm ctxgen ctxrun ctxinspect >/dev/null
mkdir -p "$work"
rm -rf "$work/out" "$work/copy" "$work/runs"
"$build/tests/oracle/make_llm" "$work/llm.onnx" "${shape[@]}"

# Wall time, peak anonymous memory (RssAnon) and peak RSS (VmHWM, mapped files included) of a command, in seconds
# and KiB, sampled from /proc every 10 ms with shell builtins (a sampler that forks would compete for the CPU).
measure() {
  local start end peak=0 hwm=0 key value pid
  start=$(date +%s.%N)
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    while read -r key value _; do
      case $key in
        RssAnon:) [ "$value" -gt "$peak" ] && peak=$value ;;
        VmHWM:) [ "$value" -gt "$hwm" ] && hwm=$value ;;
      esac
    done <"/proc/$pid/status" 2>/dev/null || true
    sleep 0.01
  done
  wait "$pid"
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $peak $hwm"
}

# cp leaves its copy in the page cache, ctxgen makes its files durable (fsync before the rename): cp is timed
# both ways, and `sync` runs before each timing so that no command pays for another's writeback.
cpDurable() { cp "$@" && sync "${@:$#}"/*; }
mkdir -p "$work/copy"
sync
read -r cpSeconds _ < <(measure cp "$work/llm.onnx" "$work/llm.onnx.data" "$work/copy/")
# The copy's writeback alone (its bytes already in the page cache): how fast this disk takes 1 GiB, the floor for any
# writer that makes its output durable, ctxgen's included.
read -r writebackSeconds _ < <(measure sync "$work/copy/llm.onnx" "$work/copy/llm.onnx.data")
rm -rf "$work/copy" && mkdir -p "$work/copy" && sync
read -r cpSyncSeconds _ < <(measure cpDurable "$work/llm.onnx" "$work/llm.onnx.data" "$work/copy")
rm -rf "$work/copy" && sync
read -r genSeconds genAnonKiB genRssKiB < <(measure "$build/apps/ctxgen/ctxgen" "$work/llm.onnx" --variant seq=1 \
  --variant seq=128 --variant seq=512 -o "$work/out" -q --json "$work/report.json")
unique=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['weights']['unique_bytes'])" "$work/report.json")
binBytes=$(stat -c %s "$work/out/llm_ctxkit.bin")
weightBytes=$(stat -c %s "$work/llm.onnx.data")
echo "weights in the source: $weightBytes bytes; unique weight bytes stored: $unique; .bin: $binBytes bytes" \
  "($(echo "scale=5; $binBytes / $unique" | bc) x unique)"
echo "ctxgen (3 variants): ${genSeconds}s wall, peak anonymous memory $((genAnonKiB / 1024)) MiB," \
  "peak RSS (mapped weights included) $((genRssKiB / 1024)) MiB; cp of the inputs: ${cpSeconds}s," \
  "${cpSyncSeconds}s with sync; the copy's writeback alone (sync after cp): ${writebackSeconds}s"
python3 -c "import json,sys; print('ctxgen stages (ms):', {k: round(v) for k, v in json.load(open(sys.argv[1]))['stage_ms'].items()})" \
  "$work/report.json"

status=0
# Every weight hash in the .bin is recomputed from the bytes written (packed while written, never held whole).
if "$build/apps/ctxinspect/ctxinspect" "$work"/out/llm_seq*_ctx.onnx --verify >"$work/verify.log" 2>&1; then
  echo "ctxinspect --verify: ok"
else
  echo "ctxinspect --verify failed: $(cat "$work/verify.log")"; status=1
fi
for variant in seq1 seq128 seq512; do
  run="$work/runs/$variant"
  mkdir -p "$run"
  ctx="$work/out/llm_${variant}_ctx.onnx"
  "$build/apps/ctxrun/ctxrun" "$ctx" --seed 7 --save-inputs "$run/in" >"$run/run.log"
  if ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$work/llm.onnx" "$run/in" "$run/ort" 1 >"$run/ort.log" 2>&1; then
    echo "$variant: onnxruntime failed: $(cat "$run/ort.log")"; status=1; continue
  fi
  if "$build/apps/ctxrun/ctxrun" "$ctx" --inputs "$run/in" --expected "$run/ort" >"$run/cmp.log" 2>&1; then
    echo "$variant: matches ONNX Runtime: $(grep -h 'max |diff|' "$run/cmp.log" | tr '\n' ' ')"
  else
    echo "$variant: differs from ONNX Runtime: $(cat "$run/cmp.log")"; status=1
  fi
done
exit $status
