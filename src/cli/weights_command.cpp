#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "gpumem/report/weights_report.h"

namespace gpumem::cli {

Action add_weights_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("weights", "What a weight file holds: safetensors, GGUF or ONNX, read through mmap");
  struct Args {
    std::string file;
    int top = 10;
    bool json = false, no_duplicates = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option(
         "FILE", args->file,
         "A .safetensors file, a model.safetensors.index.json (or its directory), a .gguf file or an ONNX model")
      ->required();
  cmd->add_option("--top", args->top, "How many of the largest tensors to list")->check(kNonNegativeInteger);
  cmd->add_flag("--no-duplicates", args->no_duplicates, "Do not read tensor data to find identical tensors");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/weights.md)");
  return [args]() {
    const auto summary = weights::summarize(weights::read_weight_file(args->file), !args->no_duplicates);
    if (args->json) {
      std::fputs((weights_to_json(summary).dump(2) + "\n").c_str(), stdout);
    } else {
      std::fputs(render_weights_text(summary, args->top).c_str(), stdout);
    }
    return 0;
  };
}

}  // namespace gpumem::cli
