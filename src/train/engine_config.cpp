// The engines' own configuration for a plan, so that `gpumem fit --emit`
// hands users something they can run rather than figures to transcribe.
#include "gpumem/train/engine_config.h"
#include "common/bounded_json.h"

#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gpumem::train {

std::string deepspeed_config_json(const ZeroSetting& zero, Precision precision, uint64_t micro_batch_per_gpu,
                                  const DeepSpeedBuffers& buffers, uint64_t accumulation_steps) {
  using nlohmann::json;
  json zo = {{"stage", zero.stage},
             {"contiguous_gradients", true},
             {"overlap_comm", true},
             {"reduce_bucket_size", buffers.reduce_bucket_size}};
  if (zero.stage <= 2) {
    zo["allgather_bucket_size"] = buffers.allgather_bucket_size;
  } else {
    zo["stage3_prefetch_bucket_size"] = buffers.prefetch_bucket_size;
    zo["stage3_max_live_parameters"] = buffers.max_live_parameters;
    zo["stage3_param_persistence_threshold"] = buffers.param_persistence_threshold;
  }
  // Pinned host memory is DeepSpeed's default for both offloads.
  if (zero.offload_optimizer) zo["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (zero.stage == 3 && zero.offload_param) zo["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};

  json config = {{"train_micro_batch_size_per_gpu", micro_batch_per_gpu},
                 {"gradient_accumulation_steps", accumulation_steps},
                 {"zero_optimization", zo}};
  if (precision == Precision::kAmpBf16 || precision == Precision::kBf16) {
    config["bf16"] = {{"enabled", true}};
  } else if (precision == Precision::kAmpFp16) {
    // loss_scale 0: dynamic loss scaling.
    config["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
  }
  return json_text(config, 2) + "\n";
}

std::string fsdp_snippet(FsdpSharding sharding, Precision precision, const FsdpWrap& wrap) {
  const bool by_class = !wrap.module_class.empty();
  std::string s =
      "import functools\n"
      "import torch\n"
      "from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy\n";
  s += by_class ? "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy\n"
                : "from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy\n";
  s += "\n";
  if (by_class) {
    s += "# " + wrap.module_class + ": import it from the module that defines the model's layers.\n";
    s += "auto_wrap_policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={" +
         wrap.module_class + "})\n";
  } else {
    s += "auto_wrap_policy = functools.partial(size_based_auto_wrap_policy, min_num_params=" +
         std::to_string(wrap.min_num_params) + ")\n";
  }
  const char* dtype = precision == Precision::kAmpFp16                                    ? "torch.float16"
                      : precision == Precision::kAmpBf16 || precision == Precision::kBf16 ? "torch.bfloat16"
                                                                                          : nullptr;
  if (dtype) {
    s += std::string("mixed_precision = MixedPrecision(param_dtype=") + dtype + ", reduce_dtype=" + dtype +
         ", buffer_dtype=" + dtype + ")\n";
  } else {
    s += "mixed_precision = None  # fp32\n";
  }
  s += "model = FullyShardedDataParallel(\n"
       "    model,\n"
       "    sharding_strategy=ShardingStrategy." +
       std::string(sharding == FsdpSharding::kFullShard ? "FULL_SHARD" : "SHARD_GRAD_OP") +
       ",\n"
       "    auto_wrap_policy=auto_wrap_policy,\n"
       "    mixed_precision=mixed_precision,\n"
       "    device_id=torch.cuda.current_device(),\n"
       ")\n";
  return s;
}

namespace {

// "'layer1.0'" as a Python string literal (module names are identifiers and
// indices; anything else is escaped).
std::string python_string(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      continue;
    }
    out += c;
  }
  return out + "'";
}

// "layer1.0" -> {"layer1", "0"}; "0" -> {"", "0"}.
std::pair<std::string, std::string> parent_and_child(const std::string& module) {
  const size_t dot = module.rfind('.');
  if (dot == std::string::npos) return {"", module};
  return {module.substr(0, dot), module.substr(dot + 1)};
}

}  // namespace

