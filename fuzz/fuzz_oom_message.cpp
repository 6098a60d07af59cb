// libFuzzer target: arbitrary text as a PyTorch out-of-memory message
// through `gpumem explain-oom`'s reader and diagnosis.
//
// The contract under test: parse_oom_message() never throws; when it finds
// a message, every figure it reads is a size a GPU could have (under 2^62
// bytes, so sums of two cannot wrap), reserved is allocated plus reserved
// but unallocated where all three are known, and explain_oom() gives a
// diagnosis with a meaning and advice. Any sanitizer report aborts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "gpumem/oom/oom_message.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

bool plausible(const std::optional<std::uint64_t>& bytes) { return !bytes || *bytes <= (std::uint64_t{1} << 62); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::optional<gpumem::oom::OomMessage> m = gpumem::oom::parse_oom_message(text);
  if (!m) return 0;
  for (const auto& bytes : {m->requested_bytes, m->capacity_bytes, m->free_bytes, m->process_bytes, m->allocated_bytes,
                            m->reserved_bytes, m->reserved_unallocated_bytes})
    check(plausible(bytes));
  if (m->allocated_bytes && m->reserved_bytes && m->reserved_unallocated_bytes)
    check(*m->reserved_bytes == *m->allocated_bytes + *m->reserved_unallocated_bytes);
  const gpumem::oom::OomExplanation e = gpumem::oom::explain_oom(*m);
  check(!e.meaning.empty() && !e.advice.empty());
  check(std::string(gpumem::oom::to_string(e.diagnosis)) != "?");
  return 0;
}
