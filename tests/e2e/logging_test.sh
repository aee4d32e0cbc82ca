#!/usr/bin/env bash
# The tools' diagnostics: results on stdout, diagnostics on stderr with "TOOL: severity:" prefixes; -v, -q and
# --log-level; ctxgen's one-line summary off a terminal and its progress display (bytes hashed and written, with
# rates) on one, here a pseudo-terminal made by script(1).
set -euo pipefail
ctxgen=$1 ctxinspect=$2 ctxrun=$3 samples=$4 work=$5

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# run NAME TOOL ARGS...: runs a tool with stdout and stderr in $work/NAME.out and .err, its exit code in $code.
run() {
  local name=$1
  shift
  code=0
  "$@" > "$work/$name.out" 2> "$work/$name.err" || code=$?
}
lines() { grep -c '' "$work/$1" || true; }

rm -rf "$work"
mkdir -p "$work"
model=$samples/tiny_cnn.onnx

# Off a terminal: the report on stdout, one summary line on stderr, no terminal control characters.
run plain "$ctxgen" "$model" -o "$work/plain"
[[ $code == 0 ]] || fail "ctxgen exit $code"
grep -q "^wrote $work/plain/tiny_cnn_ctx.onnx" "$work/plain.out" || fail "the report is not on stdout"
[[ $(lines plain.err) == 1 ]] || fail "stderr off a terminal is not one line: $(cat "$work/plain.err")"
bin_bytes=$(stat -c %s "$work/plain/tiny_cnn_ctxkit.bin")
onnx_bytes=$(stat -c %s "$work/plain/tiny_cnn_ctx.onnx")
total_kib=$(awk -v b=$((bin_bytes + onnx_bytes)) 'BEGIN { printf "%.1f KiB", b / 1024 }')
grep -qE "^ctxgen: compiled 1 model for npu-sim: 10 of 11 nodes in 1 partition; wrote 2 files, $total_kib; hashed [0-9.]+ KiB of weights; [0-9.]+ s$" \
  "$work/plain.err" || fail "summary line: $(cat "$work/plain.err") (files: $total_kib)"
if grep -q $'\e' "$work/plain.err" || grep -q $'\r' "$work/plain.err"; then fail "terminal control characters off a terminal"; fi

# The bytes hashed, as in the --json report: the pair's models hold the same weights, so dedupe finds every one's
# fingerprint twice and hashes both copies (every weight reference), and the writer hashes each stored weight again.
run pair "$ctxgen" "$samples/tiny_prefill.onnx,$samples/tiny_decode.onnx" --share -o "$work/pair" --json "$work/pair.json"
referenced=$(grep -o '"referenced_bytes": [0-9]*' "$work/pair.json" | grep -o '[0-9]*$')
stored=$(grep -o '"stored_bytes": [0-9]*' "$work/pair.json" | grep -o '[0-9]*$')
hashed=$(grep -o '"hashed_bytes": [0-9]*' "$work/pair.json" | grep -o '[0-9]*$')
[[ -n "$hashed" && "$hashed" == $((referenced + stored)) ]] ||
  fail "hashed_bytes '$hashed', expected referenced_bytes + stored_bytes '$referenced + $stored'"
hashed_kib=$(awk -v b="$hashed" 'BEGIN { printf "%.1f KiB", b / 1024 }')
grep -q "; hashed $hashed_kib of weights; " "$work/pair.err" || fail "the summary does not say $hashed_kib hashed: $(cat "$work/pair.err")"

# -q and --log-level error: errors only, and no report either.
for quiet in -q "--log-level error" "--log-level 3"; do
  # shellcheck disable=SC2086  # two words
  run quiet "$ctxgen" "$model" -o "$work/quiet" --force $quiet
  [[ $code == 0 && $(lines quiet.out) == 0 && $(lines quiet.err) == 0 ]] ||
    fail "ctxgen $quiet: exit $code, printed: $(cat "$work/quiet.out" "$work/quiet.err")"
done
# ...but an error is still printed, with the wording scripts grep for.
run quiet_error "$ctxgen" "$work/missing.onnx" -q
[[ $code == 1 ]] || fail "a missing model: exit $code"
grep -q "^ctxgen: error: .*missing.onnx" "$work/quiet_error.err" || fail "-q hid the error: $(cat "$work/quiet_error.err")"

# -v: each step on stderr, the per-partition detail on stdout.
run verbose "$ctxgen" "$model" -o "$work/verbose" -v
grep -q "^ctxgen: $model: loading$" "$work/verbose.err" || fail "-v does not show the steps: $(cat "$work/verbose.err")"
grep -q "^ctxgen: writing $work/verbose/tiny_cnn_ctxkit.bin$" "$work/verbose.err" || fail "-v does not show the files written"
grep -q "^  partition tiny_cnn_ctxkit_0: 10 nodes -> " "$work/verbose.out" || fail "-v does not print the partitions"
run level_verbose "$ctxgen" "$model" -o "$work/verbose" --force --log-level verbose
grep -q "^ctxgen: $model: loading$" "$work/level_verbose.err" || fail "--log-level verbose is not -v"

