// TEMPORARY STAND-IN for make_scheduler() and policy_name() until the real
// paged KV-cache manager and policies land (branch serve-manager, issue 14).
// Delete this file, and the (SERVE-STANDIN) lines in src/CMakeLists.txt,
// tests/CMakeLists.txt and bench/CMakeLists.txt, at that merge. It is never
// part of libgpumem.
//
// Every policy behaves the same here: first come first served, each
// request reserves prompt + output slots at admission (it cheats: it reads
// output_tokens), prefills chunked to the token budget after the running
// decodes, no preemption, no prefix cache. Enough for the simulator's
// invariants, nothing to compare policies with.
#include <deque>
#include <memory>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/serve/scheduler.h"

namespace gpumem::serve {

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kContiguous: return "contiguous";
    case Policy::kVllm: return "vllm";
    case Policy::kGpumem: return "gpumem";
  }
  return "?";
}

namespace {

class FakeScheduler : public Scheduler {
 public:
  explicit FakeScheduler(const SchedulerConfig& c) : c_(c), pool_(c.kv_budget_bytes / c.kv_bytes_per_token) {}
  void add(const Request& r) override { waiting_.push_back(r); }
  StepResult step() override {
    StepResult res;
    uint32_t budget = c_.token_budget;
    while (!waiting_.empty() && running_.size() < c_.max_sequences &&
           reserved_ + waiting_.front().prompt_tokens + waiting_.front().output_tokens <= pool_) {
      reserved_ += waiting_.front().prompt_tokens + waiting_.front().output_tokens;
      running_.push_back({waiting_.front()});
      waiting_.pop_front();
    }
    for (Seq& s : running_) {
      if (budget == 0) break;
      if (s.computed == s.r.prompt_tokens) {
        res.scheduled.push_back({s.r.id, 1, s.kv(), false});
        --budget;
        ++s.generated;
      }
    }
    for (Seq& s : running_) {
      if (budget == 0) break;
      if (s.computed < s.r.prompt_tokens) {
        const uint32_t chunk = std::min(budget, s.r.prompt_tokens - s.computed);
        res.scheduled.push_back({s.r.id, chunk, s.computed, true});
        budget -= chunk;
        s.computed += chunk;
        if (s.computed == s.r.prompt_tokens) s.generated = 1;
      }
    }
    std::vector<Seq> still;
    for (Seq& s : running_) {
      if (s.generated == s.r.output_tokens) {
        res.finished.push_back(s.r.id);
        reserved_ -= s.r.prompt_tokens + s.r.output_tokens;
      } else {
        still.push_back(s);
      }
    }
    running_.swap(still);
    return res;
  }
  KvUsage usage() const override {
    KvUsage u;
    u.pool_slots = pool_;
    u.reserved_slots = reserved_;
    for (const Seq& s : running_) u.used_slots += s.kv();
    u.running = static_cast<uint32_t>(running_.size());
    u.waiting = static_cast<uint32_t>(waiting_.size());
    return u;
  }
  bool idle() const override { return running_.empty() && waiting_.empty(); }

 private:
  struct Seq {
    Request r;
    uint32_t computed = 0, generated = 0;
    uint32_t kv() const { return computed + (generated > 0 ? generated - 1 : 0); }
  };
  SchedulerConfig c_;
  uint64_t pool_;
  uint64_t reserved_ = 0;
  std::deque<Request> waiting_;
  std::vector<Seq> running_;
};

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config) {
  if (config.kv_bytes_per_token == 0 || config.kv_budget_bytes / config.kv_bytes_per_token < config.max_model_len)
    throw InputError("the KV budget cannot hold one request of max_model_len tokens");
  return std::make_unique<FakeScheduler>(config);
}

}  // namespace gpumem::serve
