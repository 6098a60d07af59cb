#!/usr/bin/env bash
# The checks that need a GPU, in one short run (under ~10 minutes with the torch 2.x corpus)
# for a machine lent for a few minutes: the CUDA tests, the allocator
# benchmark if there is one, PyTorch running on libgpumem_torch.so, and the
# torch 2.x training corpus recorded on the device (tools/record_torch2.py).
#
#   scripts/gpu_check.sh            on the GPU machine, from the repository root
#   scripts/gpu_check.sh --bundle   on a build machine: build, then gather the
#                                   binaries and the libraries they need into
#                                   build-gpu-bundle/ to carry to the GPU machine
#
# Why a bundle: the GPU machine may lack the Debian packages gpumem builds
# with (ONNX, protobuf, fmt, GoogleTest) and cannot install any. On the GPU
# machine the script uses build-gpu-bundle/ when it is there, and otherwise
# configures and builds in build-gpu/. Logs go to $OUT when it is set.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
bundle="$root/build-gpu-bundle"
build="$root/build-gpu"
jobs=$(nproc 2>/dev/null || echo 4)
if ((jobs > 16)); then jobs=16; fi

log_dir=${OUT:-$build/logs}
mkdir -p "$log_dir"

say() { printf '\n=== %s ===\n' "$*"; }

configure_and_build() {
  local bench=$1
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUMEM_BUILD_BENCH="$bench" >"$log_dir/configure.log" 2>&1 ||
    { tail -30 "$log_dir/configure.log"; return 1; }
  grep 'gpumem:' "$log_dir/configure.log"
  local targets=(gpumem_alloc gpumem_torch alloc_cuda_tests)
  if [[ $bench == ON ]] && grep -qs 'gpumem_alloc_bench' "$root/bench/CMakeLists.txt"; then
    targets+=(gpumem_alloc_bench)
  fi
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$log_dir/build.log" 2>&1 ||
    { tail -40 "$log_dir/build.log"; return 1; }
}

# Copies a program and every shared library it needs that a machine with a
# GPU driver and a C++ runtime may lack. libcuda comes from the driver there;
# the C and C++ runtimes are newer there. libcudart goes to cuda/, apart, so
# that the PyTorch run does not put it before PyTorch's own.
bundle_binary() {
  local file=$1
  cp "$file" "$bundle/bin/"
  ldd "$file" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcuda.so*) ;;
      libcudart.so*) cp -L "$path" "$bundle/cuda/" ;;
      *) cp -L "$path" "$bundle/lib/" ;;
    esac
  done
}

