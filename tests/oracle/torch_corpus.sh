#!/usr/bin/env bash
# The PyTorch corpus against ONNX Runtime (CORPUS.md §6): every graph scripts/export_corpus.sh wrote into
# CACHE_DIR/corpus-torch (torchvision classifiers, a segmenter, both detector kinds, wav2vec2, a BERT-like encoder, a
# Llama-style prefill/decode pair) is compiled with ctxgen for npu-sim and for cpu, run with ctxrun on the seeded
# inputs exported with it, and compared with ONNX Runtime 1.30 running the source model on the same bytes, at fp32
# tolerances rtol 1e-3, atol 1e-5 (ctxrun's defaults; atol raised to twice ONNX Runtime's own difference between its
# optimized and unoptimized runs where that is larger). Detectors' outputs are compared as sets of detections (two
# whose scores differ by a few ulp may come out in either order). Each graph and target must end as
# torch_corpus_expected.txt says: a listed failure that passes fails the test, as does an unlisted failure or a graph
# the list does not name. Each graph that matches on cpu is also compiled weightless, and its outputs must be byte for
# byte the ordinary compile's (outcome weightless-differs otherwise). The LLM's prefill/decode pair is also compiled as
# one --share group, which must store its weights once and still match. Prints (and writes to BUILD_DIR/tests/oracle/torch_corpus_results.md) the table of
# compiled, fallback and folded nodes, partitions and max |diff| per graph and target.
# Exits 77 (CTest's skip code) when the corpus or ONNX Runtime is absent or the corpus was exported by another version
# of the script, saying why, or fails when CI is set (tests/common/skip.sh).
# usage: torch_corpus.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../common/skip.sh"
ctx_oracle_setup "$@"
expected="$here/torch_corpus_expected.txt"
[ -d "$corpus" ] || ctx_skip "$corpus is missing (run scripts/export_corpus.sh; it needs python3-torch," \
  "python3-torchvision and python3-torchaudio)"
helper() { node "$here/torch_corpus.js" "$@"; }
hash="$(sha256sum "$src/scripts/export_corpus.py" | cut -c1-16)"
mapfile -t listed < <(grep -v '^\s*#' "$expected" | awk 'NF {print $1}' | sort -u)
mapfile -t present < <(helper graphs "$corpus")
# (grep reads all it is given: with -q it stops at the first match, and under pipefail printf's write into the closed
# pipe could fail the check now and then, reporting a listed graph as unlisted.)
failed=0 passed=0
for g in "${listed[@]}"; do
  if ! printf '%s\n' "${present[@]}" | grep -xF "$g" >/dev/null; then
    ctx_skip "$corpus has no $g (run scripts/export_corpus.sh; an export that failed says why)"
  elif [ "$(helper hash "$corpus" "$g")" != "$hash" ]; then
    ctx_skip "$corpus/${g%%/*} was exported by another version of scripts/export_corpus.py (run" \
      "scripts/export_corpus.sh)"
  fi
