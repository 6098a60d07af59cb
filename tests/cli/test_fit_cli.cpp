// `gpumem fit` as users run it: exit codes, the JSON fields the issue asks
// for, --precision auto's changes, --max-batch, --gpus and the emitted files.
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string train_model(const std::string& name) {
  return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/train/" + name + ".onnx";
}

// As recorded: fp32 (fit would otherwise try bf16 autocast first).
const std::string kResnet = train_model("resnet18_sgd") + " --device cpu --optimizer sgd-momentum --keep precision";

TEST(CliFit, ExitsZeroWhenItFitsAndThreeWhenNothingDoes) {
  const CliRun fits = run("fit " + kResnet + " --gpu 282MiB --json");
  ASSERT_EQ(fits.code, 0) << fits.err;
  const auto doc = nlohmann::json::parse(fits.out);
  for (const char* field : {"fits", "batch", "budget_bytes", "predicted_peak_bytes", "checkpoint", "recompute_flops",
                            "recompute_fraction", "optimal", "changes"}) {
    EXPECT_TRUE(doc.contains(field)) << field;
  }
  EXPECT_TRUE(doc["fits"].get<bool>());
  EXPECT_EQ(doc["budget_bytes"], 282u << 20);
  EXPECT_LE(doc["predicted_peak_bytes"].get<uint64_t>(), 282u << 20);
  // The recorded plan (resnet18_sgd_fit282): the stem after conv1 under one checkpoint.
  EXPECT_EQ(doc["checkpoint"], nlohmann::json::array({"bn1..maxpool"}));

  const CliRun tight = run("fit " + kResnet + " --gpu 100MiB");
  EXPECT_EQ(tight.code, 3);
  EXPECT_NE(tight.out.find("DOES NOT FIT"), std::string::npos) << tight.out;
}

