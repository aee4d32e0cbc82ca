# Bash completion for ctxgen, ctxinspect and ctxrun, installed once under each tool's name.
# The options come from the tool's own --help, so completion stays in step with the tool.

# The names at the start of each line of the Options section: "  -o,--output-dir TEXT  ..." gives -o, --output-dir.
_ctxkit_options() {
  "$1" --help 2> /dev/null | sed -n '/^Options:/,/^$/p' | grep -oE -- '^ +-[-A-Za-z0-9,]*' | tr -d ' ' | tr ',' '\n' |
    sort -u
}

_ctxkit_complete() {
  local cur prev tool
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  tool=${COMP_WORDS[0]}

  case "$prev" in
    --log-level)
      mapfile -t COMPREPLY < <(compgen -W "verbose info warning error fatal" -- "$cur")
      return ;;
    --embed-mode)
      mapfile -t COMPREPLY < <(compgen -W "0 1" -- "$cur")
      return ;;
    --target)
      mapfile -t COMPREPLY < <(compgen -W "npu-sim cpu" -- "$cur"; compgen -f -X '!*.json' -- "$cur"; compgen -d -- "$cur")
      return ;;
    --print-target)
      mapfile -t COMPREPLY < <(compgen -W "npu-sim cpu" -- "$cur")
      return ;;
    -o | --output-dir | --inputs | --expected | --save-inputs)
      mapfile -t COMPREPLY < <(compgen -d -- "$cur")
      return ;;
    --json)
      # ctxgen --json takes FILE or -; ctxinspect and ctxrun --json is a flag.
      if [[ "${tool##*/}" == ctxgen ]]; then
        mapfile -t COMPREPLY < <(compgen -W "-" -- "$cur"; compgen -f -- "$cur")
        return
      fi ;;
    --dot | --depfile | --external-initializers-file | --context-file-path | --prompt-ids)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return ;;
    -C | --config | --dim | --shape | --variant | --set | --node-name-prefix | --seed | --iters | --threads | \
      --parallel-runs | --sessions | --rtol | --atol | --dump-after | --stop-after | --generate | --kv)
      return ;;
  esac

  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_ctxkit_options "$tool")" -- "$cur")
    return
  fi
  # Models: .onnx files and folders to descend into.
  mapfile -t COMPREPLY < <(compgen -f -X '!*.onnx' -- "$cur"; compgen -d -- "$cur")
  compopt -o filenames 2> /dev/null || true
}

complete -F _ctxkit_complete ctxgen ctxinspect ctxrun
