// libFuzzer target: arbitrary bytes through gpumem's GGUF reader.
//
// The contract under test: parse_gguf() returns a tensor table or throws
// gpumem::InputError with one line "fuzz.gguf: byte N: ..." or
// "fuzz.gguf: tensor 'NAME': ...". What it returns holds: every tensor's
// data lies inside the input, aligned to at least 1 and apart from every
// other tensor's, with its bytes those of its type and shape. Anything
// else aborts, as does any sanitizer report.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/weights/gguf.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), size);
  gpumem::weights::WeightFile f;
  try {
    f = gpumem::weights::parse_gguf(data, "fuzz.gguf");
  } catch (const gpumem::InputError& e) {
    const std::string what = e.what();
    check(what.rfind("fuzz.gguf: byte ", 0) == 0 || what.rfind("fuzz.gguf: tensor '", 0) == 0);
    check(what.find('\n') == std::string::npos);
    return 0;
  }
  check(f.file_bytes == size);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& t : f.tensors) {
    const auto* type = gpumem::weights::ggml_type_named(t.dtype);
    check(type != nullptr);
    check(t.bytes == gpumem::weights::ggml_tensor_bytes(type->id, t.shape));
    check(t.bytes > 0 && t.offset <= size && t.bytes <= size - t.offset);
    spans.emplace_back(t.offset, t.offset + t.bytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) check(spans[i - 1].second <= spans[i].first);
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
