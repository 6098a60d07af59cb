#include <cstdio>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_files.h"
#include "cli/streams.h"
#include "common/bounded_json.h"
#include "gpumem/common/error.h"
#include "gpumem/common/files.h"
#include "gpumem/common/units.h"
#include "gpumem/oom/oom_message.h"
#include "gpumem/report/html/command_pages.h"

namespace gpumem::cli {
namespace {

nlohmann::ordered_json size_or_null(const std::optional<uint64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

Action add_explain_oom_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "explain-oom", "What a PyTorch \"CUDA out of memory\" message means and what to try (reads stdin without FILE)");
  struct Args {
    std::string file, html;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("FILE", args->file, "A file holding the message (a traceback or log); - or none: stdin");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema in docs/explain-oom.md)");
  add_html_flag(*cmd, args->html);
  return [args]() {
    const bool from_stdin = args->file.empty() || args->file == "-";
    const std::string name = from_stdin ? "<stdin>" : args->file;
    std::string text;
    if (from_stdin) {
      // At most 64 MiB: a message, or the log around it.
      char buffer[65536];
      size_t got = 0;
      while ((got = std::fread(buffer, 1, sizeof buffer, in())) > 0) {
        text.append(buffer, got);
        if (text.size() > (64ull << 20))
          throw InputError("<stdin>: more than 64 MiB, more than a log holding an error message");
      }
    } else {
      bool gzipped = false;
      text = read_file(args->file, 64ull << 20, "more than a log holding an error message", &gzipped);
    }
    const auto message = oom::parse_oom_message(text);
    if (!message) throw InputError(printable(name) + ": no PyTorch or CUDA out-of-memory message in it");
    const oom::OomExplanation e = oom::explain_oom(*message);
    const auto& m = e.message;
    if (!args->html.empty()) write_html(args->html, report::oom_html(e));
    if (args->json) {
      nlohmann::ordered_json doc;
      doc["schema_version"] = 1;
      doc["wording"] = m.wording;
      doc["device"] = m.device >= 0 ? nlohmann::ordered_json(m.device) : nlohmann::ordered_json(nullptr);
      doc["requested_bytes"] = size_or_null(m.requested_bytes);
      doc["capacity_bytes"] = size_or_null(m.capacity_bytes);
      doc["free_bytes"] = size_or_null(m.free_bytes);
      doc["process_bytes"] = size_or_null(m.process_bytes);
      doc["allocated_bytes"] = size_or_null(m.allocated_bytes);
      doc["reserved_bytes"] = size_or_null(m.reserved_bytes);
      doc["reserved_unallocated_bytes"] = size_or_null(m.reserved_unallocated_bytes);
      doc["diagnosis"] = to_string(e.diagnosis);
      doc["meaning"] = e.meaning;
      doc["advice"] = e.advice;
      std::fputs((json_text(doc, 2) + "\n").c_str(), out());
      return kExitOk;
    }
    std::string text_out = "Diagnosis   " + std::string(to_string(e.diagnosis)) + "\n";
    text_out += "            " + e.meaning + "\n";
    for (const auto& a : e.advice) text_out += "Try         " + a + "\n";
    std::fputs(text_out.c_str(), out());
    return kExitOk;
  };
}

}  // namespace gpumem::cli
