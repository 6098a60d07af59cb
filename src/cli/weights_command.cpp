#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/output_files.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/report/html/command_pages.h"
#include "gpumem/report/weights_report.h"

namespace gpumem::cli {

Action add_weights_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("weights", "What a weight file holds: safetensors, GGUF or ONNX, read through mmap");
  struct Args {
    std::string file, html;
    int top = 10;
    bool json = false, duplicates = false, no_duplicates = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option(
         "FILE", args->file,
         "A .safetensors file, a model.safetensors.index.json (or its directory), a .gguf file or an ONNX model")
      ->required();
  cmd->add_option("--top", args->top, "How many of the largest tensors to list")->check(kNonNegativeInteger);
  cmd->add_flag("--duplicates", args->duplicates,
                "Also read every tensor's data to find identical ones (tied embeddings): seconds on large files, "
                "where the header alone takes milliseconds");
  // The default since issue 31; kept so that old scripts still run.
  cmd->add_flag("--no-duplicates", args->no_duplicates, "Old flag: headers only is now the default")->group("");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/weights.md)");
  add_html_flag(*cmd, args->html);
  return [args]() {
    if (args->no_duplicates)
      std::fputs("gpumem: note: --no-duplicates is now the default (--duplicates reads the tensor data)\n", err());
    const auto summary = weights::summarize(weights::read_weight_file(args->file), args->duplicates);
    if (!args->html.empty()) write_html(args->html, report::weights_html(summary, args->top));
    if (args->json) {
      std::fputs((json_text(weights_to_json(summary), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_weights_text(summary, args->top).c_str(), out());
    }
    return 0;
  };
}

}  // namespace gpumem::cli
