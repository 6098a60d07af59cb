#!/usr/bin/env bash
# Issue 17's goal for the defaults, on every real trace bundled (training
# and inference recorded with torch 1.13, tests/data/traces and
# tests/data/train): peak reserved MiB under gpumem, pytorch,
# gpumem-expandable and pytorch-expandable. Goals: gpumem <= pytorch and
# gpumem-expandable <= gpumem on every one (tests/trace/test_real_traces.cpp
# checks both). Exact figures, deterministic.
#   bench/default_vs_pytorch.sh      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPUMEM_BIN:-build/gpumem}
printf '%-42s %9s %9s %9s %9s  %s\n' trace gpumem pytorch gpumem-x pytorch-x goals
for trace in tests/data/traces/*_train.json tests/data/traces/*.json.gz tests/data/train/*.trace.json.gz; do
  "$bin" replay "$trace" --policy gpumem,pytorch,gpumem-expandable,pytorch-expandable --time-limit 0 --json |
    /usr/bin/python3 -c '
import json, sys
r = {p["name"]: p["peak_reserved_bytes"] / 2**20 for p in json.load(sys.stdin)["policies"]}
goals = "ok" if r["gpumem"] <= r["pytorch"] and r["gpumem-expandable"] <= r["gpumem"] else "NOT MET"
print("%-42s %9.0f %9.0f %9.0f %9.0f  %s" % (sys.argv[1].split("/")[-1], r["gpumem"], r["pytorch"],
      r["gpumem-expandable"], r["pytorch-expandable"], goals))' "$trace"
done
