#!/usr/bin/env bash
# skip.sh MESSAGE...: the way out of a test whose material is missing. Prints "skipped: MESSAGE" and exits 77
# (CTest's skip code, set as SKIP_RETURN_CODE), except when CI is set (to anything but "", 0 or false): then it
# prints FAIL and exits 1, so a CI run cannot pass by skipping. Shell tests source it and call ctx_skip; CMake
# runs it directly.
ctx_skip() {
  case "${CI:-}" in
    "" | 0 | false)
      echo "skipped: $*"
      exit 77
      ;;
    *)
      echo "FAIL: $* (CI is set: the material must be present)"
      exit 1
      ;;
  esac
}
# ctx_require_ort NODE_MODULES: skips (as above) unless ONNX Runtime from npm is in NODE_MODULES and Node.js runs.
ctx_require_ort() {
  if [ ! -e "$1/onnxruntime-node/package.json" ]; then
    ctx_skip "$1/onnxruntime-node is missing (run scripts/fetch_test_assets.sh; it needs Node.js, npm and the npm" \
      "registry)"
  fi
  command -v node >/dev/null || ctx_skip "Node.js is not installed"
}
# ctx_oracle_setup BUILD_DIR CACHE_DIR SOURCE_DIR: the oracle scripts' arguments as build, cache and src, ONNX
# Runtime's node_modules as ort and the PyTorch corpus as corpus; skips (as above) unless ONNX Runtime is there.
ctx_oracle_setup() {
  build="$1" cache="$2" src="$3"
  ort="$cache/onnxruntime-node-1.30.0/node_modules"
  corpus="$cache/corpus-torch"
  ctx_require_ort "$ort"
}
# ctx_require_corpus NAME...: skips (as above) unless each PyTorch corpus model NAME has been exported.
ctx_require_corpus() {
  local m
  for m in "$@"; do
    [ -e "$corpus/$m/meta.json" ] || ctx_skip "$corpus/$m is missing (run scripts/export_corpus.sh; it needs" \
      "python3-torch, python3-torchvision and python3-torchaudio)"
  done
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then ctx_skip "$@"; fi
