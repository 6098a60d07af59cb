// The three serving policies of scheduler.h over one state machine:
// contiguous (max_model_len reserved per request), vllm (vLLM v0's paged
// policy with chunked prefill) and gpumem (paged, look-ahead admission,
// least-recompute victims, no admission in a step that preempted).
//
// A sequence knows prompt + generated tokens; `computed` of them have KV.
// A step processes tokens [computed, computed + n); when that reaches the
// known tokens a new token is sampled. It is decoding when it has sampled and
// only its last token lacks KV. The paged policies hold, in the KV-cache
// manager, every known token while prefilling (vLLM v0 allocates the whole
// prompt at admission) and the computed ones while decoding; a decode
// appends its token before it runs.
#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <unordered_set>

#include "gpumem/common/error.h"
#include "gpumem/serve/kv_block_manager.h"
#include "gpumem/serve/scheduler.h"
#include "serve/mix64.h"

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

struct Seq {
  Request r;
  uint32_t computed = 0;   // tokens whose KV is in the cache
  uint32_t generated = 0;  // output tokens sampled so far
  uint64_t order = 0;      // admission order (newest = largest)
  uint32_t step_tokens = 0;
  uint64_t swap_bytes = 0;  // host bytes while swapped
  bool prefilling = true;   // until its known tokens are all computed
  uint32_t output() const { return std::max<uint32_t>(r.output_tokens, 1); }
  uint32_t known() const { return r.prompt_tokens + generated; }
  bool decoding() const { return !prefilling; }
};

class SchedulerImpl final : public Scheduler {
 public:
  explicit SchedulerImpl(const SchedulerConfig& c) : c_(c) {
    if (c.block_tokens == 0 || c.kv_bytes_per_token == 0 || c.token_budget == 0 || c.max_sequences == 0 ||
        c.max_model_len < 2)
      throw InputError(
          "scheduler: block size, KV bytes per token, token budget, sequences must be positive and "
          "max_model_len at least 2");
    const uint64_t slots = c.kv_budget_bytes / c.kv_bytes_per_token;
    if (c.policy == Policy::kContiguous) {
      pool_slots_ = slots;
      if (slots < c.max_model_len)
        throw InputError("scheduler: the KV budget holds " + std::to_string(slots) +
                         " tokens, under one request of max_model_len " + std::to_string(c.max_model_len));
    } else {
      const uint64_t blocks = slots / c.block_tokens;
      const uint64_t table = (c.max_model_len + c.block_tokens - 1) / c.block_tokens;
      watermark_ = static_cast<uint32_t>(blocks / 100);  // vLLM's 1% watermark, rounded down
      const uint64_t ahead =
          c.policy == Policy::kGpumem ? (c.lookahead_tokens + c.block_tokens - 1) / c.block_tokens : 0;
      if (blocks > (1u << 28)) throw InputError("scheduler: the KV pool is over 2^28 blocks");
      if (blocks < table + watermark_ + ahead)
        throw InputError("scheduler: the KV pool holds " + std::to_string(blocks) + " blocks of " +
                         std::to_string(c.block_tokens) + " tokens, under one request of max_model_len " +
                         std::to_string(c.max_model_len) + " plus the watermark");
      KvBlockManagerConfig mc;
      mc.num_blocks = static_cast<uint32_t>(blocks);
      mc.block_tokens = c.block_tokens;
      mc.max_sequences = c.max_sequences;
      mc.max_blocks_per_sequence = static_cast<uint32_t>(table);
      mc.prefix_caching = c.prefix_caching;
      kv_.emplace(mc);
      pool_slots_ = blocks * c.block_tokens;
    }
    scratch_.resize(c.max_model_len);
    running_.reserve(c.max_sequences);
  }

  void add(const Request& r) override {
    if (r.prompt_tokens == 0) throw InputError("scheduler: request " + std::to_string(r.id) + " has no prompt");
    if (static_cast<uint64_t>(r.prompt_tokens) + std::max<uint32_t>(r.output_tokens, 1) > c_.max_model_len)
      throw InputError("scheduler: request " + std::to_string(r.id) + " is longer than max_model_len " +
                       std::to_string(c_.max_model_len));
    if (!ids_.insert(r.id).second)
      throw InputError("scheduler: request " + std::to_string(r.id) + " is already queued");
    Seq s;
    s.r = r;
    waiting_.push_back(s);
  }

  bool idle() const override { return running_.empty() && waiting_.empty() && swapped_.empty(); }

  KvUsage usage() const override {
    KvUsage u;
    u.pool_slots = pool_slots_;
    u.running = static_cast<uint32_t>(running_.size());
    u.waiting = static_cast<uint32_t>(waiting_.size());
    u.swapped = static_cast<uint32_t>(swapped_.size());
    if (!kv_) {
      u.reserved_slots = running_.size() * uint64_t{c_.max_model_len};
      for (const Seq& s : running_) u.used_slots += s.computed;
      return u;
    }
    u.reserved_slots = uint64_t{kv_->used_blocks()} * c_.block_tokens;
    uint64_t unfilled = 0;  // prompt tokens held but not computed yet
    for (const Seq& s : running_)
      if (!s.decoding()) unfilled += s.known() - s.computed;
    u.used_slots = kv_->filled_slots() - unfilled;
    u.cached_slots = uint64_t{kv_->cached_blocks()} * c_.block_tokens;
    return u;
  }

