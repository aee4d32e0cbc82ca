#!/usr/bin/env bash
# Value-dependent shapes against ONNX Runtime: the small detector head of make_detector_head.cpp (NonMaxSuppression
# of at most 12 rows, a box head on the selected boxes, NonZero of at most 3 x 48, TopK with a computed k of at most
# 48).
# - ctxgen --dry-run --json must report each value-dependent node with its bound (docs/ctxgen-json.md): on the head
#   NonMaxSuppression [12, 3], NonZero [3, 48], TopK [48], and the nodes behind each, with a bound (npu-sim, whose
#   programs stay static: they are fallback nodes there).
# - On cpu (bounded_shapes: docs/compiler.md#bounded-programs) the whole head compiles, no fallback node behind a root,
#   and for both targets the dry run's compiled/fallback/folded counts and partitions are the real compile's.
# - The head's fallback weights (18 KiB) must be in the .bin, not in the _ctx.onnx (docs/epcontext-models.md), and in
#   the _ctx.onnx with --embed-fallback-initializers.
# - For each target (npu-sim, cpu) the compiled head must match ONNX Runtime on inputs that select no box, some, and
#   the bound of each op (12 boxes, 48 scores, k = 48), with the row counts checked against those expectations.
# - The row-independent ops behind a root (make_detector_head --rows) on both targets, at 0 rows, some and the bound;
#   and behind an If on the fallback path (--rows-behind-if: a partition with a bounded input on cpu).
# (The corpus's detectors run against ONNX Runtime in torch_corpus.sh, which also bounds their _ctx.onnx sizes.)
# Exits 77 (CTest's skip code) when ONNX Runtime is absent, saying why, or fails when CI is set (tests/common/skip.sh).
# usage: detector_head.sh BUILD_DIR CACHE_DIR SOURCE_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../common/skip.sh"
ctx_oracle_setup "$@"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
apps="$build/apps"
failed=0 passed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; passed=$((passed + 1)); }

model="$work/detector_head.onnx"
if ! made="$("$build/tests/oracle/make_detector_head" "$model" "$work/in" 2>&1)"; then
  echo "FAIL make_detector_head: $made"
  exit 1
fi

# The bounds the dry run reports.
if ! "$apps/ctxgen/ctxgen" "$model" --target npu-sim --dry-run --json "$work/dry.json" -q >"$work/dry.log" 2>&1; then
  fail "dry run: $(cat "$work/dry.log")"
else
  report="$(node -e '
    const m = require(process.argv[1]).models[0];
    const by = Object.fromEntries(m.value_dependent.map(v => [v.op_type, v]));
    const want = { NonMaxSuppression: [12, 3], NonZero: [3, 48], TopK: [48] };
    const bad = [];
    for (const [op, bound] of Object.entries(want)) {
      const v = by[op];
      if (!v) { bad.push(op + " not reported"); continue; }
      if (JSON.stringify(v.bound) !== JSON.stringify(bound)) bad.push(`${op} bound ${JSON.stringify(v.bound)}, expected ${JSON.stringify(bound)}`);
      if (!(v.fallback_nodes >= 1)) bad.push(`${op}: no fallback node behind it`);
    }
    // Behind the NMS: itself, the two Gathers, MatMul, Add, Relu, MatMul, Add, Slice, Mul, Add: all with a bound.
    if (by.NonMaxSuppression && by.NonMaxSuppression.bounded_nodes < 11) bad.push(`NMS: ${by.NonMaxSuppression.bounded_nodes} bounded nodes, expected 11`);
    console.log(bad.length ? bad.join("; ") : m.value_dependent.map(v => `${v.op_type} <= ${JSON.stringify(v.bound)} (${v.fallback_nodes} nodes, ${v.bounded_nodes} bounded)`).join(", "));
    process.exit(bad.length ? 1 : 0);' "$work/dry.json")" && ok "dry run bounds: $report" || fail "dry run bounds: $report"
fi

# The same in the text report.
text="$("$apps/ctxgen/ctxgen" "$model" --target npu-sim --dry-run 2>&1)"
want="value-dependent NonMaxSuppression_selected (NonMaxSuppression): output at most 12x3; 11 fallback nodes behind it, 11 with a bound"
if [[ "$text" == *"$want"* ]]; then
  ok "dry run text names the bound"
else
  fail "dry run text: $(grep value-dependent <<<"$text")"
fi

