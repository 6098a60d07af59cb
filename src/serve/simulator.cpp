#include "gpumem/serve/simulator.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "gpumem/common/device_defaults.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"

namespace gpumem::serve {
namespace {

// Nearest rank: the smallest value with at least p of the values at or below it.
double percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
  const size_t i = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(i), values.end());
  return values[i];
}

// Time-weighted sums of the KV figures, and the spans of non-zero
// utilisation for the series: state proportional to the steps simulated,
// not to the seconds they span (two requests 1e10 s apart once made one
// bucket per simulated second, gigabytes of them).
struct Meter {
  double start = 0, weighted_util = 0, weighted_waste = 0, peak = 0;
  struct Span {
    double from, to, util;  // seconds since start
  };
  std::vector<Span> spans;

  void add(double t0, double t1, double util, double waste) {
    if (!(t1 > t0)) return;
    weighted_util += util * (t1 - t0);
    weighted_waste += waste * (t1 - t0);
    peak = std::max(peak, util);
    if (util > 0) spans.push_back({t0 - start, t1 - start, util});
  }

  // Utilisation x seconds within each of `count` windows of `width` seconds.
  std::vector<double> integrate(size_t count, double width) const {
    std::vector<double> sums(count, 0.0);
    for (const Span& s : spans) {
      size_t w = static_cast<size_t>(s.from / width);
      for (double a = s.from; a < s.to && w < count; ++w) {
        const double end = std::min(s.to, static_cast<double>(w + 1) * width);
        sums[w] += s.util * (end - a);
        a = end;
      }
    }
    return sums;
  }
};

}  // namespace

double step_seconds(const ModelCost& cost, const TimeModel& time, const StepResult& step) {
  double tokens = 0, attention = 0, kv_read = 0;
  for (const ScheduledSequence& s : step.scheduled) {
    tokens += s.tokens;
    attention += static_cast<double>(s.tokens) * (static_cast<double>(s.context_tokens) + s.tokens);
    kv_read += static_cast<double>(s.context_tokens) + s.tokens;
  }
  const double flops =
      2.0 * static_cast<double>(cost.parameters) * tokens + 4.0 * static_cast<double>(cost.attention_width) * attention;
  const double bytes = static_cast<double>(cost.weight_bytes) + static_cast<double>(cost.kv_bytes_per_token) * kv_read;
  return std::max(flops / time.flops_per_s, bytes / time.bytes_per_s) + time.step_overhead_s +
         static_cast<double>(step.swapped_bytes) / kDefaultPcieBytesPerSecond;
}

