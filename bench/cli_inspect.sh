#!/usr/bin/env bash
# Times the whole `gpumem inspect` process (start-up, load, inference,
# report) on a model, N runs, and prints the median and the spread.
#   bench/cli_inspect.sh [MODEL] [RUNS]      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-examples/models/bert_base.onnx}
runs=${2:-21}
bin=${GPUMEM_BIN:-build/gpumem}
times=()
for ((i = 0; i < runs; i++)); do
  start=$(date +%s%N)
  "$bin" inspect "$model" --json > /dev/null
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
median=${sorted[$((runs / 2))]}
printf 'gpumem inspect %s: median %.1f ms, min %.1f ms, max %.1f ms over %d runs\n' "$model" \
  "$(echo "$median / 1000" | bc -l)" "$(echo "${sorted[0]} / 1000" | bc -l)" \
  "$(echo "${sorted[$((runs - 1))]} / 1000" | bc -l)" "$runs"
