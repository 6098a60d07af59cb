// Text and JSON for `gpumem trace stats` and `gpumem replay`.
#include "gpumem/report/trace_report.h"
#include "gpumem/common/flag_names.h"

#include <fmt/format.h>

#include "gpumem/alloc/policies/policy_registry.h"
#include "gpumem/common/units.h"

namespace gpumem {
namespace {

std::string bytes(std::int64_t n) { return format_bytes(static_cast<std::uint64_t>(n < 0 ? 0 : n)); }
std::string count(std::uint64_t n) { return format_count(n); }

nlohmann::ordered_json anomalies_json(const trace::Anomalies& a) {
  return {{"unknown_frees", a.unknown_frees},
          {"double_frees", a.double_frees},
          {"live_address_allocations", a.live_address_allocs},
          {"negative_sizes", a.negative_sizes},
          {"examples", a.examples}};
}

void anomalies_text(std::string& out, const trace::Anomalies& a) {
  if (a.total() == 0) return;
  out += fmt::format("Skipped {} events that make no sense (" GPUMEM_FLAG_STRICT " fails on the first):\n",
                     count(a.total()));
  if (a.unknown_frees)
    out += fmt::format("  {} frees of addresses the trace never allocated\n", count(a.unknown_frees));
  if (a.double_frees) out += fmt::format("  {} double frees\n", count(a.double_frees));
  if (a.live_address_allocs)
    out += fmt::format("  {} allocations at an address still live\n", count(a.live_address_allocs));
  if (a.negative_sizes) out += fmt::format("  {} negative sizes\n", count(a.negative_sizes));
  for (const std::string& e : a.examples) out += "  e.g. " + e + "\n";
}

// "by_context" entries: what never_freed and live_at_peak list.
nlohmann::ordered_json by_context_json(const std::vector<trace::ContextBytes>& groups) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& c : groups) out.push_back({{"context", c.label}, {"allocations", c.count}, {"bytes", c.bytes}});
  return out;
}

void by_context_text(std::string& out, const std::vector<trace::ContextBytes>& groups) {
  for (const auto& c : groups) out += fmt::format("  {:>12} in {:>8}  {}\n", bytes(c.bytes), count(c.count), c.label);
}

// memory_viz's most used view: what holds the memory at the peak.
void live_at_peak_text(std::string& out, const std::vector<trace::ContextBytes>& groups, std::int64_t baseline) {
  if (groups.empty() && !baseline) return;
  out += "Live at the peak, by operator or stack (largest first, up to 10):\n";
  if (baseline) out += fmt::format("  {:>12}              allocated before recording began\n", bytes(baseline));
  by_context_text(out, groups);
}

// One line per policy that beats the one the trace was recorded under.
void advice_text(std::string& out, const trace::ReplayReport& r) {
  if (r.current_policy.empty()) return;
  const trace::PolicyResult* current = nullptr;
  for (const auto& p : r.policies)
    if (p.name == r.current_policy) current = &p;
  if (!current) {
    out += fmt::format("Advice: none; " GPUMEM_FLAG_POLICY " left out {}, the policy the trace was recorded under\n\n",
                       r.current_policy);
    return;
  }
  if (r.advice.empty()) {
    out += fmt::format(
        "Advice: no policy replayed does better than {} ({}), the policy the trace was recorded "
        "under\n\n",
        r.current_policy, alloc::policy_named(r.current_policy).setting);
    return;
  }
  out += fmt::format("Advice against {} ({}), the policy the trace was recorded under (" GPUMEM_FLAG_CURRENT
                     " says otherwise):\n",
                     r.current_policy, alloc::policy_named(r.current_policy).setting);
  for (const trace::Advice& a : r.advice) {
    if (a.fits_where_current_does_not)
      out += fmt::format("  {} would have fit in {} ({} reserved at the peak), where {} runs out at event {}\n",
                         a.setting, bytes(static_cast<std::int64_t>(r.capacity)), bytes(a.peak_reserved),
                         r.current_policy, count(*current->oom_at_event));
    else
      out += fmt::format("  {} would have saved {} at the peak ({} reserved, not {})\n", a.setting,
                         bytes(a.saved_bytes), bytes(a.peak_reserved), bytes(current->peak_reserved));
  }
  out += "\n";
}

