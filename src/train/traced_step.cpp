#include "gpumem/train/traced_step.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "train/step_summary.h"

namespace gpumem::train {
namespace {

constexpr std::string_view kFormat = "gpumem-step";
constexpr int kVersion = 1;
// Limits that no real step reaches, so that a damaged file cannot make the
// reader allocate without bound: a 7B model's step has about 30,000
// allocations and 50,000 times.
constexpr uint64_t kMaxFileBytes = 1ull << 30;
constexpr int64_t kMaxTimes = 50'000'000;
// A traced step's time moves on once per operator, and most operators
// allocate (views do not): GPT-124M's step has 7 times per allocation. A
// file that claims far more times than its allocations explain would only
// make the timeline (one entry per time) large.
constexpr uint64_t kMaxTimesPerAllocation = 256;
constexpr uint64_t kMaxBytes = 1ull << 50;  // 1 PiB per allocation
constexpr uint64_t kMaxTotal = 1ull << 60;  // and in all

constexpr int kPhaseCount = 5;

class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& place, const std::string& what) const {
    throw InputError(fmt::format("{}: {}: {}", where_, place, what));
  }

  const nlohmann::json& member(const nlohmann::json& obj, const char* key, const std::string& place) const {
    if (!obj.is_object() || !obj.contains(key)) fail(place, fmt::format("key '{}' is missing", key));
    return obj.at(key);
  }
  std::string text(const nlohmann::json& obj, const char* key, const std::string& place, bool required = true) const {
    if (!obj.contains(key) && !required) return {};
    const auto& v = member(obj, key, place);
    if (!v.is_string()) fail(place, fmt::format("'{}' is not a string", key));
    return v.get<std::string>();
  }
  uint64_t count(const nlohmann::json& obj, const char* key, const std::string& place, uint64_t max) const {
    const auto& v = member(obj, key, place);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(place, fmt::format("'{}' is not a non-negative integer", key));
    const uint64_t n = v.get<uint64_t>();
    if (n > max) fail(place, fmt::format("'{}' is {}, more than {}", key, n, max));
    return n;
  }

 private:
  std::string where_;
};

// The enum value whose to_string() is `name`: the document spells phases and
// categories as every report and JSON document does.
template <typename T>
std::optional<T> named(const std::string& name, int count) {
  for (int i = 0; i < count; ++i) {
    if (name == to_string(static_cast<T>(i))) return static_cast<T>(i);
  }
  return std::nullopt;
}

Device device_named(const std::string& name, const Reader& r) {
  if (name == "cuda") return Device::kCuda;
  if (name == "cpu") return Device::kCpu;
  r.fail("settings.device", fmt::format("'{}' is not cuda or cpu", name));
}

}  // namespace

