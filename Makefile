# The two commands of the README's quick start, plus a few for developers.
MAKEFLAGS += --no-print-directory
# Everything real happens in CMake; this file only strings the steps together.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
EXAMPLE ?= examples/models/bert_base.onnx

.PHONY: all deps configure build build-cli run test bench fuzz asan tsan clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	@scripts/python-path.sh $(BUILD_DIR)

# What `make run` and the README's Python quick start need: the library, the
# CLI and the Python module (imported from the build folder), not the tests
# and benchmarks.
build-cli: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target gpumem_quickstart
	@scripts/python-path.sh $(BUILD_DIR)

run: build-cli
	@$(BUILD_DIR)/gpumem inspect $(EXAMPLE)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD_DIR)/bench/gpumem_bench --benchmark_repetitions=9 --benchmark_report_aggregates_only=true

# Sanitizer builds (CMakePresets.json): every test under ASan+UBSan; the
# allocator's tests, threads included, under TSan.
asan: deps
	@cmake --preset asan > build-asan.configure.log 2>&1 || (cat build-asan.configure.log; exit 1)
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

tsan: deps
	@cmake --preset tsan > build-tsan.configure.log 2>&1 || (cat build-tsan.configure.log; exit 1)
	@cmake --build --preset tsan -j $(JOBS) --target alloc_tests alloc_adaptor_tests alloc_c_api_test
	@ctest --preset tsan -j $(JOBS)

# libFuzzer needs clang; see docs/developers.md.
fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DGPUMEM_FUZZ=ON -DGPUMEM_BUILD_TESTS=OFF -DGPUMEM_BUILD_BENCH=OFF
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_onnx_loader fuzz_plan_csv fuzz_allocator fuzz_chrome_trace fuzz_pickle fuzz_gzip fuzz_gguf fuzz_safetensors fuzz_request_trace fuzz_llm_config fuzz_published_block fuzz_iteration_plan fuzz_oom_message fuzz_safetensors_index

clean:
	rm -rf $(BUILD_DIR) build-fuzz build-asan build-tsan *.configure.log
