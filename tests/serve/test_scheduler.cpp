// The serving schedulers: a scripted scenario per policy with every decision
// spelled out, the vllm policy against a slow reference model of its rules,
// and properties of random workloads (every request finishes with its
// output, the pool comes back, contiguous reserves max_model_len, gpumem
// preempts less than vllm on the same pool).
#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/serve/scheduler.h"

namespace gpumem::serve {

// gtest prints mismatched decisions with this.
std::ostream& operator<<(std::ostream& o, const ScheduledSequence& s) {
  return o << "{" << s.request_id << "," << s.tokens << "," << s.context_tokens << "," << (s.prefill ? "P" : "D")
           << "}";
}

namespace {

using Sched = std::vector<ScheduledSequence>;

struct Expect {
  Sched scheduled;
  std::vector<uint64_t> preempted, finished;
  uint64_t recomputed = 0;
};

void expect_steps(Scheduler& s, const std::vector<Expect>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i + 1));
    const StepResult r = s.step();
    EXPECT_EQ(r.scheduled, steps[i].scheduled);
    EXPECT_EQ(r.preempted, steps[i].preempted);
    EXPECT_EQ(r.finished, steps[i].finished);
    EXPECT_EQ(r.recomputed_tokens, steps[i].recomputed);
  }
  EXPECT_TRUE(s.idle());
}

Request req(uint64_t id, uint32_t prompt, uint32_t output) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

// Blocks of 4 tokens, a pool of 5 blocks (watermark 0), max_model_len 16.
SchedulerConfig tiny(Policy p) {
  SchedulerConfig c;
  c.policy = p;
  c.block_tokens = 4;
  c.kv_bytes_per_token = 1;
  c.kv_budget_bytes = 20;
  c.max_model_len = 16;
  c.token_budget = 16;
  c.max_sequences = 4;
  c.prefix_caching = false;
  c.lookahead_tokens = 4;
  return c;
}

void add_abc(Scheduler& s) {
  s.add(req(1, 8, 6));  // A: up to 13 tokens, 4 blocks
  s.add(req(2, 4, 4));  // B
  s.add(req(3, 4, 2));  // C
}

TEST(Scheduler, VllmAdmitsWhatFitsAndPreemptsTheNewest) {
  auto s = make_scheduler(tiny(Policy::kVllm));
  add_abc(*s);
  // Step 1 takes all 5 blocks but one; step 2's decodes need two: B's block
  // comes from C, the newest, whose 4 tokens are thrown away. C comes back
  // when B finishes, recomputing its prompt and its one sampled token.
  expect_steps(*s, {
                       {{{1, 8, 0, true}, {2, 4, 0, true}, {3, 4, 0, true}}, {}, {}, 0},
                       {{{1, 1, 8, false}, {2, 1, 4, false}}, {3}, {}, 4},
                       {{{1, 1, 9, false}, {2, 1, 5, false}}, {}, {}, 0},
                       {{{1, 1, 10, false}, {2, 1, 6, false}}, {}, {2}, 0},
                       {{{1, 1, 11, false}, {3, 5, 0, true}}, {}, {3}, 0},
                       {{{1, 1, 12, false}}, {}, {1}, 0},
                   });
}

TEST(Scheduler, GpumemKeepsTheNextBlocksOfRunningSequencesFree) {
  auto s = make_scheduler(tiny(Policy::kGpumem));
  add_abc(*s);
  // C waits: A and B each keep one block of look-ahead (4 tokens), so no one
  // is preempted; C runs when A is done.
  expect_steps(*s, {
                       {{{1, 8, 0, true}, {2, 4, 0, true}}, {}, {}, 0},
                       {{{1, 1, 8, false}, {2, 1, 4, false}}, {}, {}, 0},
                       {{{1, 1, 9, false}, {2, 1, 5, false}}, {}, {}, 0},
                       {{{1, 1, 10, false}, {2, 1, 6, false}}, {}, {2}, 0},
                       {{{1, 1, 11, false}}, {}, {}, 0},
                       {{{1, 1, 12, false}}, {}, {1}, 0},
                       {{{3, 4, 0, true}}, {}, {}, 0},
                       {{{3, 1, 4, false}}, {}, {3}, 0},
                   });
}