done
for g in "${present[@]}"; do
  if ! printf '%s\n' "${listed[@]}" | grep -xF "$g" >/dev/null; then
    echo "FAIL $g: exported but not in $(basename "$expected"): add its expected outcome"; failed=$((failed + 1))
  fi
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
rows=()
# expectation GRAPH TARGET: the outcome listed for it (match, ctxgen-fails, ctxrun-fails or mismatch).
expectation() { awk -v g="$1" -v t="$2" '$1 == g && $2 == t {print $3; exit}' "$expected"; }
# The graph compiled weightless for cpu (docs/weight-sharing.md#derived-weights): what the compiler derives from the
# source weights (a BatchNorm fold, prune-conv-taps' slices, the analysis' Slice/Concat/Transpose of a weight) is
# computed at load, so its outputs must be byte for byte those of the ordinary compile, which matched ONNX Runtime.
# Prints what differs and fails, or the weightless .bin's size.
checkWeightless() {
  local model="$1" t="$2" inputs="$3" wl="$2/weightless" f differs=""
  shift 3
  mkdir -p "$wl"
  if ! "$apps/ctxgen/ctxgen" "$model" --weightless -o "$wl" -q --target cpu "$@" >"$wl/gen.log" 2>&1; then
    echo "ctxgen --weightless: $(tr '\n' ' ' <"$wl/gen.log")"; return 1
  fi
  if ! "$apps/ctxrun/ctxrun" "$wl/${graph}_ctx.onnx" --source-model "$model" --inputs "$inputs" \
      --output-dir "$wl/ours" -q >"$wl/run.log" 2>&1; then
    echo "ctxrun on the weightless context: $(tr '\n' ' ' <"$wl/run.log")"; return 1
  fi
  for f in "$t/ours"/*.npy; do cmp -s "$f" "$wl/ours/${f##*/}" || differs+=" ${f##*/}"; done
  if [ -n "$differs" ]; then echo "the weightless compile's outputs differ from the ordinary one's:$differs"; return 1; fi
  echo "weightless .bin $(stat -c %s "$wl/${graph}_ctxkit.bin") bytes"
}
for g in "${listed[@]}"; do
  name="${g%%/*}" graph="model"
  [ "$name" != "$g" ] && graph="${g#*/}"
  model="$corpus/$name/$graph.onnx" inputs="$corpus/$name/inputs"
  [ "$graph" != model ] && inputs="$corpus/$name/${graph}_inputs"
  mapfile -t bindings < <(helper args "$corpus" "$g")
  compare="$(helper compare "$corpus" "$g")"
  out="$work/${g//\//.}"
  mkdir -p "$out"
  ortOk=1
  if ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$inputs" "$out/ort" 1 >"$out/ort.log" 2>&1; then
    echo "FAIL $g: onnxruntime: $(cat "$out/ort.log")"; failed=$((failed + 1)); ortOk=0
  fi
  # The reference's own float noise: ONNX Runtime with its graph optimizations off. Deep nets differ from the
  # optimized run by up to 2e-5 at outputs of order 1 (ORT against itself fails atol 1e-5 on mnasnet0_5), so tensors
  # are compared at atol max(1e-5, twice that difference), at most 1e-4; rtol stays 1e-3.
  atol=1e-5
  if [ "$ortOk" = 1 ] && [ "$compare" != detections ]; then
    if ORT_GRAPH_OPTIMIZATION=disabled NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$inputs" \
        "$out/ort_plain" 1 >"$out/ort_plain.log" 2>&1; then
      atol="$(helper atol "$out/ort" "$out/ort_plain" 1e-5)"
    else
      echo "FAIL $g: onnxruntime without optimizations: $(cat "$out/ort_plain.log")"; failed=$((failed + 1)); ortOk=0
    fi
  fi
  for target in npu-sim cpu; do
    want="$(expectation "$g" "$target")"
    t="$out/$target"
    mkdir -p "$t"
    [ "$ortOk" = 1 ] || continue
    outcome=match detail="" counts="- - - - -"
    if ! "$apps/ctxgen/ctxgen" "$model" -o "$t" -q --target "$target" "${bindings[@]}" --json "$t/gen.json" \
        >"$t/gen.log" 2>&1; then
      outcome=ctxgen-fails detail="$(tr '\n' ' ' <"$t/gen.log")"
    else
      counts="$(helper gen "$t/gen.json")"
      ctx="$t/${graph}_ctx.onnx"
      read -r _ _ _ _ compiledParts <<<"$counts"
      ctxBytes=$(stat -c %s "$ctx")
      if [ "${compiledParts:-0}" -gt 0 ] && [ "$ctxBytes" -ge 4194304 ]; then
        # Fallback initializers of 1 KiB or more go to the .bin when a partition compiled (docs/epcontext-models.md).
        outcome=ctxgen-fails detail="the _ctx.onnx is $ctxBytes bytes: fallback weights were left in it"
      elif [ "$compare" = detections ]; then
        if ! "$apps/ctxrun/ctxrun" "$ctx" --inputs "$inputs" --output-dir "$t/ours" -q >"$t/run.log" 2>&1; then
          outcome=ctxrun-fails detail="$(tr '\n' ' ' <"$t/run.log")"
        elif ! detail="$(helper detections "$t/ours" "$out/ort" 1e-3 1e-5)"; then
          outcome=mismatch
        fi
      else
        "$apps/ctxrun/ctxrun" "$ctx" --inputs "$inputs" --expected "$out/ort" --atol "$atol" --json \
          --output-dir "$t/ours" >"$t/run.json" 2>"$t/run.log"
        rc=$?
        if ! grep -q '"comparison"' "$t/run.json"; then
          outcome=ctxrun-fails detail="$(tr '\n' ' ' <"$t/run.log")"
        else
          detail="$(helper diff "$t/run.json")"
          [ "$atol" = 1.00e-5 ] || detail+=" (atol $atol)"
          [ "$rc" = 0 ] || outcome=mismatch
        fi
      fi
    fi
    if [ "$target" = cpu ] && [ "$outcome" = match ]; then
      if weightless="$(checkWeightless "$model" "$t" "$inputs" "${bindings[@]}")"; then
        detail+="; $weightless"
      else
        outcome=weightless-differs detail="$weightless"
      fi
    fi
    read -r nodes compiled fallback folded partitions <<<"$counts"
    if [ -z "$want" ]; then
      echo "FAIL $g [$target]: $outcome, and $(basename "$expected") lists no outcome for it: $detail"
      failed=$((failed + 1))
    elif [ "$outcome" != "$want" ]; then
      echo "FAIL $g [$target]: $outcome, but $(basename "$expected") expects $want: $detail"; failed=$((failed + 1))
    else
      echo "ok   $g [$target]: $outcome: $detail"; passed=$((passed + 1))
    fi
    result="$detail"
    [ "$outcome" = match ] || result="$outcome: $detail"
    rows+=("| $g | $target | $nodes | $compiled | $fallback | $folded | $partitions | ${result//|/\\|} |")
  done
