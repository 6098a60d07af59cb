// Reading PyTorch's out-of-memory message back (c10/cuda/CUDACachingAllocator.cpp
// writes it; its wording changed in 2.0 and 2.1).
#include "gpumem/oom/oom_message.h"
#include "gpumem/common/flag_names.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem::oom {
namespace {

// A size as PyTorch prints it (format_size: "%.2f" and B, KiB, MiB, GiB;
// "bytes" in 1.x), back to bytes.
constexpr const char* kSize = R"(([0-9]+(?:\.[0-9]+)?) ?(bytes|B|KiB|MiB|GiB|TiB))";

// Nothing in a message is trusted: a size past 2^62 bytes (no GPU has it)
// or a number too long for a double is no size at all.
std::optional<uint64_t> to_bytes(const std::string& number, const std::string& unit) {
  const double value = std::strtod(number.c_str(), nullptr);
  double scale = 1;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024;
  if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes > 0x1p62) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

// A device or process number; -1 (or 0) when it does not fit.
template <typename T>
T to_number(const std::string& digits, T otherwise) {
  T value{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() ? value : otherwise;
}

std::optional<uint64_t> size_before(const std::string& text, const std::string& after) {
  const std::regex re(std::string(kSize) + " " + after);
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return to_bytes(m[1], m[2]);
}

std::optional<uint64_t> size_after(const std::string& text, const std::string& before) {
  const std::regex re(before + " " + kSize);
  std::smatch m;
  if (!std::regex_search(text, m, re)) return std::nullopt;
  return to_bytes(m[1], m[2]);
}

}  // namespace

std::optional<OomMessage> parse_oom_message(const std::string& text) {
  const size_t at = text.find("out of memory");
  if (at == std::string::npos) return std::nullopt;
  // The message runs to the end of its paragraph; a traceback before it is
  // not part of it.
  const size_t start = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  const std::string s = text.substr(start, std::min<size_t>(text.size() - start, 4096));
  OomMessage m;
  m.requested_bytes = size_after(s, "Tried to allocate");
  std::smatch g;
  if (std::regex_search(s, g,
                        std::regex(std::string(R"(GPU ([0-9]+) has a total capac(?:i)?ty of )") + kSize + " of which " +
                                   kSize + " is free"))) {
    m.wording = "pytorch-2";
    m.device = to_number<int>(g[1], -1);
    m.capacity_bytes = to_bytes(g[2], g[3]);
    m.free_bytes = to_bytes(g[4], g[5]);
    const std::regex process(std::string(R"(Process ([0-9]+) has )") + kSize + " memory in use");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), process); it != std::sregex_iterator(); ++it) {
      m.processes.emplace_back(to_number<uint64_t>((*it)[1], 0), to_bytes((*it)[2], (*it)[3]).value_or(0));
    }
    m.process_bytes = size_after(s, "this process has");
    if (!m.process_bytes && m.processes.size() == 1) m.process_bytes = m.processes.front().second;
    m.allocated_bytes = size_after(s, "Of the allocated memory");
    m.reserved_unallocated_bytes = size_before(s, "is reserved by PyTorch but unallocated");
    if (m.allocated_bytes && m.reserved_unallocated_bytes)
      m.reserved_bytes = *m.allocated_bytes + *m.reserved_unallocated_bytes;
    return m;
  }
  if (std::regex_search(s, g, std::regex(R"(\(GPU ([0-9]+);)"))) {
    m.device = to_number<int>(g[1], -1);
    m.capacity_bytes = size_before(s, "total capacity");
    m.allocated_bytes = size_before(s, "already allocated");
    m.free_bytes = size_before(s, "free");
    m.reserved_bytes = size_before(s, "reserved in total by PyTorch");
    m.wording = "pytorch-1";
    if (!m.reserved_bytes) {
      // Before 1.4 the last figure was "cached": the cache beyond what is
      // allocated (it is often smaller than the allocated figure).
      m.reserved_unallocated_bytes = size_before(s, "cached");
      if (m.reserved_unallocated_bytes) {
        m.wording = "pytorch-1-cached";
        if (m.allocated_bytes) m.reserved_bytes = *m.allocated_bytes + *m.reserved_unallocated_bytes;
      }
    } else if (m.allocated_bytes && *m.reserved_bytes >= *m.allocated_bytes) {
      m.reserved_unallocated_bytes = *m.reserved_bytes - *m.allocated_bytes;
    }
    return m;
  }
  if (m.requested_bytes) {
    m.wording = "pytorch";  // a request without the device's figures
    return m;
  }
  m.wording = "driver";
  return m;
}

