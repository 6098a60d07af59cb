// PyTorch's out-of-memory messages as users pasted them in public issues
// (tests/data/oom/messages.json, each with its source): every figure read
// back to the byte, and what gpumem explain-oom makes of them.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpumem/oom/oom_message.h"
#include "test_paths.h"

namespace gpumem::oom {
namespace {

const nlohmann::json& messages() {
  static const nlohmann::json doc = [] {
    std::ifstream in(gpumem::test::source_dir() / "tests" / "data" / "oom" / "messages.json");
    return nlohmann::json::parse(in);
  }();
  return doc["messages"];
}

void expect_figure(const nlohmann::json& expected, const char* key, const std::optional<uint64_t>& got,
                   const std::string& id) {
  if (!expected.contains(key) || expected[key].is_null()) return;
  ASSERT_TRUE(got.has_value()) << id << ": " << key;
  // Printed with two decimals: the byte count is the printed figure's.
  EXPECT_EQ(*got, expected[key].get<uint64_t>()) << id << ": " << key;
}

TEST(OomMessage, EveryPublicMessageReadsBackToTheByte) {
  ASSERT_GE(messages().size(), 10u);
  for (const auto& m : messages()) {
    const std::string id = m["id"];
    const auto parsed = parse_oom_message(m["text"].get<std::string>());
    ASSERT_TRUE(parsed.has_value()) << id;
    const auto& e = m["expected"];
    expect_figure(e, "requested_bytes", parsed->requested_bytes, id);
    expect_figure(e, "capacity_bytes", parsed->capacity_bytes, id);
    expect_figure(e, "free_bytes", parsed->free_bytes, id);
    expect_figure(e, "allocated_bytes", parsed->allocated_bytes, id);
    expect_figure(e, "reserved_bytes", parsed->reserved_bytes, id);
    expect_figure(e, "reserved_unallocated_bytes", parsed->reserved_unallocated_bytes, id);
    const OomExplanation x = explain_oom(*parsed);
    EXPECT_FALSE(x.meaning.empty()) << id;
    EXPECT_FALSE(x.advice.empty()) << id;
    std::printf("  %-44s %-18s %s\n", id.c_str(), parsed->wording.c_str(), to_string(x.diagnosis));
  }
}

TEST(OomMessage, TheDiagnosisFollowsTheFigures) {
  const auto diagnose = [](const std::string& text) { return explain_oom(*parse_oom_message(text)).diagnosis; };
  // 2.x: 6 GiB cached but unallocated, 20 MiB asked: fragmentation.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of "
                     "which 17.31 MiB is free. Process 1234 has 79.13 GiB memory in use. Of the allocated memory "
                     "72.50 GiB is allocated by PyTorch, and 6.00 GiB is reserved by PyTorch but unallocated."),
            OomDiagnosis::kFragmentation);
  // The same GPU with 78.21 GiB allocated and 300 MiB cached is full: the
  // cache could hold these 20 MiB, but not the step's next allocation.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of "
                     "which 17.31 MiB is free. Process 1234 has 79.13 GiB memory in use. Of the allocated memory "
                     "78.21 GiB is allocated by PyTorch, and 300.12 MiB is reserved by PyTorch but unallocated."),
            OomDiagnosis::kSimplyFull);
  // Issue 46, the classic 1.x wording: 14.56 GiB allocated of 14.76, 164 MiB
  // cached. A full GPU, and the advice is a smaller batch and checkpointing.
  const std::string classic =
      "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total capacity; 14.56 GiB "
      "already allocated; 3.44 MiB free; 14.72 GiB reserved in total by PyTorch)";
  EXPECT_EQ(diagnose(classic), OomDiagnosis::kSimplyFull);
  const OomExplanation full = explain_oom(*parse_oom_message(classic));
  ASSERT_GE(full.advice.size(), 2u);
  EXPECT_NE(full.advice[0].find("smaller batch"), std::string::npos) << full.advice[0];
  EXPECT_NE(full.advice[1].find("checkpointing"), std::string::npos) << full.advice[1];
  // 1.x: 2 GiB asked, 1.77 GiB free, little cached: simply full.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.17 GiB total capacity; 8.59 GiB "
                     "already allocated; 1.77 GiB free; 9.04 GiB reserved in total by PyTorch)"),
            OomDiagnosis::kSimplyFull);
  // 20 GiB of a 24 GiB card held by someone else.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 23.69 GiB total capacity; 2.10 GiB "
                     "already allocated; 300.00 MiB free; 2.20 GiB reserved in total by PyTorch)"),
            OomDiagnosis::kAnotherProcess);
  // A 40 GiB request on an 80 GiB GPU.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 40.00 GiB. GPU 0 has a total capacity of 79.15 GiB of "
                     "which 30.00 GiB is free. Of the allocated memory 48.00 GiB is allocated by PyTorch, and 1.00 "
                     "GiB is reserved by PyTorch but unallocated."),
            OomDiagnosis::kOneHugeRequest);
  // pytorch#59778: 2.26 GiB asked, 3.03 GiB free after the cache went back: refused though free.
  EXPECT_EQ(diagnose("CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 781.59 MiB "
                     "already allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch)"),
            OomDiagnosis::kRefusedThoughFree);
  // 32 MiB asked, 41.56 MiB free: within the driver's headroom, not refused though free.
  EXPECT_NE(diagnose("CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacty of 4.00 GiB of "
                     "which 41.56 MiB is free. Including non-PyTorch memory, this process has 3.44 GiB memory in "
                     "use. Of the allocated memory 2.58 GiB is allocated by PyTorch, and 1.90 MiB is reserved by "
                     "PyTorch but unallocated."),
            OomDiagnosis::kRefusedThoughFree);
  EXPECT_EQ(diagnose("RuntimeError: CUDA error: out of memory"), OomDiagnosis::kDriver);
  EXPECT_FALSE(parse_oom_message("RuntimeError: shape mismatch").has_value());
}

}  // namespace
}  // namespace gpumem::oom
