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
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then ctx_skip "$@"; fi
