#!/usr/bin/env bash
# Issue 14's serving goals on every bundled trace (examples/serve/*.csv) and
# on a loaded ShareGPT-shaped one (8 requests/s, generated): Llama 3 8B in
# bf16 on a GPU sized so that the KV cache is the constraint. Prints, per
# trace and policy, the waste (reserved but unused KV slots, of the pool),
# throughput and preemptions, then checks the goals:
#   paged waste under 4%; contiguous waste 60% or more;
#   gpumem's throughput at least vllm's, its preemptions at most vllm's.
#   bench/serve_goals.sh [GPU] [MODEL]      (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=${1:-19GiB}
model=${2:-examples/llm/llama-3-8b}
bin=${GPUMEM_BIN:-build/gpumem}
loaded=$(mktemp --suffix=.csv)
trap 'rm -f "$loaded"' EXIT
"$bin" serve-sim --generate sharegpt --rate 8 --count 1000 -o "$loaded"
for trace in examples/serve/*.csv "$loaded"; do
  "$bin" serve-sim "$model" --gpu "$gpu" --requests "$trace" --json |
    /usr/bin/python3 -c '
import json, sys
name = sys.argv[1]
d = json.load(sys.stdin)
p = {x["name"]: x for x in d["policies"]}
for n in ("contiguous", "vllm", "gpumem"):
    x = p[n]
    print("%-22s %-11s waste %6.2f%%  throughput %8.1f tok/s  preemptions %4d  p99 latency %7.2f s"
          % (name, n, 100 * x["waste_fraction"], x["throughput_tokens_per_s"], x["preemptions"], x["p99_latency_s"]))
ok = (p["vllm"]["waste_fraction"] < 0.04 and p["gpumem"]["waste_fraction"] < 0.04
      and p["contiguous"]["waste_fraction"] >= 0.60
      and p["gpumem"]["throughput_tokens_per_s"] >= p["vllm"]["throughput_tokens_per_s"]
      and p["gpumem"]["preemptions"] <= p["vllm"]["preemptions"])
print("%-22s goals %s" % (name, "met" if ok else "NOT met"))
' "$(basename "$trace" | sed 's/^tmp.*/sharegpt-8rps (generated)/')"
done
