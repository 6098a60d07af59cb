// Hostile input and output paths (issue 34): what an adversarial sweep
// found, each a regression test. Every command that reads a file answers a
// FIFO, a device, a symbolic-link loop with one line and exit 2 at once;
// no output replaces a device node or the command's own input; names with
// control characters are printed escaped; a failed command writes nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_runner.h"
#include "model/onnx_builder.h"
#include "test_paths.h"

namespace gpumem::test {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const fs::path dir = fs::path(testing::TempDir()) / ("gpumem_hostile_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir.string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One line on stderr, starting as every error does.
void expect_one_line_error(const CliRun& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << what << ": " << r.err;
  ASSERT_FALSE(r.err.empty()) << what;
  const std::string last = r.err.substr(
      r.err.rfind('\n', r.err.size() - 2) == std::string::npos ? 0 : r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_EQ(last.rfind("gpumem: error: ", 0), 0u) << what << ": " << r.err;
  EXPECT_EQ(last.find('\n'), last.size() - 1) << what << ": " << r.err;
}

TEST(HostileInputs, AFifoIsRefusedAtOnceByEveryCommandThatReadsAFile) {
  const std::string fifo = temp_dir() + "/input.fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string out = temp_dir() + "/out";
  const std::vector<std::string> commands = {
      "inspect " + fifo,
      "plan " + fifo,
      "train " + fifo,
      "fit " + fifo + " --gpu 1GiB",
      "weights " + fifo,
      "quantize " + fifo + " " + out + ".gguf --type q8_0",
      "llm " + fifo + " --gpu 8GiB",
      "finetune " + fifo,
      "trace stats " + fifo,
      "trace convert " + fifo + " --to csv -o " + out + ".csv",
      "trace plan " + fifo + " -o " + out + ".json",
      "replay " + fifo,
      "report " + fifo + " -o " + out + ".html",
      "serve-sim " + std::string(GPUMEM_SOURCE_DIR) + "/examples/llm/llama-3-8b --gpu 24GiB --requests " + fifo,
      "explain-oom " + fifo,
  };
  for (const std::string& c : commands) {
    const CliRun r = run_bounded(c);
    EXPECT_NE(r.code, 137) << c << ": hung";
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find("FIFO"), std::string::npos) << c << ": " << r.err;
  }
  unlink(fifo.c_str());
}

TEST(HostileInputs, ADeviceOrALinkLoopIsNamedAsWhatItIs) {
  for (const std::string c : {"weights /dev/null", "quantize /dev/null /tmp/x.gguf --type q8_0",
                              "llm /dev/null --gpu 8GiB", "inspect /dev/zero"}) {
    const CliRun r = run_bounded(c);
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find("character device"), std::string::npos) << c << ": " << r.err;
    EXPECT_EQ(r.err.find("Success"), std::string::npos) << c << ": a stale errno: " << r.err;
  }
  const std::string a = temp_dir() + "/loop_a";
  const std::string b = temp_dir() + "/loop_b";
  unlink(a.c_str());
  unlink(b.c_str());
  ASSERT_EQ(symlink(b.c_str(), a.c_str()), 0);
  ASSERT_EQ(symlink(a.c_str(), b.c_str()), 0);
  for (const std::string c : {"inspect ", "weights ", "trace stats "}) {
    const CliRun r = run_bounded(c + a);
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find("a loop of symbolic links"), std::string::npos) << c << ": " << r.err;
  }
}

TEST(HostileInputs, NoOutputReplacesADeviceNodeOrTheCommandsOwnInput) {
  const std::string trace = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/resnet18_train.json";
  // A device node: refused, and still a device.
  for (const std::string c :
       {"trace convert " + trace + " --to csv -o /dev/null", "trace stats " + trace + " --html /dev/null",
        "inspect " + std::string(GPUMEM_SOURCE_DIR) + "/examples/models/mobilenet_v2.onnx --html /dev/null"}) {
    const CliRun r = run_bounded(c);
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find("character device"), std::string::npos) << c << ": " << r.err;
  }
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // The input itself, under its own name or through a link.
  const std::string copy = temp_dir() + "/trace.json";
  fs::copy_file(trace, copy, fs::copy_options::overwrite_existing);
  const std::string link = temp_dir() + "/trace_link.json";
  unlink(link.c_str());
  ASSERT_EQ(symlink(copy.c_str(), link.c_str()), 0);
  const std::string before = read_all(copy);
  for (const std::string& target : {copy, link}) {
    const CliRun r = run_bounded("trace convert " + copy + " --to jsonl -o " + target);
    expect_one_line_error(r, target);
    EXPECT_NE(r.err.find("an input of this command"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_all(copy), before);
}

TEST(HostileInputs, NamesWithControlCharactersArePrintedEscaped) {
  const CliRun r = run_bounded("inspect \"$(printf 'evil\\nname\\033[31m.onnx')\"");
  expect_one_line_error(r, "a name with a newline and an escape sequence");
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("evil\\x0aname\\x1b[31m.onnx"), std::string::npos) << r.err;
}

