#!/usr/bin/env bash
# The main job on the bundled samples: compile the prefill/decode pair with --share, inspect, run and check.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctxkit_install_deps
ctxkit_build -DCTXKIT_BUILD_TESTS=OFF

bin="$CTXKIT_BUILD/apps"
samples="$CTXKIT_BUILD/samples"
out="$CTXKIT_BUILD/demo"
rm -rf "$out"
set -x
"$bin/ctxgen/ctxgen" "$samples/tiny_prefill.onnx,$samples/tiny_decode.onnx" --share -o "$out"
"$bin/ctxinspect/ctxinspect" "$out/tiny_prefill_ctx.onnx" "$out/tiny_decode_ctx.onnx" --verify
for m in tiny_prefill tiny_decode; do
  "$bin/ctxrun/ctxrun" "$out/${m}_ctx.onnx" --inputs "$samples/$m/test_data_set_0" --expected "$samples/$m/test_data_set_0"
done
"$bin/ctxgen/ctxgen" "$samples/tiny_cnn.onnx" -o "$out"
"$bin/ctxrun/ctxrun" "$out/tiny_cnn_ctx.onnx" --inputs "$samples/tiny_cnn/test_data_set_0" --expected "$samples/tiny_cnn/test_data_set_0"
{ set +x; } 2>/dev/null
echo "demo: all outputs match the independently computed expected outputs"
