#!/usr/bin/env bash
# Makes (once) a virtual environment with one torch 2.x release and the
# libraries users train with, for recording ground truth on the CPU and for
# gpumem.torch's estimate without compute. Not used by `make run` or
# `make test`: CI runs on the recordings committed under tests/data/torch2/.
#
#   scripts/torch-venv.sh 2.15.0      # prints the venv's python
#   scripts/torch-venv.sh 2.10.0
#
# The venv lives in .venv/torch-VERSION (ignored by git). The library
# versions are pinned per torch release below so that a recording says
# exactly which code made it.
set -euo pipefail

version=${1:?usage: scripts/torch-venv.sh TORCH_VERSION (2.15.0 or 2.10.0)}
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv/torch-$version"

case "$version" in
  2.15.0) extra=(transformers==5.25.0 peft==0.22.0 accelerate safetensors torchvision==0.29.2 onnx) ;;
  # A year older: the releases current in early 2026.
  2.10.0) extra=(transformers==4.57.6 peft==0.17.1 accelerate safetensors torchvision==0.25.0 onnx) ;;
  *) echo "scripts/torch-venv.sh: no pinned library set for torch $version (2.15.0, 2.10.0)" >&2; exit 2 ;;
esac

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch, torchvision, transformers, peft, pytest, onnx" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q "torch==$version" numpy pytest "${extra[@]}" >&2
fi
echo "$venv/bin/python"
