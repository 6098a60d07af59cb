#include "gpumem/train/training_step.h"
#include "gpumem/common/flag_names.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gpumem/common/error.h"
#include "gpumem/model/onnx_loader.h"
#include "gpumem/train/step_graph.h"
#include "train/autocast.h"
#include "train/flops.h"
#include "train/op_rules.h"
#include "train/optimizer_rules.h"
#include "train/step_summary.h"

namespace gpumem::train {

const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kSgdMomentum: return "sgd-momentum";
    case Optimizer::kAdam: return "adam";
    case Optimizer::kAdamW: return "adamw";
    case Optimizer::kAdafactor: return "adafactor";
    case Optimizer::kAdam8bit: return "adam8bit";
    case Optimizer::kAdamW32bit: return "adamw32bit";
  }
  return "?";
}
const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kAmpFp16: return "amp-fp16";
    case Precision::kAmpBf16: return "amp-bf16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}
const char* to_string(Loss l) {
  switch (l) {
    case Loss::kCrossEntropy: return "cross-entropy";
    case Loss::kMse: return "mse";
    case Loss::kNone: return "none";
  }
  return "?";
}
const char* to_string(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

std::optional<TorchVersion> parse_torch_version(const std::string& text) {
  TorchVersion v;
  int patch = 0;
  char extra = 0;
  const int read = std::sscanf(text.c_str(), "%d.%d.%d%c", &v.major, &v.minor, &patch, &extra);
  // What follows the numbers ("1.13.0a0", "2.4.1+cu121") is the build, not the release.
  if (read < 1 || text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  if (read == 1) v.minor = 0;
  if (v.major < 1 || v.major > 99 || v.minor < 0 || v.minor > 99 || v.before(1, 13)) return std::nullopt;
  return v;
}
const char* to_string(Phase p) {
  switch (p) {
    case Phase::kResident: return "resident";
    case Phase::kForward: return "forward";
    case Phase::kLoss: return "loss";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}
const char* to_string(Category c) {
  switch (c) {
    case Category::kWeights: return "weights";
    case Category::kGradients: return "gradients";
    case Category::kOptimizerStates: return "optimizer_states";
    case Category::kInputs: return "inputs";
    case Category::kSavedActivations: return "saved_activations";
    case Category::kTransient: return "transient";
  }
  return "?";
}

std::string module_path(const std::string& node_name, int depth) {
  if (node_name.empty() || node_name[0] != '/') return "";
  std::vector<std::string> scopes;
  size_t start = 1;
  while (true) {
    const size_t slash = node_name.find('/', start);
    if (slash == std::string::npos) break;  // the last part is the op's own name
    scopes.push_back(node_name.substr(start, slash - start));
    start = slash + 1;
  }
  if (depth >= 1 && scopes.size() > static_cast<size_t>(depth)) scopes.resize(static_cast<size_t>(depth));
  // Each scope is a child's name relative to its parent, except that a
  // container's numbered children repeat the container's own scope
  // ("layer2", "layer2.1"; "branch1", "branch1.0" inside "stage2.0"): those
  // add only their index.
  std::string path;
  const std::string* previous = nullptr;
  for (const auto& scope : scopes) {
    if (previous != nullptr && scope.size() > previous->size() + 1 && scope.rfind(*previous + ".", 0) == 0) {
      path += scope.substr(previous->size());
    } else {
      path = path.empty() ? scope : path + "." + scope;
    }
    previous = &scope;
  }
  return path;
}

namespace {

constexpr int kNever = -1;
// PyTorch's default cuBLAS workspace, CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8
// (4096 KiB x 2 + 16 KiB x 8), the size memory snapshots show for it.
constexpr uint64_t kCublasWorkspaceBytes = 8519680;
// torch.get_rng_state() on CPU: the Mersenne Twister state, as a tensor.
constexpr uint64_t kCpuRngStateBytes = 5056;

// Builds the step's allocations: forward, loss, backward, optimizer.
class Simulator {
 public:
  Simulator(StepGraph g, const TrainOptions& o, TrainingStep& out) : g_(std::move(g)), o_(o), out_(out) {}

  void run() {
    add_loss();
    plan_times();
    resident();
    forward();
    backward();
    optimizer();
    finish();
  }

 private:
  StepGraph g_;
  const TrainOptions& o_;
  TrainingStep& out_;
  std::vector<Phase> phase_of_time_;
  std::vector<std::string> op_of_time_;
  std::vector<int> time_of_op_;                     // forward time per op
  std::vector<int> backward_time_;                  // per op, kNever when it has no backward
  std::vector<int> segment_of_;                     // per op: its checkpointed segment, -1 none
  std::vector<std::string> op_module_;              // per forward op: module_path(name), computed once
  std::vector<int> recompute_time_;                 // per op in a segment: when backward recomputes it
  std::vector<int> producer_;                       // per value: the op that produces it, -1 none
  std::vector<int> segment_end_;                    // per segment: the time its backward ends
  std::vector<int> recompute_end_;                  // per segment: its last recomputation time
  std::vector<std::vector<int>> read_in_segments_;  // see note_readers()
  int last_backward_time_ = 0;
  std::vector<OpRule> rules_;
  std::vector<int> storage_;  // per value: its allocation index, -1 none
  std::vector<int> grad_;     // per gradient root: the allocation holding its gradient, -1 none
  // A value's gradient is its view base's: a view's gradient is a view of
  // its base's. (In-place results share storage, not gradients.)
  std::vector<int> grad_root_;
  std::vector<int> release_;  // per allocation: the time after which it may go (free_time = release + 1)
  int loss_value_ = -1;
  size_t forward_ops_ = 0;

  int add_value(std::string name, uint64_t bytes, DType dtype, bool input = false) {
    Value v;
    v.name = std::move(name);
    v.bytes = bytes;
    v.dtype = dtype;
    v.input = input;
    g_.values.push_back(std::move(v));
    return static_cast<int>(g_.values.size()) - 1;
  }

  // The loss over the graph's first output.
  void add_loss() {
    forward_ops_ = g_.ops.size();
    if (o_.loss == Loss::kNone) {
      loss_value_ = g_.graph_outputs.empty() ? -1 : g_.graph_outputs.front();
      return;
    }
    int logits = g_.graph_outputs.front();
    // Autocast runs the loss in fp32, on an fp32 copy of the logits.
    const bool low = g_.values[static_cast<size_t>(logits)].dtype != DType::Float &&
                     (o_.precision == Precision::kAmpFp16 || o_.precision == Precision::kAmpBf16);
    if (low) logits = insert_cast(g_, logits, DType::Float, g_.ops.size());
    // Copies: adding values below may move the vector.
    const Value l = g_.values[static_cast<size_t>(logits)];
    const uint64_t elements = elements_of(l);
    // cross_entropy takes [N, C] or [N, C, d1, ...]: the classes are on axis 1
    // of a per-pixel output ([N, C, H, W], segmentation). A 3-D output is
    // taken as a sequence model's [batch, tokens, vocabulary], flattened to
    // rows before the loss (as language models call it), classes last.
    const int64_t classes = l.dims.empty() ? 1 : std::max<int64_t>(l.dims.size() >= 4 ? l.dims[1] : l.dims.back(), 1);
    const DType loss_type = l.dtype;
    const uint64_t width = static_cast<uint64_t>(dtype_bits(loss_type) / 8);
    if (o_.loss == Loss::kCrossEntropy) {
      const uint64_t rows = elements / static_cast<uint64_t>(classes);
      const int labels = add_value("labels", rows * 8, DType::Int64, true);
      const int logp = add_value("log_softmax of " + l.name, elements * width, loss_type);
      loss_value_ = add_value("loss", width, loss_type);
      g_.ops.push_back(Op{"LogSoftmax", "cross_entropy/log_softmax", {logits}, {logp}, false});
      g_.ops.push_back(Op{"nll_loss", "cross_entropy/nll_loss", {logp, labels}, {loss_value_}, false});
    } else {
      const int target = add_value("target", elements * width, loss_type, true);
      loss_value_ = add_value("loss", width, loss_type);
      g_.ops.push_back(Op{"mse_loss", "mse_loss", {logits, target}, {loss_value_}, false});
    }
    for (size_t k = forward_ops_; k < g_.ops.size(); ++k) {
      Op& op = g_.ops[k];
      op.needs_backward = g_.values[static_cast<size_t>(op.inputs[0])].requires_grad;
      for (int out : op.outputs) g_.values[static_cast<size_t>(out)].requires_grad = op.needs_backward;
    }
  }

  // Ops whose outputs lead to the loss run backward; the rest never do.
  void plan_times() {
    grad_root_.resize(g_.values.size());
    for (size_t v = 0; v < g_.values.size(); ++v) grad_root_[v] = root(static_cast<int>(v));
    std::vector<bool> on_path(g_.values.size(), false);
    if (loss_value_ >= 0) on_path[static_cast<size_t>(loss_value_)] = true;
    std::vector<bool> runs_backward(g_.ops.size(), false);
    for (size_t k = g_.ops.size(); k-- > 0;) {
      Op& op = g_.ops[k];
      if (!op.needs_backward) continue;
      const bool leads = std::any_of(op.outputs.begin(), op.outputs.end(),
                                     [&](int o) { return o >= 0 && on_path[static_cast<size_t>(root(o))]; });
      if (!leads) continue;
      runs_backward[k] = true;
      for (int in : op.inputs) {
        if (in >= 0 && g_.values[static_cast<size_t>(in)].requires_grad) on_path[static_cast<size_t>(root(in))] = true;
      }
    }
    rules_.reserve(g_.ops.size());
    std::map<std::string, std::pair<int, std::string>> unruled;  // kind -> (count, first node)
    std::vector<int> last_reader(g_.values.size(), -1);
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      for (int in : g_.ops[k].inputs) {
        if (in >= 0) last_reader[static_cast<size_t>(root(in))] = static_cast<int>(k);
      }
    }
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      Op& op = g_.ops[k];
      op.needs_backward = runs_backward[k];
      const int in0 = op.inputs.empty() || op.inputs[0] < 0 ? -1 : root(op.inputs[0]);
      const bool dies = in0 >= 0 && last_reader[static_cast<size_t>(in0)] == static_cast<int>(k) &&
                        !g_.values[static_cast<size_t>(in0)].parameter && !g_.values[static_cast<size_t>(in0)].input &&
                        !g_.values[static_cast<size_t>(in0)].buffer;
      rules_.push_back(rule_for(op, g_, o_.device, dies));
      // A rule matters only to an op that runs backward.
      if (!rules_.back().known && op.needs_backward) {
        auto& [count, example] = unruled[op.kind];
        if (count++ == 0) example = op.name;
      }
    }
    if (o_.device == Device::kCuda &&
        std::any_of(g_.ops.begin(), g_.ops.end(), [](const Op& op) { return op.kind == "convolution"; })) {
      out_.assumptions.push_back(
          "convolution: cuDNN's workspaces are not counted: their size depends on the algorithm cuDNN picks at run "
          "time (torch.backends.cudnn.benchmark)");
    }
    for (const auto& [kind, seen] : unruled) {
      out_.assumptions.push_back(fmt::format("{}: {} node(s), e.g. '{}': {}", kind, seen.first, seen.second,
                                             rule_for(Op{kind, "", {}, {}, true}, g_, o_.device, false).source));
    }
    // Time 0: what is resident. Then one time per op, forward and loss,
    // then backward in reverse, then the optimizer.
    phase_of_time_.push_back(Phase::kResident);
    op_of_time_.push_back("");
    out_.op_at_time.push_back(-1);
    time_of_op_.assign(g_.ops.size(), kNever);
    backward_time_.assign(g_.ops.size(), kNever);
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      time_of_op_[k] = static_cast<int>(phase_of_time_.size());
      phase_of_time_.push_back(k < forward_ops_ ? Phase::kForward : Phase::kLoss);
      op_of_time_.push_back(g_.ops[k].name);
      out_.op_at_time.push_back(static_cast<int>(k));
      out_.op_names.push_back(g_.ops[k].name);
      out_.op_kinds.push_back(g_.ops[k].kind);
      out_.op_flops.push_back(forward_flops(g_.ops[k], g_));
      out_.forward_flops += out_.op_flops.back();
    }
    mark_segments();
    for (size_t k = g_.ops.size(); k-- > 0;) {
      // At a checkpointed segment's last op, backward first runs the
      // segment's forward again (when anything in it needs a gradient).
      const int seg = segment_of_[k];
      if (seg >= 0 && (k + 1 == g_.ops.size() || segment_of_[k + 1] != seg)) {
        size_t first = k;
        while (first > 0 && segment_of_[first - 1] == seg) --first;
        bool any = false;
        for (size_t j = first; j <= k; ++j) any = any || g_.ops[j].needs_backward;
        for (size_t j = first; j <= k && any; ++j) {
          recompute_time_[j] = static_cast<int>(phase_of_time_.size());
          phase_of_time_.push_back(Phase::kBackward);
          op_of_time_.push_back("recompute " + g_.ops[j].name);
          out_.op_at_time.push_back(static_cast<int>(j));
          out_.recomputed_ops.push_back(static_cast<int>(j));
          out_.recompute_flops += forward_flops(g_.ops[j], g_);
        }
      }
      if (!g_.ops[k].needs_backward) continue;
      backward_time_[k] = static_cast<int>(phase_of_time_.size());
      phase_of_time_.push_back(Phase::kBackward);
      op_of_time_.push_back(g_.ops[k].name);
      out_.op_at_time.push_back(static_cast<int>(k));
    }
    last_backward_time_ = static_cast<int>(phase_of_time_.size()) - 1;
    segment_end_.assign(o_.checkpoint.size(), 0);
    recompute_end_.assign(o_.checkpoint.size(), 0);
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      const int seg = segment_of_[k];
      if (seg < 0) continue;
      auto& end = segment_end_[static_cast<size_t>(seg)];
      end = std::max({end, backward_time_[k], recompute_time_[k]});
      recompute_end_[static_cast<size_t>(seg)] = std::max(recompute_end_[static_cast<size_t>(seg)], recompute_time_[k]);
    }
  }

  // Each entry to checkpoint is one segment: a module's ops from the first
  // to the last, or for "FIRST..LAST" a run of sibling modules from FIRST's
  // first op to LAST's last, as checkpoint_sequential wraps a run of
  // children in one torch.utils.checkpoint (casts autocast put in between
  // included either way).
  std::pair<int, int> module_ops(const std::string& entry, const std::string& module) {
    int first = -1, last = -1;
    if (op_module_.empty()) {
      for (size_t k = 0; k < forward_ops_; ++k) op_module_.push_back(module_path(g_.ops[k].name));
    }
    for (size_t k = 0; k < forward_ops_; ++k) {
      const std::string& path = op_module_[k];
      if (path.rfind(module, 0) != 0 || (path.size() > module.size() && path[module.size()] != '.')) continue;
      if (first < 0) first = static_cast<int>(k);
      last = static_cast<int>(k);
    }
    if (first < 0) {
      throw InputError(
          fmt::format("{}: " GPUMEM_FLAG_CHECKPOINT " {}: no node belongs to module '{}'", out_.model, entry, module));
    }
    return {first, last};
  }

  void mark_segments() {
    segment_of_.assign(g_.ops.size(), -1);
    recompute_time_.assign(g_.ops.size(), kNever);
    producer_.assign(g_.values.size(), -1);
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      for (int o : g_.ops[k].outputs) {
        if (o >= 0) producer_[static_cast<size_t>(o)] = static_cast<int>(k);
      }
    }
    for (size_t segment = 0; segment < o_.checkpoint.size(); ++segment) {
      const std::string& entry = o_.checkpoint[segment];
      const size_t dots = entry.find("..");
      const auto [first, last] = dots == std::string::npos
                                     ? module_ops(entry, entry)
                                     : std::pair{module_ops(entry, entry.substr(0, dots)).first,
                                                 module_ops(entry, entry.substr(dots + 2)).second};
      if (last < first) {
        throw InputError(fmt::format("{}: " GPUMEM_FLAG_CHECKPOINT
                                     " {}: '{}' runs after '{}'; name the run first..last",
                                     out_.model, entry, entry.substr(0, dots), entry.substr(dots + 2)));
      }
      for (int k = first; k <= last; ++k) {
        if (segment_of_[static_cast<size_t>(k)] >= 0) {
          throw InputError(fmt::format("{}: " GPUMEM_FLAG_CHECKPOINT " {}: it overlaps another module in the list",
                                       out_.model, entry));
        }
        segment_of_[static_cast<size_t>(k)] = static_cast<int>(segment);
      }
    }
  }

  int root(int v) const {
    while (g_.values[static_cast<size_t>(v)].alias_of >= 0) v = g_.values[static_cast<size_t>(v)].alias_of;
    return v;
  }

  int allocate(std::string tensor, std::string op, Category category, uint64_t bytes, int time) {
    Allocation a;
    a.tensor = std::move(tensor);
    a.op = std::move(op);
    a.phase = phase_of_time_[static_cast<size_t>(time)];
    a.category = category;
    a.bytes = bytes;
    a.alloc_time = time;
    a.free_time = kNever;
    out_.allocations.push_back(std::move(a));
    release_.push_back(time);
    return static_cast<int>(out_.allocations.size()) - 1;
  }

  void hold(int allocation, int until) {
    if (allocation >= 0)
      release_[static_cast<size_t>(allocation)] = std::max(release_[static_cast<size_t>(allocation)], until);
  }

  int storage_of(int value) const { return storage_[static_cast<size_t>(root(value))]; }

  void resident() {
    storage_.assign(g_.values.size(), -1);
    grad_.assign(g_.values.size(), -1);
    for (size_t id = 0; id < g_.values.size(); ++id) {
      const Value& v = g_.values[id];
      if (v.alias_of >= 0 || v.bytes == 0) continue;
      if (v.parameter || v.buffer) {
        storage_[id] = allocate(v.name, v.buffer ? "buffer" : "parameter", Category::kWeights, v.bytes, 0);
        hold(storage_[id], kForever);
        if (v.parameter) {
          out_.parameter_bytes += v.bytes;
          // By shape where known: a packed 4-bit weight's bytes are not its values.
          uint64_t n = v.dims.empty() ? elements_of(v) : 1;
          for (const int64_t d : v.dims) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
          (v.trainable ? out_.trainable_parameters : out_.frozen_parameters) += n;
        }
      } else if (v.input) {
        storage_[id] = allocate(v.name, "batch", Category::kInputs, v.bytes, 0);
        hold(storage_[id], kForever);
      }
    }
    for (int p : g_.parameters) {
      const Value& v = g_.values[static_cast<size_t>(p)];
      if (!v.trainable || v.bytes == 0) continue;
      if (!o_.first_step) {
        for (const auto& s : optimizer_states(o_.optimizer, v)) {
          hold(allocate(s.name + " of " + v.name, "optimizer state", Category::kOptimizerStates, s.bytes, 0), kForever);
        }
      }
      if (!o_.grads_set_to_none) {
        grad_[static_cast<size_t>(p)] = allocate("grad of " + v.name, "zero_grad", Category::kGradients, v.bytes, 0);
        hold(grad_[static_cast<size_t>(p)], kForever);
      }
    }
  }

  static constexpr int kForever = 1 << 30;

  // On CUDA, PyTorch gives each thread's cuBLAS handle a workspace from the
  // caching allocator at its first matrix product and keeps it: one for the
  // forward thread, one for autograd's backward thread.
  void cublas_workspace(const Op& op, int t, bool& done, const char* thread) {
    if (done || o_.device != Device::kCuda || !uses_cublas(op.kind)) return;
    done = true;
    hold(allocate(fmt::format("cuBLAS workspace ({} thread)", thread), op.name, Category::kTransient,
                  kCublasWorkspaceBytes, t),
         kForever);
  }

  static bool uses_cublas(const std::string& kind) { return kind == "linear" || kind == "MatMul"; }

  void forward() {
    bool workspace = false;
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      cublas_workspace(g_.ops[k], time_of_op_[k], workspace, "forward");
      const bool checkpointed = segment_of_[k] >= 0 && recompute_time_[k] != kNever;
      if (checkpointed) {
        // torch.utils.checkpoint keeps the segment's inputs until its
        // backward is over, not what its ops would keep: those come back
        // when the segment is recomputed.
        const int seg = segment_of_[k];
        for (int in : g_.ops[k].inputs) {
          if (in < 0 || produced_in_segment(root(in), seg)) continue;
          hold(storage_of(in), segment_end_[static_cast<size_t>(seg)]);
        }
        // On CPU it also keeps the generator's state (5,056 bytes in torch
        // 1.13) until the whole backward pass ends; CUDA's lives on the host.
        if (o_.device == Device::kCpu && (k == 0 || segment_of_[k - 1] != seg)) {
          hold(allocate("RNG state of a checkpoint", g_.ops[k].name, Category::kTransient, kCpuRngStateBytes,
                        time_of_op_[k]),
               last_backward_time_);
        }
      }
      run_op(k, time_of_op_[k], checkpointed ? kNever : backward_time_[k]);
    }
    note_readers();
    // Recomputation, in the backward pass: the segment's ops run again and
    // keep what their backward needs. The recomputed outputs stay until the
    // segment's backward is over (CheckpointFunction holds them).
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      if (recompute_time_[k] == kNever) continue;
      const int seg = segment_of_[k];
      if (o_.device == Device::kCpu && (k == 0 || segment_of_[k - 1] != seg)) {
        // fork_rng's copy of the state while the segment reruns.
        hold(allocate("RNG state while recomputing", "recompute " + g_.ops[k].name, Category::kTransient,
                      kCpuRngStateBytes, recompute_time_[k]),
             recompute_end_[static_cast<size_t>(seg)]);
      }
      run_op(k, recompute_time_[k], backward_time_[k]);
      for (int o : g_.ops[k].outputs) {
        if (o >= 0 && leaves_segment(o, seg)) hold(storage_of(o), segment_end_[static_cast<size_t>(seg)]);
      }
    }
  }

  // Whether `value`, made in `segment`, is read by an op outside it.
  bool leaves_segment(int value, int segment) const {
    const auto& readers = read_in_segments_[static_cast<size_t>(root(value))];
    return std::any_of(readers.begin(), readers.end(), [&](int s) { return s != segment; });
  }

  // Per storage root (once the forward pass has set in-place aliases): the
  // segments (-1: none) of the ops that read it.
  void note_readers() {
    read_in_segments_.assign(g_.values.size(), {});
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      for (int in : g_.ops[k].inputs) {
        if (in < 0) continue;
        auto& segments = read_in_segments_[static_cast<size_t>(root(in))];
        if (std::find(segments.begin(), segments.end(), segment_of_[k]) == segments.end()) {
          segments.push_back(segment_of_[k]);
        }
      }
    }
  }

  bool produced_in_segment(int value, int segment) const {
    const int p = producer_[static_cast<size_t>(value)];
    return p >= 0 && segment_of_[static_cast<size_t>(p)] == segment;
  }

  // Op k at time t: its outputs and extras; what backward needs is kept
  // until `backward` (kNever: nothing is kept).
  void run_op(size_t k, int t, int backward) {
    const Op& op = g_.ops[k];
    const OpRule& r = rules_[k];
    const bool recompute = phase_of_time_[static_cast<size_t>(t)] == Phase::kBackward;
    const std::string label = recompute ? "recompute " + op.name : op.name;
    auto note = [&](int allocation, std::vector<int> Allocation::*list) {
      if (allocation >= 0 && !recompute) {
        (out_.allocations[static_cast<size_t>(allocation)].*list).push_back(static_cast<int>(k));
      }
    };
    auto make = [&](const std::string& what, uint64_t bytes) {
      const int a = allocate(what, label, Category::kTransient, bytes, t);
      if (!recompute) out_.allocations.back().op_index = static_cast<int>(k);
      return a;
    };
    for (int in : op.inputs) {
      if (in < 0) continue;
      hold(storage_of(in), t);
      note(storage_of(in), &Allocation::read_by);
    }
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      const int o = op.outputs[i];
      if (o < 0) continue;
      Value& v = g_.values[static_cast<size_t>(o)];
      if (i == 0 && r.in_place && !op.inputs.empty() && op.inputs[0] >= 0 && v.alias_of < 0) {
        v.alias_of = root(op.inputs[0]);
      }
      if (v.alias_of >= 0 || v.bytes == 0) continue;
      storage_[static_cast<size_t>(o)] = make(v.name, v.bytes);
      if (v.held_through_loss) hold(storage_[static_cast<size_t>(o)], time_of_op_.back());
    }
    if (backward == kNever) {
      for (const Extra& e : r.extras) make(e.what + " of " + op.name, e.bytes);
      return;
    }
    // What backward needs stays until the op's backward has run.
    auto keep = [&](int allocation) {
      if (allocation < 0) return;
      note(allocation, &Allocation::kept_by);
      hold(allocation, backward);
      Allocation& a = out_.allocations[static_cast<size_t>(allocation)];
      if (a.category == Category::kTransient) a.category = Category::kSavedActivations;
    };
    for (int i : r.saved_inputs) {
      if (static_cast<size_t>(i) < op.inputs.size() && op.inputs[static_cast<size_t>(i)] >= 0) {
        keep(storage_of(op.inputs[static_cast<size_t>(i)]));
      }
    }
    if (r.saved_output && !op.outputs.empty() && op.outputs[0] >= 0) keep(storage_of(op.outputs[0]));
    for (const Extra& e : r.extras) {
      const int a = make(e.what + " of " + op.name, e.bytes);
      if (e.saved) keep(a);
    }
  }

  // A gradient arrives for `value` at time t: the first one is its
  // gradient; later ones are added into it in place (AccumulateGrad and
  // autograd's InputBuffer), their own memory freed right after.
  void arrive(int value, int contribution, int t) {
    const int r = grad_root_[static_cast<size_t>(value)];
    const Value& v = g_.values[static_cast<size_t>(r)];
    int& grad = grad_[static_cast<size_t>(r)];
    if (grad < 0) {
      grad = contribution;
      if (v.parameter && contribution >= 0) {
        Allocation& a = out_.allocations[static_cast<size_t>(contribution)];
        if (a.alloc_time == t) a.category = Category::kGradients;
        hold(contribution, kForever);
      }
      return;
    }
    // Accumulated into the existing gradient; a fresh contribution goes.
    if (contribution >= 0 && out_.allocations[static_cast<size_t>(contribution)].alloc_time == t) hold(contribution, t);
  }

  void backward() {
    bool first = true;
    bool workspace = false;
    for (size_t k = g_.ops.size(); k-- > 0;) {
      const Op& op = g_.ops[k];
      const int t = backward_time_[k];
      if (t == kNever) continue;
      cublas_workspace(op, t, workspace, "backward");
      const OpRule& r = rules_[k];
      if (first) {
        // loss.backward() starts from a gradient of ones.
        first = false;
        const Value& loss = g_.values[static_cast<size_t>(loss_value_)];
        grad_[static_cast<size_t>(grad_root_[static_cast<size_t>(loss_value_)])] =
            allocate("grad of " + loss.name, "backward", Category::kTransient, loss.bytes, t);
      }
      const int out = op.outputs.empty() || op.outputs[0] < 0 ? -1 : op.outputs[0];
      const int grad_out = out >= 0 ? grad_[static_cast<size_t>(grad_root_[static_cast<size_t>(out)])] : -1;
      hold(grad_out, t);
      for (size_t i = 0; i < op.inputs.size() && i < r.grads.size(); ++i) {
        const int in = op.inputs[i];
        if (in < 0 || !g_.values[static_cast<size_t>(in)].requires_grad) continue;
        if (r.grads[i] == OpRule::Grad::kAllocated) {
          const Value& target = g_.values[static_cast<size_t>(grad_root_[static_cast<size_t>(in)])];
          const int a = allocate("grad of " + target.name, op.name, Category::kTransient, target.bytes, t);
          arrive(in, a, t);
        } else if (r.grads[i] == OpRule::Grad::kPassThrough) {
          arrive(in, grad_out, t);
        }
      }
      if (r.backward_scratch > 0)
        allocate("scratch of " + op.name, op.name, Category::kTransient, r.backward_scratch, t);
    }
    // CheckpointFunction's backward holds the gradient of the segment's
    // outputs until it returns.
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      const int seg = segment_of_[k];
      if (seg < 0 || recompute_time_[k] == kNever) continue;
      for (int o : g_.ops[k].outputs) {
        if (o >= 0 && leaves_segment(o, seg)) {
          hold(grad_[static_cast<size_t>(grad_root_[static_cast<size_t>(o)])], segment_end_[static_cast<size_t>(seg)]);
        }
      }
    }
    // Each activation's gradient is needed until its producer's backward.
    for (size_t k = 0; k < g_.ops.size(); ++k) {
      if (backward_time_[k] == kNever) continue;
      for (int o : g_.ops[k].outputs) {
        if (o >= 0) hold(grad_[static_cast<size_t>(grad_root_[static_cast<size_t>(o)])], backward_time_[k]);
      }
    }
  }

  void optimizer() {
    const bool foreach = o_.foreach.value_or(o_.device == Device::kCuda);
    std::vector<const Value*> trainable;
    for (int p : g_.parameters) {
      const Value& v = g_.values[static_cast<size_t>(p)];
      if (v.trainable && v.bytes > 0 && grad_[static_cast<size_t>(p)] >= 0) trainable.push_back(&v);
    }
    auto new_time = [&](std::string what) {
      phase_of_time_.push_back(Phase::kOptimizer);
      op_of_time_.push_back(std::move(what));
      out_.op_at_time.push_back(-1);
      return static_cast<int>(phase_of_time_.size()) - 1;
    };
    if (foreach) {
      const int t = new_time(fmt::format("{} step (foreach)", to_string(o_.optimizer)));
      if (o_.first_step) {
        for (const Value* v : trainable) create_states(*v, t);
      }
      if (const uint64_t temp = foreach_temporary_bytes(o_.optimizer, trainable, o_.torch.value_or(TorchVersion{}));
          temp > 0) {
        allocate("foreach temporaries", "optimizer step", Category::kTransient, temp, t);
      }
      return;
    }
    // The for-loop implementation's last temporary (Adam's denom) stays
    // bound to a Python local until the next parameter's replaces it.
    int previous = -1;
    for (const Value* v : trainable) {
      const int t = new_time(fmt::format("{} step of {}", to_string(o_.optimizer), v->name));
      if (o_.first_step) create_states(*v, t);
      const uint64_t temp = for_loop_temporary_bytes(o_.optimizer, *v);
      if (temp == 0) continue;
      const uint64_t kept = lingering_temporary_bytes(o_.optimizer, *v);
      if (temp > kept) allocate("update of " + v->name, "optimizer step", Category::kTransient, temp - kept, t);
      hold(previous, t);
      previous = kept > 0 ? allocate("denom of " + v->name, "optimizer step", Category::kTransient, kept, t) : -1;
    }
    hold(previous, static_cast<int>(phase_of_time_.size()) - 1);
  }

  void create_states(const Value& v, int t) {
    for (const auto& s : optimizer_states(o_.optimizer, v)) {
      hold(allocate(s.name + " of " + v.name, "optimizer step", Category::kOptimizerStates, s.bytes, t), kForever);
    }
  }

  void finish() {
    const int end = static_cast<int>(phase_of_time_.size());
    out_.end_time = end;
    for (size_t i = 0; i < out_.allocations.size(); ++i) {
      Allocation& a = out_.allocations[i];
      const int release = release_[i];
      a.free_time = release >= kForever ? end : std::min(release + 1, end);
      if (a.free_time <= a.alloc_time) a.free_time = a.alloc_time + 1;
    }
    summarize_step(out_, phase_of_time_, op_of_time_);
  }
};

