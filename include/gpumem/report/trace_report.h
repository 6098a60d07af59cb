#pragma once
// Reports of `gpumem trace stats` and `gpumem replay`: readable text in
// binary units, and JSON documents with exact bytes (schemas in docs/trace.md).
#include <string>

#include <nlohmann/json.hpp>

#include "gpumem/trace/replay.h"
#include "gpumem/trace/trace_stats.h"

namespace gpumem {

inline constexpr int kTraceStatsSchemaVersion = 2;  // 2: live_bytes_at_trough (1: live_bytes_after)
// 2: peak_allocated_bytes/peak_allocated_event became traced_peak_bytes/
// traced_peak_event (they never counted the baseline), baseline_bytes added.
inline constexpr int kReplaySchemaVersion = 2;

std::string render_trace_stats_text(const trace::TraceStats& stats, const std::string& source);
nlohmann::ordered_json trace_stats_to_json(const trace::TraceStats& stats, const std::string& source);

std::string render_replay_text(const trace::ReplayReport& report);
nlohmann::ordered_json replay_to_json(const trace::ReplayReport& report);

}  // namespace gpumem
