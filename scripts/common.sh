#!/usr/bin/env bash
# Shared steps for the README commands: install missing Debian packages, configure and build.
set -euo pipefail

CTXKIT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CTXKIT_BUILD="${CTXKIT_BUILD:-$CTXKIT_ROOT/build}"
CTXKIT_PACKAGES=(cmake ninja-build g++ pkg-config libonnx-dev libprotobuf-dev protobuf-compiler libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libxxhash-dev catch2 help2man clang-format-14)

# ctxkit_install_packages PKG...: installs the named Debian packages that are missing. Returns 1 (after
# saying why) when they are missing and cannot be installed.
ctxkit_install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "ctxkit: Debian packages present: $*"
    return 0
  fi
  echo "ctxkit: installing ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "ctxkit: error: packages missing (${missing[*]}) and not root; install them as root or install sudo" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q || return 1
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" || return 1
}

ctxkit_install_deps() {
  ctxkit_install_packages "${CTXKIT_PACKAGES[@]}" || exit 1
}

# The clang-14 tree with AddressSanitizer + UndefinedBehaviorSanitizer (-O1, asserts on): scripts/fuzz.sh builds the
# libFuzzer targets in it and scripts/test.sh the whole suite too, so that every library is compiled once (with
# libFuzzer's coverage hooks, fuzzer-no-link) for both. libctxkit_ep.so is left out (ONNX Runtime, which loads it,
# is not instrumented). clang does not know the kernels' `#pragma GCC ivdep`; that warning must not stop this build.
CTXKIT_SAN_BUILD="${CTXKIT_FUZZ_BUILD:-$CTXKIT_ROOT/build-fuzz}"
ctxkit_configure_sanitizer_tree() {
  CXX=clang++-14 cmake -S "$CTXKIT_ROOT" -B "$CTXKIT_SAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-Wno-error=unknown-pragmas" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCTXKIT_FUZZ=ON -DCTXKIT_BUILD_TESTS=ON -DCTXKIT_SANITIZE=fuzzer-no-link,address,undefined \
    -DCTXKIT_BUILD_ORT_EP=OFF >/dev/null
}

ctxkit_build() {
  cmake -S "$CTXKIT_ROOT" -B "$CTXKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$CTXKIT_BUILD" -j "$(nproc)"
}
