#!/usr/bin/env bash
# Issue 17: never slower than MiniMalloc on an instance both solve. Times
# whole processes, side by side, on every CSV of a folder (MiniMalloc's
# challenging suite by default), the capacity taken from the file name as
# the suite names them (A.1048576.csv: 1 MiB): MiniMalloc's
#   minimalloc --capacity=C --input=X.csv --output=OUT
# against
#   gpumem plan X.csv --capacity C --out OUT
# median of RUNS each, and checks MiniMalloc's plan with gpumem's validator
# (`gpumem plan --validate OUT`). MiniMalloc is not built here: build it beside
# the project (github.com/google/minimalloc, `cmake -DCMAKE_BUILD_TYPE=Release
# && make`, which builds Abseil from a submodule; or compile src/*.cc except
# the tests against Debian's libabsl-dev, see docs/plan.md) and give its
# binary. MiniMalloc gets --timeout=$MINIMALLOC_TIMEOUT (default 600s), so an
# instance it cannot solve ends as "found no plan" instead of hanging.
#   bench/vs_minimalloc.sh MINIMALLOC_BINARY [DIR] [RUNS]      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
minimalloc=${1:-}
if [[ -z "$minimalloc" || ! -x "$minimalloc" ]]; then
  echo "usage: bench/vs_minimalloc.sh MINIMALLOC_BINARY [DIR] [RUNS]: no MiniMalloc binary given" >&2
  exit 2
fi
dir=${2:-../shared/minimalloc-benchmarks/challenging}
runs=${3:-5}
bin=${GPUMEM_BIN:-build/gpumem}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Median wall-clock milliseconds of `runs` runs of a command in $ms, its
# last exit code in $status.
median_ms() {
  local times=() start end
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    status=0
    "$@" >/dev/null 2>&1 || status=$?
    end=$(date +%s%N)
    times+=($(((end - start) / 1000)))
  done
  local sorted=($(printf '%s\n' "${times[@]}" | sort -n))
  ms=$(echo "${sorted[$((runs / 2))]} / 1000" | bc -l)
}

printf '%-22s %12s %12s %8s  %s\n' instance minimalloc_ms gpumem_ms ratio verdict
for csv in "$dir"/*.csv; do
  name=$(basename "$csv")
  capacity=$(echo "$name" | grep -oE '\.[0-9]+\.csv$' | tr -dc '0-9')
  [[ -n "$capacity" ]] || { echo "$name: no capacity in the file name" >&2; continue; }
  rm -f "$out/m.csv"
  median_ms "$minimalloc" --capacity="$capacity" --input="$csv" --output="$out/m.csv" \
    --timeout="${MINIMALLOC_TIMEOUT:-600s}"
  m=$ms m_status=$status
  median_ms "$bin" plan "$csv" --capacity "$capacity" --out "$out/g.csv"
  g=$ms g_status=$status
  verdict=
  if [[ $m_status -ne 0 || ! -s "$out/m.csv" ]]; then
    verdict="MiniMalloc found no plan"
  elif ! "$bin" plan --validate "$out/m.csv" >/dev/null 2>&1; then
    verdict="MiniMalloc's plan does not check"
  elif [[ $g_status -ne 0 ]]; then
    verdict="gpumem found no plan"
  elif (($(echo "$g <= $m" | bc -l))); then
    verdict="ok"
  else
    verdict="SLOWER"
  fi
  printf '%-22s %12.1f %12.1f %8.2f  %s\n' "$name" "$m" "$g" "$(echo "$g / $m" | bc -l)" "$verdict"
done