std::string event_time(std::size_t event, std::int64_t time_ns) {
  if (time_ns == trace::kUnknown) return fmt::format("event {}", count(event));
  return fmt::format("event {} ({:.3f} ms into the trace)", count(event), double(time_ns) / 1e6);
}

std::int64_t since(std::int64_t time_ns, std::int64_t start_ns) {
  return time_ns == trace::kUnknown || start_ns == trace::kUnknown ? trace::kUnknown : time_ns - start_ns;
}

// As PyTorch's own out-of-memory message: the request, what the device had
// free, reserved and allocated, and whether fragmentation is why.
void oom_text(std::string& out, const trace::OomReport& o, std::int64_t start_ns) {
  out += fmt::format("Out of memory at {}: tried to allocate {}", event_time(o.event, since(o.time_ns, start_ns)),
                     bytes(o.requested));
  if (o.device_free) out += fmt::format(" with {} free on the device", bytes(o.device_free));
  if (!o.reserved_known) {
    out += fmt::format("\n  then: allocated {} (the trace records no segments, so reserved memory is unknown)\n",
                       bytes(o.allocated));
  } else {
    out += fmt::format("\n  {}: reserved {}, allocated {}; {} reserved but unallocated, the largest free block {}\n",
                       o.from_history ? "then" : "at the snapshot (the history has no segment events before the error)",
                       bytes(o.reserved), bytes(o.allocated), bytes(o.reserved - o.allocated),
                       bytes(o.largest_free_block));
  }
  out += "  the request came from " + o.label + "\n";
  if (o.reserved_known && o.reserved - o.allocated >= o.requested && o.largest_free_block < o.requested)
    out +=
        "  fragmentation: the reserved but unallocated memory would hold the request, no free block does; "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets free memory join (see `gpumem replay`)\n";
}

void segments_text(std::string& out, const trace::SegmentState& g) {
  if (!g.present) return;
  const double fragmentation = g.reserved ? 1.0 - double(g.allocated) / double(g.reserved) : 0.0;
  out += fmt::format("At the snapshot: {} segments, reserved {}, allocated {}", count(g.segments), bytes(g.reserved),
                     bytes(g.allocated));
  if (g.pending_free) out += fmt::format(", {} freed but waiting on a stream", bytes(g.pending_free));
  out += fmt::format("\n  fragmentation {:.1f}% (reserved but not allocated), the largest free block {}\n",
                     100.0 * fragmentation, bytes(g.largest_free_block));
  if (g.live.empty()) return;
  out += "Live at the snapshot, by stack (largest first, up to 10):\n";
  by_context_text(out, g.live);
}

nlohmann::ordered_json segments_json(const trace::SegmentState& g) {
  if (!g.present) return nullptr;
  return {{"count", g.segments},
          {"reserved_bytes", g.reserved},
          {"allocated_bytes", g.allocated},
          {"pending_free_bytes", g.pending_free},
          {"fragmentation", g.reserved ? 1.0 - double(g.allocated) / double(g.reserved) : 0.0},
          {"largest_free_block_bytes", g.largest_free_block},
          {"live_by_context", by_context_json(g.live)}};
}

nlohmann::ordered_json ooms_json(const std::vector<trace::OomReport>& ooms) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& o : ooms)
    out.push_back(
        {{"event", o.event},
         {"time_ns", o.time_ns == trace::kUnknown ? nlohmann::ordered_json() : nlohmann::ordered_json(o.time_ns)},
         {"requested_bytes", o.requested},
         {"device_free_bytes", o.device_free},
         {"from_history", o.from_history},
         {"reserved_known", o.reserved_known},
         {"reserved_bytes", o.reserved},
         {"allocated_bytes", o.allocated},
         {"largest_free_block_bytes", o.largest_free_block},
         {"context", o.label}});
  return out;
}

}  // namespace

