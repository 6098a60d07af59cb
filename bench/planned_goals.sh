#!/usr/bin/env bash
# Issue 17's planned-mode goal on every multi-iteration real trace bundled
# under tests/data (traces/; train/ holds single steps, which have none):
# steady-state reserved / allocated (the most
# reserved, and the most allocated, over the iterations after the first)
# for gpumem, pytorch and gpumem-planned. Goal: gpumem-planned <= 1.02.
#   bench/planned_goals.sh      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPUMEM_BIN:-build/gpumem}
for trace in tests/data/traces/*.json tests/data/traces/*.json.gz tests/data/train/*.trace.json.gz; do
  json=$("$bin" replay "$trace" --policy gpumem,pytorch,gpumem-planned --time-limit 0 --json 2>/dev/null) || continue
  echo "$json" | /usr/bin/python3 -c '
import json, sys
name = sys.argv[1]
d = json.load(sys.stdin)
allocated = d["steady_peak_allocated_bytes"]
if not allocated:
    sys.exit(0)  # no iterations: nothing steady to measure
row = ["%-40s %d iterations" % (name, d["iterations"])]
for p in d["policies"]:
    row.append("%s %.3f" % (p["name"], p["steady_peak_reserved_bytes"] / allocated))
planned = [p for p in d["policies"] if p["name"] == "gpumem-planned"][0]
row.append("(%d planned, %d missed)" % (planned["planned_allocations"], planned["missed_allocations"]))
print("  ".join(row))
' "$trace"
done