# The row counts ONNX Runtime must give per input set (selected, above, topv; "" unchecked).
declare -A rows=([none]="0 0 0" [some]="" [all]="12 48 48")
for target in npu-sim cpu; do
  out="$work/$target"
  if ! "$apps/ctxgen/ctxgen" "$model" --target "$target" -o "$out" -q >"$work/$target.log" 2>&1; then
    fail "$target: ctxgen: $(cat "$work/$target.log")"; continue
  fi
  ctx="$out/detector_head_ctx.onnx"
  # The dry run decides as the compile does (the same facts, the same unsupportedReason).
  "$apps/ctxgen/ctxgen" "$model" --target "$target" --dry-run --json "$out/dry.json" -q >/dev/null 2>&1
  "$apps/ctxgen/ctxgen" "$model" --target "$target" -o "$out/again" --json "$out/gen.json" -q >/dev/null 2>&1
  counts() { node -e 'const m = require(process.argv[1]).models[0];
    console.log(m.compiled_nodes, m.fallback_nodes, m.folded_nodes, m.partitions.length)' "$1" 2>&1; }
  dry="$(counts "$out/dry.json")" real="$(counts "$out/gen.json")"
  if [ "$dry" != "$real" ]; then fail "$target: dry run counts $dry, the compile's $real"
  else ok "$target: dry run and compile agree: compiled fallback folded partitions $real"; fi
  if [ "$target" = cpu ]; then
    if [ "$real" = "21 0 0 1" ]; then ok "cpu: every node compiled in one partition, no fallback node behind a root"
    else fail "cpu: compiled fallback folded partitions $real, expected 21 0 0 1"; fi
  fi
  bytes=$(stat -c %s "$ctx")
  if [ "$bytes" -ge 16384 ]; then fail "$target: the _ctx.onnx is $bytes bytes: the box head's weights are in it"
  else ok "$target: _ctx.onnx $bytes bytes, fallback weights in the .bin"; fi
  for set in none some all; do
    if ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$work/in/$set" "$out/ort_$set" 1 >"$out/ort.log" 2>&1; then
      fail "$target $set: onnxruntime: $(cat "$out/ort.log")"; continue
    fi
    got="$(node -e '
      const { readNpy } = require(process.argv[1]);
      console.log([0, 3, 4].map(i => readNpy(`${process.argv[2]}/output_${i}.npy`).shape[0]).join(" "));' \
      "$src/bench/npy.js" "$out/ort_$set")"
    if [ -n "${rows[$set]}" ] && [ "$got" != "${rows[$set]}" ]; then
      fail "$target $set: ONNX Runtime selected $got rows, the inputs are made for ${rows[$set]}"; continue
    fi
    if "$apps/ctxrun/ctxrun" "$ctx" --inputs "$work/in/$set" --expected "$out/ort_$set" >"$out/cmp.log" 2>&1; then
      ok "$target $set (rows $got): $(grep -h 'max |diff|' "$out/cmp.log" | tr '\n' ' ')"
    else
      fail "$target $set (rows $got): $(cat "$out/cmp.log")"
    fi
  done
done
if ! "$apps/ctxgen/ctxgen" "$model" --target npu-sim --embed-fallback-initializers -o "$work/embed" -q >"$work/embed.log" 2>&1; then
  fail "--embed-fallback-initializers: $(cat "$work/embed.log")"
elif [ "$(stat -c %s "$work/embed/detector_head_ctx.onnx")" -lt 16384 ]; then
  fail "--embed-fallback-initializers: the box head's weights are not in the _ctx.onnx"
else
  ok "--embed-fallback-initializers keeps them in the _ctx.onnx"
fi

# The row-independent ops behind a root (make_detector_head --rows): elementwise, Gather on rows, Concat along rows,
# MatMul and Gemm over rows, Softmax over a static axis, RoiAlign over the selected boxes, and TopK with k = the row
# count; on cpu all in one bounded program, run at 0 rows, 11 and the bound of 16 against ONNX Runtime.
# --rows-behind-if: the same ops reading the rows through an If (a fallback node, as torchvision's batched NMS): on cpu
# they compile into partitions whose input is bounded (docs/format/program.md#bounded-tensors), the If alone on
# the fallback path.
declare -A rowCounts=([none]=0 [some]=11 [all]=16)
rowsCase() {  # MODE NAME EXPECTED_CPU_COUNTS
  local mode="$1" name="$2" want="$3" rowsModel="$work/$2.onnx" target out set got dry real
  if ! made="$("$build/tests/oracle/make_detector_head" "$mode" "$rowsModel" "$work/${name}_in" 2>&1)"; then
    fail "make_detector_head $mode: $made"; return
  fi
  for target in npu-sim cpu; do
    out="$work/${name}_$target"
    if ! "$apps/ctxgen/ctxgen" "$rowsModel" --target "$target" -o "$out" --json "$out.json" -q >"$out.log" 2>&1; then
      fail "$name $target: ctxgen: $(cat "$out.log")"; continue
    fi
    "$apps/ctxgen/ctxgen" "$rowsModel" --target "$target" --dry-run --json "$out.dry.json" -q >/dev/null 2>&1
    dry="$(counts "$out.dry.json")" real="$(counts "$out.json")"
    if [ "$dry" != "$real" ]; then fail "$name $target: dry run counts $dry, the compile's $real"
    else ok "$name $target: dry run and compile agree: compiled fallback folded partitions $real"; fi
    if [ "$target" = cpu ] && [ "$real" != "$want" ]; then
      fail "$name cpu: compiled fallback folded partitions $real, expected $want"
    fi
    for set in none some all; do
      if ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$rowsModel" "$work/${name}_in/$set" "$out/ort_$set" 1 \
          >"$out/ort.log" 2>&1; then
        fail "$name $target $set: onnxruntime: $(cat "$out/ort.log")"; continue
      fi
      got="$(node -e 'const { readNpy } = require(process.argv[1]);
        console.log(readNpy(`${process.argv[2]}/output_0.npy`).shape[0]);' "$src/bench/npy.js" "$out/ort_$set")"
      if [ "$got" != "${rowCounts[$set]}" ]; then
        fail "$name $target $set: ONNX Runtime selected $got rows, the inputs are made for ${rowCounts[$set]}"; continue
      fi
      if "$apps/ctxrun/ctxrun" "$out/${name}_ctx.onnx" --inputs "$work/${name}_in/$set" --expected "$out/ort_$set" \
          >"$out/cmp.log" 2>&1; then
        ok "$name $target $set ($got rows): $(grep -h 'max |diff|' "$out/cmp.log" | sed 's/: match (max |diff| / /; s/)$//' | tr '\n' ' ')"
      else
        fail "$name $target $set ($got rows): $(cat "$out/cmp.log")"
      fi
    done
  done
}
rowsCase --rows bounded_rows "17 0 0 1"
rowsCase --rows-behind-if rows_behind_if "19 1 0 3"

echo "detector head: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
