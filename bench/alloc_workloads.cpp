// The comparison workloads. Sizes follow the tensors real models produce;
// see each generator's comment in alloc_workloads.h.
#include "alloc_workloads.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include "gpumem/alloc/simulated_device.h"
#include "gpumem/model/inspect.h"

namespace gpumem::alloc::bench {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

class Recorder {
 public:
  std::uint32_t alloc(std::size_t bytes) {
    ops_.push_back({true, next_, bytes});
    return next_++;
  }
  void free(std::uint32_t id) { ops_.push_back({false, id, 0}); }
  // Frees one of `live`, picked at random, and forgets it.
  void free_random(std::vector<std::uint32_t>& live, std::mt19937_64& rng) {
    std::size_t v = rng() % live.size();
    free(live[v]);
    live[v] = live.back();
    live.pop_back();
  }
  std::vector<Op> take() { return std::move(ops_); }

 private:
  std::vector<Op> ops_;
  std::uint32_t next_ = 0;
};

}  // namespace

Workload transformer_training_dynamic() {
  const std::size_t layers = 12, hidden = 768, heads = 12, batch = 8, vocab = 50257;
  Recorder r;
  // Parameters (fp32 master weights), their gradients and Adam's two states.
  std::vector<std::uint32_t> persistent;
  const std::size_t layer_params = 12 * hidden * hidden + 13 * hidden;
  for (std::size_t copy = 0; copy < 4; ++copy) {
    persistent.push_back(r.alloc(vocab * hidden * 4));
    for (std::size_t l = 0; l < layers; ++l) persistent.push_back(r.alloc(layer_params * 4));
  }
  std::mt19937_64 rng(42);
  for (int step = 0; step < 8; ++step) {
    const std::size_t seq = 128 + 64 * (rng() % 15);  // 128 .. 1024 tokens
    const std::size_t tok = batch * seq, act = tok * hidden * 2;
    std::vector<std::uint32_t> saved;
    std::uint32_t x = r.alloc(act);
    for (std::size_t l = 0; l < layers; ++l) {
      saved.push_back(r.alloc(act));                       // layer norm 1
      std::uint32_t qkv = r.alloc(3 * act);
      std::uint32_t scores = r.alloc(batch * heads * seq * seq * 2);
      saved.push_back(r.alloc(batch * heads * seq * seq * 2));  // softmax
      r.free(scores);
      saved.push_back(qkv);
      saved.push_back(r.alloc(act));                       // attention output
      std::uint32_t proj = r.alloc(act);
      saved.push_back(r.alloc(act));                       // residual
      r.free(proj);
      saved.push_back(r.alloc(act));                       // layer norm 2
      saved.push_back(r.alloc(4 * act));                   // MLP up
      saved.push_back(r.alloc(4 * act));                   // GELU
      std::uint32_t down = r.alloc(act);
      r.free(x);
      x = down;
    }
    std::uint32_t logits = r.alloc(tok * vocab * 2);
    std::uint32_t loss_grad = r.alloc(tok * vocab * 2);
    r.free(logits);
    std::uint32_t grad = r.alloc(act);
    r.free(loss_grad);
    // Backward: per layer, temporaries for the gradients, then the saved
    // activations of that layer go.
    for (std::size_t l = layers; l-- > 0;) {
      std::uint32_t g_mlp = r.alloc(4 * act);
      std::uint32_t g_scores = r.alloc(batch * heads * seq * seq * 2);
      std::uint32_t g_qkv = r.alloc(3 * act);
      r.free(g_scores);
      r.free(g_mlp);
      std::uint32_t g_next = r.alloc(act);
      r.free(g_qkv);
      r.free(grad);
      grad = g_next;
      for (int k = 0; k < 8; ++k) {
        r.free(saved.back());
        saved.pop_back();
      }
    }
    r.free(grad);
    r.free(x);
    // Optimizer: a fused step's temporaries, one per layer.
    for (std::size_t l = 0; l < layers; ++l) r.free(r.alloc(layer_params * 4));
  }
  for (std::uint32_t id : persistent) r.free(id);
  return {"transformer-train-dynamic", "GPT-2-small training, sequence length varying per step", r.take()};
}

