#pragma once
// The serving scheduler's contract (issue 14): what the simulator hands it
// (requests) and what each step gives back (which sequences run how many
// tokens, who was preempted, who finished, and the KV memory in use). The
// paged KV-cache manager (kv_block_manager.h) sits underneath the paged
// policies; the contiguous policy reserves max_model_len per request.
//
// Time is the simulator's business: the scheduler is a pure state machine
// advanced one step at a time.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumem::serve {

struct Request {
  uint64_t id = 0;
  double arrival_s = 0;
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;  // tokens it will generate (known to the simulator, not to the policy's admission)
  int64_t prefix_group = -1;   // requests of one group share their first prefix_tokens prompt tokens
  uint32_t prefix_tokens = 0;
};

enum class Policy {
  kContiguous,  // naive servers: max_model_len slots reserved per request at admission
  kVllm,        // vLLM's paged policy: admit when the prompt's blocks fit; preempt the newest by recompute
  kGpumem,      // paged, admission looks ahead at the blocks running decodes will need soon
};
const char* policy_name(Policy p);  // "contiguous", "vllm", "gpumem"

enum class Preemption { kRecompute, kSwap };

struct SchedulerConfig {
  Policy policy = Policy::kGpumem;
  uint32_t block_tokens = 16;
  uint64_t kv_bytes_per_token = 0;   // from gpumem llm's accounting
  uint64_t kv_budget_bytes = 0;      // the pool: kv_budget_bytes / (block_tokens x kv_bytes_per_token) blocks
  uint32_t max_model_len = 4096;     // longest prompt + output; the contiguous policy reserves this much
  uint32_t token_budget = 2048;      // tokens per step (decodes count one each); prefills chunked to fit
  uint32_t max_sequences = 256;      // running sequences per step
  bool prefix_caching = true;        // paged policies only
  Preemption preemption = Preemption::kRecompute;
  uint64_t swap_budget_bytes = 0;    // host memory for swapped-out blocks (kSwap)
  // gpumem policy: admission keeps free, beyond the new prompt's blocks, the
  // blocks each running sequence needs to grow by this many tokens (its next
  // block boundaries within that distance). See docs/serve.md.
  uint32_t lookahead_tokens = 16;
};

// One sequence's share of a step.
struct ScheduledSequence {
  uint64_t request_id = 0;
  uint32_t tokens = 0;         // prompt tokens computed this step (prefill chunk), or 1 (decode)
  uint32_t context_tokens = 0; // tokens already in its KV cache before this step (read by attention)
  bool prefill = false;
  bool operator==(const ScheduledSequence&) const = default;
};

struct StepResult {
  std::vector<ScheduledSequence> scheduled;
  std::vector<uint64_t> preempted;  // request ids preempted this step
  std::vector<uint64_t> finished;   // request ids that produced their last token this step
  uint64_t recomputed_tokens = 0;   // tokens whose KV a recompute preemption threw away
  uint64_t swapped_bytes = 0;       // bytes copied to or from host memory this step
  uint64_t prefix_hit_tokens = 0;   // prompt tokens found in the prefix cache at admission this step
  uint64_t prefix_query_tokens = 0; // prompt tokens looked up at admission this step
};

// KV memory now, for the utilisation and waste figures.
struct KvUsage {
  uint64_t pool_slots = 0;      // token slots in the pool (blocks x block_tokens, or the contiguous budget / bytes per token)
  uint64_t reserved_slots = 0;  // slots held by sequences (allocated blocks or contiguous reservations)
  uint64_t used_slots = 0;      // slots holding a token's K and V
  uint64_t cached_slots = 0;    // slots of free blocks kept for the prefix cache (not waste: reusable)
  uint32_t running = 0, waiting = 0, swapped = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // InputError for an empty prompt, prompt + max(output, 1) over
  // max_model_len, or an id already waiting, running or swapped.
  virtual void add(const Request& r) = 0;
  // Chooses and applies one step: running decodes first, then waiting
  // prefills (chunked to the token budget), admission and preemption as the
  // policy says. After it returns, every scheduled sequence has the KV slots
  // for its tokens. Requests whose output is complete are released.
  virtual StepResult step() = 0;
  virtual KvUsage usage() const = 0;
  virtual bool idle() const = 0;  // nothing running, waiting or swapped
};

// InputError when the config cannot hold one request of max_model_len.
std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config);

}  // namespace gpumem::serve
