#!/usr/bin/env bash
# Runs the commands of docs/guide.md: every ```sh block, in order, in one shell, in an empty folder holding the
# sample models, with the built tools first on PATH; then checks the files and results the guide says they give.
# MODE commands: every block not marked; MODE onnx_runtime: the same plus the blocks marked
# <!-- guide-test: onnx-runtime --> (exit 77, saying why, when ONNX Runtime's files are not there; a failure when CI is set).
# Blocks marked <!-- guide-test: skip, REASON --> are not run (the reason must say which test covers them).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../common/skip.sh"
mode=$1 guide=$2 tools_path=$3 samples=$4 make_symbolic=$5 work=$6 ort_app=${7:-} ep_library=${8:-} ort_library=${9:-}

fail() {
  echo "FAIL: $*"
  exit 1
}

if [[ "$mode" == onnx_runtime ]]; then
  if [[ -z "$ort_app" || -z "$ep_library" || ! -e "$ort_library" ]]; then
    ctx_skip "the guide's ONNX Runtime section needs ONNX Runtime 1.30 in .cache (scripts/fetch_test_assets.sh)" \
      "and libctxkit_ep.so with samples/ort_app built"
  fi
fi

rm -rf "$work"
mkdir -p "$work/blocks" "$work/run"
# Split the guide into blocks/NNN.sh; a marker comment on the line before a fence tags the block.
awk -v dir="$work/blocks" '
  /^<!-- guide-test: / { tag = $0; sub(/^<!-- guide-test: /, "", tag); sub(/ *-->$/, "", tag); next }
  /^```sh$/ { n++; file = sprintf("%s/%03d.sh", dir, n); printf "" > file; print (tag == "" ? "run" : tag) > (file ".tag"); inside = 1; tag = ""; next }
  /^```/ && inside { inside = 0; close(file); next }
  inside { print > file }
  /[^ ]/ && !inside { tag = (/^<!-- guide-test: / ? tag : "") }
' "$guide"
# The output the guide shows (```text blocks), one line a file, for comparing with what the commands print.
awk '/^```text$/ { inside = 1; next } /^```/ { inside = 0 } inside { print }' "$guide" > "$work/shown.txt"
blocks=("$work"/blocks/*.sh)
[[ ${#blocks[@]} -ge 10 ]] || fail "found ${#blocks[@]} sh blocks in $guide; expected the guide's examples"

cp "$samples"/tiny_prefill.onnx "$samples"/tiny_decode.onnx "$samples"/tiny_cnn.onnx "$work/run/"
cp -r "$samples"/tiny_prefill "$samples"/tiny_decode "$samples"/tiny_cnn "$work/run/"
"$make_symbolic" "$samples/tiny_prefill.onnx" "$work/run/block.onnx" > /dev/null
export PATH="$tools_path:$PATH"
[[ -n "$ort_app" ]] && export PATH="$(dirname "$ort_app"):$PATH"
export CTXKIT_EP_LIBRARY="$ep_library"

ran=0 skipped=0
log=$work/guide.log
for block in "${blocks[@]}"; do
  tag=$(cat "$block.tag")
  case "$tag" in
    run) ;;
    onnx-runtime) [[ "$mode" == onnx_runtime ]] || { skipped=$((skipped + 1)); continue; } ;;
    skip,*) skipped=$((skipped + 1)); continue ;;
    *) fail "$(basename "$block"): unknown marker '$tag'" ;;
  esac
  echo "== $(basename "$block")"
  sed 's/^/$ /' "$block"
  # Its own shell: set -e is off inside a sourced file that is part of an && list.
  (cd "$work/run" && bash -euo pipefail "$block") 2>&1 | tee -a "$log" ||
    fail "a command of block $(basename "$block") failed"
  ran=$((ran + 1))
done
echo "ran $ran blocks, $skipped not in this mode"

# The output the guide shows is printed by its commands, to the digit; only times (" 0.02 s") may differ.
[[ -s "$work/shown.txt" ]] || fail "the guide shows no output"
while IFS= read -r line; do
  pattern=$(sed -e 's/[][\.*^$/]/\\&/g' -e 's/ [0-9]\\.[0-9]* s$/ [0-9.]* s/' <<< "$line")
  grep -q "^$pattern\$" "$log" || fail "the guide shows '$line', which its commands do not print"
done < "$work/shown.txt"

# What the guide says the commands give.
cd "$work/run"
for f in out/tiny_cnn_ctx.onnx out/tiny_cnn_ctxkit.bin variants/block_s1_ctx.onnx variants/block_s16_ctx.onnx \
  variants/block_ctxkit.bin results/output_0.npy mine/tiny_prefill_ctx.onnx npu-sim.json build-out.d \
  quick/tiny_cnn_ctx.onnx quick/tiny_prefill_ctxkit.bin quick-target/tiny_cnn_ctx.onnx; do
  [[ -s "$f" ]] || fail "the guide's commands did not write $f"
done
[[ "$(ls shared | tr '\n' ' ')" == "tiny_decode_ctx.onnx tiny_prefill_ctx.onnx tiny_prefill_ctxkit.bin " ]] ||
  fail "--share wrote [$(ls shared | tr '\n' ' ')], the guide says two _ctx.onnx and one .bin"
grep -q '"schema_version"' inspect.json || fail "ctxinspect --json wrote no report"
[[ ! -e typo ]] || fail "a bad target file left an output folder"
grep -q 'tiny_cnn.onnx' build-out.d || fail "the depfile does not name the model"
# The commands shown failing fail as the guide says, with the exit code it shows.
grep -q '^exit 2 (out/tiny_cnn_ctx.onnx exists)' "$log" || fail "compiling over an existing output did not exit 2"
grep -q '^exit 1: broken/tiny_cnn_ctxkit.bin is missing' "$log" || fail "ctxinspect did not exit 1 on a missing .bin"
grep -q '^exit 2$' "$log" || fail "a typo in a target file was not a usage error (exit 2)"
grep -q "ctxgen: error: target 'typo.json'" "$log" || fail "the target file error does not name the file"
[[ $(grep -c ": match (max |diff|" "$log") -ge 5 ]] || fail "ctxrun did not compare all the outputs the guide runs"
if [[ "$mode" == onnx_runtime ]]; then
  diffs=$(sed -n "s/^max |diff| vs ORT's CPU EP on the source: //p" "$log")
  [[ $(wc -l <<< "$diffs") == 2 ]] || fail "ctxkit_ort_app did not compare both runs with ORT's CPU EP"
  for d in $diffs; do
    awk -v d="$d" 'BEGIN { exit !(d < 1e-4) }' || fail "ORT + ctxkit differ from ORT's CPU EP on the source by $d"
  done
  [[ -s ort/tiny_cnn_ctx.onnx && -s ort/tiny_cnn_ctxkit.bin ]] || fail "ORT's compile API did not write ort/tiny_cnn_ctx*"
fi
rm -rf "$work"
echo "PASSED"
