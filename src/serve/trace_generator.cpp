#include "gpumem/serve/trace_generator.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "gpumem/common/error.h"

namespace gpumem::serve {
namespace {

// SplitMix64 (Steele, Lea and Flood, 2014): small, fast, and the same
// sequence on every platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // In (0, 1): never 0, so its logarithm is finite.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double exponential(double rate) { return -std::log(uniform()) / rate; }
  double normal() {  // Box-Muller, one of the pair
    return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform());
  }
  // A lognormal with this mean: mu = ln(mean) - sigma^2 / 2.
  double lognormal(double mean, double sigma) {
    return std::exp(std::log(mean) - sigma * sigma / 2 + sigma * normal());
  }

 private:
  uint64_t state_;
};

uint32_t tokens(double x) { return static_cast<uint32_t>(std::clamp(std::llround(x), 1ll, 1ll << 30)); }

}  // namespace

std::vector<std::string> trace_preset_names() { return {"sharegpt", "alpaca", "system-prompt", "bursty"}; }

TraceShape trace_preset(const std::string& name) {
  TraceShape s;
  s.name = name;
  if (name == "sharegpt") {
    s.rate_per_s = 2;
  } else if (name == "alpaca") {
    s.rate_per_s = 10;
    s.prompt_mean = 19.31;
    s.prompt_sigma = 0.6;
    s.output_mean = 58.45;
    s.output_sigma = 0.8;
  } else if (name == "system-prompt") {
    s.rate_per_s = 2;
    s.prefix_groups = 4;
    s.prefix_fraction = 0.8;
    s.prefix_tokens = 1024;
  } else if (name == "bursty") {
    s.rate_per_s = 1;
    s.burst_period_s = 60;
    s.burst_length_s = 10;
    s.burst_factor = 8;
  } else {
    std::string names;
    for (const auto& n : trace_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(fmt::format(GPUMEM_FLAG_GENERATE ": unknown preset '{}' (presets: {})", printable(name), names));
  }
  return s;
}

std::vector<Request> generate_trace(const TraceShape& s) {
  if (!(s.rate_per_s > 0) || !(s.prompt_mean >= 1) || !(s.output_mean >= 1) || s.max_model_len < 2)
    throw InputError(
        "trace generator: the rate must be positive, the means at least 1 token, max_model_len at least 2");
  Random rng(s.seed);
  std::vector<Request> out;
  out.reserve(s.requests);
  const bool bursts = s.burst_period_s > 0 && s.burst_length_s > 0 && s.burst_factor > 1;
  const double peak = bursts ? s.rate_per_s * s.burst_factor : s.rate_per_s;
  double t = 0;
  while (out.size() < s.requests) {
    // Thinning (Lewis and Shedler, 1979): candidates at the peak rate, each
    // kept with probability rate(t) / peak.
    t += rng.exponential(peak);
    if (bursts) {
      const bool in_burst = std::fmod(t, s.burst_period_s) < s.burst_length_s;
      const double keep = in_burst ? 1.0 : 1.0 / s.burst_factor;
      if (rng.uniform() >= keep) continue;
    }
    Request r;
    r.id = out.size();
    r.arrival_s = std::round(t * 1000) / 1000;
    uint32_t prefix = 0;
    if (s.prefix_groups > 0 && rng.uniform() < s.prefix_fraction) {
      r.prefix_group = static_cast<int64_t>(rng.next() % s.prefix_groups);
      prefix = s.prefix_tokens;
    }
    uint64_t prompt = uint64_t{prefix} + tokens(rng.lognormal(s.prompt_mean, s.prompt_sigma));
    uint64_t output = tokens(rng.lognormal(s.output_mean, s.output_sigma));
    // Cut to max_model_len: the output first (to at most half), then the prompt.
    if (prompt + output > s.max_model_len)
      output = std::max<uint64_t>(1, std::min<uint64_t>(output, s.max_model_len / 2));
    if (prompt + output > s.max_model_len) prompt = s.max_model_len - output;
    prefix = static_cast<uint32_t>(std::min<uint64_t>(prefix, prompt));
    r.prompt_tokens = static_cast<uint32_t>(prompt);
    r.output_tokens = static_cast<uint32_t>(output);
    r.prefix_tokens = r.prefix_group >= 0 ? prefix : 0;
    out.push_back(r);
  }
  return out;
}

}  // namespace gpumem::serve
