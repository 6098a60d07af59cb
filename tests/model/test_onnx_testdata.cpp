// Runs the loader over ONNX's own test models (Debian's libonnx-testdata):
// more than a thousand real graphs covering every operator. Each one must
// load; where the test case ships its expected outputs, every output shape we
// inferred must equal the shape of the recorded output tensor.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "gpumem/common/error.h"
#include "gpumem/model/memory_analysis.h"
#include "gpumem/model/onnx_loader.h"

namespace gpumem {
namespace {

const std::filesystem::path kTestData = "/usr/share/libonnx-testdata/data";

std::vector<std::filesystem::path> test_models() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(kTestData, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".onnx") out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<onnx::TensorProto> read_tensor(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(ss.str())) return std::nullopt;
  return t;
}

TEST(OnnxTestData, EveryModelLoadsAndInferredOutputShapesMatchRecordedOutputs) {
  const auto models = test_models();
  if (models.empty()) GTEST_SKIP() << "libonnx-testdata is not installed (" << kTestData << "): apt-get install libonnx-testdata";
  int loaded = 0, compared = 0, mismatched = 0, unknown_shapes = 0;
  for (const auto& path : models) {
    Model m;
    try {
      m = load_onnx_model(path);
      analyze_memory(m.graph);
      ++loaded;
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    const auto data_set = path.parent_path() / "test_data_set_0";
    for (size_t i = 0; i < m.graph.outputs.size(); ++i) {
      const Tensor& t = m.graph.tensors[static_cast<size_t>(m.graph.outputs[i])];
      const auto recorded = read_tensor(data_set / ("output_" + std::to_string(i) + ".pb"));
      if (!recorded) continue;
      // A shape inference left unknown cannot be compared: counted and bounded below.
      if (!t.elements()) {
        ++unknown_shapes;
        continue;
      }
      std::vector<int64_t> want(recorded->dims().begin(), recorded->dims().end());
      std::vector<int64_t> got;
      for (const auto& d : *t.dims) got.push_back(d.value);
      ++compared;
      if (want != got) {
        ++mismatched;
        ADD_FAILURE() << path << " output " << t.name << ": inferred " << t.shape_string() << ", recorded has "
                      << want.size() << " dims";
      }
    }
  }
  EXPECT_EQ(loaded, static_cast<int>(models.size()));
  EXPECT_GT(compared, 500);
  EXPECT_EQ(mismatched, 0);
  std::printf("loaded %d models, compared %d output shapes with recorded outputs; %d recorded outputs have an "
              "inferred shape left unknown\n",
              loaded, compared, unknown_shapes);
  // Measured: 131 of 1,266 recorded outputs (Debian's libonnx-testdata
  // 1.12.0, 1,072 models), nearly all of ops whose output shape depends on
  // input values, not on the graph: Resize, Unique, sequences, NonMaxSuppression,
  // TopK, StringNormalizer, OneHot, Range, Tile, Expand. More means shape
  // inference lost ground and those outputs silently went unchecked.
  constexpr int kUnknownShapesMeasured = 131;
  EXPECT_LE(unknown_shapes, kUnknownShapesMeasured)
      << "outputs whose inferred shape is unknown, so not compared with the recorded output";
}

}  // namespace
}  // namespace gpumem