std::string render_trace_stats_text(const trace::TraceStats& s, const std::string& source) {
  std::string out =
      fmt::format("Trace {} ({}): {} events, {}\n", source, s.format, count(s.events), trace::device_name(s.device));
  for (const std::string& w : s.warnings) out += "warning: " + w + "\n";
  std::string actions;
  for (const auto& [name, n] : s.actions)
    actions += fmt::format("{}{} {}", actions.empty() ? "" : ", ", name, count(n));
  if (!actions.empty()) out += "  " + actions + "\n";
  // A snapshot without history: its segments are all there is to report.
  if (s.allocations == 0 && s.segments.present) {
    out +=
        "No allocation history: the snapshot was taken without torch.cuda.memory._record_memory_history(); "
        "its segments describe the memory allocated when it was taken\n";
    segments_text(out, s.segments);
    for (const auto& o : s.ooms) oom_text(out, o, s.start_time_ns);
    anomalies_text(out, s.anomalies);
    return out;
  }
  out += fmt::format("Allocations: {} ({} in all), {} freed\n", count(s.allocations), bytes(s.allocated_bytes_total),
                     count(s.frees));
  const std::int64_t since_start = s.peak_time_ns == trace::kUnknown || s.start_time_ns == trace::kUnknown
                                       ? trace::kUnknown
                                       : s.peak_time_ns - s.start_time_ns;
  // Two peaks with two names: with a baseline, the peak the device saw and
  // the peak of what the trace itself allocated (what replay replays) differ.
  out += fmt::format("Peak allocated: {} at {}\n", bytes(s.peak_allocated), event_time(s.peak_event, since_start));
  if (s.baseline)
    out += fmt::format(
        "  counting {} allocated before recording began (the source's running total at its first "
        "event)\n",
        bytes(s.baseline));
  else if (s.source_peak_allocated != trace::kUnknown)
    out += "  counting from an empty device: nothing was allocated before recording began, per the source\n";
  else
    out +=
        "  counting the trace's allocations only: the source has no running totals to tell what was allocated "
        "before recording began\n";
  if (s.source_peak_allocated != trace::kUnknown)
    out += fmt::format("  the source's own largest running total: {}\n", bytes(s.source_peak_allocated));
  if (s.baseline)
    out += fmt::format("Traced peak: {} at event {}, the trace's own allocations (what `gpumem replay` replays)\n",
                       bytes(s.traced_peak), count(s.traced_peak_event));
  for (const auto& o : s.ooms) oom_text(out, o, s.start_time_ns);
  if (!s.largest.empty()) {
    out += "Largest allocations:\n";
    for (const auto& l : s.largest)
      out += fmt::format("  {:>12}  event {:>10}  {}  {}\n", bytes(l.size), count(l.event),
                         l.freed ? "freed " : "LIVE  ", l.label);
  }
  live_at_peak_text(out, s.live_at_peak, s.live_at_peak_baseline);
  out += fmt::format("Never freed: {} allocations, {}\n", count(s.never_freed), bytes(s.never_freed_bytes));
  by_context_text(out, s.never_freed_by_context);
  const trace::IterationReport& it = s.iterations;
  if (it.repeats) {
    out += fmt::format("Iterations: {} complete{}; {} iteration is {} allocations ({} events, {} allocated)\n",
                       count(it.iterations), it.from_profiler_steps ? " (torch.profiler's steps)" : "",
                       it.from_profiler_steps ? "the last" : "one", count(it.period), count(it.period_events),
                       bytes(it.bytes_per_iteration));
    if (it.first_allocation)
      out += fmt::format("  the first starts after {} set-up allocations\n", count(it.first_allocation));
    if (it.first_iteration_allocations > it.period)
      out += fmt::format(
          "  the first is {} allocations, {} more: what it allocates once (weights it builds, optimizer state, "
          "gradients)\n",
          count(it.first_iteration_allocations), count(it.first_iteration_allocations - it.period));
    else if (it.first_iteration_allocations < it.period)
      out += fmt::format("  the first is {} allocations, {} fewer\n", count(it.first_iteration_allocations),
                         count(it.period - it.first_iteration_allocations));
    std::string levels;
    for (std::int64_t v : it.live_at_trough) levels += (levels.empty() ? "" : ", ") + bytes(v);
    out += "  live at each one's lowest point: " + levels + "\n";
    if (it.shape == "steady growth")
      out += fmt::format("  steady growth: {} more per iteration (a leak that grows every step)\n",
                         bytes(it.growth_per_iteration));
    else if (it.shape == "step")
      out += fmt::format("  a step: {} more after iteration {}, then flat\n", bytes(it.growth_per_iteration),
                         it.step_iteration + 1);
    else
      out += "  flat: nothing accumulates from one iteration to the next\n";
    for (const auto& g : it.growing)
      out += fmt::format("    stays: {:>12}  {} allocation(s)  {}\n", bytes(g.bytes), count(g.count), g.label);
  } else {
    out += "Iterations: no repetition found\n";
  }
  segments_text(out, s.segments);
  anomalies_text(out, s.anomalies);
  return out;
}

