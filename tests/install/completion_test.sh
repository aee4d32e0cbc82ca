#!/usr/bin/env bash
# Drives the bash completion (share/bash-completion/ctxkit.bash) as bash would, against the built tools, and checks
# what it offers against what the tools accept: their options, log levels, embed modes and built-in targets.
set -euo pipefail
completion=$1 tools_path=$2 work=$3
export PATH="$tools_path:$PATH"
# shellcheck source=/dev/null
source "$completion"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# offers WORD...: the completions for the command line WORD... (the last word is the one being completed).
offers() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  _ctxkit_complete 2> /dev/null
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
has() {  # has WHAT WORD LIST...
  local what=$1 word=$2
  shift 2
  [[ " $* " == *" $word "* ]] || fail "$what: '$word' not offered (got: $*)"
}

rm -rf "$work"
mkdir -p "$work/sub"
cd "$work"
touch a.onnx b.txt my-npu.json

for tool in ctxgen ctxinspect ctxrun; do
  all=$(offers "$tool" --)
  for opt in --help --version --verbose --quiet --log-level; do has "$tool --" "$opt" $all; done
  # Every long option the tool documents is offered.
  documented=$("$tool" --help | grep -oE '^ +(-[A-Za-z],)?--[a-z][a-z0-9-]*' | sed 's/.*--/--/' | sort -u | tr '\n' ' ')
  for opt in $documented; do has "$tool --" "$opt" $all; done
  levels=$(offers "$tool" --log-level "")
  [[ "$levels" == "error fatal info verbose warning " ]] || fail "$tool --log-level offers [$levels]"
  for level in $levels; do
    "$tool" --log-level "$level" --version > /dev/null || fail "$tool does not accept --log-level $level"
  done
  has "$tool models" a.onnx $(offers "$tool" "")
  [[ " $(offers "$tool" "") " != *" b.txt "* ]] || fail "$tool offers b.txt as a model"
done
has "ctxgen --" --share $(offers ctxgen --)
has "ctxrun --" --expected $(offers ctxrun --)
[[ " $(offers ctxinspect --) " != *" --share "* ]] || fail "ctxinspect is offered ctxgen's --share"
[[ "$(offers ctxgen --embed-mode "")" == "0 1 " ]] || fail "--embed-mode offers [$(offers ctxgen --embed-mode "")]"
# The built-in targets offered are the ones ctxgen lists, plus target files.
builtin=$(ctxgen --list-targets | awk '{print $1}' | sort | tr '\n' ' ')
targets=$(offers ctxgen --target "")
for t in $builtin my-npu.json; do has "ctxgen --target" "$t" $targets; done
[[ "$(offers ctxgen --print-target "")" == "$builtin" ]] || fail "--print-target offers [$(offers ctxgen --print-target "")], ctxgen lists [$builtin]"
has "ctxgen -o" sub $(offers ctxgen -o "")

cd /
rm -rf "$work"
if ((failures > 0)); then
  echo "$failures completion check(s) failed"
  exit 1
fi
echo "PASSED"
