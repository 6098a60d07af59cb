// One vocabulary across commands (docs/cli.md): the flag table the binary
// prints is the one the docs show; every command given every other kind of
// file answers in one line naming the command that reads it; misspelled and
// renamed flags point at the right one; sizes need units.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "test_paths.h"

namespace gpumem::test {
namespace {

std::string source(const std::string& relative) { return (source_dir() / relative).string(); }

bool one_line(const std::string& text) { return !text.empty() && text.find('\n') == text.size() - 1; }

TEST(Vocabulary, TheFlagTableIsTheBinarys) {
  std::ifstream in(source("docs/cli.md"));
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string doc = whole.str();
  const std::string begin = "<!-- flag-table: printed by `gpumem flag-table`; checked by a test -->\n";
  const std::string end = "<!-- end flag-table -->";
  const size_t from = doc.find(begin);
  const size_t to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string table = doc.substr(from + begin.size(), to - from - begin.size());
  const CliRun r = run("flag-table");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(table, r.out) << "docs/cli.md's table is stale: regenerate it with `build/gpumem flag-table`";
  // Renamed flags stay out of the table, and the current names are in it.
  EXPECT_EQ(table.find("--budget"), std::string::npos);
  EXPECT_EQ(table.find("--capacity"), std::string::npos);
  EXPECT_EQ(table.find("`--out`"), std::string::npos);
  for (const char* command : {"fit", "llm", "serve-sim", "plan", "replay", "exporter"})
    EXPECT_NE(table.find(std::string("| `gpumem ") + command + "` | `--gpu` | SIZE |"), std::string::npos) << command;
}

struct KindFile {
  std::string kind;  // as the error names it
  std::string path;
};

// One file of every kind gpumem reads, all bundled. The GGUF is written by
// `gpumem quantize` from the bundled safetensors.
std::vector<KindFile> files_of_every_kind() {
  static const std::string gguf = [] {
    const std::string path = testing::TempDir() + "gpumem_vocabulary_" + std::to_string(getpid()) + ".gguf";
    const CliRun q =
        run("quantize " + source("tests/data/weights/tiny_llama.safetensors") + " " + path + " --type q8_0");
    EXPECT_EQ(q.code, 0) << q.err;
    return path;
  }();
  return {
      {"an ONNX model", source("examples/models/bert_base.onnx")},
      {"a memory trace", source("tests/data/traces/resnet18_train.json")},
      {"a memory trace", source("tests/data/traces/snapshot_p5.pickle")},
      {"a GGUF model", gguf},
      {"a safetensors weights file", source("tests/data/weights/tiny_llama.safetensors")},
      {"a model's config.json", source("examples/llm/llama-3-8b/config.json")},
      {"a MiniMalloc CSV of buffers", source("examples/plans/gaps.csv")},
      {"a request trace", source("examples/serve/alpaca.csv")},
  };
}

struct Reader {
  std::string command;  // with FILE where the file goes
  std::vector<std::string> reads;
};

TEST(Vocabulary, EveryCommandNamesTheReaderOfAFileOfAnotherKind) {
  const std::string llama = source("examples/llm/llama-3-8b");
  const std::vector<Reader> readers = {
      {"inspect FILE", {"an ONNX model"}},
      {"train FILE", {"an ONNX model"}},
      {"fit FILE --gpu 24GiB", {"an ONNX model"}},
      {"plan FILE", {"an ONNX model", "a MiniMalloc CSV of buffers"}},
      {"report FILE -o /dev/null", {"an ONNX model", "a memory trace", "a MiniMalloc CSV of buffers"}},
      {"trace stats FILE", {"a memory trace", "a MiniMalloc CSV of buffers"}},
      {"replay FILE --time-limit 0", {"a memory trace", "a MiniMalloc CSV of buffers"}},
      {"llm FILE --gpu 24GiB", {"a GGUF model", "a model's config.json"}},
      {"weights FILE", {"an ONNX model", "a GGUF model", "a safetensors weights file"}},
      {"serve-sim " + llama + " --gpu 80GiB --requests FILE", {"a request trace"}},
  };
  for (const Reader& reader : readers) {
    for (const KindFile& file : files_of_every_kind()) {
      if (std::find(reader.reads.begin(), reader.reads.end(), file.kind) != reader.reads.end()) continue;
      std::string args = reader.command;
      args.replace(args.find("FILE"), 4, file.path);
      const CliRun r = run(args);
      SCOPED_TRACE("gpumem " + args);
      EXPECT_EQ(r.code, 2);
      EXPECT_TRUE(one_line(r.err)) << r.err;
      EXPECT_NE(r.err.find(file.path + ": " + file.kind + ", not "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("read it with `gpumem "), std::string::npos) << r.err;
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
}

TEST(Vocabulary, MisspelledFlagsSuggestTheNearestOne) {
  const std::string model = source("examples/models/bert_base.onnx");
  const std::string trace = source("tests/data/traces/resnet18_train.json");
  const std::string llama = source("examples/llm/llama-3-8b");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"inspect " + model + " --dtyp fp16", "--dtype"},
      {"plan " + model + " --minimise", "--minimize"},
      {"train " + model + " --optimiser adam", "--optimizer"},
      {"fit " + model + " --gpu 24GiB --max-bach", "--max-batch"},
      {"replay " + trace + " --polcy gpumem", "--policy"},
      {"trace stats " + trace + " --jsn", "--json"},
      {"llm " + llama + " --gpu 24GiB --contxt 4096", "--context"},
      {"report " + model + " --ouput x.html", "--output"},
      {"serve-sim " + llama + " --gpu 80GiB --max-seq 8", "--max-seqs"},
  };
  for (const auto& [args, meant] : cases) {
    const CliRun r = run(args);
    SCOPED_TRACE("gpumem " + args);
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("did you mean " + meant + "?"), std::string::npos) << r.err;
  }
}

TEST(Vocabulary, OldNamesStillWorkAndSayTheNewOne) {
  const std::string trace = source("tests/data/traces/resnet18_train.json");
  const CliRun renamed = run("replay " + trace + " --policy gpumem --time-limit 0 --capacity 64MiB --json");
  const CliRun current = run("replay " + trace + " --policy gpumem --time-limit 0 --gpu 64MiB --json");
  EXPECT_EQ(renamed.code, current.code);
  const std::string capacity = "\"capacity_bytes\": 67108864";
  EXPECT_NE(renamed.out.find(capacity), std::string::npos) << renamed.out;
  EXPECT_NE(current.out.find(capacity), std::string::npos) << current.out;
  EXPECT_NE(renamed.err.find("gpumem: note: --capacity is now --gpu"), std::string::npos) << renamed.err;
  EXPECT_EQ(current.err.find("note"), std::string::npos) << current.err;

  const std::string out = testing::TempDir() + "gpumem_vocabulary_" + std::to_string(getpid()) + ".jsonl";
  const CliRun converted = run("trace convert " + trace + " --to jsonl --out " + out);
  EXPECT_EQ(converted.code, 0) << converted.err;
  EXPECT_NE(converted.err.find("--out is now -o/--output"), std::string::npos) << converted.err;
  EXPECT_NE(converted.err.find("gpumem: wrote " + out + " (jsonl trace, "), std::string::npos) << converted.err;
}

// Issue 46: one flag per idea. The sequence length is --context on every
// command, in the forms users type (8k), and the names other tools use for
// it are read with a note; finetune's micro-batch is --batch, its
// checkpointing --checkpoint; serve-sim takes the model positionally.
TEST(Vocabulary, OneFlagForTheSequenceLengthInTheFormsUsersType) {
  const std::string llama = source("examples/llm/llama-3-8b");
  const auto context_of = [](const CliRun& r) { return nlohmann::json::parse(r.out)["request"]["context"]; };
  const CliRun plain = run("llm " + llama + " --gpu 24GiB --context 8192 --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
  for (const char* spelling : {"--context 8k", "--context 8K", "--ctx 8192", "-c 8k", "--seq_len 8k", "--seq-len 8k",
                               "--ctx-size 8192", "--max-model-len 8k", "--num-ctx 8k"}) {
    const CliRun r = run("llm " + llama + " --gpu 24GiB " + spelling + " --json");
    SCOPED_TRACE(spelling);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(context_of(r), context_of(plain));
    const bool alias = std::string(spelling).rfind("--context", 0) != 0;
    EXPECT_EQ(r.err.find("is now --context, the same flag on every command") != std::string::npos, alias) << r.err;
  }
  const CliRun bad = run("llm " + llama + " --gpu 24GiB --context 8kb");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("is not a token count (e.g. 4096, 8k, 128k)"), std::string::npos) << bad.err;

  const CliRun finetune = run("finetune " + llama + " --context 1k --batch 2 --checkpoint layers --json");
  ASSERT_EQ(finetune.code, 0) << finetune.err;
  const CliRun old = run("finetune " + llama + " --seq 1024 --micro-batch 2 --checkpointing layers --json");
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_EQ(nlohmann::json::parse(old.out)["peak_bytes"], nlohmann::json::parse(finetune.out)["peak_bytes"]);
  for (const char* note : {"--seq is now --context", "--micro-batch is now --batch", "--checkpointing is now --checkpoint"})
    EXPECT_NE(old.err.find(note), std::string::npos) << note << "\n" << old.err;

  const CliRun positional = run("serve-sim " + llama + " --gpu 24GiB --requests " +
                                source("examples/serve/bursty.csv") + " --context 4k --json");
  ASSERT_EQ(positional.code, 0) << positional.err;
  const CliRun flag = run("serve-sim --model " + llama + " --gpu 24GiB --requests " +
                          source("examples/serve/bursty.csv") + " --max-model-len 4096 --json");
  ASSERT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(flag.out), nlohmann::json::parse(positional.out));
}

TEST(Vocabulary, ASizeWithoutAUnitIsRefusedWithAGuess) {
  const std::string llama = source("examples/llm/llama-3-8b");
  const CliRun small = run("llm " + llama + " --gpu 8");
  EXPECT_EQ(small.code, 2);
  EXPECT_NE(small.err.find("--gpu 8: a size needs a unit: did you mean 8GiB?"), std::string::npos) << small.err;
  const CliRun bytes = run("plan " + source("examples/plans/gaps.csv") + " --gpu 1048576");
  EXPECT_EQ(bytes.code, 2);
  EXPECT_NE(bytes.err.find("did you mean 1048576B (1.00 MiB)?"), std::string::npos) << bytes.err;
  // Any case; decimal units with their note.
  const CliRun lower = run("llm " + llama + " --gpu 24gib --json");
  EXPECT_EQ(lower.code, 0) << lower.err;
  const CliRun decimal = run("llm " + llama + " --gpu 24gb --json");
  EXPECT_EQ(decimal.code, 0) << decimal.err;
  EXPECT_NE(decimal.err.find("24,000,000,000 bytes (22.35 GiB)"), std::string::npos) << decimal.err;
  const CliRun missing = run("llm " + llama);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--gpu is required"), std::string::npos) << missing.err;
}

TEST(Vocabulary, DtypesTakeBothFamiliesOfNames) {
  const std::string model = source("examples/models/bert_base.onnx");
  const CliRun pytorch = run("inspect " + model + " --dtype fp16 --json");
  const CliRun ggml = run("inspect " + model + " --dtype f16 --json");
  ASSERT_EQ(pytorch.code, 0) << pytorch.err;
  EXPECT_EQ(pytorch.out, ggml.out);
  const std::string llama = source("examples/llm/llama-3-8b");
  const CliRun kv_ggml = run("llm " + llama + " --gpu 24GiB --kv-dtype f16 --json");
  const CliRun kv_pytorch = run("llm " + llama + " --gpu 24GiB --kv-dtype fp16 --json");
  ASSERT_EQ(kv_ggml.code, 0) << kv_ggml.err;
  EXPECT_EQ(kv_ggml.out, kv_pytorch.out);
}

}  // namespace
}  // namespace gpumem::test
