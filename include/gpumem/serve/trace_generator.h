#pragma once
// Request traces made up from a fixed seed, shaped like published serving
// workloads: Poisson arrivals (optionally with bursts), lognormal prompt and
// output lengths, and shared system prompts (prefix groups). The same seed gives the same trace with
// any standard library: the random numbers come from SplitMix64 and the
// distributions are computed here, not by <random> (only libm's exp, log
// and cos could round a rare length differently).
//
// Where the numbers come from (docs/serve.md has the table): the length
// means are the vLLM paper's dataset statistics (Kwon et al., "Efficient
// Memory Management for Large Language Model Serving with PagedAttention",
// SOSP 2023, arXiv:2309.06180, section 6.1 and Figure 11): ShareGPT
// prompts average 161.31 tokens and outputs 337.99; Alpaca 19.31 and 58.45.
// The spreads (lognormal sigma) are our choice, not fitted.
#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/serve/scheduler.h"

namespace gpumem::serve {

struct TraceShape {
  std::string name;
  uint64_t seed = 1;
  double rate_per_s = 1;  // mean arrivals per second outside bursts
  uint64_t requests = 1000;
  double prompt_mean = 161.31, prompt_sigma = 1.0;  // lognormal: the mean and the sigma of ln(tokens)
  double output_mean = 337.99, output_sigma = 1.0;
  uint32_t max_model_len = 4096;  // prompt + output is cut to fit (output first, then prompt)
  // Shared system prompts: a request joins one of `prefix_groups` groups
  // (chosen uniformly) with probability prefix_fraction; its prompt is then
  // the group's prefix followed by its own lognormal part.
  uint32_t prefix_groups = 0;
  double prefix_fraction = 0;
  uint32_t prefix_tokens = 0;  // each group's prefix
  // Bursts: every burst_period_s the rate is multiplied by burst_factor for
  // burst_length_s (0: no bursts).
  double burst_period_s = 0, burst_length_s = 0, burst_factor = 1;
};

// The presets: "sharegpt", "alpaca", "system-prompt" (ShareGPT lengths, 4
// shared 1,024-token system prompts on 80% of requests), "bursty"
// (ShareGPT at 8x the rate for 10 s of every minute). InputError for another
// name, listing them.
TraceShape trace_preset(const std::string& name);
std::vector<std::string> trace_preset_names();

// Arrivals rounded to the millisecond, so the CSV form reads back the same.
std::vector<Request> generate_trace(const TraceShape& shape);

}  // namespace gpumem::serve
