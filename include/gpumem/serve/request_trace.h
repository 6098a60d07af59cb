#pragma once
// Request traces for `gpumem serve-sim`: when each request arrives, how
// long its prompt is, how many tokens it generates, and which shared prefix
// (a system prompt) it starts with.
//
// Two formats, told apart by the first line:
//   CSV with the header arrival_s,prompt_tokens,output_tokens, optionally
//   followed by ,prefix_group and then ,prefix_tokens (an empty
//   prefix_group: no group);
//   JSON lines, one object per line with the same keys.
// A group without prefix_tokens shares as many tokens as the group's
// shortest prompt. Either may be gzip-compressed. Every problem is one
// InputError line "FILE: line N: problem".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/serve/scheduler.h"

namespace gpumem::serve {

inline constexpr uint64_t kMaxTraceRequests = 10'000'000;
inline constexpr uint64_t kMaxTraceBytes = 2ull << 30;  // before or after gzip

// Requests numbered 0, 1, ... in file order. max_model_len 0: lengths are
// not checked against a model.
// max_requests: kMaxTraceRequests, or less for tests.
std::vector<Request> parse_request_trace(std::string_view text, const std::string& name, uint32_t max_model_len = 0,
                                         uint64_t max_requests = kMaxTraceRequests);
std::vector<Request> read_request_trace(const std::string& path, uint32_t max_model_len = 0);

// The CSV form (with prefix_group and prefix_tokens when any request has a
// group), which parse_request_trace reads back unchanged.
std::string request_trace_csv(const std::vector<Request>& requests);

}  // namespace gpumem::serve