TEST(Scheduler, SwappedSequencesComeBackBeforeNewAdmissions) {
  SchedulerConfig c = tiny(Policy::kVllm);
  c.preemption = Preemption::kSwap;
  c.swap_budget_bytes = 100;
  auto s = make_scheduler(c);
  add_abc(*s);
  s->step();
  // As in the recompute scenario, B's block comes from C, but C's block (4
  // tokens of 1 byte) goes to the host with its 4 computed tokens.
  StepResult r = s->step();
  EXPECT_EQ(r.preempted, (std::vector<uint64_t>{3}));
  EXPECT_EQ(r.swapped_bytes, 4u);
  EXPECT_EQ(r.recomputed_tokens, 0u);
  EXPECT_EQ(s->usage().swapped, 1u);
  s->add(req(4, 1, 1));  // newer: waits behind the swapped C
  r = s->step();
  EXPECT_EQ(r.scheduled, (Sched{{1, 1, 9, false}, {2, 1, 5, false}}));
  r = s->step();
  EXPECT_EQ(r.finished, (std::vector<uint64_t>{2}));
  // B's two blocks are free: C comes back (its block copied in) and decodes
  // in the same step, from its fifth token, taking the last free block; D
  // gets the block A does not need when A and C are done.
  r = s->step();
  EXPECT_EQ(r.swapped_bytes, 4u);
  EXPECT_EQ(r.scheduled, (Sched{{1, 1, 11, false}, {3, 1, 4, false}}));
  EXPECT_EQ(r.finished, (std::vector<uint64_t>{3}));
  EXPECT_EQ(s->usage().swapped, 0u);
  expect_steps(*s, {
                       {{{1, 1, 12, false}, {4, 1, 0, true}}, {}, {1, 4}, 0},
                   });
}

TEST(Scheduler, PrefixGroupsShareTheirPrefixBlocks) {
  SchedulerConfig c = tiny(Policy::kVllm);
  c.prefix_caching = true;
  auto s = make_scheduler(c);
  Request a = req(1, 10, 2), b = req(2, 10, 2), other = req(3, 8, 1);
  a.prefix_group = b.prefix_group = 0;
  other.prefix_group = 1;
  a.prefix_tokens = b.prefix_tokens = other.prefix_tokens = 8;
  s->add(a);
  StepResult r = s->step();
  EXPECT_EQ(r.prefix_query_tokens, 10u);
  EXPECT_EQ(r.prefix_hit_tokens, 0u);
  s->add(b);
  r = s->step();
  // b's first two blocks are a's: only its last 2 prompt tokens are computed.
  EXPECT_EQ(r.scheduled, (Sched{{1, 1, 10, false}, {2, 2, 8, true}}));
  EXPECT_EQ(r.prefix_query_tokens, 10u);
  EXPECT_EQ(r.prefix_hit_tokens, 8u);
  EXPECT_EQ(r.finished, (std::vector<uint64_t>{1}));
  EXPECT_EQ(s->usage().cached_slots, 0u);  // a's third block is partial: freed clean
  s->add(other);                           // another group: no hit
  r = s->step();
  EXPECT_EQ(r.scheduled, (Sched{{2, 1, 10, false}, {3, 8, 0, true}}));
  EXPECT_EQ(r.prefix_hit_tokens, 0u);
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(s->usage().cached_slots, 16u);  // the four full prompt blocks stay cached
}