TrainingStep parse_traced_step(std::string_view text, const std::string& where, const TrainOptions& device) {
  const Reader r(where);
  nlohmann::json doc;
  try {
    doc = parse_bounded_json(text, where);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON ({})", where, e.what()));
  }
  if (!doc.is_object() || r.text(doc, "format", "document", true) != kFormat)
    r.fail("document", "not a gpumem-step document (written by gpumem.torch.estimate)");
  const uint64_t version = r.count(doc, "version", "document", 1000);
  if (version != kVersion)
    r.fail("version", fmt::format("version {} is not {}; this gpumem reads version {}", version, kVersion, kVersion));

  TrainingStep step;
  step.options = device;
  step.model = r.text(doc, "model", "document");
  TrainingStep::Traced traced;
  traced.with = r.text(doc, "traced_with", "document");
  const auto& settings = r.member(doc, "settings", "document");
  step.options.device = device_named(r.text(settings, "device", "settings"), r);
  traced.optimizer = r.text(settings, "optimizer", "settings");
  traced.precision = r.text(settings, "precision", "settings");
  step.traced = std::move(traced);
  const auto& params = r.member(doc, "parameters", "document");
  step.trainable_parameters = r.count(params, "trainable", "parameters", kMaxTotal);
  step.frozen_parameters = r.count(params, "frozen", "parameters", kMaxTotal);
  // What the tracer could not price (optional: an RNN kernel's workspace).
  if (doc.contains("warnings")) {
    const auto& warnings = doc.at("warnings");
    if (!warnings.is_array() || warnings.size() > 100) r.fail("warnings", "not an array of at most 100 strings");
    for (size_t i = 0; i < warnings.size(); ++i) {
      if (!warnings[i].is_string()) r.fail(fmt::format("warnings[{}]", i), "not a string");
      step.warnings.push_back(warnings[i].get<std::string>());
    }
  }
  const int end = static_cast<int>(r.count(doc, "end", "document", kMaxTimes));
  if (end < 1) r.fail("end", "the step has no time");

  // Phase starts: each phase runs from its start to the next one's.
  std::vector<Phase> phase_of_time(static_cast<size_t>(end), Phase::kResident);
  const auto& phases = r.member(doc, "phases", "document");
  if (!phases.is_array() || phases.size() > static_cast<size_t>(kPhaseCount))
    r.fail("phases", "not an array of at most 5 phases");
  int previous_start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string place = fmt::format("phases[{}]", i);
    const auto phase = named<Phase>(r.text(phases[i], "phase", place), kPhaseCount);
    if (!phase) r.fail(place, "phase is not resident, forward, loss, backward or optimizer");
    const int start = static_cast<int>(r.count(phases[i], "start", place, static_cast<uint64_t>(end)));
    if (start < previous_start) r.fail(place, "phases are not in time order");
    previous_start = start;
    std::fill(phase_of_time.begin() + start, phase_of_time.end(), *phase);
  }

  const auto& allocations = r.member(doc, "allocations", "document");
  if (allocations.is_array() &&
      static_cast<uint64_t>(end) > kMaxTimesPerAllocation * (static_cast<uint64_t>(allocations.size()) + 1)) {
    r.fail("end", fmt::format("{} times for {} allocations: more than {} per allocation, not a traced step", end,
                              allocations.size(), kMaxTimesPerAllocation));
  }
  if (!allocations.is_array()) r.fail("allocations", "not an array");
  std::vector<std::string> op_of_time(static_cast<size_t>(end));
  uint64_t total = 0;
  step.allocations.reserve(allocations.size());
  for (size_t i = 0; i < allocations.size(); ++i) {
    const std::string place = fmt::format("allocations[{}]", i);
    const auto& a = allocations[i];
    Allocation out;
    out.tensor = r.text(a, "tensor", place);
    out.op = r.text(a, "op", place);
    out.module = r.text(a, "module", place, false);
    const auto phase = named<Phase>(r.text(a, "phase", place), kPhaseCount);
    if (!phase) r.fail(place, "phase is not resident, forward, loss, backward or optimizer");
    out.phase = *phase;
    const auto category = named<Category>(r.text(a, "category", place), kCategories);
    if (!category) {
      r.fail(place, "category is not weights, gradients, optimizer_states, inputs, saved_activations or transient");
    }
    out.category = *category;
    out.bytes = r.count(a, "bytes", place, kMaxBytes);
    total += out.bytes;
    if (total > kMaxTotal) r.fail(place, "the allocations add up to more than 1 EiB");
    out.alloc_time = static_cast<int>(r.count(a, "alloc", place, static_cast<uint64_t>(end - 1)));
    out.free_time = static_cast<int>(r.count(a, "free", place, static_cast<uint64_t>(end)));
    if (out.free_time <= out.alloc_time) r.fail(place, "free is not after alloc");
    if (!out.module.empty()) out.op = out.module + ": " + out.op;
    auto& label = op_of_time[static_cast<size_t>(out.alloc_time)];
    if (label.empty()) label = out.op;
    if (out.category == Category::kWeights) step.parameter_bytes += out.bytes;
    step.allocations.push_back(std::move(out));
  }
  // A time without an allocation of its own says what ran last.
  for (size_t t = 1; t < op_of_time.size(); ++t) {
    if (op_of_time[t].empty()) op_of_time[t] = op_of_time[t - 1];
  }
  summarize_step(step, phase_of_time, op_of_time);
  return step;
}

TrainingStep load_traced_step(const std::string& path, const TrainOptions& device) {
  bool gzipped = false;
  const std::string text = read_file(path, kMaxFileBytes, "too large for a traced step", &gzipped);
  return parse_traced_step(text, path, device);
}

}  // namespace gpumem::train
