#!/usr/bin/env bash
# Installs ctxkit into a temporary prefix, builds samples/cmake_consumer against it with Ninja (then Make), runs its
# app, and checks incremental rebuilds: a second build does nothing, and touching a model, its external data file or
# the target JSON (or changing the arguments) reruns exactly the ctxkit_compile command that reads it.
set -euo pipefail
build=$1 source=$2 samples=$3 make_external=$4 work=$5 libdir=$6 with_ep=$7 with_man=${8:-0}

fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$work"
mkdir -p "$work/models"
prefix=$work/prefix

echo "== cmake --install into a temporary prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/ctxgen bin/ctxinspect bin/ctxrun $libdir/libctxkit_runtime.a $libdir/libctxkit_runtime_core.a \
  include/ctxkit/runtime/session.h include/ctxkit/ir/ops.def include/ctxkit/epcontext/version.h \
  $libdir/cmake/ctxkit/ctxkitConfig.cmake $libdir/cmake/ctxkit/ctxkitConfigVersion.cmake \
  $libdir/cmake/ctxkit/ctxkitTargets.cmake $libdir/cmake/ctxkit/ctxkitCompile.cmake $libdir/pkgconfig/ctxkit.pc; do
  [[ -e "$prefix/$f" ]] || fail "cmake --install did not write $f"
done
if [[ "$with_ep" == 1 ]]; then
  [[ -e "$prefix/$libdir/libctxkit_ep.so" ]] || fail "the plugin EP library was built but not installed"
  grep -q 'ctxkit_EP_LIBRARY' "$prefix/$libdir/cmake/ctxkit/ctxkitConfig.cmake" || fail "the package does not name the plugin EP"
else
  [[ ! -e "$prefix/$libdir/libctxkit_ep.so" ]] || fail "libctxkit_ep.so was installed but not built"
fi
# Headers that need onnx or protobuf stay private: a consumer compiles against ctxkit's headers and fmt only.
if grep -rlE '#include <(onnx|google)/' "$prefix/include/ctxkit"; then fail "an installed header includes onnx or protobuf"; fi
"$prefix/bin/ctxgen" --version
# Man pages (when help2man was there at configure time) and bash completion for the three tools.
for tool in ctxgen ctxinspect ctxrun; do
  if [[ "$with_man" == 1 ]]; then
    page=$prefix/share/man/man1/$tool.1
    [[ -s "$page" ]] || fail "cmake --install did not write the man page share/man/man1/$tool.1"
    grep -q '^\.SH "EXIT CODES"\|^\.SS "Exit codes:"\|Exit codes' "$page" || fail "$tool.1 has no exit codes"
    grep -q -- 'log\\-level' "$page" || fail "$tool.1 does not list --log-level"
  fi
  completion=$prefix/share/bash-completion/completions/$tool
  [[ -s "$completion" ]] || fail "cmake --install did not write share/bash-completion/completions/$tool"
  bash -c "source '$completion' && complete -p $tool" > /dev/null || fail "$completion does not register $tool"
done

echo "== models: two sharing weights, one with external data and a target JSON"
cp "$samples/tiny_prefill.onnx" "$samples/tiny_decode.onnx" "$work/models/"
"$make_external" "$samples/tiny_cnn.onnx" "$work/models/cnn.onnx" cnn.data
[[ -e "$work/models/cnn.data" ]] || fail "no external data file was written"
# No Gemm: the CNN keeps a fallback node, so the compiled model also reads initializers at run time.
echo '{"name":"nogemm","element_types":["float32"],"ops":[{"op":"Conv"},{"op":"BatchNormalization"},{"op":"Relu"},{"op":"MaxPool"}]}' \
  > "$work/models/nogemm.json"

echo "== configure and build samples/cmake_consumer"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -G Ninja -S "$source/samples/cmake_consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DMODELS_DIR="$work/models" -DEXTRA_MODEL="$work/models/cnn.onnx" \
  -DEXTRA_TARGET="$work/models/nogemm.json" "${launcher[@]}" > "$work/configure.log" ||
  { cat "$work/configure.log"; fail "the example does not configure"; }

