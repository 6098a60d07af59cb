#!/usr/bin/env bash
# Times whole `gpumem plan CSV --gpu C` processes on every CSV of a
# folder (MiniMalloc's challenging suite by default), N runs each: with a
# capacity the planner answers as soon as a plan fits (issue 9, item 5).
#   bench/cli_plan_capacity.sh [DIR] [CAPACITY] [RUNS]      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../shared/minimalloc-benchmarks/challenging}
capacity=${2:-1MiB}  # a size with its unit, as --gpu takes it
runs=${3:-5}
bin=${GPUMEM_BIN:-build/gpumem}
printf '%-20s %10s %10s %10s  %s\n' instance median_ms min_ms max_ms stop_reason
for csv in "$dir"/*.csv; do
  times=()
  reason=
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    out=$("$bin" plan "$csv" --gpu "$capacity" --json) || true
    end=$(date +%s%N)
    times+=($(( (end - start) / 1000 )))
    reason=$(printf '%s' "$out" | grep -o '"stop_reason": "[a-z_]*"' | cut -d'"' -f4)
  done
  sorted=($(printf '%s\n' "${times[@]}" | sort -n))
  printf '%-20s %10.1f %10.1f %10.1f  %s\n' "$(basename "$csv")" \
    "$(echo "${sorted[$((runs / 2))]} / 1000" | bc -l)" "$(echo "${sorted[0]} / 1000" | bc -l)" \
    "$(echo "${sorted[$((runs - 1))]} / 1000" | bc -l)" "$reason"
done