Workload cnn_training_fixed() {
  Recorder r;
  const std::size_t batch = 32;
  struct Stage {
    std::size_t blocks, channels, spatial;
  };
  const Stage stages[] = {{3, 256, 56}, {4, 512, 28}, {6, 1024, 14}, {3, 2048, 7}};
  std::vector<std::uint32_t> weights;
  for (int i = 0; i < 161; ++i) weights.push_back(r.alloc(((i * 7919) % 2359296 + 1024) * 4));
  for (int step = 0; step < 4; ++step) {
    std::vector<std::uint32_t> saved;
    saved.push_back(r.alloc(batch * 64 * 112 * 112 * 4));
    for (const Stage& s : stages) {
      for (std::size_t b = 0; b < s.blocks; ++b) {
        const std::size_t out = batch * s.channels * s.spatial * s.spatial * 4;
        saved.push_back(r.alloc(out / 4));  // 1x1 reduce
        saved.push_back(r.alloc(out / 4));  // 3x3
        saved.push_back(r.alloc(out));      // 1x1 expand
        saved.push_back(r.alloc(out));      // add + relu
      }
    }
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      std::uint32_t g = r.alloc(batch * 256 * 56 * 56 * 4 / 8);
      r.free(*it);
      r.free(g);
    }
    for (std::uint32_t w : weights) r.free(r.alloc(64 * 1024));  // per-weight optimizer temporaries
  }
  for (std::uint32_t w : weights) r.free(w);
  return {"cnn-train-fixed", "ResNet-50-like training, batch 32, fixed shapes", r.take()};
}

Workload llm_kv_cache_growth() {
  Recorder r;
  const std::size_t layers = 16, kv_per_token = 2 * 8 * 128 * 2;  // K and V, 8 KV heads, dim 128, fp16
  std::vector<std::uint32_t> weights;
  for (std::size_t l = 0; l < layers; ++l) weights.push_back(r.alloc(200 * kMiB));
  std::mt19937_64 rng(7);
  struct Request {
    std::size_t length = 0, target = 0;
    std::vector<std::uint32_t> cache;
  };
  std::vector<Request> active(4);
  for (int served = 0; served < 40;) {
    for (Request& q : active) {
      if (q.length >= q.target) {  // finished: free its cache, admit a new one
        for (std::uint32_t id : q.cache) r.free(id);
        q = Request{};
        q.length = 64 + rng() % 1024;  // prompt
        q.target = q.length + 64 + rng() % 512;
        for (std::size_t l = 0; l < layers; ++l) q.cache.push_back(r.alloc(q.length * kv_per_token));
        ++served;
        continue;
      }
      // Decode 16 tokens, then grow every layer's cache by concatenation.
      q.length += 16;
      for (std::size_t l = 0; l < layers; ++l) {
        std::uint32_t bigger = r.alloc(q.length * kv_per_token);
        std::uint32_t tmp = r.alloc(16 * 4096 * 2);  // attention temporaries
        r.free(q.cache[l]);
        r.free(tmp);
        q.cache[l] = bigger;
      }
    }
  }
  for (Request& q : active)
    for (std::uint32_t id : q.cache) r.free(id);
  for (std::uint32_t id : weights) r.free(id);
  return {"llm-kv-cache-growth", "LLM decoding, 4 concurrent requests, KV caches grown by concatenation", r.take()};
}

Workload mixed_random() {
  Recorder r;
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::uint32_t> live;
  for (int i = 0; i < 200000; ++i) {
    if (live.size() < 50 || (live.size() < 400 && u(rng) < 0.5)) {
      auto bytes = static_cast<std::size_t>(std::exp(std::log(512.0) + u(rng) * (std::log(64.0 * kMiB) - std::log(512.0))));
      live.push_back(r.alloc(bytes));
    } else {
      r.free_random(live, rng);
    }
  }
  for (std::uint32_t id : live) r.free(id);
  return {"mixed-random", "log-uniform 512 B .. 64 MiB, random lifetimes", r.take()};
}

