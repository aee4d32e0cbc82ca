#!/usr/bin/env bash
# The main job on the bundled samples: compile the prefill/decode pair with --share, inspect, run and check.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ctxkit_install_deps
ctxkit_build -DCTXKIT_BUILD_TESTS=OFF

# Paths relative to the build folder keep the printed reports short.
cd "$CTXKIT_BUILD"
bin=apps samples=samples out=demo
rm -rf "$out"
ctxgen="$bin/ctxgen/ctxgen" ctxinspect="$bin/ctxinspect/ctxinspect" ctxrun="$bin/ctxrun/ctxrun"

step() { printf '\n== %s\n' "$*"; }

step "Compile the prefill/decode pair into two _ctx.onnx models sharing one context binary"
"$ctxgen" "$samples/tiny_prefill.onnx,$samples/tiny_decode.onnx" --share -o "$out"

step "Inspect the deployment files and verify every weight hash"
"$ctxinspect" "$out/tiny_prefill_ctx.onnx" "$out/tiny_decode_ctx.onnx" --verify

step "Run both compiled models and compare with the independently computed expected outputs"
for m in tiny_prefill tiny_decode; do
  "$ctxrun" "$out/${m}_ctx.onnx" --inputs "$samples/$m/test_data_set_0" --expected "$samples/$m/test_data_set_0"
done

step "Compile and run the CNN sample"
"$ctxgen" "$samples/tiny_cnn.onnx" -o "$out"
"$ctxrun" "$out/tiny_cnn_ctx.onnx" --inputs "$samples/tiny_cnn/test_data_set_0" --expected "$samples/tiny_cnn/test_data_set_0"

printf '\n'
echo "demo: all outputs match the independently computed expected outputs (files in $CTXKIT_BUILD/$out)"
echo "demo: more in docs/guide.md, and in ctxgen --help, ctxinspect --help, ctxrun --help"