TEST(CliFit, PrecisionAutoTakesTheCheapestChangesFirst) {
  const CliRun r =
      run("fit " + train_model("transformer_adamw") + " --device cpu --precision auto --gpu 110MiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_GE(doc["changes"].size(), 1u);
  EXPECT_EQ(doc["changes"][0]["change"], "--precision amp-bf16");
  EXPECT_EQ(doc["precision"], "amp-bf16");
  // Each change lowers the peak.
  for (const auto& c : doc["changes"]) {
    EXPECT_LT(c["peak_after_bytes"].get<uint64_t>(), c["peak_before_bytes"].get<uint64_t>()) << c;
  }
}

TEST(CliFit, MaxBatchAndGpusAndEmittedFiles) {
  const std::string dir = testing::TempDir() + "gpumem_fit_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const CliRun r =
      run("fit " + kResnet + " --gpu 600MiB --max-batch --gpus 4 --emit deepspeed --output-dir " + dir + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_GT(doc["batch"].get<int64_t>(), 8);
  EXPECT_GT(doc["next_batch_peak_bytes"].get<uint64_t>(), 600u << 20);
  EXPECT_LE(doc["max_batch_without_checkpointing"].get<int64_t>(), doc["batch"].get<int64_t>());
  ASSERT_FALSE(doc["per_gpu"].empty());
  bool zero3 = false;
  for (const auto& p : doc["per_gpu"]) zero3 = zero3 || p["setting"].get<std::string>().rfind("zero3", 0) == 0;
  EXPECT_TRUE(zero3);
  std::ifstream in(dir + "/ds_config.json");
  ASSERT_TRUE(in.good());
  const auto config = nlohmann::json::parse(in);
  EXPECT_TRUE(config["zero_optimization"].contains("stage"));

  const CliRun checkpoint = run("fit " + kResnet + " --gpu 282MiB --emit checkpoint --output-dir " + dir);
  ASSERT_EQ(checkpoint.code, 0) << checkpoint.err;
  // A module to import, naming the modules the JSON names (run by
  // bindings/python/tests/test_torch.py on torchvision's resnet18).
  std::ifstream plan(dir + "/checkpoint.py");
  std::stringstream text;
  text << plan.rdbuf();
  EXPECT_NE(text.str().find("def apply(model):"), std::string::npos) << text.str();
  const auto chosen = nlohmann::json::parse(run("fit " + kResnet + " --gpu 282MiB --json").out)["checkpoint"];
  ASSERT_FALSE(chosen.empty());
  for (const auto& m : chosen) {
    const std::string name = m.get<std::string>();
    EXPECT_NE(text.str().find(name.find("..") == std::string::npos ? "'" + name + "'" : std::string("RUNS")),
              std::string::npos)
        << name;
  }
  std::filesystem::remove_all(dir);
}

// BERT-base's CUDA peak is the foreach optimizer's temporaries: fit turns
// foreach off first, then 8-bit states; with --keep optimizer it may not,
// and says why the step does not fit.
TEST(CliFit, EveryLeverCheapestFirstUnlessKept) {
  const std::string bert = std::string(GPUMEM_SOURCE_DIR) + "/examples/models/bert_base.onnx";
  const CliRun r = run("fit " + bert + " --gpu 2GiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_GE(doc["changes"].size(), 1u);
  EXPECT_EQ(doc["changes"][0]["change"], "--foreach off");
  EXPECT_TRUE(doc["why_not"].is_null());
  const CliRun kept = run("fit " + bert + " --gpu 2GiB --keep optimizer,precision,offload --json");
  ASSERT_EQ(kept.code, 3) << kept.err;
  const auto k = nlohmann::json::parse(kept.out);
  for (const auto& c : k["changes"]) EXPECT_NE(c["change"].get<std::string>().rfind("--", 0), 0u) << c;
  EXPECT_NE(k["why_not"].get<std::string>().find("--keep optimizer,precision,offload forbade"), std::string::npos) << k;
  // One GPU named and no --offload: fit stays with what one GPU does, and
  // never reaches for DeepSpeed (issue 46).
  const CliRun one_gpu = run("fit " + bert + " --gpu 2GiB --keep optimizer,precision --json");
  EXPECT_TRUE(nlohmann::json::parse(one_gpu.out)["sharding"].is_null()) << one_gpu.out;
  // Offloading the states to the CPU (ZeRO-Offload, one GPU), asked for, is the last lever.
  const CliRun offload = run("fit " + bert + " --gpu 2GiB --keep optimizer,precision --offload --json");
  ASSERT_EQ(offload.code, 0) << offload.err;
  const auto o = nlohmann::json::parse(offload.out);
  EXPECT_EQ(o["sharding"]["engine"], "deepspeed") << o;
  EXPECT_NE(o["sharding"]["setting"].get<std::string>().find("offload"), std::string::npos) << o;

  // Weights, gradients and momentum alone exceed what 600 MiB leaves after
  // the 512 MiB overhead: no batch or checkpoint helps, and it says so.
  const CliRun states =
      run("fit " + train_model("resnet18_sgd") + " --optimizer sgd-momentum --gpu 600MiB --keep offload");
  EXPECT_EQ(states.code, 3);
  EXPECT_NE(states.out.find("optimizer states alone take 133.81 MiB, over the 88.00 MiB"), std::string::npos)
      << states.out;
}

// A sequence-first model ([seq, batch] tokens): the batch axis is the one
// the export names, and the emitted DeepSpeed config carries that batch.
TEST(CliFit, TheLargestBatchIsOnTheBatchAxisNotTheSequence) {
  const std::string dir = testing::TempDir() + "gpumem_fit_axis_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const CliRun r = run("fit " + train_model("transformer_adamw_dynamic") +
                       " --device cpu --gpu 400MiB --max-batch --keep precision,optimizer --gpus 2 --emit "
                       "deepspeed --output-dir " +
                       dir + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["batch_axis"]["dimension"], "batch");
  EXPECT_EQ(doc["batch_axis"]["input"], "tokens");
  EXPECT_FALSE(doc["batch_axis"]["assumed"].get<bool>());
  EXPECT_GT(doc["batch"].get<int64_t>(), 8);
  EXPECT_EQ(doc["batch_axis"]["size"], doc["batch"]);
  std::ifstream in(dir + "/ds_config.json");
  EXPECT_EQ(nlohmann::json::parse(in)["train_micro_batch_size_per_gpu"], doc["batch"]);
  std::filesystem::remove_all(dir);
  // The static export fixed its batch: --batch on it is a one-line error
  // that says how to export it.
  const CliRun fixed = run("fit " + train_model("transformer_adamw") + " --device cpu --gpu 1GiB --batch 16");
  EXPECT_EQ(fixed.code, 2);
  EXPECT_NE(fixed.err.find("dynamic_axes"), std::string::npos) << fixed.err;
  const CliRun named = run("fit " + train_model("transformer_adamw") + " --device cpu --gpu 1GiB --batch-dim batsh");
  EXPECT_EQ(named.code, 2);
  EXPECT_NE(named.err.find("--batch-dim batsh: no input has a dimension of that name"), std::string::npos) << named.err;
}

TEST(CliFit, MistakesAreOneLine) {
  const CliRun both = run("fit " + kResnet + " --gpu 1GiB --batch 4 --max-batch");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("give --batch N or --max-batch, not both"), std::string::npos) << both.err;
  const CliRun emit = run("fit " + kResnet + " --gpu 1GiB --emit fsdp");
  EXPECT_EQ(emit.code, 2);
  EXPECT_NE(emit.err.find("--emit fsdp needs --gpus N"), std::string::npos) << emit.err;
  const CliRun lever = run("fit " + kResnet + " --gpu 1GiB --keep batteries");
  EXPECT_EQ(lever.code, 2);
  EXPECT_NE(lever.err.find("--keep batteries: unknown lever (known: optimizer, precision, checkpoint, batch, offload)"),
            std::string::npos)
      << lever.err;
  const CliRun budget = run("fit " + kResnet + " --gpu lots");
  EXPECT_EQ(budget.code, 2);
  EXPECT_NE(budget.err.find("--gpu 'lots'"), std::string::npos) << budget.err;
  // A bare number is not taken as bytes: it suggests the unit.
  const CliRun bare = run("fit " + kResnet + " --gpu 24");
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.err.find("--gpu 24: a size needs a unit: did you mean 24GiB?"), std::string::npos) << bare.err;
  EXPECT_EQ(bare.err.find('\n'), bare.err.size() - 1);
  EXPECT_EQ(run("fit " + kResnet + " --gpu 24B").code, 3);
}