const char* to_string(OomDiagnosis d) {
  switch (d) {
    case OomDiagnosis::kOneHugeRequest: return "one huge request";
    case OomDiagnosis::kRefusedThoughFree: return "refused though free";
    case OomDiagnosis::kAnotherProcess: return "another process";
    case OomDiagnosis::kFragmentation: return "fragmentation";
    case OomDiagnosis::kSimplyFull: return "simply full";
    case OomDiagnosis::kDriver: return "driver";
  }
  return "?";
}

OomExplanation explain_oom(const OomMessage& m) {
  OomExplanation e;
  e.message = m;
  const auto b = [](std::optional<uint64_t> v) { return v ? format_bytes(*v) : std::string("?"); };
  if (m.wording == "driver") {
    e.diagnosis = OomDiagnosis::kDriver;
    e.meaning =
        "The CUDA driver, not PyTorch's allocator, ran out: creating a context, loading kernels or a library's own "
        "workspace (cuBLAS, cuDNN, NCCL) found no memory. The allocator's figures are not in the message.";
    e.advice = {"See what holds the GPU (nvidia-smi): another process, or this one's cached memory",
                "Call torch.cuda.empty_cache() before the library call, or leave headroom for workspaces",
                "With CUDA_LAUNCH_BLOCKING=1 the traceback points at the failing call"};
    return e;
  }
  const uint64_t requested = m.requested_bytes.value_or(0);
  const uint64_t capacity = m.capacity_bytes.value_or(0);
  // Memory on the device that is not this process's PyTorch cache: the CUDA
  // context (a few hundred MiB) and other processes.
  std::optional<uint64_t> outside;
  if (m.capacity_bytes && m.free_bytes) {
    const uint64_t used = capacity > *m.free_bytes ? capacity - *m.free_bytes : 0;
    const std::optional<uint64_t> ours = m.process_bytes ? m.process_bytes : m.reserved_bytes;
    if (ours) outside = used > *ours ? used - *ours : 0;
  }
  const uint64_t gib = uint64_t{1} << 30;
  // Allocated memory near the capacity with little cached is a full GPU,
  // even where the cache could have held this one request: the next would
  // fail the same way, and no allocator setting gains more than the cache.
  // "Near" leaves room for the CUDA context (a few hundred MiB) and "little"
  // is a twentieth of the GPU.
  const bool full_and_little_cached = capacity != 0 && m.allocated_bytes && m.reserved_unallocated_bytes &&
                                      *m.allocated_bytes >= capacity / 20 * 17 &&
                                      *m.reserved_unallocated_bytes < capacity / 20;
  if (capacity != 0 && requested * 2 > capacity) {
    e.diagnosis = OomDiagnosis::kOneHugeRequest;
    e.meaning = fmt::format(
        "One request of {} is more than half of the GPU's {}: a single tensor (often attention scores [batch, "
        "heads, seq, seq], logits [tokens, vocab] in fp32, or a whole-model copy) that no cache tuning can place.",
        b(m.requested_bytes), b(m.capacity_bytes));
    e.advice = {
        "Find the tensor: the traceback's last line, or `gpumem train MODEL.onnx` / `gpumem finetune "
        "config.json` list the largest tensors at the peak",
        "Shrink it: a smaller batch or sequence, fused (SDPA/flash) attention instead of eager, chunked "
        "cross-entropy",
        "Split the work over GPUs (`gpumem fit " GPUMEM_FLAG_GPUS " N`)"};
  } else if (m.free_bytes && *m.free_bytes >= requested + std::max<uint64_t>(requested / 8, 128ull << 20)) {
    // PyTorch measures "free" after it has given its whole cache back to
    // the driver and retried (pytorch#13751), so free memory well above the
    // request means this process could not have it. Within 128 MiB or an
    // eighth of the request, it is the driver's own headroom: simply full.
    e.diagnosis = OomDiagnosis::kRefusedThoughFree;
    e.meaning = fmt::format(
        "The driver reported {} free, more than the {} asked for, after PyTorch had already given its cache back, "
        "yet the allocation failed: this process cannot have that memory. Usual causes: a cap on the process "
        "(torch.cuda.set_per_process_memory_fraction, a container's or MIG slice's limit), Windows (WDDM) holding "
        "part of what it reports free for the desktop, another process allocating at the same moment, or host "
        "memory exhausted, which makes the driver refuse device memory too.",
        b(m.free_bytes), b(m.requested_bytes));
    e.advice = {
        "Look for a cap: set_per_process_memory_fraction in the code, the MIG slice or the container's GPU "
        "memory limit",
        "Check host memory (free -h): with RAM and swap full, device allocations fail as well "
        "(pytorch#40002)",
        "On Windows, close other programs that draw on the GPU, or run under Linux or WSL",
        "Record the failing step (torch.cuda.memory._record_memory_history) and read the snapshot with "
        "`gpumem trace stats snapshot.pickle`"};
  } else if (outside && *outside > std::max<uint64_t>(3 * gib / 2, capacity / 7)) {
    e.diagnosis = OomDiagnosis::kAnotherProcess;
    e.meaning = fmt::format(
        "{} of the GPU is used outside this process's PyTorch memory ({} in use, {} free of {}): another process "
        "(or another framework in this one) holds it.",
        format_bytes(*outside), b(m.process_bytes ? m.process_bytes : m.reserved_bytes), b(m.free_bytes),
        b(m.capacity_bytes));
    e.advice = {"nvidia-smi shows which processes hold the GPU; stop them or pick another GPU (CUDA_VISIBLE_DEVICES)",
                "A process of your own from an earlier run (a notebook kernel, a dataloader worker that touched "
                "CUDA) is the usual culprit",
                "If it must share, cap this process: torch.cuda.set_per_process_memory_fraction"};
  } else if (m.reserved_unallocated_bytes && *m.reserved_unallocated_bytes >= requested && !full_and_little_cached) {
    e.diagnosis = OomDiagnosis::kFragmentation;
    e.meaning = fmt::format(
        "PyTorch holds {} reserved but unallocated, more than the {} asked for, yet no cached block is large "
        "enough: the cache is fragmented.",
        b(m.reserved_unallocated_bytes), b(m.requested_bytes));
    e.advice = {m.wording == "pytorch-2"
                    ? "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets freed memory join into larger blocks"
                    : "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 stops large blocks being split (PyTorch 2: "
                      "expandable_segments:True)",
                "Replay a recorded snapshot under other allocator settings: `gpumem replay snapshot.pickle` "
                "(torch.cuda.memory._record_memory_history, then _dump_snapshot)",
                "Free references to large tensors before the next large allocation"};
  } else {
    e.diagnosis = OomDiagnosis::kSimplyFull;
    e.meaning = fmt::format(
        "The GPU is full: {} allocated by PyTorch, {} reserved, {} free, and the {} asked for fits nowhere. "
        "The step needs more memory than the GPU has{}.",
        b(m.allocated_bytes), b(m.reserved_bytes), b(m.free_bytes), b(m.requested_bytes),
        full_and_little_cached && *m.reserved_unallocated_bytes >= requested
            ? fmt::format("; the {} cached is too little for allocator settings to matter",
                          b(m.reserved_unallocated_bytes))
            : "");
    e.advice = {"A smaller batch: halve it, and keep the effective batch with gradient accumulation (twice the steps)",
                "Activation checkpointing: recompute activations in backward instead of keeping them "
                "(torch.utils.checkpoint, or gradient_checkpointing_enable() in transformers)",
                "bf16 autocast, an 8-bit optimizer, LoRA/QLoRA; ZeRO or FSDP over several GPUs",
                "Find the largest batch that fits: `gpumem fit MODEL.onnx " GPUMEM_FLAG_GPU
                " SIZE " GPUMEM_FLAG_MAX_BATCH
                "` (a training step), "
                "`gpumem finetune config.json " GPUMEM_FLAG_GPU " SIZE " GPUMEM_FLAG_MAX_BATCH
                "` (a language model), `gpumem llm MODEL " GPUMEM_FLAG_GPU
                " "
                "SIZE` (inference)"};
  }
  return e;
}

}  // namespace gpumem::oom
