#!/usr/bin/env bash
# gpumem as another project uses it (issue 45): installed with `cmake
# --install`, found with find_package(gpumem COMPONENTS alloc serve) and with
# pkg-config, the allocator and the KV block manager embedded in a program
# (examples/embed) that links none of ONNX, protobuf or prometheus-cpp and is
# under 1 MiB stripped. Also: find_package(gpumem) with no components gives
# every module, an unknown component is refused by name, and every installed
# header's stability is stated in docs/embedding.md.
#
#   tests/install/check_install.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR
set -euo pipefail
build=$1 source=$2 scratch=$3
rm -rf "$scratch"
mkdir -p "$scratch"
prefix=$scratch/prefix
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" --component devel > "$scratch/install.log"
test -f "$prefix/lib/cmake/gpumem/gpumemConfig.cmake" || fail "no gpumemConfig.cmake installed"
test -f "$prefix/include/gpumem/gpumem.h" || fail "no gpumem/gpumem.h installed"
test ! -e "$prefix/include/gpumem/alloc/blocks.h" || fail "a private header was installed"
# Every installed header has its stability stated in docs/embedding.md.
while read -r header; do
  grep -qF "| \`gpumem/$header\` |" "$source/docs/embedding.md" \
    || fail "include/gpumem/$header is installed but docs/embedding.md does not say how stable it is"
done < <(cd "$prefix/include/gpumem" && find . -name '*.h' | sed 's#^\./##' | sort)

# 1. CMake: the example, as its README says.
cmake -S "$source/examples/embed" -B "$scratch/embed" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  > "$scratch/embed-configure.log" 2>&1 || { cat "$scratch/embed-configure.log"; fail "the example does not configure"; }
cmake --build "$scratch/embed" > "$scratch/embed-build.log" 2>&1 || { cat "$scratch/embed-build.log"; fail "the example does not build"; }
binary=$scratch/embed/embed_allocator
"$binary" || fail "the example failed"

# What it links: no ONNX, protobuf or prometheus-cpp, neither as libraries
# nor as symbols pulled in from an archive.
libraries=$(ldd "$binary")
echo "$libraries"
if grep -Ei 'onnx|protobuf|prometheus' <<< "$libraries"; then fail "the example loads one of ONNX, protobuf, prometheus-cpp"; fi
symbols=$(nm -C "$binary")
if grep -Eq 'onnx::|google::protobuf|prometheus::' <<< "$symbols"; then
  grep -E 'onnx::|google::protobuf|prometheus::' <<< "$symbols" | head -5
  fail "the example holds symbols of ONNX, protobuf or prometheus-cpp"
fi
strip -o "$scratch/embed_allocator.stripped" "$binary"
size=$(stat -c %s "$scratch/embed_allocator.stripped")
echo "embed_allocator: $size bytes stripped"
test "$size" -lt 1048576 || fail "the allocator-only binary is $size bytes stripped, not under 1 MiB"

# 2. pkg-config: the same program, compiled by hand.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs gpumem-alloc gpumem-serve)
echo "pkg-config gpumem-alloc gpumem-serve: $flags"
if grep -Eq 'onnx|protobuf|prometheus' <<< "$flags"; then fail "pkg-config's flags for alloc and serve name ONNX, protobuf or prometheus-cpp"; fi
# shellcheck disable=SC2086
g++ -std=c++20 -O1 "$source/examples/embed/main.cpp" -o "$scratch/embed_pkgconfig" $flags \
  || fail "the example does not build with pkg-config's flags"
"$scratch/embed_pkgconfig" > /dev/null || fail "the pkg-config build failed"
pkg-config --exists gpumem || fail "gpumem.pc (every module) is not usable"

# 3. Without components, every module and gpumem::gpumem; an unknown one is refused.
mkdir -p "$scratch/all"
cat > "$scratch/all/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(gpumem_all LANGUAGES CXX)
find_package(gpumem REQUIRED)
foreach(target gpumem::gpumem gpumem::model gpumem::monitor gpumem::report)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "find_package(gpumem) did not define ${target}")
  endif()
endforeach()
find_package(gpumem QUIET COMPONENTS no_such_module)
if(gpumem_FOUND)
  message(FATAL_ERROR "find_package(gpumem COMPONENTS no_such_module) succeeded")
endif()
CMAKE
cmake -S "$scratch/all" -B "$scratch/all/build" -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/all.log" 2>&1 \
  || { cat "$scratch/all.log"; fail "find_package(gpumem) with every component failed"; }
echo "check_install: installed package OK"