# build EXPECTED...: builds $tree, and checks which ctxkit_compile commands ran (none: nothing at all is done).
tree=$work/build
build() {
  local log
  log=$(cmake --build "$tree" 2>&1) || { echo "$log"; fail "the build failed"; }
  local ran
  ran=$(grep -o 'ctxkit_compile([a-z]*)' <<< "$log" | sort | tr '\n' ' ' || true)
  local want="$*"
  if [[ -z "$want" ]]; then
    # Ninja says so; Make names no compile, link or custom command step.
    if ! grep -q "ninja: no work to do" <<< "$log" && grep -qE "ctxkit_compile|Building|Linking" <<< "$log"; then
      echo "$log"
      fail "a build with nothing changed did work"
    fi
  elif [[ "$ran" != "$want " ]]; then
    echo "$log"
    fail "expected exactly [$want] to run, got [$ran]"
  fi
  if [[ -z "$want" ]]; then echo "ok: no work to do"; else echo "ok: ran [${ran% }]"; fi
}

build "ctxkit_compile(extra) ctxkit_compile(transformer)"
outs=$(cd "$work/build/transformer" && ls | tr '\n' ' ')
[[ "$outs" == "tiny_decode_ctx.onnx tiny_prefill_ctx.onnx tiny_prefill_ctxkit.bin " ]] ||
  fail "SHARE wrote [$outs], expected two _ctx.onnx and one .bin"

echo "== run the app on the compiled models"
data() { echo "$samples/$1/test_data_set_0/input_0.npy $samples/$1/test_data_set_0/output_0.npy"; }
# shellcheck disable=SC2046  # data() yields two paths
"$work/build/run_models" "$work/build/transformer/tiny_prefill_ctx.onnx" $(data tiny_prefill) \
  "$work/build/transformer/tiny_decode_ctx.onnx" $(data tiny_decode) "$work/build/extra/cnn_ctx.onnx" $(data tiny_cnn) |
  tee "$work/run.log"
[[ $(grep -c ': ok ' "$work/run.log") == 3 ]] || fail "the app did not check all three models"

echo "== incremental builds"
build
touch "$work/models/tiny_decode.onnx"
build "ctxkit_compile(transformer)"
build
touch "$work/models/cnn.data"
build "ctxkit_compile(extra)"
build
touch "$work/models/nogemm.json"
build "ctxkit_compile(extra)"
build
# Other arguments: CMake regenerates, and only the command whose arguments changed reruns.
cmake "$work/build" -DEXTRA_TARGET=cpu > /dev/null
build "ctxkit_compile(extra)"
build

echo "== the same with Make"
tree=$work/build-make
cmake -G "Unix Makefiles" -S "$source/samples/cmake_consumer" -B "$tree" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DMODELS_DIR="$work/models" -DEXTRA_MODEL="$work/models/cnn.onnx" \
  -DEXTRA_TARGET="$work/models/nogemm.json" "${launcher[@]}" > "$work/configure-make.log" ||
  { cat "$work/configure-make.log"; fail "the example does not configure for Make"; }
build "ctxkit_compile(extra) ctxkit_compile(transformer)"
build
touch "$work/models/tiny_prefill.onnx"
build "ctxkit_compile(transformer)"
touch "$work/models/cnn.data"
build "ctxkit_compile(extra)"
touch "$work/models/nogemm.json"
build "ctxkit_compile(extra)"
cmake "$tree" -DEXTRA_TARGET=npu-sim > /dev/null
build "ctxkit_compile(extra)"
build

echo "== the pkg-config file builds the same app"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
# shellcheck disable=SC2046  # pkg-config prints several flags
c++ -std=c++20 -O1 -o "$work/run_models_pc" "$source/samples/cmake_consumer/run_models.cpp" \
  $(pkg-config --cflags --libs ctxkit) || fail "the app does not build with pkg-config's flags"
# shellcheck disable=SC2046
"$work/run_models_pc" "$work/build/transformer/tiny_decode_ctx.onnx" $(data tiny_decode)

rm -rf "$work"
echo "PASSED"
