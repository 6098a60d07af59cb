#pragma once
// One answer to "does it fit?". Every command that has one (train, fit,
// finetune, llm, plan), the Python module and every report decide it here and
// word it the same way, so the same question asked by two routes gets the
// same figures and the same words.
//
// The device is the GPU the user named (--gpu). What it must hold is the
// least memory the work runs in: for a training step, the allocated peak
// under the caching allocator replayed with the GPU's memory as its cap (it
// returns its cache and retries when short), plus what no allocator sees
// (the CUDA context, library workspaces); for inference, the engine's
// buffers plus that overhead.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace gpumem {

struct Verdict {
  uint64_t gpu_bytes = 0;     // the device's memory (--gpu); 0: no device named, no verdict
  uint64_t device_bytes = 0;  // what the device must hold
  bool decided() const { return gpu_bytes != 0; }
  bool fits() const { return decided() && device_bytes <= gpu_bytes; }
  // gpu - device when it fits, device - gpu when it does not; 0 otherwise.
  uint64_t headroom_bytes() const { return fits() ? gpu_bytes - device_bytes : 0; }
  uint64_t short_bytes() const { return decided() && !fits() ? device_bytes - gpu_bytes : 0; }
};

// "FITS, 501.00 MiB headroom" or "DOES NOT FIT, 735.00 MiB short": the
// verdict in a report's own line, after the figures it is about.
std::string verdict_brief(const Verdict& v);

// "FITS a GPU of 24.00 GiB: needs 23.51 GiB, 501.00 MiB headroom": the
// headline, with both figures.
std::string verdict_line(const Verdict& v);

// {"gpu_bytes", "device_bytes", "fits", "headroom_bytes", "short_bytes"}:
// the same object, under "verdict", in every JSON document that has one.
nlohmann::ordered_json verdict_json(const Verdict& v);

}  // namespace gpumem
