// `gpumem finetune` as users run it: a config.json, a method, a GPU.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string config(const std::string& name = "meta-llama-3-8b") {
  return (gpumem::test::source_dir() / "tests" / "data" / "llm" / "configs" / (name + ".json")).string();
}

TEST(CliFinetune, JsonHasTheIssuesFieldsAndTheBreakdownSumsToThePeak) {
  const CliRun r =
      run("finetune " + config() + " --method lora --context 2048 --gpu 24GiB --max-context --max-batch --json");
  ASSERT_TRUE(r.code == 0 || r.code == 3) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  for (const char* field : {"peak_bytes", "reserved_peak_bytes", "device_bytes", "trainable_parameters", "breakdown",
                            "peak_phase", "fits", "max_seq", "max_micro_batch", "changes"}) {
    EXPECT_TRUE(doc.contains(field)) << field;
  }
  uint64_t sum = 0;
  for (const auto& [name, bytes] : doc["breakdown"].items()) sum += bytes.get<uint64_t>();
  EXPECT_EQ(sum, doc["peak_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["trainable_parameters"], 41943040);
  EXPECT_GE(doc["reserved_peak_bytes"].get<uint64_t>(), doc["peak_bytes"].get<uint64_t>());
  EXPECT_EQ(doc["fits"].get<bool>(), r.code == 0);
  // The longest sequence fits and one more token does not.
  const uint64_t longest = doc["max_seq"];
  const std::string at = "finetune " + config() + " --method lora --gpu 24GiB --context ";
  EXPECT_EQ(run(at + std::to_string(longest)).code, 0);
  EXPECT_EQ(run(at + std::to_string(longest + 1)).code, 3);
}

TEST(CliFinetune, ASettingThatDoesNotFitListsTheChangesThatWould) {
  const CliRun r = run("finetune " + config() + " --method full --precision bf16 --context 4096 --gpu 48GiB --json");
  ASSERT_EQ(r.code, 3) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_FALSE(doc["changes"].empty());
  bool lora = false;
  for (const auto& c : doc["changes"]) lora = lora || c["change"] == "--method lora";
  EXPECT_TRUE(lora);
  // Changes that fit come first.
  bool seen_misfit = false;
  for (const auto& c : doc["changes"]) {
    if (!c["fits"].get<bool>()) seen_misfit = true;
    if (seen_misfit) EXPECT_FALSE(c["fits"].get<bool>()) << c.dump();
  }
}

TEST(CliFinetune, SeveralGpusAnswerPerGpu) {
  const CliRun r =
      run("finetune " + config() + " --method full --context 2048 --gpus 8 --strategy zero3 --gpu 80GiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["per_gpu"].is_object());
  EXPECT_EQ(doc["per_gpu"]["gpus"], 8);
  EXPECT_EQ(doc["per_gpu"]["engine"], "deepspeed");
  EXPECT_LT(doc["per_gpu"]["device_bytes"].get<uint64_t>(), doc["device_bytes"].get<uint64_t>());
  EXPECT_EQ(run("finetune " + config() + " --gpus 2 --strategy fsdp --offload").code, 2);
}

TEST(CliFinetune, BadInputIsOneLineAndExit2) {
  for (const std::string& args :
       {"finetune " + config() + " --max-context", "finetune " + config() + " --context 100000",
        "finetune " + config() + " --lora-targets q,lm_head", "finetune " + config() + " --method dpo",
        std::string("finetune /nonexistent.json")}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("gpumem: error: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << "\n" << r.err;
  }
}

}  // namespace