PricingOptions pricing_for(Precision p) {
  PricingOptions pricing;
  switch (p) {
    case Precision::kFp32: break;
    case Precision::kAmpFp16: pricing.activations_as = DType::Float16; break;
    case Precision::kAmpBf16: pricing.activations_as = DType::BFloat16; break;
    case Precision::kBf16: pricing.weights_as = pricing.activations_as = DType::BFloat16; break;
  }
  return pricing;
}

}  // namespace

void summarize_step(TrainingStep& step, const std::vector<Phase>& phase_of_time,
                    const std::vector<std::string>& op_of_time) {
  const int end = static_cast<int>(phase_of_time.size());
  step.end_time = end;
  std::vector<int64_t> delta(static_cast<size_t>(end) + 1, 0);
  for (const auto& a : step.allocations) {
    delta[static_cast<size_t>(a.alloc_time)] += static_cast<int64_t>(a.bytes);
    delta[static_cast<size_t>(a.free_time)] -= static_cast<int64_t>(a.bytes);
    step.allocated_in_phase[static_cast<int>(a.phase)] += a.bytes;
  }
  int64_t live = 0;
  for (int t = 0; t < end; ++t) {
    live += delta[static_cast<size_t>(t)];
    const Phase phase = phase_of_time[static_cast<size_t>(t)];
    step.timeline.push_back({t, phase, op_of_time[static_cast<size_t>(t)], static_cast<uint64_t>(live)});
    auto& phase_peak = step.peak_in_phase[static_cast<int>(phase)];
    phase_peak = std::max(phase_peak, static_cast<uint64_t>(live));
    if (static_cast<uint64_t>(live) > step.peak_bytes) {
      step.peak_bytes = static_cast<uint64_t>(live);
      step.peak_time = t;
    }
  }
  step.peak_phase = phase_of_time[static_cast<size_t>(step.peak_time)];
  step.peak_op = op_of_time[static_cast<size_t>(step.peak_time)];
  for (const auto& a : step.allocations) {
    if (a.alloc_time <= step.peak_time && step.peak_time < a.free_time) {
      step.breakdown[static_cast<int>(a.category)] += a.bytes;
    }
    const bool carried = a.category == Category::kWeights || a.category == Category::kOptimizerStates ||
                         (a.category == Category::kGradients && !step.options.grads_set_to_none);
    if (carried && a.free_time == end) step.steady_state_bytes += a.bytes;
    if (a.category == Category::kWeights || a.category == Category::kGradients ||
        a.category == Category::kOptimizerStates) {
      if (a.free_time == end) step.static_estimate_bytes += a.bytes;
    }
  }
}

