#!/usr/bin/env bash
# ctest python_torch_trace: gpumem.torch.estimate's traced step (torch 2.x,
# fake tensors) against real CPU steps, in each torch 2.x venv that
# scripts/torch-venv.sh has made (.venv/torch-VERSION). CI's machine has
# none (torch 2.x with its CUDA libraries is gigabytes), so there the test
# is skipped, saying so; tests/train/test_traced_step.cpp checks the
# committed recordings of the same steps (tests/data/torch2) instead.
set -euo pipefail
source_dir=${1:?usage: python_torch2.sh SOURCE_DIR}
ran=0
for python in "$source_dir"/.venv/torch-2.*/bin/python; do
  [[ -x $python ]] || continue
  echo "== $python"
  "$python" -m pytest -q -p no:cacheprovider "$source_dir/bindings/python/tests/test_torch_trace.py"
  ran=1
done
if ((ran == 0)); then
  echo "SKIPPED: no torch 2.x venv (scripts/torch-venv.sh 2.15.0 makes one); the traced steps are checked on"
  echo "the committed recordings by train_tests (TracedStep.*)"
  exit 77
fi