nlohmann::ordered_json trace_stats_to_json(const trace::TraceStats& s, const std::string& source) {
  nlohmann::ordered_json j;
  j["schema_version"] = kTraceStatsSchemaVersion;
  j["trace"] = source;
  j["format"] = s.format;
  j["events"] = s.events;
  j["actions"] = s.actions;
  j["device"] = s.device;
  j["allocations"] = s.allocations;
  j["frees"] = s.frees;
  j["allocated_bytes_total"] = s.allocated_bytes_total;
  j["baseline_bytes"] = s.baseline;
  j["peak_allocated_bytes"] = s.peak_allocated;
  j["peak_event"] = s.peak_event;
  j["peak_time_ns"] =
      s.peak_time_ns == trace::kUnknown ? nlohmann::ordered_json() : nlohmann::ordered_json(s.peak_time_ns);
  j["traced_peak_bytes"] = s.traced_peak;
  j["traced_peak_event"] = s.traced_peak_event;
  j["source_peak_allocated_bytes"] = s.source_peak_allocated == trace::kUnknown
                                         ? nlohmann::ordered_json()
                                         : nlohmann::ordered_json(s.source_peak_allocated);
  auto& largest = j["largest_allocations"] = nlohmann::ordered_json::array();
  for (const auto& l : s.largest)
    largest.push_back({{"event", l.event}, {"size_bytes", l.size}, {"freed", l.freed}, {"context", l.label}});
  j["live_at_peak"] = {{"baseline_bytes", s.live_at_peak_baseline}, {"by_context", by_context_json(s.live_at_peak)}};
  j["never_freed"] = {{"allocations", s.never_freed},
                      {"bytes", s.never_freed_bytes},
                      {"by_context", by_context_json(s.never_freed_by_context)}};
  const trace::IterationReport& it = s.iterations;
  if (it.repeats) {
    j["iterations"] = {{"period_allocations", it.period},
                       {"period_events", it.period_events},
                       {"bytes_per_iteration", it.bytes_per_iteration},
                       {"first_allocation", it.first_allocation},
                       {"first_iteration_allocations", it.first_iteration_allocations},
                       {"count", it.iterations},
                       {"live_bytes_at_trough", it.live_at_trough},
                       {"growing_by_context", by_context_json(it.growing)},
                       {"shape", it.shape},
                       {"growth_bytes", it.growth_per_iteration},
                       {"found_from", it.from_profiler_steps ? "profiler-steps" : "repetition"}};
    if (it.shape == "step") j["iterations"]["step_after_iteration"] = it.step_iteration + 1;
  } else {
    j["iterations"] = nullptr;
  }
  j["out_of_memory"] = ooms_json(s.ooms);
  j["segments"] = segments_json(s.segments);
  j["skipped"] = anomalies_json(s.anomalies);
  j["warnings"] = s.warnings;
  return j;
}

