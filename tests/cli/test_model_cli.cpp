// `gpumem inspect` and `gpumem plan` on models, as a user with an
// out-of-memory error runs them: what inference needs, what the weights are
// at run time, whether a capacity really fits, and the advice after the
// report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace {

using gpumem::test::CliRun;
using gpumem::test::run;

std::string model(const std::string& name) { return gpumem::test::model_path(name).string(); }

nlohmann::json inspect_json(const std::string& args) {
  const CliRun r = run("inspect " + args + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// The exporter transposes each Linear weight of BERT into a new tensor; a
// runtime folds that once and keeps only the result. The weights resident
// at run time are then PyTorch's parameters (float32: 4 bytes each, counted
// by tools/export_models.py from the PyTorch module), plus a few int64 shape
// constants that Reshapes read.
TEST(CliModel, ResidentWeightsAreWhatPyTorchCallsParameters) {
  const auto bert = inspect_json(model("bert_base"));
  const auto parameters = gpumem::test::model_expected_figures("bert_base")["torch_parameters"].get<uint64_t>();
  const auto resident = bert["weights"]["resident_bytes"].get<uint64_t>();
  EXPECT_GE(resident, parameters * 4);
  EXPECT_LT(resident, parameters * 4 + 8 * 1024);
  EXPECT_GT(bert["weights"]["bytes"].get<uint64_t>(),
            resident + 250u * 1024 * 1024);  // the transposed copies

  // ResNet-50's exporter deduplicates shared tensors with Identity nodes:
  // aliases, not copies. Resident weights are exactly the initializers.
  const auto resnet = inspect_json(model("resnet50"));
  const auto initializers = gpumem::test::model_expected_figures("resnet50")["initializer_elements"].get<uint64_t>();
  EXPECT_EQ(resnet["weights"]["resident_bytes"], initializers * 4);

  const CliRun text = run("inspect " + model("bert_base"));
  EXPECT_NE(text.out.find("Weights       414.26 MiB  resident at run time"), std::string::npos) << text.out;
}

TEST(CliModel, InspectLeadsWithWhatOneInferenceNeeds) {
  const auto doc = inspect_json(model("bert_base"));
  const auto weights = doc["weights"]["resident_bytes"].get<uint64_t>();
  const auto activations = doc["inference"]["activation_bytes"].get<uint64_t>();
  EXPECT_EQ(doc["inference_bytes"].get<uint64_t>(), weights + activations);
  EXPECT_EQ(doc["inference"]["overhead_bytes"], 0);
  // In-place reuse lets the activations take less than their peak live sum,
  // and `plan` (which proves its arena optimal here) reaches that figure.
  EXPECT_LE(activations, doc["activations"]["peak_live_bytes"].get<uint64_t>());
  const CliRun plan = run("plan " + model("bert_base") + " --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_EQ(nlohmann::json::parse(plan.out)["arena_bytes"].get<uint64_t>(), activations);

  const auto with_overhead = inspect_json(model("bert_base") + " --overhead 512MiB");
  EXPECT_EQ(with_overhead["inference_bytes"].get<uint64_t>(), weights + activations + (512u << 20));

  const CliRun text = run("inspect " + model("bert_base"));
  EXPECT_NE(text.out.find("Inference   needs at least 417.64 MiB at these input shapes"), std::string::npos)
      << text.out;
}

TEST(CliModel, ACapacityOnAModelCountsItsWeights) {
  // BERT's activations alone fit in 100 MiB; its 414 MiB of weights do not.
  const CliRun small = run("plan " + model("bert_base") + " --gpu 100MiB");
  EXPECT_EQ(small.code, 3) << small.out;
  EXPECT_NE(small.out.find("DOES NOT FIT a GPU of 100.00 MiB: needs 417.64 MiB, 317.64 MiB short"), std::string::npos)
      << small.out;
  EXPECT_NE(small.out.find("414.26 MiB of resident weights + the 3.38 MiB arena"), std::string::npos) << small.out;

  const CliRun enough = run("plan " + model("bert_base") + " --gpu 420MiB --json");
  ASSERT_EQ(enough.code, 0) << enough.err;
  const auto doc = nlohmann::json::parse(enough.out);
  EXPECT_EQ(doc["needed_bytes"].get<uint64_t>(),
            doc["weights_resident_bytes"].get<uint64_t>() + doc["arena_bytes"].get<uint64_t>());
  EXPECT_TRUE(doc["fits"].get<bool>());

  // The runtime's own memory, when given, is counted too.
  const CliRun crowded = run("plan " + model("bert_base") + " --gpu 420MiB --overhead 300MiB");
  EXPECT_EQ(crowded.code, 3) << crowded.out;
  EXPECT_NE(crowded.out.find("+ 300.00 MiB of runtime overhead"), std::string::npos) << crowded.out;

  // A CSV of buffers has no weights: its arena alone meets the capacity.
  const CliRun csv = run("plan " + std::string(GPUMEM_SOURCE_DIR) + "/examples/plans/gaps.csv --overhead 1MiB");
  EXPECT_EQ(csv.code, 2);
  EXPECT_NE(csv.err.find("--overhead does not apply to a CSV of buffers"), std::string::npos) << csv.err;
}

TEST(CliModel, RepricedTensorsAreLabelledWithTheirNewType) {
  const auto doc = inspect_json(model("resnet50") + " --dtype fp16 --top 3");
  for (const auto& a : doc["activations"]["largest"]) EXPECT_EQ(a["dtype"], "float16") << a;
  const CliRun text = run("inspect " + model("resnet50") + " --dtype fp16 --top 3");
  EXPECT_EQ(text.out.find("float32"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("float16"), std::string::npos) << text.out;
}

TEST(CliModel, InspectAdvisesTheLeversWithTheirFigures) {
  const auto doc = inspect_json(model("resnet50") + " --batch 8");
  const auto now = doc["inference_bytes"].get<uint64_t>();
  const auto& levers = doc["levers"];
  ASSERT_GE(levers.size(), 4u) << levers;
  // Each figure is the model analysed again under that setting.
  auto figure_of = [&](const std::string& setting) {
    for (const auto& l : levers) {
      if (l["setting"] == setting) return l["inference_bytes"].get<uint64_t>();
    }
    ADD_FAILURE() << "no lever " << setting << " in " << levers;
    return uint64_t{0};
  };
  EXPECT_EQ(figure_of("--dtype fp16"), inspect_json(model("resnet50") + " --batch 8 --dtype fp16")["inference_bytes"]);
  EXPECT_EQ(figure_of("--batch 4"), inspect_json(model("resnet50") + " --batch 4")["inference_bytes"]);
  EXPECT_EQ(figure_of("--batch 16"), inspect_json(model("resnet50") + " --batch 16")["inference_bytes"]);
  // Half the batch halves the activations, not the weights.
  const auto weights = doc["weights"]["resident_bytes"].get<uint64_t>();
  EXPECT_EQ(figure_of("--batch 4") - weights, (now - weights) / 2);
  // Most saved first.
  EXPECT_LT(levers[0]["inference_bytes"].get<uint64_t>(), levers[1]["inference_bytes"].get<uint64_t>());
  EXPECT_EQ(levers[levers.size() - 1]["setting"], "--batch 16");

  const CliRun text = run("inspect " + model("resnet50") + " --batch 8");
  EXPECT_NE(text.out.find("  --batch 4  "), std::string::npos) << text.out;
}

// A model exported with dynamic axes (examples/pytorch/export_dynamic_axes.py)
// has symbolic dimensions: inspect refuses to guess and names them, and once they are bound with
// --dim, the batch lever is given as the --dim to change.
TEST(CliModel, DynamicAxesBecomeDimsAndTheBatchLeverFollowsThem) {
  const std::string mlp = model("token_mlp_dynamic");
  // Unbound, there is nothing to size: one line names the symbols and the flags, exit 2.
  for (const char* command : {"inspect ", "plan "}) {
    const CliRun unbound = run(command + mlp);
    EXPECT_EQ(unbound.code, 2) << command;
    EXPECT_EQ(unbound.err, "gpumem: error: " + mlp +
                               ": symbolic dimensions batch, seq are not bound: give their sizes with --dim "
                               "batch=N,seq=N (or --batch N for the batch axis)\n");
    EXPECT_TRUE(unbound.out.empty()) << unbound.out;
  }
  const CliRun seq_only = run("inspect " + mlp + " --batch 8");
  EXPECT_EQ(seq_only.code, 2);
  EXPECT_NE(seq_only.err.find("symbolic dimension seq is not bound: give its size with --dim seq=N"), std::string::npos)
      << seq_only.err;

  const auto doc = inspect_json(mlp + " --dim batch=8,seq=512");
  EXPECT_FALSE(doc["lower_bound"].get<bool>());
  // [8, 512, 1024] float32 hidden activations: 16 MiB each.
  EXPECT_EQ(doc["activations"]["largest"][0]["bytes"], 8 * 512 * 1024 * 4);
  bool found = false;
  for (const auto& lever : doc["levers"]) {
    if (lever["setting"] != "--dim batch=4") continue;
    found = true;
    EXPECT_EQ(lever["inference_bytes"], inspect_json(mlp + " --dim batch=4,seq=512")["inference_bytes"]);
  }
  EXPECT_TRUE(found) << doc["levers"];
}

}  // namespace