// On CUDA, fit decides on reserved + overhead and writes the step it chose:
// `replay` of that file under the same allocator, with the budget less the
// overhead as capacity, agrees.
TEST(CliFit, DecidesOnTheDeviceAndItsTraceReplaysWithinTheBudget) {
  const std::string out = testing::TempDir() + "gpumem_fit_trace_" + std::to_string(getpid()) + ".jsonl.gz";
  const std::string step = train_model("resnet18_sgd") + " --optimizer sgd-momentum";
  const std::string model = step + " --keep precision,optimizer,offload";
  const CliRun r = run("fit " + model + " --gpu 870MiB --json --trace " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 2);
  EXPECT_EQ(doc["overhead_bytes"], 512u << 20);
  EXPECT_EQ(doc["allocator"], "pytorch");
  EXPECT_EQ(doc["device_bytes"], doc["predicted_peak_bytes"]);
  EXPECT_EQ(doc["device_bytes"].get<uint64_t>(), doc["reserved_peak_bytes"].get<uint64_t>() + (512u << 20));
  EXPECT_LE(doc["predicted_peak_bytes"].get<uint64_t>(), 870u << 20);
  // Unlimited, PyTorch's allocator reserves 396 MiB for this step; given
  // 358 MiB it frees its cache when short and retries, and the step fits.
  EXPECT_TRUE(doc["checkpoint"].empty());
  const CliRun train = run("train " + step + " --json");
  const auto unlimited = nlohmann::json::parse(train.out)["reserved_peak_bytes"].get<uint64_t>();
  EXPECT_GT(unlimited, 358u << 20);
  EXPECT_LT(doc["reserved_peak_bytes"].get<uint64_t>(), unlimited);
  const CliRun replay = run("replay " + out + " --policy pytorch --gpu 358MiB --time-limit 0 --json");
  ASSERT_EQ(replay.code, 0) << replay.out << replay.err;
  EXPECT_EQ(nlohmann::json::parse(replay.out)["policies"][0]["peak_reserved_bytes"], doc["reserved_peak_bytes"]);
  EXPECT_EQ(run("replay " + out + " --policy pytorch --gpu 300MiB --time-limit 0").code, 3);
  // At 780 MiB no checkpoint plan leaves little enough reserved.
  const CliRun tight = run("fit " + model + ",batch --gpu 780MiB --json --trace " + out);
  ASSERT_EQ(tight.code, 3) << tight.err;
  EXPECT_FALSE(nlohmann::json::parse(tight.out)["checkpoint"].empty());
  EXPECT_EQ(run("replay " + out + " --policy pytorch --gpu 268MiB --time-limit 0").code, 3);
  // Micro-batches with gradient accumulation reach it, the batch of 8
  // kept; the step they run replays within it.
  const CliRun micro = run("fit " + model + " --gpu 780MiB --json --trace " + out);
  ASSERT_EQ(micro.code, 0) << micro.err;
  const auto accumulated = nlohmann::json::parse(micro.out);
  EXPECT_GT(accumulated["accumulation_steps"].get<int64_t>(), 1);
  EXPECT_EQ(accumulated["batch"].get<int64_t>() * accumulated["accumulation_steps"].get<int64_t>(), 8);
  EXPECT_EQ(run("replay " + out + " --policy pytorch --gpu 268MiB --time-limit 0").code, 0);
  std::remove(out.c_str());
}

}  // namespace

namespace {

// Issue 47: fit had no --loss, so it always priced cross-entropy; it takes
// train's, and says which it priced.
TEST(CliFit, TakesTrainsLoss) {
  const std::string resnet = train_model("resnet18_sgd") + " --optimizer sgd-momentum --gpu 1GiB";
  const CliRun mse = run("fit " + resnet + " --loss mse");
  ASSERT_EQ(mse.code, 0) << mse.err;
  EXPECT_NE(mse.out.find("loss mse"), std::string::npos) << mse.out;
  const CliRun none = run("fit " + resnet + " --loss none --json");
  const CliRun ce = run("fit " + resnet + " --json");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_LT(nlohmann::json::parse(none.out)["verdict"]["device_bytes"].get<uint64_t>(),
            nlohmann::json::parse(ce.out)["verdict"]["device_bytes"].get<uint64_t>());
  EXPECT_EQ(run("fit " + resnet + " --loss hinge").code, 2);
}

}  // namespace
