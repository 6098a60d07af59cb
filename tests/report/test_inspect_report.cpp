// The inspect reports: the JSON document's documented fields, and the text
// report's units.
#include <gtest/gtest.h>

#include "gpumem/report/inspect_report.h"
#include "test_paths.h"

namespace gpumem {
namespace {

TEST(InspectJson, HasTheDocumentedFieldsWithExactBytes) {
  const InspectResult r = inspect_model(test::model_path("resnet50"));
  const auto doc = inspect_to_json(r, ReportOptions{5});
  EXPECT_EQ(doc["schema_version"], kInspectSchemaVersion);
  EXPECT_EQ(doc["model"], test::model_path("resnet50").string());
  EXPECT_EQ(doc["weights"]["count"], 108);
  EXPECT_EQ(doc["weights"]["elements"], 25530472);
  EXPECT_EQ(doc["weights"]["bytes"], 102121888);
  EXPECT_EQ(doc["activations"]["tensors"], 123);
  EXPECT_EQ(doc["activations"]["total_bytes"], 106393504);
  EXPECT_EQ(doc["activations"]["peak_live_bytes"], 9633792);
  EXPECT_EQ(doc["activations"]["peak_node"], 56);
  EXPECT_EQ(doc["activations"]["peak_node_name"], "/layer1/layer1.0/Add");
  EXPECT_EQ(doc["activations"]["unknown_shape_tensors"], 0);
  EXPECT_EQ(doc["activations"]["largest"].size(), 5u);
  EXPECT_EQ(doc["lower_bound"], false);

  const auto& timeline = doc["timeline"];
  ASSERT_EQ(timeline.size(), 169u);
  EXPECT_EQ(timeline[56]["index"], 56);
  EXPECT_EQ(timeline[56]["op_type"], "Add");
  EXPECT_EQ(timeline[56]["live_bytes"], 9633792);
  uint64_t max_live = 0;
  for (const auto& p : timeline) max_live = std::max(max_live, p["live_bytes"].get<uint64_t>());
  EXPECT_EQ(max_live, 9633792u);
}

TEST(InspectText, SpeaksInBinaryUnitsAndNamesThePeak) {
  const InspectResult r = inspect_model(test::model_path("resnet50"));
  const std::string text = render_inspect_text(r, ReportOptions{3});
  EXPECT_NE(text.find("97.39 MiB"), std::string::npos) << text;  // weights, 102,121,888 bytes
  EXPECT_NE(text.find("9.19 MiB  at node #56 '/layer1/layer1.0/Add' (Add)"), std::string::npos) << text;
  EXPECT_NE(text.find("[1,64,112,112]"), std::string::npos) << text;
  EXPECT_EQ(text.find("lower bounds"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpumem
