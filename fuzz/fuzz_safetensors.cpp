// libFuzzer target: arbitrary bytes through gpumem's safetensors parser.
//
// The contract under test: parse_safetensors() returns a table whose every
// tensor lies inside the bytes, in order, end to end, with a byte count
// that matches its dtype and shape; or it throws gpumem::InputError with
// one line naming "fuzz.safetensors". Anything else aborts, as does any
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpumem/common/error.h"
#include "gpumem/weights/weight_file.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const gpumem::weights::WeightFile f = gpumem::weights::parse_safetensors(bytes, "fuzz.safetensors");
    std::uint64_t end = 0;
    for (const auto& t : f.tensors) {
      check(t.offset >= end || end == 0);
      check(t.offset + t.bytes <= size && t.offset + t.bytes >= t.offset);
      std::uint64_t elements = 1;
      for (std::uint64_t d : t.shape) elements *= d;
      check(elements * gpumem::weights::safetensors_dtype_bytes(t.dtype) == t.bytes);
      end = t.offset + t.bytes;
    }
  } catch (const gpumem::InputError& e) {
    const std::string what = e.what();
    check(what.rfind("fuzz.safetensors", 0) == 0 && what.find('\n') == std::string::npos);
  }
  return 0;
}
