#!/usr/bin/env bash
# Installs the Debian packages gpumem builds and tests with, and only those
# that are missing: a machine that already has them is left untouched, so
# `make run` and `make test` stay fast after the first time.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-testdata
  prometheus-cpp-dev libcurl4-openssl-dev prometheus
  chromium
  pybind11-dev python3-dev python3-pytest python3-torch python3-torchvision
  time
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "gpumem: installing missing packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
