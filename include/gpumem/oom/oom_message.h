#pragma once
// PyTorch's "CUDA out of memory" message, read back: every wording from
// PyTorch 1.x ("(GPU 0; 15.78 GiB total capacity; 14.12 GiB already
// allocated; 3.75 MiB free; 14.65 GiB reserved in total by PyTorch)", older
// "... cached)") to 2.x ("GPU 0 has a total capacity of ... of which ... is
// free. Process 123 has ... memory in use. Of the allocated memory ... is
// allocated by PyTorch, and ... is reserved by PyTorch but unallocated."),
// and the driver's bare "CUDA error: out of memory". What it means and what
// to try follow from the figures (`gpumem explain-oom`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::oom {

struct OomMessage {
  std::string wording;  // "pytorch-2", "pytorch-1", "pytorch-1-cached", "driver"
  int device = -1;      // the GPU index the message names; -1 when it names none
  std::optional<uint64_t> requested_bytes, capacity_bytes, free_bytes;
  std::optional<uint64_t> process_bytes;  // this process's (2.x: "this process has" or the first Process line)
  std::optional<uint64_t> allocated_bytes, reserved_bytes, reserved_unallocated_bytes;
  std::vector<std::pair<uint64_t, uint64_t>> processes;  // 2.x: (pid, bytes) per "Process N has" line
};

// The first out-of-memory message in `text` (a traceback, a log), or nullopt.
std::optional<OomMessage> parse_oom_message(const std::string& text);

enum class OomDiagnosis : std::uint8_t {
  kOneHugeRequest,
  kRefusedThoughFree,
  kAnotherProcess,
  kFragmentation,
  kSimplyFull,
  kDriver
};
const char* to_string(OomDiagnosis d);

struct OomExplanation {
  OomMessage message;
  OomDiagnosis diagnosis = OomDiagnosis::kSimplyFull;
  std::string meaning;              // one paragraph: what the figures say
  std::vector<std::string> advice;  // what to try, most direct first
};
OomExplanation explain_oom(const OomMessage& message);

}  // namespace gpumem::oom
