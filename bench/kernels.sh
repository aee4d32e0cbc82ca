#!/usr/bin/env bash
# Times one-op kernel models (depthwise/3x3 Conv, pooling, fused activations) with ctxrun and ONNX Runtime 1.30,
# one thread, same inputs, and prints median run times and ratios (ctxkit / ORT) over REPEATS runs of ITERS.
# usage: bench/kernels.sh [ITERS] [REPEATS] [NAME_FILTER]   (needs a build with ctxgen, ctxrun and the
# make_kernel_models target; CTXKIT_BUILD selects it, default build/; CTXKIT_APPS=DIR times the ctxgen/ and
# ctxrun/ binaries under DIR instead, e.g. a copy kept from before a change)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CTXKIT_BUILD:-$root/build}"
cache="${CTXKIT_CACHE:-$root/.cache}"
iters="${1:-200}"
repeats="${2:-3}"
filter="${3:-}"
ort_dir="$cache/onnxruntime-node-1.30.0"
[[ -d "$ort_dir/node_modules" ]] || CTXKIT_CACHE="$cache" "$root/scripts/fetch_test_assets.sh"
apps="${CTXKIT_APPS:-$build/apps}"
cmake --build "$build" --target make_kernel_models $([[ -n "${CTXKIT_APPS:-}" ]] || echo ctxgen ctxrun) >/dev/null
work="$build/bench-kernels"
rm -rf "$work" && mkdir -p "$work"
"$build/tests/kernels/make_kernel_models" "$work"
printf '%-22s %10s %10s %8s  %s\n' model ort_ms ctx_ms ratio outputs
for model in "$work"/*.onnx; do
  m="$(basename "$model" .onnx)"
  [[ "$m" == gridsample_* ]] && continue  # correctness models for the oracle (non-finite grid values), not timed
  [[ -z "$filter" || "$m" == *$filter* ]] || continue
  "$apps/ctxgen/ctxgen" "$model" --target cpu -o "$work/ctx" -q
  ort=() ctx=() ok=match
  for ((r = 0; r < repeats; ++r)); do
    ort+=("$(NODE_PATH="$ort_dir/node_modules" node "$root/bench/run_ort.js" "$model" "$work/$m" "$work/$m.ort" \
      "$iters")")
    ctx+=("$("$apps/ctxrun/ctxrun" "$work/ctx/${m}_ctx.onnx" --inputs "$work/$m" --expected "$work/$m.ort" \
      --iters "$iters" --threads 1 --atol 1e-4 --json)")
  done
  python3 - "$m" "${#ort[@]}" "${ort[@]}" "${ctx[@]}" <<'PY'
import json, statistics, sys
m, n = sys.argv[1], int(sys.argv[2])
ort = [json.loads(s)["median_ms"] for s in sys.argv[3:3 + n]]
runs = [json.loads(s) for s in sys.argv[3 + n:]]
ctx = [c["median_ms"] for c in runs]
o, c = statistics.median(ort), statistics.median(ctx)
verdict = "match ORT" if all(r["ok"] for r in runs) else "MISMATCH"
print(f"{m:<22} {o:10.3f} {c:10.3f} {c / o:8.2f}  {verdict}")
PY
done