TEST(HostileInputs, ACommandThatDoesNotFitWritesNothing) {
  const std::string dir = temp_dir() + "/emit";
  fs::create_directories(dir);
  const std::string earlier = dir + "/checkpoint.py";
  std::ofstream(earlier) << "{\"from\": \"an earlier run\"}\n";
  const CliRun r = run_bounded("fit " + std::string(GPUMEM_SOURCE_DIR) +
                               "/tests/data/train/resnet18_sgd.onnx --gpu 64MiB --emit checkpoint --output-dir " + dir);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(read_all(earlier), "{\"from\": \"an earlier run\"}\n");
  EXPECT_NE(r.err.find("nothing written"), std::string::npos) << r.err;
}

TEST(HostileInputs, ConvertingATraceWithoutMemoryEventsIsRefused) {
  const std::string brace = write_temp("brace.json", "{");
  const std::string empty = write_temp("no_events.json", "{\"traceEvents\": []}");
  for (const std::string& input :
       {brace, empty, std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/mlp_no_memory.json"}) {
    const std::string out = temp_dir() + "/converted.csv";
    unlink(out.c_str());
    const CliRun r = run_bounded("trace convert " + input + " --to csv -o " + out);
    expect_one_line_error(r, input);
    EXPECT_FALSE(fs::exists(out)) << input;
  }
}

// 100 KB of nested arrays once overflowed the stack (a segfault) in the
// config reader's error path and in dumping safetensors metadata.
TEST(HostileInputs, DeeplyNestedJsonIsOneLineNotASegfault) {
  const std::string deep = std::string(50'000, '[') + std::string(50'000, ']');
  const std::string dir = temp_dir() + "/deep_model";
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << "{\"model_type\": \"llama\", \"hidden_size\": " << deep << "}";
  std::string header = "{\"__metadata__\": " + deep + "}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string safetensors = write_temp("deep.safetensors", file + header);
  const std::string requests = write_temp("deep_requests.jsonl", "{\"arrival_s\": " + deep + "}\n");
  for (const std::string c :
       {"llm " + dir + " --gpu 8GiB", "finetune " + dir + "/config.json", "weights " + safetensors,
        "quantize " + safetensors + " " + temp_dir() + "/deep.gguf --type q8_0",
        "serve-sim " + std::string(GPUMEM_SOURCE_DIR) + "/examples/llm/llama-3-8b --gpu 24GiB --requests " +
            requests}) {
    const CliRun r = run_bounded(c);
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find("nested deeper than 64 levels"), std::string::npos) << c << ": " << r.err;
  }
}

// Two requests 1e10 s apart once made one bucket per simulated second
// (4-8 GB): the simulator's state follows the steps, not the seconds.
TEST(HostileInputs, ServeSimStateFollowsRequestsNotSimulatedSeconds) {
  const std::string requests =
      write_temp("far_apart.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n10000000000,10,10\n");
  const CliRun r = run_bounded("serve-sim " + std::string(GPUMEM_SOURCE_DIR) +
                               "/examples/llm/llama-3-8b --gpu 24GiB --json --requests " + requests);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"kv_utilization_series\""), std::string::npos);
}

