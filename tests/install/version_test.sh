#!/usr/bin/env bash
# Checks that project(ctxkit VERSION) reaches every place a version is shown: the three tools' --version, the
# EPContext ep_sdk_version and the .bin producer version of a compiled model, the CMake package version file and
# the pkg-config file. (The plugin EP's version is checked against the same value in tests/ort_ep.)
set -euo pipefail
version=$1 ctxgen=$2 ctxinspect=$3 ctxrun=$4 model=$5 build=$6 work=$7

failures=0
check() {  # check WHAT FOUND
  if [[ "$2" == "$version" ]]; then
    echo "ok: $1 is $version"
  else
    echo "FAIL: $1 is '$2', project(VERSION) is '$version'"
    failures=$((failures + 1))
  fi
}

for tool in "$ctxgen" "$ctxinspect" "$ctxrun"; do
  name=$(basename "$tool")
  out=$("$tool" --version)
  check "$name --version" "${out#"$name "}"
done

rm -rf "$work"
mkdir -p "$work"
"$ctxgen" "$model" -o "$work/out" > /dev/null
ctx="$work/out/$(basename "${model%.*}")_ctx.onnx"
json=$("$ctxinspect" "$ctx" --json)
sdk=$(grep -o '"ep_sdk_version": *"[^"]*"' <<< "$json" | sed 's/.*: *"\(.*\)"/\1/' | sort -u)
check "ep_sdk_version of the compiled model" "$sdk"
producer=$(grep -o '"producer_version": *"[^"]*"' <<< "$json" | sed 's/.*: *"\(.*\)"/\1/' | sort -u)
check "producer_version of its context binary" "$producer"

config_version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/cmake/ctxkitConfigVersion.cmake")
check "ctxkitConfigVersion.cmake" "$config_version"
pc_version=$(sed -n 's/^Version: //p' "$build/cmake/ctxkit.pc")
check "ctxkit.pc" "$pc_version"

rm -rf "$work"
if ((failures > 0)); then
  echo "$failures version(s) disagree"
  exit 1
fi