  StepResult step() override {
    StepResult res;
    budget_ = c_.token_budget;
    preempted_.clear();
    schedule_decodes(res);
    schedule_running_prefills(res);
    const bool gpumem = c_.policy == Policy::kGpumem;
    // vLLM: swap-in only when nothing was preempted; admissions still run,
    // and the preempted rejoin the queue after them. gpumem: no admission
    // in a step that preempted (the pool is short), swapped first.
    bool admit = !(gpumem && !res.preempted.empty());
    if (kv_ && res.preempted.empty()) swap_in(res);
    if (!swapped_.empty()) admit = false;
    if (admit) admit_waiting(res);
    // Preempted ones go to the front of the queue, oldest first.
    std::sort(preempted_.begin(), preempted_.end(), [](const Seq& a, const Seq& b) { return a.order < b.order; });
    for (size_t i = preempted_.size(); i-- > 0;) waiting_.push_front(preempted_[i]);
    apply(res);
    return res;
  }

  // For tests: the manager under the paged policies.
  const KvBlockManager* manager() const { return kv_ ? &*kv_ : nullptr; }

 private:
  uint32_t token_id(const Request& r, uint32_t pos) const {
    if (r.prefix_group >= 0 && pos < r.prefix_tokens)
      return static_cast<uint32_t>(mix64(mix64(static_cast<uint64_t>(r.prefix_group) ^ 0x5eed) + pos));
    return static_cast<uint32_t>(mix64(mix64(r.id ^ 0xa5a5a5a5a5a5ULL) + pos) >> 32);
  }
  std::span<const uint32_t> tokens(const Seq& s, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) scratch_[i] = token_id(s.r, i);
    return {scratch_.data(), n};
  }
  // Tokens the manager holds for a sequence (see the file comment).
  static uint32_t held(const Seq& s) { return s.decoding() ? s.computed + s.step_tokens : s.known(); }
  uint32_t lookahead(uint32_t held_tokens) const {
    return kv_->blocks_needed(uint64_t{held_tokens} + c_.lookahead_tokens) - kv_->blocks_needed(held_tokens);
  }

  void schedule(StepResult& res, Seq& s, uint32_t n) {
    s.step_tokens = n;
    // A prefill chunk's full blocks join the prefix cache when scheduled
    // (as vLLM v1 does), not at admission: a victim's uncomputed prompt
    // blocks never become hits.
    if (kv_ && !s.decoding()) kv_->mark_computed(s.r.id, s.computed + n);
    res.scheduled.push_back({s.r.id, n, s.computed, !s.decoding()});
    budget_ -= n;
  }

  // Victim for a decode at index i that needs a block: vllm takes the most
  // recently admitted running sequence (the back); gpumem the one with the
  // fewest computed tokens (least recompute; the newest on ties). Only
  // sequences not yet scheduled this step (and i itself) are candidates.
  size_t choose_victim(size_t i) const {
    if (c_.policy == Policy::kVllm) return running_.size() - 1;
    size_t best = i;
    for (size_t v = 0; v < running_.size(); ++v) {
      if (v != i && running_[v].step_tokens > 0) continue;
      if (running_[v].computed < running_[best].computed ||
          (running_[v].computed == running_[best].computed && running_[v].order > running_[best].order))
        best = v;
    }
    return best;
  }

  void preempt(StepResult& res, size_t v) {
    Seq s = running_[v];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(v));
    res.preempted.push_back(s.r.id);
    const uint64_t bytes = uint64_t{kv_->block_table(s.r.id).size()} * c_.block_tokens * c_.kv_bytes_per_token;
    kv_->free_sequence(s.r.id);
    if (c_.preemption == Preemption::kSwap && swap_used_ + bytes <= c_.swap_budget_bytes) {
      swap_used_ += bytes;
      s.swap_bytes = bytes;
      res.swapped_bytes += bytes;
      auto at = std::find_if(swapped_.begin(), swapped_.end(), [&](const Seq& o) { return o.order > s.order; });
      swapped_.insert(at, s);
      return;
    }
    res.recomputed_tokens += s.computed;
    s.computed = 0;
    s.prefilling = true;
    preempted_.push_back(s);
  }

  void schedule_decodes(StepResult& res) {
    for (size_t i = 0; i < running_.size() && budget_ > 0;) {
      if (!running_[i].decoding()) {
        ++i;
        continue;
      }
      if (kv_) {
        bool self_preempted = false;
        while (kv_->append_cost(running_[i].r.id, 1) > kv_->free_blocks()) {
          const size_t v = choose_victim(i);
          preempt(res, v);
          if (v == i) {
            self_preempted = true;
            break;
          }
          if (v < i) --i;
        }
        if (self_preempted) continue;
        Seq& t = running_[i];
        const uint32_t id = token_id(t.r, t.computed);
        kv_->append_tokens(t.r.id, std::span<const uint32_t>(&id, 1));
        schedule(res, t, 1);
      } else {
        schedule(res, running_[i], 1);
      }
      ++i;
    }
  }

  void schedule_running_prefills(StepResult& res) {
    for (Seq& s : running_) {
      if (budget_ == 0) break;
      if (s.decoding() || s.step_tokens > 0) continue;
      schedule(res, s, std::min(budget_, s.known() - s.computed));
    }
  }

  void swap_in(StepResult& res) {
    while (!swapped_.empty() && running_.size() < c_.max_sequences) {
      Seq& s = swapped_.front();
      const auto t = tokens(s, held(s));
      const uint32_t cost = kv_->admission_cost(t);
      if (uint64_t{kv_->free_blocks()} < uint64_t{cost} + reserve(held(s))) break;
      uint32_t cached = 0;
      kv_->add_sequence(s.r.id, t, &cached, /*computed=*/false);
      kv_->mark_computed(s.r.id, s.computed);
      const uint64_t copied =
          uint64_t{kv_->blocks_needed(t.size()) - cached / c_.block_tokens} * c_.block_tokens * c_.kv_bytes_per_token;
      res.swapped_bytes += copied;
      swap_used_ -= s.swap_bytes;
      s.swap_bytes = 0;
      s.order = ++order_;
      running_.push_back(s);
      swapped_.pop_front();
      // It runs in this step too, as in vLLM, if the budget and (for a
      // decode) a block allow.
      Seq& back = running_.back();
      if (budget_ == 0) continue;
      if (back.decoding()) {
        if (kv_->append_cost(back.r.id, 1) > kv_->free_blocks()) continue;
        const uint32_t id = token_id(back.r, back.computed);
        kv_->append_tokens(back.r.id, std::span<const uint32_t>(&id, 1));
        schedule(res, back, 1);
      } else {
        schedule(res, back, std::min(budget_, back.known() - back.computed));
      }
    }
  }

  // Free blocks an admission of `held_tokens` must leave beyond its cost:
  // the watermark, and for gpumem the look-ahead of every running sequence
  // and of the new one.
  uint64_t reserve(uint32_t held_tokens) const {
    uint64_t r = watermark_;
    if (c_.policy == Policy::kGpumem) {
      for (const Seq& s : running_) r += lookahead(held(s));
      r += lookahead(held_tokens);
    }
    return r;
  }

  void admit_waiting(StepResult& res) {
    while (!waiting_.empty() && running_.size() < c_.max_sequences && budget_ > 0) {
      Seq& w = waiting_.front();
      uint32_t cached = 0;
      if (kv_) {
        const auto t = tokens(w, w.known());
        const uint32_t cost = kv_->admission_cost(t);
        if (uint64_t{kv_->free_blocks()} < uint64_t{cost} + reserve(w.known())) break;
        kv_->add_sequence(w.r.id, t, &cached, /*computed=*/false);
        res.prefix_query_tokens += t.size();
        res.prefix_hit_tokens += cached;
      } else if ((running_.size() + 1) * uint64_t{c_.max_model_len} > pool_slots_) {
        break;
      }
      Seq s = w;
      waiting_.pop_front();
      s.computed = cached;
      s.order = ++order_;
      running_.push_back(s);
      schedule(res, running_.back(), std::min(budget_, s.known() - s.computed));
    }
  }

  void apply(StepResult& res) {
    size_t keep = 0;
    for (size_t i = 0; i < running_.size(); ++i) {
      Seq& s = running_[i];
      if (s.step_tokens > 0) {
        s.computed += s.step_tokens;
        s.step_tokens = 0;
        if (s.computed == s.known()) {
          ++s.generated;
          s.prefilling = false;
        }
        if (s.generated >= s.output()) {
          res.finished.push_back(s.r.id);
          if (kv_) kv_->free_sequence(s.r.id);
          ids_.erase(s.r.id);
          continue;
        }
      }
      if (keep != i) running_[keep] = s;
      ++keep;
    }
    running_.resize(keep);
  }

  SchedulerConfig c_;
  std::optional<KvBlockManager> kv_;
  uint64_t pool_slots_ = 0;
  uint32_t watermark_ = 0;
  uint32_t budget_ = 0;
  uint64_t order_ = 0, swap_used_ = 0;
  std::vector<Seq> running_;  // admission order, oldest first
  std::deque<Seq> waiting_, swapped_;
  std::vector<Seq> preempted_;
  std::vector<uint32_t> scratch_;
  std::unordered_set<uint64_t> ids_;
};

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config) {
  return std::make_unique<SchedulerImpl>(config);
}

}  // namespace gpumem::serve
