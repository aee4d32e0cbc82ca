#!/usr/bin/env bash
# House rule (STYLE.md): the C++ of lib/ and apps/ is as .clang-format lays it out. Checks every such file (or only
# those that differ from the git revision BASE, when given) with clang-format-14 and names each file that differs;
# `--fix` rewrites them instead. Exit 1 when a file differs.
# usage: scripts/check_format.sh [--fix] [BASE]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=0
if [ "${1:-}" = "--fix" ]; then
  fix=1
  shift
fi
format=clang-format-14
command -v "$format" >/dev/null || { echo "ctxkit: error: $format is missing (apt install clang-format-14)" >&2; exit 1; }
if [ $# -gt 0 ]; then
  mapfile -t files < <(git diff --name-only --diff-filter=d "$1" -- 'lib/*.cpp' 'lib/*.h' 'apps/*.cpp' 'apps/*.h')
else
  mapfile -t files < <(git ls-files 'lib/*.cpp' 'lib/*.h' 'apps/*.cpp' 'apps/*.h')
fi
if [ "$fix" = 1 ]; then
  [ ${#files[@]} -eq 0 ] || "$format" -i "${files[@]}"
  echo "ctxkit: formatted ${#files[@]} files"
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  "$format" --dry-run -Werror "$f" >/dev/null 2>&1 || differ+=("$f")
done
if [ ${#differ[@]} -gt 0 ]; then
  echo "ctxkit: error: ${#differ[@]} of ${#files[@]} files are not laid out as .clang-format says (scripts/check_format.sh --fix):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
echo "ctxkit: format: ${#files[@]} files laid out as .clang-format says"
