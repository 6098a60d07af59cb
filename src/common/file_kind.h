#pragma once
// What a file is, guessed from its first bytes, for one purpose: when a
// command is given a file of another kind, to say so in one line and name
// the command that reads it ("a GGUF model, not an ONNX model: read it with
// `gpumem llm FILE` or `gpumem weights FILE`"). The readers themselves
// decide what they accept; this never does.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

enum class FileKind {
  Unknown,
  OnnxModel,
  MemoryTrace,  // PyTorch snapshot, torch.profiler/Chrome JSON, RMM log, gpumem history
  Gguf,
  Safetensors,
  SafetensorsIndex,  // model.safetensors.index.json
  ModelConfig,       // a Hugging Face config.json
  ModelFolder,       // a folder with config.json and weights
  PlanCsv,           // MiniMalloc's id,lower,upper,size
  RequestTrace,      // serve-sim's arrival_s,prompt_tokens,output_tokens
  OomMessage,        // text with a PyTorch or CUDA out-of-memory message
  TracedStep,        // a gpumem-step document (gpumem.torch.estimate's traced training step)
};

// From the first bytes of a file (4 KiB is plenty).
FileKind file_kind(std::string_view head);
// From a path: a folder is a ModelFolder when it holds a config.json.
FileKind file_kind_at(const std::string& path);

// When `path` is of a kind gpumem reads but not one of `accepted`: the
// one-line error, "FILE: a GGUF model, not <wanted>: read it with ...".
// Unknown kinds give nullopt: the reader's own error says more.
std::optional<std::string> wrong_kind_error(const std::string& path, std::initializer_list<FileKind> accepted,
                                            std::string_view wanted);
// The same for a head already read (readers that hold the bytes), or a
// kind already found (readers that also route by it).
std::optional<std::string> wrong_kind_error(std::string_view head, const std::string& path,
                                            std::initializer_list<FileKind> accepted, std::string_view wanted);
std::optional<std::string> wrong_kind_error(FileKind kind, const std::string& path,
                                            std::initializer_list<FileKind> accepted, std::string_view wanted);

}  // namespace gpumem
