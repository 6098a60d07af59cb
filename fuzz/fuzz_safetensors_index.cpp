// libFuzzer target: arbitrary bytes as a sharded checkpoint's
// model.safetensors.index.json, beside two real shards.
//
// The contract under test: read_safetensors_index() returns every tensor of
// the weight map, each found in the shard the map names, or throws
// gpumem::InputError with one line. Shard names that leave the folder are
// refused, however spelled. Anything else aborts, as does any sanitizer
// report (deep nesting included: the JSON is bounded at 64 levels).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gpumem/common/error.h"
#include "gpumem/weights/weight_file.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

// A shard with two F32 tensors, "a" [2] and "b" [1].
std::string shard(const std::string& first, const std::string& second) {
  const std::string header = "{\"" + first + "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"" + second +
                             "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(12, '\0');
}

const std::filesystem::path& folder() {
  static const std::filesystem::path dir = [] {
    auto d = gpumem::fuzz::scratch_folder("index");
    std::ofstream(d / "model-00001-of-00002.safetensors", std::ios::binary) << shard("a", "b");
    std::ofstream(d / "model-00002-of-00002.safetensors", std::ios::binary) << shard("c", "d");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto index = folder() / "model.safetensors.index.json";
  gpumem::fuzz::write_input(index, data, size);
  try {
    const gpumem::weights::WeightFile f = gpumem::weights::read_safetensors_index(index.string());
    for (const auto& t : f.tensors) {
      check(t.name == "a" || t.name == "b" || t.name == "c" || t.name == "d");
      check(t.bytes == (t.name == "a" || t.name == "c" ? 8u : 4u));
      check(std::filesystem::path(t.file).parent_path() == folder());
    }
  } catch (const gpumem::InputError& e) {
    gpumem::fuzz::check_one_line(e);
  }
  return 0;
}
