#!/usr/bin/env bash
# Cold build times, as `make run` and `make test` meet them on a machine
# whose packages are installed: a fresh build folder each run, then
#   run:   configure, build the library and the CLI (what `make run` builds)
#   build: build everything else (tests, benchmarks, tools)
#   test:  ctest, every test
# Prints seconds per phase for each run, then the medians.
#   bench/build_times.sh [RUNS] [JOBS]     (defaults: 1 run, every core)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
jobs=${2:-$(nproc)}
dir=$(mktemp -d /tmp/gpumem-build-times.XXXXXX)
trap 'rm -rf "$dir"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

for ((i = 1; i <= runs; i++)); do
  rm -rf "$dir/build"
  t0=$(date +%s.%N)
  cmake -S . -B "$dir/build" -DCMAKE_BUILD_TYPE=Release >"$dir/log" 2>&1
  cmake --build "$dir/build" -j "$jobs" --target gpumem_cli >>"$dir/log" 2>&1
  t1=$(date +%s.%N)
  cmake --build "$dir/build" -j "$jobs" >>"$dir/log" 2>&1
  t2=$(date +%s.%N)
  (cd "$dir/build" && ctest -j "$jobs" >>"$dir/log" 2>&1) || { echo "ctest failed: see a rerun" >&2; exit 1; }
  t3=$(date +%s.%N)
  run=$(echo "$t1 - $t0" | bc); rest=$(echo "$t2 - $t1" | bc); test=$(echo "$t3 - $t2" | bc)
  echo "run $i: make-run build ${run} s, the rest of the build ${rest} s, ctest ${test} s"
  echo "$run" >>"$dir/run"; echo "$(echo "$run + $rest" | bc)" >>"$dir/all"; echo "$(echo "$run + $rest + $test" | bc)" >>"$dir/total"
done
echo "median of $runs on $jobs jobs: make run's build $(median <"$dir/run") s; make test's build $(median <"$dir/all") s; make test in all $(median <"$dir/total") s"