TrainingStep predict_training_step(const Model& model, const TrainOptions& options) {
  TrainingStep step;
  step.options = options;
  const MemoryAnalysis analysis = analyze_memory(model.graph, pricing_for(options.precision));
  StepGraph g = [&] {
    try {
      return build_step_graph(model.graph, analysis, options.frozen, model.path);
    } catch (const InputError& e) {
      // --batch on an axis without a name: the export fixed the sizes that
      // follow from it (reshapes to constant shapes), so they cannot change.
      const BatchAxis& axis = model.batch_axis;
      if (!options.model.load.batch || !axis.symbol.empty()) throw;
      // Its advice to give --batch does not apply: it was given.
      std::string what = e.what();
      what = what.substr(0, what.find("; bind its dimensions"));
      throw InputError(
          fmt::format("{}: " GPUMEM_FLAG_BATCH
                      " {} set dimension {} of '{}'{}, but this export fixed the sizes that follow from it; export "
                      "with dynamic_axes={{'{}': {{{}: 'batch'}}}} (docs/train.md)",
                      what, *options.model.load.batch, axis.axis, axis.input,
                      axis.assumed ? ", taken as the batch since the export names none (" GPUMEM_FLAG_BATCH_DIM
                                     " AXIS chooses another)"
                                   : "",
                      axis.input, axis.axis));
    }
  }();
  step.batch_axis = model.batch_axis;
  apply_autocast(g, options.precision, options.device);
  if (g.graph_outputs.empty()) throw InputError(model.path + ": the graph has no output to compute a loss from");
  if (g.has_batch_norm && !g.batch_statistics) {
    step.warnings.push_back(
        "BatchNormalization runs on running statistics: the model was exported in inference mode; export it with "
        "torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING) for a training step's memory");
  }
  const bool has_dropout = std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.kind == "Dropout"; });
  if (!g.has_batch_norm && !has_dropout) {
    // torch.onnx's default export is in inference mode: BatchNorm folded
    // into the convolutions, whose weights become unnamed constants
    // ("onnx::Conv_193"), and dropout removed. The step then lacks the
    // batch statistics and masks training keeps. (A training-mode export
    // with constant folding also has unnamed weights, the transposes it
    // folded, but keeps its BatchNorm or Dropout nodes.)
    uint64_t unnamed = 0, all = 0;
    std::string example;
    for (int p : g.parameters) {
      const Value& v = g.values[static_cast<size_t>(p)];
      all += v.bytes;
      if (v.name.rfind("onnx::", 0) == 0) {
        unnamed += v.bytes;
        if (example.empty()) example = v.name;
      }
    }
    if (all > 0 && unnamed * 2 > all) {
      step.warnings.push_back(fmt::format(
          "most parameters are unnamed constants ('{}'): an inference-mode export, with BatchNorm folded into the "
          "convolutions and dropout removed, predicts too little; export with torch.onnx.export(..., "
          "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)",
          example));
    }
  }
  const bool any_trainable = std::any_of(g.parameters.begin(), g.parameters.end(),
                                         [&](int p) { return g.values[static_cast<size_t>(p)].trainable; });
  if (!any_trainable) {
    step.warnings.push_back("no parameter is trainable (" GPUMEM_FLAG_FROZEN
                            " matches them all): the step computes no gradient");
  }
  step.model = model.path;
  Simulator(std::move(g), options, step).run();
  return step;
}

TrainingStep simulate_step_graph(StepGraph graph, const TrainOptions& options, const std::string& model) {
  TrainingStep step;
  step.options = options;
  step.model = model;
  apply_autocast(graph, options.precision, options.device);
  Simulator(std::move(graph), options, step).run();
  return step;
}

TrainingStep predict_training_step(const std::string& path, const TrainOptions& options) {
  return predict_training_step(load_onnx_model(path, options.model.load), options);
}

}  // namespace gpumem::train
