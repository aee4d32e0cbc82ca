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

ctxkit_build() {
  cmake -S "$CTXKIT_ROOT" -B "$CTXKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$CTXKIT_BUILD" -j "$(nproc)"
}