std::string render_replay_text(const trace::ReplayReport& r) {
  std::string out = fmt::format("Replay of {} ({}): {} events, {} allocations on {}\n", r.source, r.format,
                                count(r.events), count(r.allocations), trace::device_name(r.device));
  out += fmt::format("Traced peak {} at event {}: the trace's own allocations", bytes(r.traced_peak),
                     count(r.traced_peak_event));
  if (r.baseline)
    out += fmt::format(", not counting the {} allocated before recording began (see `gpumem trace stats`)",
                       bytes(r.baseline));
  out += fmt::format("\nThe best packing needs at least {}", bytes(r.lower_bound));
  if (r.optimal_arena)
    out += fmt::format("; the planner packs it in {} ({}, {:.2f} s)", bytes(r.optimal_arena),
                       r.optimal_proven ? "optimal, proven" : "best found", r.optimal_seconds);
  out += "\n";
  if (r.capacity) out += fmt::format("Device capacity: {}\n", bytes(static_cast<std::int64_t>(r.capacity)));
  out += "\n";
  out += fmt::format("{:<20} {:>12} {:>10} {:>13} {:>10} {:>10}  {}\n", "policy", "peak reserved", "reserved/",
                     "fragmentation", "vs best", "device", r.capacity ? "out of memory" : "");
  out += fmt::format("{:<20} {:>12} {:>10} {:>13} {:>10} {:>10}\n", "", "", "allocated", "at peak", "packing", "calls");
  auto row = [&](const std::string& name, std::int64_t reserved, double frag, std::uint64_t calls, std::string oom,
                 bool ran_out) {
    const double ratio = r.traced_peak ? double(reserved) / double(r.traced_peak) : 0.0;
    const std::int64_t best = r.optimal_arena ? r.optimal_arena : r.lower_bound;
    // A policy that ran out stopped early: its peak is not comparable.
    std::string vs = best && !ran_out
                         ? fmt::format("{:+.1f}%", 100.0 * (double(reserved) - double(best)) / double(best))
                         : std::string("-");
    out += fmt::format("{:<20} {:>12} {:>10.3f} {:>12.1f}% {:>10} {:>10}  {}\n", name, bytes(reserved), ratio,
                       100.0 * frag, vs, calls == UINT64_MAX ? std::string("-") : count(calls), oom);
  };
  for (const auto& p : r.policies)
    row(p.name, p.peak_reserved, p.fragmentation_at_peak, p.upstream_calls,
        p.oom_at_event ? fmt::format("at event {}", count(*p.oom_at_event)) : (r.capacity ? "fits" : ""),
        p.oom_at_event.has_value());
  if (r.optimal_arena)
    row(r.optimal_proven ? "optimal" : "optimal (best found)", r.optimal_arena,
        1.0 - double(r.traced_peak) / double(r.optimal_arena), UINT64_MAX,
        r.capacity ? (static_cast<std::size_t>(r.optimal_arena) <= r.capacity ? "fits" : "does not fit") : "", false);
  out += "\n";
  advice_text(out, r);
  live_at_peak_text(out, r.live_at_peak, 0);
  anomalies_text(out, r.anomalies);
  return out;
}

nlohmann::ordered_json replay_to_json(const trace::ReplayReport& r) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReplaySchemaVersion;
  j["trace"] = r.source;
  j["format"] = r.format;
  j["events"] = r.events;
  j["device"] = r.device;
  j["allocations"] = r.allocations;
  j["capacity_bytes"] = r.capacity ? nlohmann::ordered_json(r.capacity) : nlohmann::ordered_json();
  j["baseline_bytes"] = r.baseline;
  j["traced_peak_bytes"] = r.traced_peak;
  j["traced_peak_event"] = r.traced_peak_event;
  j["lower_bound_bytes"] = r.lower_bound;
  j["optimal_arena_bytes"] = r.optimal_arena ? nlohmann::ordered_json(r.optimal_arena) : nlohmann::ordered_json();
  j["optimal_proven"] = r.optimal_proven;
  j["iterations"] = r.iterations;
  j["steady_peak_allocated_bytes"] =
      r.steady_peak_allocated >= 0 ? nlohmann::ordered_json(r.steady_peak_allocated) : nlohmann::ordered_json();
  j["live_at_peak"] = by_context_json(r.live_at_peak);
  j["current_policy"] = r.current_policy.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.current_policy);
  auto& advice = j["advice"] = nlohmann::ordered_json::array();
  for (const trace::Advice& a : r.advice)
    advice.push_back({{"policy", a.policy},
                      {"setting", a.setting},
                      {"peak_reserved_bytes", a.peak_reserved},
                      {"saved_bytes", a.saved_bytes},
                      {"fits_where_current_does_not", a.fits_where_current_does_not}});
  auto& policies = j["policies"] = nlohmann::ordered_json::array();
  for (const auto& p : r.policies) {
    policies.push_back(
        {{"name", p.name},
         {"peak_reserved_bytes", p.peak_reserved},
         {"allocated_at_peak_bytes", p.allocated_at_peak},
         {"fragmentation_at_peak", p.fragmentation_at_peak},
         {"upstream_calls", p.upstream_calls},
         {"oom_at_event", p.oom_at_event ? nlohmann::ordered_json(*p.oom_at_event) : nlohmann::ordered_json()},
         {"steady_peak_reserved_bytes",
          p.steady_peak_reserved >= 0 ? nlohmann::ordered_json(p.steady_peak_reserved) : nlohmann::ordered_json()},
         {"replay_seconds", p.seconds}});
    if (p.plan) {
      policies.back()["planned_allocations"] = p.plan->planned;
      policies.back()["missed_allocations"] = p.plan->missed;
    }
  }
  j["skipped"] = anomalies_json(r.anomalies);
  return j;
}

}  // namespace gpumem
