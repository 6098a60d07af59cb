#!/usr/bin/env bash
# Predicted against recorded training-step peaks: runs `gpumem train` on each
# recorded configuration of tests/data/train/ (tools/record_training.py made
# them with torch 1.13 on CPU) with the settings it was recorded under, and
# prints the recorded peak, the predicted peak, the error, and what the usual
# estimators count (weights + gradients + optimizer states).
#   bench/train_accuracy.sh            (after `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPUMEM_BIN:-build/gpumem}
data=tests/data/train
# name | flags
configs=(
  "resnet18_sgd|--optimizer sgd-momentum"
  "mobilenet_v2_sgd|--optimizer sgd-momentum"
  "resnet18_frozen|--optimizer sgd-momentum --frozen ^(conv1|bn1|layer1|layer2)\\."
  "transformer_adamw|--optimizer adamw"
  "transformer_bf16|--optimizer adamw --precision amp-bf16"
  "resnet50_sgd|--optimizer sgd-momentum"
  "gpt_adam|--optimizer adam"
  "vgg11_bn_sgd|--optimizer sgd-momentum"
)
printf '| model | settings | recorded peak | predicted peak | error | weights + grads + optimizer |\n'
printf '| --- | --- | ---: | ---: | ---: | ---: |\n'
for c in "${configs[@]}"; do
  name=${c%%|*}
  flags=${c#*|}
  # shellcheck disable=SC2086
  out=$(mktemp)
  "$bin" train "$data/$name.onnx" $flags --device cpu --json > "$out"
  /usr/bin/python3 - "$data/$name.facts.json" "$name" "$flags" "$out" <<'PY'
import json, sys
facts = json.load(open(sys.argv[1]))
pred = json.load(open(sys.argv[4]))
rec = facts["recorded_peak_bytes"]
p = pred["peak_bytes"]
mib = lambda b: f"{b / 2**20:.2f} MiB"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {mib(rec)} | {mib(p)} | {100 * (p - rec) / rec:+.2f}% ({p - rec:+,} B) | {mib(pred['static_estimate_bytes'])} |")
PY
  rm -f "$out"
done