std::string checkpoint_snippet(const std::vector<std::string>& modules, const std::string& about) {
  std::string singles, runs;
  for (const auto& m : modules) {
    const size_t dots = m.find("..");
    if (dots == std::string::npos) {
      singles += "    " + python_string(m) + ",\n";
      continue;
    }
    const auto [parent, first] = parent_and_child(m.substr(0, dots));
    const auto [last_parent, last] = parent_and_child(m.substr(dots + 2));
    runs += "    (" + python_string(parent) + ", " + python_string(first) + ", " + python_string(last) + "),\n";
  }
  return "# " + about +
         "\n"
         "# Usage: from checkpoint import apply; apply(model), before training. The model's code\n"
         "# and its parameters' names stay as they are.\n"
         "import functools\n"
         "\n"
         "import torch\n"
         "from torch.utils.checkpoint import checkpoint\n"
         "\n"
         "# Each under a checkpoint of its own.\n"
         "MODULES = [\n" +
         singles +
         "]\n"
         "# (an nn.Sequential, its first child, its last child): that run under one checkpoint.\n"
         "RUNS = [\n" +
         runs +
         "]\n"
         "\n"
         "\n"
         "def _checkpointed(forward):\n"
         "    @functools.wraps(forward)\n"
         "    def run(*args, **kwargs):\n"
         "        return checkpoint(forward, *args, use_reentrant=False, **kwargs)\n"
         "    return run\n"
         "\n"
         "\n"
         "def _passed_through(x):\n"
         "    return x\n"
         "\n"
         "\n"
         "def _chain(modules):\n"
         "    def run(x):\n"
         "        for module in modules:\n"
         "            x = module(x)\n"
         "        return x\n"
         "    return run\n"
         "\n"
         "\n"
         "def _sequential_forward(sequential, spans):\n"
         "    names = [name for name, _ in sequential.named_children()]\n"
         "    starts = {names.index(first): names.index(last) for first, last in spans}\n"
         "    children = list(sequential.children())\n"
         "\n"
         "    def forward(x):\n"
         "        i = 0\n"
         "        while i < len(children):\n"
         "            if i in starts:\n"
         "                end = starts[i] + 1\n"
         "                x = checkpoint(_chain(children[i:end]), x, use_reentrant=False)\n"
         "                i = end\n"
         "            else:\n"
         "                x = children[i](x)\n"
         "                i += 1\n"
         "        return x\n"
         "    return forward\n"
         "\n"
         "\n"
         "def apply(model):\n"
         "    for name in MODULES:\n"
         "        module = model.get_submodule(name)\n"
         "        module.forward = _checkpointed(module.forward)\n"
         "    spans = {}\n"
         "    for parent, first, last in RUNS:\n"
         "        spans.setdefault(parent, []).append((first, last))\n"
         "    for parent, parent_spans in spans.items():\n"
         "        owner = model.get_submodule(parent) if parent else model\n"
         "        if isinstance(owner, torch.nn.Sequential):\n"
         "            owner.forward = _sequential_forward(owner, parent_spans)\n"
         "            continue\n"
         "        # Named children the parent's forward calls one after the other, each once\n"
         "        # (gpumem plans no other run): the first runs the whole run under one\n"
         "        # checkpoint, the others pass their input through.\n"
         "        names = [name for name, _ in owner.named_children()]\n"
         "        for first, last in parent_spans:\n"
         "            run = [getattr(owner, n) for n in names[names.index(first):names.index(last) + 1]]\n"
         "            head = _chain([m.forward for m in run])\n"
         "            run[0].forward = _checkpointed(head)\n"
         "            for module in run[1:]:\n"
         "                module.forward = _passed_through\n"
         "    return model\n";
}

}  // namespace gpumem::train
