// `gpumem train` as users run it: the report, its JSON, the predicted step
// as a trace the other commands read, and mistakes.
#include <unistd.h>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string train_model(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/train/" + name + ".onnx";
}

const std::string kResnet = " --device cpu --optimizer sgd-momentum";

TEST(CliTrain, ReportsThePeakWhereItFallsAndWhatIsInIt) {
  const CliRun r = run("train " + train_model("resnet18_sgd") + kResnet);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("Allocated     294.62 MiB  in backward at '/layer4/layer4.0/conv2/Conv'"), std::string::npos)
      << r.out;
  // On the CPU nothing is cached and no context is added.
  EXPECT_NE(r.out.find("Needs         294.62 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("saved_activations"), std::string::npos);
  EXPECT_NE(r.out.find("what the usual estimators count"), std::string::npos);
}

TEST(CliTrain, JsonHasTheDocumentedFields) {
  const CliRun r = run("train " + train_model("transformer_adamw") + " --device cpu --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  uint64_t sum = 0;
  for (const char* c : {"weights", "gradients", "optimizer_states", "inputs", "saved_activations", "transient"}) {
    ASSERT_TRUE(doc["breakdown"].contains(c)) << c;
    sum += doc["breakdown"][c].get<uint64_t>();
  }
  EXPECT_EQ(sum, doc["peak_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["peak_phase"], "backward");
  EXPECT_EQ(doc["settings"]["optimizer"], "adamw");
  EXPECT_GT(doc["timeline"].size(), 100u);
  EXPECT_TRUE(doc["assumptions"].empty());
  // Weights + optimizer states carried from step to step: 3x the parameters
  // (AdamW's two moments) plus a 4-byte step per parameter tensor.
  const auto params = doc["parameters"]["bytes"].get<uint64_t>();
  EXPECT_GT(doc["steady_state_bytes"].get<uint64_t>(), 3 * params);
  EXPECT_LT(doc["steady_state_bytes"].get<uint64_t>(), 3 * params + 4096);
}

// The prediction is a trace: trace stats finds its peak, replay runs it
// under the allocator policies.
TEST(CliTrain, ThePredictedStepIsATraceTheOtherCommandsRead) {
  const std::string out = testing::TempDir() + "gpumem_train_" + std::to_string(getpid()) + ".jsonl.gz";
  const CliRun r = run("train " + train_model("resnet18_sgd") + kResnet + " --json --trace " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto peak = nlohmann::json::parse(r.out)["peak_bytes"].get<uint64_t>();
  const CliRun stats = run("trace stats " + out + " --json");
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["peak_allocated_bytes"].get<uint64_t>(), peak);
  const CliRun replay = run("replay " + out + " --time-limit 0 --json");
  ASSERT_EQ(replay.code, 0) << replay.err;
  EXPECT_EQ(nlohmann::json::parse(replay.out)["traced_peak_bytes"].get<uint64_t>(), peak);
  std::remove(out.c_str());
}

// On CUDA the step is replayed under the caching allocator: reserved is at
// least allocated, and the device adds the context (--overhead).
TEST(CliTrain, GivesAllocatedReservedAndDeviceBytes) {
  const CliRun r = run("train " + train_model("resnet18_sgd") + " --optimizer sgd-momentum --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto allocated = doc["allocated_peak_bytes"].get<uint64_t>();
  const auto reserved = doc["reserved_peak_bytes"].get<uint64_t>();
  EXPECT_EQ(allocated, doc["peak_bytes"].get<uint64_t>());
  EXPECT_GE(reserved, allocated);
  EXPECT_EQ(doc["settings"]["allocator"], "pytorch");
  EXPECT_EQ(doc["settings"]["overhead_bytes"], 512u << 20);
  // What the device must hold: the least GPU the capped replay runs on,
  // between the tensors' peak and the unconstrained reserved peak.
  EXPECT_GE(doc["device_bytes"].get<uint64_t>(), allocated + (512u << 20));
  EXPECT_LE(doc["device_bytes"].get<uint64_t>(), reserved + (512u << 20));
  EXPECT_EQ(doc["verdict"]["device_bytes"], doc["device_bytes"]);
  EXPECT_EQ(doc["verdict"]["gpu_bytes"], 0);
  // The same replay as `gpumem replay --policy pytorch` of the written step.
  const std::string out = testing::TempDir() + "gpumem_train_device_" + std::to_string(getpid()) + ".jsonl";
  ASSERT_EQ(run("train " + train_model("resnet18_sgd") + " --optimizer sgd-momentum --trace " + out).code, 0);
  const CliRun replay = run("replay " + out + " --policy pytorch --time-limit 0 --json");
  ASSERT_EQ(replay.code, 0) << replay.err;
  EXPECT_EQ(nlohmann::json::parse(replay.out)["policies"][0]["peak_reserved_bytes"].get<uint64_t>(), reserved);
  std::remove(out.c_str());

  const CliRun other = run("train " + train_model("resnet18_sgd") +
                           " --optimizer sgd-momentum --overhead 1GiB --allocator "
                           "pytorch-expandable --json");
  ASSERT_EQ(other.code, 0) << other.err;
  const auto o = nlohmann::json::parse(other.out);
  EXPECT_EQ(o["settings"]["allocator"], "pytorch-expandable");
  EXPECT_LE(o["device_bytes"].get<uint64_t>(), o["reserved_peak_bytes"].get<uint64_t>() + (1u << 30));
  EXPECT_GE(o["device_bytes"].get<uint64_t>(), o["allocated_peak_bytes"].get<uint64_t>() + (1u << 30));

  const CliRun cpu = run("train " + train_model("resnet18_sgd") + kResnet + " --allocator pytorch");
  EXPECT_EQ(cpu.code, 2);
  EXPECT_NE(cpu.err.find("--device cpu has no caching allocator"), std::string::npos) << cpu.err;
}

TEST(CliTrain, MistakesAreOneLineErrorsOrWarnings) {
  const CliRun unbound = run("train " + gpumem::test::model_path("token_mlp_dynamic").string());
  EXPECT_EQ(unbound.code, 2);
  EXPECT_NE(unbound.err.find("bind its dimensions with --dim NAME=VALUE"), std::string::npos) << unbound.err;
  EXPECT_EQ(unbound.err.find('\n'), unbound.err.size() - 1);

  const CliRun regex = run("train " + train_model("resnet18_sgd") + " --frozen '('");
  EXPECT_EQ(regex.code, 2);
  EXPECT_NE(regex.err.find("--frozen '(': not a valid regular expression"), std::string::npos) << regex.err;

  const CliRun optimizer = run("train " + train_model("resnet18_sgd") + " --optimizer adagrad");
  EXPECT_EQ(optimizer.code, 2);
  EXPECT_NE(optimizer.err.find("gpumem: error: train: --optimizer"), std::string::npos) << optimizer.err;
}

// A step traced by gpumem.torch.estimate (tests/data/torch2: Llama with peft's
// LoRA, transformers 5, torch 2.15, traced on fake tensors for the CPU).
std::string traced_step() {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/torch2/2.15.0/llama_lora.step.json.gz";
}

TEST(CliTrain, ReadsAStepTracedByPyTorchItself) {
  const CliRun r = run("train " + traced_step());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Training step PeftModelForCausalLM (traced: torch 2.15.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("AdamW, fp32, device cpu"), std::string::npos) << r.out;
  const CliRun j = run("train " + traced_step() + " --json --gpu 1MiB");
  EXPECT_EQ(j.code, 3) << j.err;  // does not fit
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["source"], "traced");
  EXPECT_EQ(doc["settings"]["optimizer"], "AdamW");
  EXPECT_TRUE(doc["settings"]["loss"].is_null());
  EXPECT_FALSE(doc["verdict"]["fits"].get<bool>());
  // Every allocation names the module it was made in.
  EXPECT_NE(r.out.find("(base_model.model.model.layers.1.mlp.up_proj: parameter)"), std::string::npos) << r.out;
  // The page says where the step came from, as the text does.
  const std::string page = ::testing::TempDir() + "traced_step.html";
  ASSERT_EQ(run("train " + traced_step() + " --html " + page).code, 0);
  EXPECT_NE(gpumem::test::read_file_bytes(page).find("traced: torch 2.15.0"), std::string::npos);
}

TEST(CliTrain, RefusesToReshapeATracedStep) {
  for (const char* flag : {"--batch 4", "--optimizer sgd", "--precision bf16", "--checkpoint model.layers.0"}) {
    SCOPED_TRACE(flag);
    const CliRun r = run("train " + traced_step() + " " + flag);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("does not apply for a traced step"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("gpumem.torch.estimate"), std::string::npos) << r.err;
  }
  const CliRun inspect = run("inspect " + traced_step());
  EXPECT_EQ(inspect.code, 2);
  EXPECT_NE(inspect.err.find("a traced training step, not an ONNX model: read it with `gpumem train`"),
            std::string::npos)
      << inspect.err;
}

}  // namespace
