#!/usr/bin/env bash
# Elided Concats against ONNX Runtime (docs/compiler.md#concat-elision): the CNN of make_concat_net.cpp (a fire
# module, two DenseNet-style blocks with a transition, an Inception-style Concat nested in another; two Concats that
# must stay copies) is compiled for cpu, where plan-memory must report its 10 elided Concats and the program keep the
# 2 copies, and run at 1 and 2 threads on seeded inputs; each run must match ONNX Runtime 1.30 running the source
# model on the same bytes (rtol 1e-3, atol 1e-5: ctxrun's defaults).
# Exits 77 (CTest's skip code) when ONNX Runtime is absent, saying why, or fails when CI is set (tests/common/skip.sh).
# usage: concat_elision.sh BUILD_DIR CACHE_DIR SOURCE_DIR
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

model="$work/concat_net.onnx"
if ! made="$("$build/tests/oracle/make_concat_net" "$model" 2>&1)"; then
  echo "FAIL make_concat_net: $made"
  exit 1
fi
out="$work/cpu"
if ! "$apps/ctxgen/ctxgen" "$model" --target cpu -o "$out" --json "$work/gen.json" -q >"$work/gen.log" 2>&1; then
  echo "FAIL ctxgen: $(cat "$work/gen.log")"
  exit 1
fi
counts="$(node -e '
  const j = require(process.argv[1]);
  const pass = j.passes.find(p => p.name === "plan-memory") || { counts: {} };
  const m = j.models[0];
  console.log(pass.counts.concats_elided || 0, m.partitions.length, m.fallback_nodes);' "$work/gen.json" 2>&1)"
if [ "$counts" = "10 1 0" ]; then
  ok "plan-memory elided 10 Concats in one partition"
else
  fail "elided Concats, partitions, fallback nodes: $counts (expected 10 1 0)"
fi
# The program keeps the two copies and the Concat writing the output: three Concat ops.
if "$apps/ctxgen/ctxgen" "$model" --target cpu -o "$work/again" --dump >"$work/dump.txt" 2>&1; then
  kept="$(grep -c "= Concat(" "$work/dump.txt")"
  [ "$kept" = 3 ] && ok "three Concats stay copies" || fail "$kept Concat ops in the program, expected 3"
else
  fail "ctxgen --dump: $(cat "$work/dump.txt")"
fi
ctx="$out/concat_net_ctx.onnx"
if ! "$apps/ctxrun/ctxrun" "$ctx" --seed 7 --save-inputs "$work/in" >"$work/run.log" 2>&1; then
  fail "ctxrun: $(cat "$work/run.log")"
elif ! NODE_PATH="$ort" node "$src/bench/run_ort.js" "$model" "$work/in" "$work/ort" 1 >"$work/ort.log" 2>&1; then
  fail "onnxruntime: $(cat "$work/ort.log")"
else
  for threads in 1 2; do
    if "$apps/ctxrun/ctxrun" "$ctx" --inputs "$work/in" --expected "$work/ort" --threads "$threads" \
        >"$work/cmp$threads.log" 2>&1; then
      ok "$threads thread(s): matches ONNX Runtime"
    else
      fail "$threads thread(s): $(cat "$work/cmp$threads.log")"
    fi
  done
fi
echo "concat elision: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