# Usage errors: exit 2, naming what is wrong.
for tool in "$ctxgen" "$ctxinspect" "$ctxrun"; do
  name=$(basename "$tool")
  run usage "$tool" "$model" --log-level loud
  [[ $code == 2 ]] || fail "$name --log-level loud: exit $code"
  grep -q "^$name: error: --log-level 'loud': expected one of verbose, info, warning, error, fatal" "$work/usage.err" ||
    fail "$name --log-level loud: $(cat "$work/usage.err")"
  run both "$tool" "$model" -v -q
  [[ $code == 2 ]] && grep -q "^$name: error: -v and -q contradict each other" "$work/both.err" ||
    fail "$name -v -q: exit $code, $(cat "$work/both.err")"
  run contradict "$tool" "$model" -q --log-level verbose
  [[ $code == 2 ]] && grep -q "^$name: error: --log-level verbose contradicts -q" "$work/contradict.err" ||
    fail "$name -q --log-level verbose: exit $code, $(cat "$work/contradict.err")"
done

# --help ends with worked examples and the exit codes (help2man makes the man pages from it).
for tool in "$ctxgen" "$ctxinspect" "$ctxrun"; do
  name=$(basename "$tool")
  run help "$tool" --help
  [[ $code == 0 ]] || fail "$name --help: exit $code"
  [[ $(grep -c "^  \$ $name " "$work/help.out") -ge 3 ]] || fail "$name --help shows fewer than 3 examples"
  for c in 0 1 2; do grep -q "^  $c  " "$work/help.out" || fail "$name --help does not explain exit code $c"; done
  grep -q -- "--log-level" "$work/help.out" || fail "$name --help does not list --log-level"
done

# ctxrun: results on stdout, nothing on stderr; a mismatch is an error even with -q.
"$ctxgen" "$model" -o "$work/npu_sim" -q || fail "ctxgen (npu-sim)"
ctx=$work/npu_sim/tiny_cnn_ctx.onnx
data=$samples/tiny_cnn/test_data_set_0
run ctxrun "$ctxrun" "$ctx" --inputs "$data" --expected "$data"
[[ $code == 0 && $(lines ctxrun.err) == 0 ]] || fail "ctxrun: exit $code, stderr: $(cat "$work/ctxrun.err")"
grep -q "^output 0 'logits': match" "$work/ctxrun.out" || fail "ctxrun's comparison is not on stdout"
grep -q ": 1 compiled node, 0 fallback nodes, 1 context binary; " "$work/ctxrun.out" || fail "ctxrun's summary: $(cat "$work/ctxrun.out")"
run ctxrun_verbose "$ctxrun" "$ctx" -v
grep -q "^ctxrun: loaded $ctx in [0-9.]* ms$" "$work/ctxrun_verbose.err" || fail "ctxrun -v: $(cat "$work/ctxrun_verbose.err")"
run mismatch "$ctxrun" "$ctx" --inputs "$data" --expected "$samples/tiny_prefill/test_data_set_0" -q
[[ $code == 1 ]] || fail "ctxrun on the wrong expected outputs: exit $code"
grep -q "^ctxrun: error: " "$work/mismatch.err" || fail "ctxrun -q hid the error"

# ctxinspect: the report on stdout; a problem is also an error line on stderr, which -q keeps.
mkdir -p "$work/broken"
cp "$ctx" "$work/broken/"
run inspect "$ctxinspect" "$work/broken/tiny_cnn_ctx.onnx" -q
[[ $code == 1 ]] || fail "ctxinspect on a missing .bin: exit $code"
grep -q "\[missing\]" "$work/inspect.out" || fail "ctxinspect's report does not flag the missing file"
[[ "$(cat "$work/inspect.err")" == "ctxinspect: error: 1 problem found (listed in the report)" ]] ||
  fail "ctxinspect stderr: $(cat "$work/inspect.err")"

# On a terminal: a progress line with bytes hashed and written and their rates, cleared before the summary.
if script -qec true /dev/null > /dev/null 2>&1; then
  script -qec "'$ctxgen' '$model' -o '$work/tty' > '$work/tty.out'" /dev/null > "$work/tty.log" 2>&1 ||
    fail "ctxgen on a terminal failed: $(cat "$work/tty.log")"
  grep -qE $'\r\e\\[K[^\r]*: loading \\| hashed 0 B \\(0 B/s\\), wrote 0 B \\(0 B/s\\)' "$work/tty.log" ||
    fail "no progress line for loading: $(cat -v "$work/tty.log")"
  grep -qE $'\r\e\\[Kwriting [^\r]*tiny_cnn_ctx.onnx \\| hashed [0-9.]+ KiB \\([0-9.]+ [KMG]?i?B/s\\), wrote [0-9.]+ KiB \\([0-9.]+ [KMG]?i?B/s\\)' \
    "$work/tty.log" || fail "the progress line does not show bytes hashed and written: $(cat -v "$work/tty.log")"
  grep -qE $'\r\e\\[Kctxgen: compiled 1 model for npu-sim' "$work/tty.log" || fail "the summary does not replace the progress line"
else
  echo "note: script(1) cannot make a pseudo-terminal here; the progress display is not checked"
fi

rm -rf "$work"
if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASSED"
