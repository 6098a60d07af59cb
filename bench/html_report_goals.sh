#!/usr/bin/env bash
# Issue 16's goals for HTML reports on a 1,000,000-event trace
# (bench/make_million_event_trace.py, fixed seed):
#   written in under 2 s and under 5 MB; rendered by headless Chromium in
#   under 2 s. Prints the median of 5 runs of each:
#   - `trace stats --html`: read the trace, its statistics, the page;
#   - `report --time-limit 0`: the same plus a replay of all six policies
#     (the planner skipped: its time is --time-limit's);
#   - the page's own render time in Chromium (performance.now() when its
#     script ends, which the page records), and Chromium's whole run.
#   bench/html_report_goals.sh      (after `make build`; needs chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPUMEM_BIN:-build/gpumem}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 bench/make_million_event_trace.py "$dir/million.csv" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }

for i in 1 2 3 4 5; do seconds "$bin" trace stats "$dir/million.csv" --html "$dir/stats.html"; done | median >"$dir/t1"
for i in 1 2 3 4 5; do seconds "$bin" report "$dir/million.csv" -o "$dir/report.html" --time-limit 0; done | median >"$dir/t2"
printf 'trace stats --html   %6.2f s   %s bytes\n' "$(cat "$dir/t1")" "$(stat -c %s "$dir/stats.html")"
printf 'report               %6.2f s   %s bytes\n' "$(cat "$dir/t2")" "$(stat -c %s "$dir/report.html")"

if command -v chromium >/dev/null; then
  for i in 1 2 3 4 5; do
    s=$(date +%s.%N)
    dom=$(chromium --headless=new --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile" \
      --dump-dom "file://$dir/report.html" 2>/dev/null)
    e=$(date +%s.%N)
    echo "$(echo "$dom" | grep -o 'data-render-ms="[0-9]*"' | grep -o '[0-9]*') $(echo "$e - $s" | bc)"
  done >"$dir/render"
  printf 'render in Chromium   %6.3f s (the page)   %6.2f s (Chromium from start to exit)\n' \
    "$(cut -d' ' -f1 "$dir/render" | median | awk '{print $1 / 1000}')" "$(cut -d' ' -f2 "$dir/render" | median)"
fi
