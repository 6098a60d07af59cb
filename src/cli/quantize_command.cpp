#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/output_files.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/llm/llama_cpp_keys.h"
#include "gpumem/llm/llm_model.h"
#include "gpumem/report/html/command_pages.h"
#include "gpumem/report/quantize_report.h"
#include "gpumem/weights/quantize_file.h"

namespace gpumem::cli {
namespace {

// The config.json describing a safetensors checkpoint: the one given, else
// the one in its folder; "" when there is none (or the input is a GGUF or
// ONNX file, which carries or lacks its own).
std::string config_for(const std::string& input, const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) return given;
  std::error_code ec;
  const fs::path in(input);
  const bool folder = fs::is_directory(in, ec);
  if (!folder && !input.ends_with(".safetensors") && !input.ends_with(".safetensors.index.json")) return {};
  const fs::path beside = (folder ? in : in.parent_path()) / "config.json";
  return fs::is_regular_file(beside, ec) ? beside.string() : std::string();
}

}  // namespace

Action add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "A safetensors, GGUF or ONNX file's float tensors to a GGUF file of ggml types, as llama.cpp does");
  struct Args {
    std::string input, output, keep, hf_config, html;
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
  cmd->add_option("--hf-config", args->hf_config,
                  "The checkpoint's Hugging Face config.json, whose architecture and hyperparameters the GGUF "
                  "gets (default: config.json beside IN)");
  cmd->add_flag("--pure", args->pure, "Every quantizable tensor at the type's own ggml type: no llama.cpp mixture");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/quantize.md)");
  add_html_flag(*cmd, args->html);
  return [args, types]() {
    if (!weights::quantize_recipe_named(args->type))
      throw InputError("quantize: --type: '" + printable(args->type) + "' is not one of " + types);
    weights::QuantizeOptions options;
    options.type = args->type;
    options.pure = args->pure;
    options.keep = args->keep;
    // The shape gpumem llm (and llama.cpp) read from a GGUF's key-values.
    if (const std::string config = config_for(args->input, args->hf_config); !config.empty()) {
      options.metadata = llm::llama_cpp_keys(llm::load_llm_model(config));
      options.metadata_from = config;
    }
    const auto report = weights::quantize_file(args->input, args->output, options);
    announce_written(args->output, "GGUF " + args->type);
    if (!args->html.empty()) write_html(args->html, report::quantize_html(report));
    if (args->json) {
      std::fputs((json_text(quantize_to_json(report), 2) + "\n").c_str(), out());
    } else {
      std::fputs(render_quantize_text(report).c_str(), out());
    }
    return 0;
  };
}

}  // namespace gpumem::cli