PolicyRun simulate(const ServeSetup& setup, Policy policy, const std::vector<Request>& requests) {
  SchedulerConfig config = setup.scheduler;
  config.policy = policy;
  const std::unique_ptr<Scheduler> scheduler = make_scheduler(config);

  struct State {
    double first_token_s = -1, finish_s = -1;
  };
  std::vector<State> state(requests.size());
  PolicyRun run;
  run.name = policy_name(policy);
  run.requests = requests.size();
  if (requests.empty()) return run;
  run.first_arrival_s = requests.front().arrival_s;

  Meter meter;
  meter.start = run.first_arrival_s;
  double t = run.first_arrival_s;
  size_t next = 0;
  uint64_t empty_steps = 0;
  const auto sample = [&](double t0, double t1) {
    const KvUsage u = scheduler->usage();
    if (u.pool_slots == 0) return;
    const double pool = static_cast<double>(u.pool_slots);
    const double used = static_cast<double>(u.used_slots);
    const double reserved = static_cast<double>(std::max(u.reserved_slots, u.used_slots));
    meter.add(t0, t1, used / pool, (reserved - used) / pool);
  };
  while (next < requests.size() || !scheduler->idle()) {
    while (next < requests.size() && requests[next].arrival_s <= t) {
      Request r = requests[next];
      r.id = next++;
      scheduler->add(r);
    }
    if (scheduler->idle()) {
      const double t1 = requests[next].arrival_s;
      sample(t, t1);
      t = t1;
      continue;
    }
    const StepResult step = scheduler->step();
    ++run.steps;
    if (step.scheduled.empty()) {
      // Nothing fits until something arrives (or never: a policy bug).
      if (next < requests.size()) {
        const double t1 = requests[next].arrival_s;
        sample(t, t1);
        t = t1;
        continue;
      }
      if (++empty_steps > 1000)
        throw std::runtime_error(
            fmt::format("serve-sim: the {} scheduler made no progress in 1000 steps with work left", run.name));
      continue;
    }
    empty_steps = 0;
    const double t1 = t + step_seconds(setup.cost, setup.time, step);
    uint64_t running = 0;
    for (const ScheduledSequence& s : step.scheduled) {
      ++running;
      if (s.request_id >= state.size()) throw std::runtime_error("serve-sim: the scheduler ran an unknown request");
      State& st = state[s.request_id];
      // The step that computes a prompt's last token samples the first output token.
      if (st.first_token_s < 0 && (!s.prefill || s.context_tokens + s.tokens >= requests[s.request_id].prompt_tokens))
        st.first_token_s = t1;
    }
    run.peak_running = std::max<uint32_t>(run.peak_running, static_cast<uint32_t>(running));
    for (uint64_t id : step.finished) {
      if (id >= state.size()) throw std::runtime_error("serve-sim: the scheduler finished an unknown request");
      if (state[id].first_token_s < 0) state[id].first_token_s = t1;
      state[id].finish_s = t1;
    }
    run.preemptions += step.preempted.size();
    run.recomputed_tokens += step.recomputed_tokens;
    run.swapped_bytes += step.swapped_bytes;
    run.prefix_hit_tokens += step.prefix_hit_tokens;
    run.prefix_query_tokens += step.prefix_query_tokens;
    sample(t, t1);
    t = t1;
  }
  run.end_s = t;

  std::vector<double> ttft, latency;
  ttft.reserve(requests.size());
  latency.reserve(requests.size());
  double last_finish = run.first_arrival_s;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (state[i].finish_s < 0) continue;
    ++run.completed;
    run.output_tokens += requests[i].output_tokens;
    ttft.push_back(state[i].first_token_s - requests[i].arrival_s);
    latency.push_back(state[i].finish_s - requests[i].arrival_s);
    last_finish = std::max(last_finish, state[i].finish_s);
  }
  run.end_s = last_finish;
  const double makespan = run.end_s - run.first_arrival_s;
  run.throughput_tokens_per_s = makespan > 0 ? static_cast<double>(run.output_tokens) / makespan : 0;
  run.kv_utilization_mean = makespan > 0 ? meter.weighted_util / makespan : 0;
  run.waste_fraction = makespan > 0 ? meter.weighted_waste / makespan : 0;
  run.kv_utilization_peak = meter.peak;
  run.prefix_hit_rate = run.prefix_query_tokens > 0
                            ? static_cast<double>(run.prefix_hit_tokens) / static_cast<double>(run.prefix_query_tokens)
                            : 0;
  run.ttft_p50_s = percentile(ttft, 0.50);
  run.ttft_p99_s = percentile(ttft, 0.99);
  run.latency_p50_s = percentile(latency, 0.50);
  run.latency_p99_s = percentile(latency, 0.99);
  // At most 100 points: whole seconds merged.
  const double n = std::ceil(makespan);
  const double group = std::max(1.0, std::ceil(n / 100));
  run.series_interval_s = group;
  const size_t windows = static_cast<size_t>(std::ceil(n / group));
  const std::vector<double> sums = meter.integrate(windows, group);
  for (size_t w = 0; w < windows; ++w) {
    const double from = static_cast<double>(w) * group;
    const double span = std::min(makespan, from + group) - from;
    run.kv_utilization_series.push_back(span > 0 ? sums[w] / span : 0);
  }
  return run;
}

ServeSimulation simulate_all(const ServeSetup& setup, const std::vector<Policy>& policies,
                             const std::vector<Request>& requests) {
  ServeSimulation sim;
  sim.setup = setup;
  sim.requests = requests.size();
  if (!requests.empty()) {
    sim.trace_span_s = requests.back().arrival_s - requests.front().arrival_s;
    double prompt = 0, output = 0;
    for (const Request& r : requests) {
      prompt += r.prompt_tokens;
      output += r.output_tokens;
    }
    sim.mean_prompt_tokens = prompt / static_cast<double>(requests.size());
    sim.mean_output_tokens = output / static_cast<double>(requests.size());
  }
  for (Policy p : policies) sim.runs.push_back(simulate(setup, p, requests));
  return sim;
}

}  // namespace gpumem::serve