Workload small_tensors() {
  Recorder r;
  std::mt19937_64 rng(99);
  std::vector<std::uint32_t> live;
  for (int i = 0; i < 200000; ++i) {
    if (live.size() < 100 || (live.size() < 2000 && rng() % 2)) {
      live.push_back(r.alloc(1 + rng() % kMiB));
    } else {
      r.free_random(live, rng);
    }
  }
  for (std::uint32_t id : live) r.free(id);
  return {"small-tensors", "sizes under 1 MiB, random lifetimes", r.take()};
}

Workload onnx_model(const std::string& path, const std::vector<std::int64_t>& batches) {
  Recorder r;
  for (std::int64_t batch : batches) {
    InspectOptions options;
    options.load.batch = batch;
    InspectResult result = inspect_model(path, options);
    const MemoryAnalysis& m = result.memory;
    int nodes = static_cast<int>(m.timeline.size());
    std::vector<std::vector<const Activation*>> born(std::size_t(nodes) + 1), dies(std::size_t(nodes) + 1);
    for (const Activation& a : m.activations) {
      if (a.bytes == 0) continue;
      born[std::size_t(a.first)].push_back(&a);
      dies[std::size_t(a.last)].push_back(&a);
    }
    std::unordered_map<const Activation*, std::uint32_t> ids;
    for (int n = 0; n <= nodes; ++n) {
      for (const Activation* a : born[std::size_t(n)]) ids[a] = r.alloc(a->bytes);
      for (const Activation* a : dies[std::size_t(n)]) r.free(ids.at(a));
    }
  }
  std::string file = path.substr(path.find_last_of('/') + 1);
  std::string sizes;
  for (std::int64_t b : batches) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  return {file.substr(0, file.find('.')) + "-batches", file + " activations at batch " + sizes, r.take()};
}

std::vector<Workload> all_workloads(const std::string& source_dir) {
  std::vector<Workload> w;
  w.push_back(transformer_training_dynamic());
  w.push_back(cnn_training_fixed());
  w.push_back(llm_kv_cache_growth());
  w.push_back(mixed_random());
  w.push_back(small_tensors());
  w.push_back(onnx_model(source_dir + "/examples/models/resnet50.onnx", {8, 32, 16, 24, 4}));
  w.push_back(onnx_model(source_dir + "/examples/models/bert_base.onnx", {4, 16, 8, 12, 2}));
  return w;
}

ReplayResult replay(const Workload& w, const AllocatorConfig& config, std::size_t capacity) {
  SimulatedDevice device({.capacity = capacity});
  ReplayResult result;
  {
    CachingAllocator a(simulated_upstream(device), config);
    std::vector<void*> ptrs;
    std::vector<std::size_t> sizes;
    for (const Op& op : w.ops) {
      if (op.id >= ptrs.size()) {
        ptrs.resize(op.id + 1, nullptr);
        sizes.resize(op.id + 1, 0);
      }
      if (op.allocate) {
        try {
          ptrs[op.id] = a.allocate(op.bytes, op.stream);
          sizes[op.id] = op.bytes;
        } catch (const OutOfMemoryError&) {
          ++result.ooms;
        }
      } else if (ptrs[op.id]) {
        a.deallocate(ptrs[op.id], sizes[op.id], op.stream);
        ptrs[op.id] = nullptr;
      }
    }
    AllocatorStats s = a.stats();
    result.peak_allocated = static_cast<std::size_t>(s.allocated_bytes[kStatAll].peak);
    result.peak_reserved = static_cast<std::size_t>(s.reserved_bytes[kStatAll].peak);
    result.device_calls = s.num_device_alloc + s.num_device_free;
  }
  return result;
}

}  // namespace gpumem::alloc::bench