// A 200 MiB run of zeros gzipped (a 200 KB file) once cost 4.1 GB before
// its clean error: a bomb stops at its first limit, under 500 MB.
TEST(HostileInputs, AGzipBombStopsEarlyAndSmall) {
  const std::string bomb = temp_dir() + "/bomb.json.gz";
  ASSERT_EQ(std::system(("head -c 209715200 /dev/zero | gzip -1 > " + bomb).c_str()), 0);
  for (const std::string c :
       {std::string("trace stats "), std::string("replay "),
        "serve-sim " + std::string(GPUMEM_SOURCE_DIR) + "/examples/llm/llama-3-8b --gpu 24GiB --requests "}) {
    const CliRun r =
        run_shell("/usr/bin/time -f 'rss_kb %M' timeout -s KILL 20 " + std::string(GPUMEM_CLI_PATH) + " " + c + bomb);
    EXPECT_EQ(r.code, 2) << c << r.err;
    EXPECT_NE(r.err.find("gzip bomb"), std::string::npos) << c << r.err;
    const size_t at = r.err.find("rss_kb ");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_LT(std::stoul(r.err.substr(at + 7)), 500'000u) << c << r.err;
  }
}

// An RMM log of 5,000 lines with a stream per allocation once took 10 GB
// and then an internal error (bad_alloc): per-stream state is now what
// the stream uses, not a device's worth of granule flags and 4,096 bins.
TEST(HostileInputs, AStreamPerAllocationStaysSmall) {
  std::string log = "Thread,Time,Action,Pointer,Size,Stream\n";
  for (int i = 0; i < 5000; ++i)
    log += "1," + std::to_string(i) + ",allocate,0x" + std::to_string((i + 1) * 10000) + ",4096," +
           std::to_string(i + 1) + "\n";
  const std::string path = write_temp("streams.csv", log);
  const CliRun r = run_shell("/usr/bin/time -f 'rss_kb %M' timeout -s KILL 30 " + std::string(GPUMEM_CLI_PATH) +
                             " replay --json " + path);
  EXPECT_EQ(r.code, 0) << r.err;
  const size_t at = r.err.find("rss_kb ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_LT(std::stoul(r.err.substr(at + 7)), 1'000'000u) << r.err;
}

// Names read from a file go to stdout escaped too: a tensor named with a
// newline and an escape sequence, in a safetensors file.
TEST(HostileInputs, TensorNamesOnStdoutAreEscaped) {
  const std::string header =
      "{\"evil\\nname\\u001b[31m\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string path = write_temp("evil_names.safetensors", file + header + std::string(8, '\0'));
  const CliRun r = run_bounded("weights " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evil\\x0aname\\x1b[31m"), std::string::npos) << r.out;
}

// An initializer of 2^40 values without their data: one line, exit 2 (it
// was an internal error in quantize).
TEST(HostileInputs, AHugeInitializerIsBadInputToQuantize) {
  OnnxBuilder b;
  b.input("x", {1, 4});
  b.weight("big", {int64_t{1} << 20, int64_t{1} << 20});
  b.node("MatMul", {"x", "big"}, {"y"});
  b.output("y");
  const std::string model = write_temp("big_initializer.onnx", b.bytes());
  const CliRun r = run_bounded("quantize " + model + " " + temp_dir() + "/big.gguf --type q8_0");
  expect_one_line_error(r, "quantize");
}

// A 24 MB GGUF holding one uint8 array once cost 2 GB in quantize (a value
// object per element), and a GGUF without tensors was an internal error.
TEST(HostileInputs, AHugeMetadataArrayIsCopiedAsBytes) {
  const auto le = [](uint64_t v, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return out;
  };
  const uint64_t n = 24ull << 20;
  const std::string key = "general.big";
  std::string gguf = "GGUF" + le(3, 4) + le(0, 8) + le(1, 8) + le(key.size(), 8) + key + le(9, 4) + le(0, 4) + le(n, 8);
  gguf += std::string(n, '\x07');
  const std::string in = write_temp("big_array.gguf", gguf);
  const std::string out = temp_dir() + "/big_array_q8.gguf";
  const CliRun r = run_shell("/usr/bin/time -f 'rss_kb %M' timeout -s KILL 30 " + std::string(GPUMEM_CLI_PATH) +
                             " quantize " + in + " " + out + " --type q8_0");
  EXPECT_EQ(r.code, 0) << r.err;
  const size_t at = r.err.find("rss_kb ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_LT(std::stoul(r.err.substr(at + 7)), 300'000u) << r.err;
  EXPECT_GT(fs::file_size(out), n);  // the array went through whole
}

// A number past a double is JSON that parses to nothing: once an internal
// error (nlohmann's out_of_range escaped the readers), now one line.
TEST(HostileInputs, ANumberPastADoubleIsBadInput) {
  const std::string dir = temp_dir() + "/overflow_model";
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << "{\"model_type\": \"llama\", \"hidden_size\": 1e999}";
  const std::string index = temp_dir() + "/model.safetensors.index.json";
  std::ofstream(index) << "{\"weight_map\": {\"a\": 1e999}}";
  for (const std::string c : {"llm " + dir + " --gpu 8GiB", "weights " + index}) {
    const CliRun r = run_bounded(c);
    expect_one_line_error(r, c);
  }
}

// Found by the sweep (tests/hostile/sweep.py): a name that is not UTF-8
// made every --json report an internal error (nlohmann's dump throws on
// it); it is now printed with U+FFFD in place of the bad bytes.
TEST(HostileInputs, NamesThatAreNotUtf8DoNotBreakJson) {
  const auto le = [](uint64_t v, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return out;
  };
  // A GGUF with one F32 tensor [2] named "bad\xff\xfename".
  const std::string name = "bad\xff\xfename";
  std::string gguf =
      "GGUF" + le(3, 4) + le(1, 8) + le(0, 8) + le(name.size(), 8) + name + le(1, 4) + le(2, 8) + le(0, 4) + le(0, 8);
  gguf += std::string((32 - gguf.size() % 32) % 32, '\0') + std::string(8, '\0');
  const std::string weights = write_temp("not_utf8.gguf", gguf);
  const std::string trace = write_temp(
      "not_utf8_trace.json",
      "{\"traceEvents\": [{\"ph\": \"i\", \"name\": \"[memory]\", \"ts\": 1, \"pid\": 1, \"tid\": 1, \"args\": "
      "{\"Device Type\": 1, \"Device Id\": 0, \"Addr\": 4096, \"Bytes\": 512, \"Total Allocated\": 512, "
      "\"Total Reserved\": 2097152}}, {\"ph\": \"X\", \"name\": \"aten::\xc0\xafop\", \"ts\": 0, \"dur\": 5, "
      "\"pid\": 1, \"tid\": 1}]}");
  for (const std::string c : {"weights --json " + weights, "trace stats --json " + trace}) {
    const CliRun r = run_bounded(c);
    EXPECT_EQ(r.code, 0) << c << ": " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c << ": " << r.err;
  }
  const CliRun r = run_bounded("weights --json " + weights);
  EXPECT_NE(r.out.find("bad\xef\xbf\xbd\xef\xbf\xbdname"), std::string::npos) << r.out;
}

// Found by the sweep: `plan --validate` read any file as a CSV of buffers
// ("unknown column '{\"traceEvents\"'"), `plan` complained of --batch on an
// RMM log named .csv, and an out-of-memory message given to another command
// was "not a valid ONNX model": each now says what the file is and which
// command reads it.
TEST(HostileInputs, AFileOfAnotherKindNamesItsCommand) {
  const std::string trace = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/leaky_mlp_train.json";
  const std::string rmm = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/traces/rmm_sample.csv";
  const std::string oom =
      write_temp("oom.txt",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
                 "capacity of 7.79 GiB of which 12.31 MiB is free.\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plan --validate " + trace, "`gpumem trace stats`"},
      {"plan " + rmm + " --batch 2", "`gpumem trace stats`"},
      {"inspect " + oom, "`gpumem explain-oom`"},
      {"trace stats " + oom, "`gpumem explain-oom`"},
      {"llm " + oom + " --gpu 8GiB", "`gpumem explain-oom`"},
  };
  for (const auto& [c, reader] : cases) {
    const CliRun r = run_bounded(c);
    expect_one_line_error(r, c);
    EXPECT_NE(r.err.find(reader), std::string::npos) << c << ": " << r.err;
  }
}

// A safetensors index under another name is still an index.
TEST(HostileInputs, AnIndexUnderAnotherNameIsReadAsOne) {
  const std::string index = write_temp("renamed_index.json", "{\"weight_map\": {\"a\": \"missing.safetensors\"}}");
  const CliRun r = run_bounded("weights " + index);
  expect_one_line_error(r, "weights");
  EXPECT_NE(r.err.find("missing.safetensors: no such file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpumem::test
