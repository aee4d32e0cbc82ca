#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (unit, end-to-end, ONNX conformance).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctxkit_install_deps
ctxkit_build -DCTXKIT_BUILD_TESTS=ON
ctest --test-dir "$CTXKIT_BUILD" --output-on-failure -j "$(nproc)"
