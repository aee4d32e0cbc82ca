#!/usr/bin/env bash
# Exports the PyTorch corpus (scripts/export_corpus.py: torchvision classifiers of 10 architectures, ConvNeXt, Swin
# and ViT, two segmenters, three detectors (SSD, Faster R-CNN, FCOS), wav2vec2, a Conformer, Conv-TasNet, an
# LSTM/GRU tagger, a BERT-like encoder, an encoder-decoder transformer, a Llama-style prefill/decode pair) into the
# cache folder (default
# .cache/corpus-torch, not in git). Safe to run again: models exported by the same script are kept. Uses the first
# interpreter that imports torch, torchvision and torchaudio (Debian's /usr/bin/python3 with python3-torch,
# python3-torchvision, python3-torchaudio; a pyenv python3 on PATH usually lacks them). Exits 0 with a notice when
# there is none, so the test that needs the corpus skips (or fails under CI) instead.
# usage: scripts/export_corpus.sh [NAME...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CTXKIT_CACHE:-$root/.cache}"
python=""
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import torch, torchvision, torchaudio' >/dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "ctxkit: no python3 imports torch, torchvision and torchaudio: the PyTorch corpus is not exported and its" \
    "test will skip (install python3-torch python3-torchvision python3-torchaudio)"
  exit 0
fi
start=$SECONDS
"$python" "$root/scripts/export_corpus.py" "$cache/corpus-torch" "$@"
echo "ctxkit: PyTorch corpus ready in $cache/corpus-torch ($((SECONDS - start)) s)"
