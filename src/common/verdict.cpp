#include "gpumem/common/verdict.h"

#include <fmt/format.h>

#include "gpumem/common/units.h"

namespace gpumem {

std::string verdict_brief(const Verdict& v) {
  if (!v.decided()) return "no GPU named";
  return v.fits() ? fmt::format("FITS, {} headroom", format_bytes(v.headroom_bytes()))
                  : fmt::format("DOES NOT FIT, {} short", format_bytes(v.short_bytes()));
}

std::string verdict_line(const Verdict& v) {
  if (!v.decided()) return fmt::format("needs {} (no GPU named)", format_bytes(v.device_bytes));
  return fmt::format("{} a GPU of {}: needs {}, {} {}", v.fits() ? "FITS" : "DOES NOT FIT", format_bytes(v.gpu_bytes),
                     format_bytes(v.device_bytes), format_bytes(v.fits() ? v.headroom_bytes() : v.short_bytes()),
                     v.fits() ? "headroom" : "short");
}

nlohmann::ordered_json verdict_json(const Verdict& v) {
  return {{"gpu_bytes", v.gpu_bytes},
          {"device_bytes", v.device_bytes},
          {"fits", v.fits()},
          {"headroom_bytes", v.headroom_bytes()},
          {"short_bytes", v.short_bytes()}};
}

}  // namespace gpumem
