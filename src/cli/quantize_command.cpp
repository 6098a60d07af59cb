#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/output_files.h"
#include "gpumem/common/error.h"
#include "gpumem/report/quantize_report.h"
#include "gpumem/weights/quantize_file.h"

namespace gpumem::cli {

Action add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "A safetensors, GGUF or ONNX file's float tensors to a GGUF file of ggml types, as llama.cpp does");
  struct Args {
    std::string input, output, keep;
    std::string type;
    bool pure = false, json = false;
  };
  auto args = std::make_shared<Args>();
  std::string types;
  for (const auto& r : weights::quantize_recipes()) types += (types.empty() ? "" : ", ") + std::string(r.name);
  cmd->add_option("IN", args->input,
                  "A .safetensors file (or a sharded checkpoint's index), a .gguf file or an ONNX model")
      ->required();
  cmd->add_option("OUT", args->output, "The GGUF file to write (replaced only once it is complete)")->required();
  cmd->add_option("--type", args->type, "What to write: " + types + " (docs/quantize.md)")->required();
  cmd->add_option("--keep", args->keep,
                  "Tensors whose whole name matches this regular expression (ECMAScript) keep their type");
  cmd->add_flag("--pure", args->pure, "Every quantizable tensor at the type's own ggml type: no llama.cpp mixture");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/quantize.md)");
  return [args, types]() {
    if (!weights::quantize_recipe_named(args->type))
      throw InputError("quantize: --type: '" + printable(args->type) + "' is not one of " + types);
    weights::QuantizeOptions options;
    options.type = args->type;
    options.pure = args->pure;
    options.keep = args->keep;
    const auto report = weights::quantize_file(args->input, args->output, options);
    announce_written(args->output, "GGUF " + args->type);
    if (args->json) {
      std::fputs((quantize_to_json(report).dump(2) + "\n").c_str(), stdout);
    } else {
      std::fputs(render_quantize_text(report).c_str(), stdout);
    }
    return 0;
  };
}

}  // namespace gpumem::cli
