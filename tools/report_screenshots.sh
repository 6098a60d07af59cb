#!/usr/bin/env bash
# The README's pictures: each kind of HTML report on a bundled input,
# rendered by headless Chromium into docs/images/. Run by hand after a
# change to the pages (`make build` first); ctest renders the same pages.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPUMEM_BIN:-build/gpumem}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" inspect examples/models/mobilenet_v2.onnx --html "$tmp/inspect.html" >/dev/null
"$bin" plan examples/models/mobilenet_v2.onnx --time-limit 2 --html "$tmp/plan.html" >/dev/null
"$bin" replay tests/data/traces/resnet18_adamw_3iter.json.gz --time-limit 2 --html "$tmp/replay.html" >/dev/null
"$bin" train tests/data/train/gpt_adam.onnx --html "$tmp/train.html" >/dev/null
mkdir -p docs/images
for page in inspect plan replay train; do
  chromium --headless=new --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
    --hide-scrollbars --window-size=1100,700 --virtual-time-budget=2000 \
    --screenshot="docs/images/$page.png" "file://$tmp/$page.html" 2>/dev/null
done
ls -l docs/images
