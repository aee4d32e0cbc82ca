#!/usr/bin/env bash
# Compiles the bundled samples, runs them with ctxrun and with ONNX Runtime (installed from npm into a cache)
# on the same inputs, checks ctxrun's outputs against ORT's, and prints load and run time ratios.
# usage: bench/compare_ort.sh [ITERS]   (needs a build: ./scripts/demo.sh or ./scripts/test.sh first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
iters="${1:-50}"
ort_dir="$cache/onnxruntime-node-1.30.0"
CTXKIT_CACHE="$cache" "$root/scripts/fetch_test_assets.sh"
work="$build/bench"
rm -rf "$work" && mkdir -p "$work"
apps="$build/apps"
samples="$build/samples"
"$apps/ctxgen/ctxgen" "$samples/tiny_prefill.onnx,$samples/tiny_decode.onnx" --share -o "$work" -q
"$apps/ctxgen/ctxgen" "$samples/tiny_cnn.onnx" -o "$work" -q
printf '%-14s %10s %10s %8s %10s %10s %8s  %s\n' model ort_load ctx_load ratio ort_run ctx_run ratio outputs
for m in tiny_prefill tiny_decode tiny_cnn; do
  data="$samples/$m/test_data_set_0"
  ort_json=$(NODE_PATH="$ort_dir/node_modules" node "$root/bench/run_ort.js" "$samples/$m.onnx" "$data" "$work/$m.ort" "$iters")
  ctx_json=$("$apps/ctxrun/ctxrun" "$work/${m}_ctx.onnx" --inputs "$data" --expected "$work/$m.ort" --iters "$iters" --json)
  python3 - "$m" "$ort_json" "$ctx_json" <<'PY'
import json, sys
m, o, c = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
verdict = "match ORT" if c["ok"] else "MISMATCH"
print(f"{m:<14} {o['load_ms']:9.2f}ms {c['load_ms']:9.2f}ms {c['load_ms']/o['load_ms']:8.3f} {o['median_ms']:9.3f}ms {c['median_ms']:9.3f}ms {c['median_ms']/o['median_ms']:8.3f}  {verdict}")
PY
done