if [[ ${1:-} == --bundle ]]; then
  say "build (Release, $jobs jobs)"
  configure_and_build ON || exit 1
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/cuda"
  for f in "$build/tests/alloc_cuda_tests" "$build/libgpumem_torch.so" \
    "$(find "$build" -name gpumem_alloc_bench -type f -perm -u+x | head -1)"; do
    if [[ -f $f ]]; then bundle_binary "$f"; fi
  done
  du -sh "$bundle"
  ls "$bundle"/*
  echo "carry build-gpu-bundle to the GPU machine and run scripts/gpu_check.sh there"
  exit 0
fi

status=0
summary=()
step() {  # step NAME TIMEOUT LOG COMMAND...: runs one check, notes how it went
  local name=$1 limit=$2 log=$3
  shift 3
  say "$name"
  local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$log_dir/$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s %s (%ds)' "$name" "$([[ $rc == 0 ]] && echo ok || echo "FAILED, exit $rc")" $((SECONDS - start)))")
  if [[ $rc != 0 ]]; then status=1; fi
}

say "device"
have_gpu=0
if nvidia-smi >"$log_dir/nvidia-smi.log" 2>&1; then have_gpu=1; fi
head -20 "$log_dir/nvidia-smi.log"

if [[ -d $bundle/bin ]]; then
  echo "using the prebuilt binaries in build-gpu-bundle/"
  bin=$bundle/bin
  tests=$bin/alloc_cuda_tests
  plugin=$bin/libgpumem_torch.so
  bench=$bin/gpumem_alloc_bench
  libs=$bundle/lib
  # The CUDA runtime the programs were built with, only where this machine
  # has none where they look (LD_LIBRARY_PATH would win over its own).
  cuda_libs=""
  if ! ldconfig -p 2>/dev/null | grep -q 'libcudart.so.13 ' && [[ ! -e /usr/local/cuda/lib/libcudart.so.13 ]]; then
    cuda_libs=$bundle/cuda
  fi
else
  say "build (Release, $jobs jobs)"
  if ! configure_and_build OFF; then
    echo "gpu_check: the build failed; if Debian packages are missing here, run"
    echo "  scripts/gpu_check.sh --bundle   on a build machine and carry build-gpu-bundle"
    exit 1
  fi
  tests=$build/tests/alloc_cuda_tests
  plugin=$build/libgpumem_torch.so
  bench=$(find "$build" -name gpumem_alloc_bench -type f -perm -u+x | head -1)
  libs=""
  cuda_libs=""
fi

# Where the bundle's programs find the libraries that came with them.
prog_path="${libs}${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "alloc_cuda_tests" 180 tests.log env LD_LIBRARY_PATH="$prog_path" GPUMEM_TORCH_PLUGIN="$plugin" \
  "$tests" --gtest_color=no
# On a GPU machine only the no-device test may skip: more means the tests
# could not use the GPU, and "ok" would hide it.
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below:$/\1/p' "$log_dir/tests.log")
if ((have_gpu && ${skipped:-0} > 1)); then
  summary+=("alloc_cuda_tests       FAILED: $skipped tests skipped although nvidia-smi sees a GPU")
  status=1
fi

if [[ -n $bench && -x $bench ]]; then
  # Extra flags for the benchmark (Google Benchmark's) through GPUMEM_BENCH_ARGS.
  # shellcheck disable=SC2086
  step "gpumem_alloc_bench" 150 bench.log env LD_LIBRARY_PATH="$prog_path" "$bench" ${GPUMEM_BENCH_ARGS:-}
fi

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  # PyTorch brings its own CUDA runtime: only the bundle's other libraries go
  # on the path.
  step "torch_pluggable_check" 240 torch.log env PYTHONUNBUFFERED=1 \
    LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    python3 tools/torch_pluggable_check.py --lib "$plugin"
else
  summary+=("torch_pluggable_check  skipped: no python3 with PyTorch and a GPU")
fi

# The torch 2.x corpus on this GPU (tools/record_torch2.py --device cuda): the
# caching allocator's own max_memory_allocated and max_memory_reserved for
# every case, beside gpumem's traced estimate for device="cuda", into
# $OUT/torch2-cuda (issue 47's CUDA side). Needs a python with torch 2.1+,
# transformers and peft: GPUMEM_TORCH2_PYTHON, else the venv
# scripts/torch-venv.sh made, else python3.
torch2_python=${GPUMEM_TORCH2_PYTHON:-}
if [[ -z $torch2_python ]]; then
  for candidate in "$root"/.venv/torch-2.*/bin/python python3; do
    if "$candidate" -c 'import torch, transformers, peft, sys; sys.exit(0 if torch.cuda.is_available() and tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 1) else 1)' 2>/dev/null; then
      torch2_python=$candidate
      break
    fi
  done
fi
if [[ -n $torch2_python ]]; then
  step "torch2_cuda_corpus" 420 torch2.log env PYTHONUNBUFFERED=1 "$torch2_python" tools/record_torch2.py \
    --device cuda --out "$log_dir/torch2-cuda"
else
  summary+=("torch2_cuda_corpus     skipped: no python with torch 2.1+, transformers, peft and a GPU")
fi

say "summary"
printf '%s\n' "${summary[@]}" | tee "$log_dir/summary.log"
exit $status
