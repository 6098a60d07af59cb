#!/usr/bin/env bash
# Issue 17: never slower than MiniMalloc on an instance both solve. Times
# whole processes, side by side, on every CSV of a folder (MiniMalloc's
# challenging suite by default), the capacity taken from the file name as
# the suite names them (A.1048576.csv: 1 MiB): MiniMalloc's
#   minimalloc --capacity=C --input=X.csv --output=OUT
# against
#   gpumem plan X.csv --gpu C -o OUT
# median of RUNS each, and beside them each solver's own solve time (what
# MiniMalloc prints on stderr, in whole ms; gpumem's `solve_seconds`), which
# leaves out starting the process. Checks MiniMalloc's plan with gpumem's validator
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

# The median of numbers, one per line on stdin.
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# Runs a command `runs` times: the median wall-clock milliseconds in $ms,
# the median solve milliseconds in $solve_ms (what `parse` reads from the
# run's stdout and stderr, in $out/run.txt), the last exit code in $status.
timed_runs() {
  local parse=$1 walls=() solves=() start end
  shift
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    status=0
    "$@" >"$out/run.txt" 2>&1 || status=$?
    end=$(date +%s%N)
    walls+=("$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f\n", (b - a) / 1e6}')")
    solves+=("$($parse <"$out/run.txt")")
  done
  ms=$(printf '%s\n' "${walls[@]}" | median)
  solve_ms=$(printf '%s\n' "${solves[@]}" | median)
}
# Whether the number $1 is at most $2.
at_most() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a <= b)}'; }
# MiniMalloc prints its solve time in seconds (three decimals) first on stderr.
minimalloc_solve_ms() { grep -oE '^[0-9]+\.[0-9]+' | head -1 | awk '{printf "%.6f\n", $1 * 1000}'; }
gpumem_solve_ms() { grep -oE '"solve_seconds": *[0-9.e+-]+' | grep -oE '[0-9.e+-]+$' | awk '{printf "%.6f\n", $1 * 1000}'; }

printf '%-22s %13s %10s %13s %10s  %s\n' instance minimalloc_ms gpumem_ms mm_solve_ms gm_solve_ms verdict
for csv in "$dir"/*.csv; do
  name=$(basename "$csv")
  capacity=$(echo "$name" | grep -oE '\.[0-9]+\.csv$' | tr -dc '0-9')
  [[ -n "$capacity" ]] || { echo "$name: no capacity in the file name" >&2; continue; }
  rm -f "$out/m.csv"
  timed_runs minimalloc_solve_ms "$minimalloc" --capacity="$capacity" --input="$csv" --output="$out/m.csv" \
    --timeout="${MINIMALLOC_TIMEOUT:-600s}"
  m=$ms m_solve=$solve_ms m_status=$status
  timed_runs gpumem_solve_ms "$bin" plan "$csv" --gpu "${capacity}B" -o "$out/g.csv" --json
  g=$ms g_solve=$solve_ms g_status=$status
  verdict=
  if [[ $m_status -ne 0 || ! -s "$out/m.csv" ]]; then
    verdict="MiniMalloc found no plan"
  elif ! "$bin" plan --validate "$out/m.csv" >/dev/null 2>&1; then
    verdict="MiniMalloc's plan does not check"
  elif [[ $g_status -ne 0 ]]; then
    verdict="gpumem found no plan"
  else
    # MiniMalloc's solve time has whole-ms resolution: 0 means under 0.5 ms.
    verdict="solve ok"
    at_most "$g_solve" "$(awk -v m="$m_solve" 'BEGIN {print (m > 0.5 ? m : 0.5)}')" || verdict="solve SLOWER"
    if at_most "$g" "$m"; then verdict+=", process ok"; else verdict+=", process SLOWER"; fi
  fi
  printf '%-22s %13.1f %10.1f %13.1f %10.3f  %s\n' "$name" "$m" "$g" "${m_solve:-0}" "${g_solve:-0}" "$verdict"
done