TEST(Scheduler, AVictimsUncomputedPromptBlocksAreNeverHits) {
  SchedulerConfig c = tiny(Policy::kVllm);
  c.prefix_caching = true;
  c.token_budget = 6;
  auto s = make_scheduler(c);
  s->add(req(1, 4, 8));   // A: 1 block, then grows to 3
  s->add(req(2, 15, 1));  // B: 4 blocks, prefilled in chunks
  StepResult r = s->step();
  EXPECT_EQ(r.scheduled, (Sched{{1, 4, 0, true}, {2, 2, 0, true}}));
  r = s->step();  // A's decode needs a block: B, 2 tokens computed, goes
  EXPECT_EQ(r.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(r.recomputed_tokens, 2u);
  for (int step = 3; step <= 9; ++step) {
    r = s->step();
    const bool b_back = !r.scheduled.empty() && r.scheduled.back().request_id == 2;
    EXPECT_EQ(b_back, step == 9) << "step " << step;
  }
  // B's prompt blocks were allocated, but none was computed: re-admitted,
  // it finds nothing in the prefix cache and prefills from 0 (caching them
  // at admission would have found 8 tokens that were never computed).
  EXPECT_EQ(r.scheduled.back(), (ScheduledSequence{2, 6, 0, true}));
  EXPECT_EQ(r.prefix_query_tokens, 15u);
  EXPECT_EQ(r.prefix_hit_tokens, 0u);
}

TEST(Scheduler, ContiguousReservesMaxModelLenPerRequest) {
  SchedulerConfig c = tiny(Policy::kContiguous);
  c.kv_budget_bytes = 40;  // two requests of 16
  auto s = make_scheduler(c);
  add_abc(*s);
  const StepResult first = s->step();
  EXPECT_EQ(first.scheduled, (Sched{{1, 8, 0, true}, {2, 4, 0, true}}));
  const KvUsage u = s->usage();
  EXPECT_EQ(u.pool_slots, 40u);
  EXPECT_EQ(u.reserved_slots, 32u);
  EXPECT_EQ(u.used_slots, 12u);
  EXPECT_EQ(u.running, 2u);
  EXPECT_EQ(u.waiting, 1u);
  expect_steps(*s, {
                       {{{1, 1, 8, false}, {2, 1, 4, false}}, {}, {}, 0},
                       {{{1, 1, 9, false}, {2, 1, 5, false}}, {}, {}, 0},
                       {{{1, 1, 10, false}, {2, 1, 6, false}}, {}, {2}, 0},
                       {{{1, 1, 11, false}, {3, 4, 0, true}}, {}, {}, 0},
                       {{{1, 1, 12, false}, {3, 1, 4, false}}, {}, {1, 3}, 0},
                   });
}

TEST(Scheduler, PagedUsageCountsBlocks) {
  auto s = make_scheduler(tiny(Policy::kVllm));
  add_abc(*s);
  s->step();
  const KvUsage u = s->usage();
  EXPECT_EQ(u.pool_slots, 20u);
  EXPECT_EQ(u.reserved_slots, 16u);  // 2 + 1 + 1 blocks
  EXPECT_EQ(u.used_slots, 16u);
  EXPECT_EQ(u.running, 3u);
}

TEST(Scheduler, ChunksPrefillsToTheTokenBudget) {
  SchedulerConfig c = tiny(Policy::kVllm);
  c.token_budget = 3;
  auto s = make_scheduler(c);
  s->add(req(1, 8, 1));
  EXPECT_EQ(s->step().scheduled, (Sched{{1, 3, 0, true}}));
  EXPECT_EQ(s->usage().used_slots, 3u);
  EXPECT_EQ(s->usage().reserved_slots, 8u);
  EXPECT_EQ(s->step().scheduled, (Sched{{1, 3, 3, true}}));
  const StepResult r = s->step();
  EXPECT_EQ(r.scheduled, (Sched{{1, 2, 6, true}}));
  EXPECT_EQ(r.finished, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(s->idle());
  EXPECT_EQ(s->usage().reserved_slots, 0u);
}

TEST(Scheduler, RejectsConfigsAndRequestsThatCannotFit) {
  SchedulerConfig c = tiny(Policy::kVllm);
  c.kv_budget_bytes = 12;  // 3 blocks < 4 for max_model_len
  EXPECT_THROW(make_scheduler(c), InputError);
  c = tiny(Policy::kContiguous);
  c.kv_budget_bytes = 15;
  EXPECT_THROW(make_scheduler(c), InputError);
  c = tiny(Policy::kGpumem);
  c.lookahead_tokens = 8;  // 4 + 2 blocks > 5
  EXPECT_THROW(make_scheduler(c), InputError);
  auto s = make_scheduler(tiny(Policy::kVllm));
  EXPECT_THROW(s->add(req(1, 0, 3)), InputError);
  EXPECT_THROW(s->add(req(1, 12, 5)), InputError);
  s->add(req(1, 12, 4));
  EXPECT_THROW(s->add(req(1, 2, 2)), InputError);
  EXPECT_STREQ(policy_name(Policy::kGpumem), "gpumem");
}

// ---- the vllm policy against a slow reference ------------------------------

// vLLM v0's rules with prefix caching off, in block counts: decodes oldest
// first, each taking a block at a boundary, preempting the newest running
// sequence (recompute) while none is free; then running prefills; then
// waiting requests FCFS while free - prompt blocks >= 1% watermark; the
// preempted rejoin the front of the queue, oldest first.
class ReferenceVllm {
 public:
  explicit ReferenceVllm(const SchedulerConfig& c)
      : c_(c), free_(static_cast<uint32_t>(c.kv_budget_bytes / c.kv_bytes_per_token / c.block_tokens)) {
    watermark_ = free_ / 100;
  }
  void add(const Request& r) { waiting_.push_back({r.id, r.prompt_tokens, std::max<uint32_t>(r.output_tokens, 1)}); }
  uint32_t used_blocks() const {
    uint32_t n = 0;
    for (const S& s : running_) n += s.blocks;
    return n;
  }

  StepResult step() {
    StepResult r;
    uint32_t budget = c_.token_budget;
    std::vector<S> preempted;
    for (size_t i = 0; i < running_.size() && budget > 0;) {
      if (running_[i].prefilling) {
        ++i;
        continue;
      }
      bool gone = false;
      while (blocks(running_[i].computed + 1) - running_[i].blocks > free_) {
        S v = running_.back();
        running_.pop_back();
        free_ += v.blocks;
        r.recomputed_tokens += v.computed;
        r.preempted.push_back(v.id);
        v.computed = v.blocks = 0;
        v.prefilling = true;
        preempted.push_back(v);
        if (i == running_.size()) {
          gone = true;
          break;
        }
      }
      if (gone) break;
      S& s = running_[i];
      const uint32_t need = blocks(s.computed + 1) - s.blocks;
      free_ -= need;
      s.blocks += need;
      s.n = 1;
      r.scheduled.push_back({s.id, 1, s.computed, false});
      --budget;
      ++i;
    }
    for (S& s : running_) {
      if (budget == 0) break;
      if (!s.prefilling || s.n > 0) continue;
      s.n = std::min(budget, s.known() - s.computed);
      r.scheduled.push_back({s.id, s.n, s.computed, true});
      budget -= s.n;
    }
    while (!waiting_.empty() && running_.size() < c_.max_sequences && budget > 0) {
      S w = waiting_.front();
      const uint32_t need = blocks(w.known());
      if (free_ < need + watermark_) break;
      waiting_.pop_front();
      free_ -= need;
      w.blocks = need;
      w.order = ++order_;
      w.n = std::min(budget, w.known());
      r.scheduled.push_back({w.id, w.n, 0, true});
      budget -= w.n;
      running_.push_back(w);
    }
    std::sort(preempted.begin(), preempted.end(), [](const S& a, const S& b) { return a.order < b.order; });
    waiting_.insert(waiting_.begin(), preempted.begin(), preempted.end());
    std::vector<S> still;
    for (S s : running_) {
      if (s.n > 0) {
        s.computed += s.n;
        s.n = 0;
        if (s.computed == s.known()) {
          ++s.generated;
          s.prefilling = false;
        }
        if (s.generated == s.output) {
          r.finished.push_back(s.id);
          free_ += s.blocks;
          continue;
        }
      }
      still.push_back(s);
    }
    running_ = still;
    return r;
  }

 private:
  struct S {
    uint64_t id;
    uint32_t prompt, output;
    uint32_t computed = 0, generated = 0, blocks = 0, n = 0;
    bool prefilling = true;
    uint64_t order = 0;
    uint32_t known() const { return prompt + generated; }
  };
  uint32_t blocks(uint32_t tokens) const { return (tokens + c_.block_tokens - 1) / c_.block_tokens; }
  SchedulerConfig c_;
  uint32_t free_, watermark_ = 0;
  uint64_t order_ = 0;
  std::vector<S> running_;
  std::deque<S> waiting_;
};

std::vector<std::vector<Request>> random_arrivals(uint64_t seed, uint32_t steps, uint32_t max_len, double rate,
                                                  uint32_t groups = 0) {
  std::mt19937_64 rng(seed);
  std::poisson_distribution<int> arrivals(rate);
  std::vector<std::vector<Request>> out(steps);
  uint64_t id = 1;
  for (auto& at : out) {
    for (int k = arrivals(rng); k > 0; --k) {
      Request r;
      r.id = id++;
      r.prompt_tokens = 1 + static_cast<uint32_t>(rng() % (max_len / 2));
      r.output_tokens = 1 + static_cast<uint32_t>(rng() % (max_len - r.prompt_tokens));
      if (groups > 0 && rng() % 2 == 0) {
        r.prefix_group = static_cast<int64_t>(rng() % groups);
        r.prefix_tokens = std::min<uint32_t>(r.prompt_tokens, 48);
      }
      at.push_back(r);
    }
  }
  return out;
}

SchedulerConfig random_config(Policy p, uint32_t blocks, uint32_t bt) {
  SchedulerConfig c;
  c.policy = p;
  c.block_tokens = bt;
  c.kv_bytes_per_token = 3;
  c.kv_budget_bytes = uint64_t{blocks} * bt * 3;
  c.max_model_len = 128;
  c.token_budget = 96;
  c.max_sequences = 32;
  c.prefix_caching = false;
  return c;
}

TEST(SchedulerDifferential, VllmMatchesTheReferenceStepByStep) {
  uint64_t preemptions = 0, steps_run = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const uint32_t bt = seed % 2 ? 4 : 16;
    const uint32_t blocks = (seed % 3 == 0 ? 160 : 60) * 16 / bt;
    SchedulerConfig c = random_config(Policy::kVllm, blocks, bt);
    auto s = make_scheduler(c);
    ReferenceVllm ref(c);
    const auto arrivals = random_arrivals(seed, 400, c.max_model_len, 0.4);
    for (size_t t = 0; t < arrivals.size() || !s->idle(); ++t) {
      ASSERT_LT(t, 100000u) << "no progress";
      if (t < arrivals.size())
        for (const Request& r : arrivals[t]) {
          s->add(r);
          ref.add(r);
        }
      SCOPED_TRACE("seed " + std::to_string(seed) + " step " + std::to_string(t));
      const StepResult got = s->step(), want = ref.step();
      ASSERT_EQ(got.scheduled, want.scheduled);
      ASSERT_EQ(got.preempted, want.preempted);
      ASSERT_EQ(got.finished, want.finished);
      ASSERT_EQ(got.recomputed_tokens, want.recomputed_tokens);
      ASSERT_EQ(s->usage().reserved_slots, uint64_t{ref.used_blocks()} * bt);
      preemptions += got.preempted.size();
      ++steps_run;
    }
  }
  EXPECT_GT(preemptions, 10u);  // the workloads reach the preemption path
  EXPECT_GT(steps_run, 20000u);
}

// ---- properties of random workloads ----------------------------------------

struct RunTotals {
  uint64_t steps = 0, preemptions = 0, recomputed = 0, swapped_bytes = 0, hits = 0, queries = 0, finished = 0;
};

// Runs a workload to the end, checking that every scheduled sequence's
// context is what the test's own bookkeeping says (recompute restarts at 0
// unless the prefix cache held some), that each request samples exactly its
// output tokens, and that the pool is empty at the end.
RunTotals run(const SchedulerConfig& c, const std::vector<std::vector<Request>>& arrivals) {
  auto s = make_scheduler(c);
  struct Track {
    uint32_t prompt, output, generated = 0;
    bool finished = false;
  };
  std::map<uint64_t, Track> track;
  RunTotals tot;
  for (size_t t = 0; t < arrivals.size() || !s->idle(); ++t) {
    if (t > 200000) {
      ADD_FAILURE() << "no progress";
      break;
    }
    if (t < arrivals.size())
      for (const Request& r : arrivals[t]) {
        s->add(r);
        track[r.id] = {r.prompt_tokens, std::max<uint32_t>(r.output_tokens, 1)};
      }
    const StepResult r = s->step();
    ++tot.steps;
    uint32_t tokens = 0;
    for (const ScheduledSequence& q : r.scheduled) {
      Track& k = track.at(q.request_id);
      EXPECT_FALSE(k.finished);
      tokens += q.tokens;
      EXPECT_LE(q.context_tokens + q.tokens, k.prompt + k.generated);
      if (q.context_tokens + q.tokens == k.prompt + k.generated) ++k.generated;
    }
    EXPECT_LE(tokens, c.token_budget);
    EXPECT_LE(r.scheduled.size(), c.max_sequences);
    EXPECT_LE(r.prefix_hit_tokens, r.prefix_query_tokens);
    for (uint64_t id : r.finished) {
      Track& k = track.at(id);
      EXPECT_EQ(k.generated, k.output) << "request " << id;
      k.finished = true;
      ++tot.finished;
    }
    const KvUsage u = s->usage();
    EXPECT_LE(u.used_slots, u.reserved_slots);
    EXPECT_LE(u.reserved_slots + u.cached_slots, u.pool_slots);
    if (c.policy == Policy::kContiguous) {
      EXPECT_EQ(u.reserved_slots, uint64_t{u.running} * c.max_model_len);
      EXPECT_TRUE(r.preempted.empty());
    }
    tot.preemptions += r.preempted.size();
    tot.recomputed += r.recomputed_tokens;
    tot.swapped_bytes += r.swapped_bytes;
    tot.hits += r.prefix_hit_tokens;
    tot.queries += r.prefix_query_tokens;
  }
  EXPECT_EQ(tot.finished, track.size());
  EXPECT_EQ(s->usage().reserved_slots, 0u);
  EXPECT_EQ(s->usage().used_slots, 0u);
  return tot;
}

TEST(SchedulerProperty, EveryPolicyFinishesEveryRequest) {
  for (Policy p : {Policy::kContiguous, Policy::kVllm, Policy::kGpumem}) {
    SCOPED_TRACE(policy_name(p));
    SchedulerConfig c = random_config(p, 60, 16);
    c.prefix_caching = true;
    const RunTotals t = run(c, random_arrivals(7, 500, c.max_model_len, 0.4, 3));
    EXPECT_GT(t.finished, 150u);
    if (p != Policy::kContiguous)
      EXPECT_GT(t.hits, 0u);  // shared prefixes are found
    else
      EXPECT_EQ(t.queries, 0u);
  }
}

TEST(SchedulerProperty, GpumemPreemptsLessThanVllmOnTheSamePool) {
  RunTotals v, g;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto arrivals = random_arrivals(100 + seed, 600, 128, 0.5);
    const RunTotals a = run(random_config(Policy::kVllm, 60, 16), arrivals);
    const RunTotals b = run(random_config(Policy::kGpumem, 60, 16), arrivals);
    v.preemptions += a.preemptions;
    v.recomputed += a.recomputed;
    v.steps += a.steps;
    g.preemptions += b.preemptions;
    g.recomputed += b.recomputed;
    g.steps += b.steps;
  }
  EXPECT_GT(v.preemptions, 20u);
  EXPECT_LT(g.preemptions, v.preemptions);
  EXPECT_LT(g.recomputed, v.recomputed);
  std::printf("preemptions: vllm %llu (%llu tokens recomputed, %llu steps), gpumem %llu (%llu, %llu steps)\n",
              static_cast<unsigned long long>(v.preemptions), static_cast<unsigned long long>(v.recomputed),
              static_cast<unsigned long long>(v.steps), static_cast<unsigned long long>(g.preemptions),
              static_cast<unsigned long long>(g.recomputed), static_cast<unsigned long long>(g.steps));
}

TEST(SchedulerProperty, SwapPreemptionKeepsTheComputedTokens) {
  SchedulerConfig c = random_config(Policy::kGpumem, 60, 16);
  c.preemption = Preemption::kSwap;
  c.swap_budget_bytes = uint64_t{1} << 30;
  const auto arrivals = random_arrivals(5, 600, 128, 0.6);
  const RunTotals t = run(c, arrivals);
  EXPECT_GT(t.preemptions, 0u);
  EXPECT_GT(t.swapped_bytes, 0u);
  EXPECT_EQ(t.recomputed, 0u);  // the host held every victim
  c.swap_budget_bytes = 0;      // no host memory: recompute instead
  const RunTotals r = run(c, arrivals);
  EXPECT_EQ(r.swapped_bytes, 0u);
  EXPECT_GT(r.recomputed, 0u);
}

}  // namespace
}  // namespace gpumem::serve