done
# A model exported as several graphs from the same weights (the LLM's prefill/decode pair) compiled as one --share
# group, each graph's bindings given to it alone (STEM:): every weight must be stored once (sharing ratio at least
# 0.95 x the graph count) and each graph must still match ONNX Runtime.
checkShared() {
  local name="$1" target="$2" out="$work/$name.shared.$target" models=() binds=() graphs=()
  for g in "${listed[@]}"; do
    [ "${g%%/*}" = "$name" ] && [ "$g" != "$name" ] || continue
    local graph="${g#*/}" i a
    graphs+=("$graph") models+=("$corpus/$name/$graph.onnx")
    mapfile -t a < <(helper args "$corpus" "$g")
    for ((i = 0; i + 1 < ${#a[@]}; i += 2)); do binds+=("${a[i]}" "$graph:${a[i + 1]}"); done
  done
  mkdir -p "$out"
  if ! "$apps/ctxgen/ctxgen" "${models[@]}" --share -o "$out" -q --target "$target" "${binds[@]}" \
      --json "$out/gen.json" >"$out/gen.log" 2>&1; then
    echo "FAIL $name --share [$target]: ctxgen: $(cat "$out/gen.log")"; failed=$((failed + 1)); return
  fi
  local ratio detail="" graph
  ratio="$(node -e 'console.log(require(process.argv[1]).weights.sharing_ratio.toFixed(3))' "$out/gen.json")"
  if ! awk -v r="$ratio" -v n="${#graphs[@]}" 'BEGIN {exit !(r >= 0.95 * n)}'; then
    detail="sharing ratio $ratio, expected about ${#graphs[@]}"
  fi
  for graph in "${graphs[@]}"; do
    "$apps/ctxrun/ctxrun" "$out/${graph}_ctx.onnx" --inputs "$corpus/$name/${graph}_inputs" \
      --expected "$work/$name.$graph/ort" >"$out/$graph.log" 2>&1 ||
      detail+=" $graph: $(tr '\n' ' ' <"$out/$graph.log")"
  done
  local bin
  bin="$(node -e 'const j = require(process.argv[1]); console.log(j.files.filter(f => f.path.endsWith(".bin"))
    .map(f => f.bytes).join(" "))' "$out/gen.json")"
  if [ -n "$detail" ]; then
    echo "FAIL $name --share [$target]: $detail"; failed=$((failed + 1))
  else
    echo "ok   $name --share [$target]: sharing ratio $ratio, one .bin of $bin bytes"; passed=$((passed + 1))
  fi
  rows+=("| $name (${graphs[*]}, --share) | $target | | | | | |"\
" sharing ratio $ratio, one .bin of $bin bytes${detail:+; FAIL:$detail} |")
}
for target in npu-sim cpu; do checkShared llama_kv "$target"; done
table="$build/tests/oracle/torch_corpus_results.md"
mkdir -p "$(dirname "$table")"
{
  echo "| graph | target | nodes | compiled | fallback | folded | partitions | max \\|diff\\| vs ORT |"
  echo "|---|---|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$table"
echo "pytorch corpus vs onnxruntime: $passed as expected, $failed not"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
