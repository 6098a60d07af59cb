#include <charconv>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grp.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/size_flag.h"
#include "cli/streams.h"
#include "gpumem/alloc/config.h"
#include "gpumem/common/error.h"
#include "gpumem/common/units.h"
#include "gpumem/monitor/exporter.h"
#include "gpumem/monitor/nvml.h"
#include "gpumem/monitor/simulated_workload.h"

namespace gpumem::cli {
namespace {

// The host part of --listen for the start-up line; every interface without one.
std::string listen_host(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon == std::string::npos || colon == 0 ? "0.0.0.0" : listen.substr(0, colon);
}

}  // namespace
namespace {

std::atomic<bool> g_stop{false};

extern "C" void request_stop(int /*signal*/) { g_stop.store(true); }

std::chrono::milliseconds interval_flag(const std::string& text) {
  const auto parsed = parse_duration(text);
  if (!parsed || *parsed < std::chrono::milliseconds(10)) {
    throw InputError(fmt::format("--interval {}: expected a duration of at least 10ms, such as 1s or 500ms", text));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

// A group by name, or by number when it is one: --trusted-group.
gid_t group_id(const std::string& name) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    return found->gr_gid;
  gid_t id = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  if (ec == std::errc() && end == name.data() + name.size()) return id;
  throw InputError(fmt::format("--trusted-group '{}': no such group", printable(name)));
}

}  // namespace

Action add_exporter_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "exporter", "Serve device and allocator memory to Prometheus at /metrics (NVML and published allocator blocks)");
  struct Args {
    std::string listen = "127.0.0.1:9400", interval = "1s", simulate, gpu = "80GiB", config, blocks_dir = "/dev/shm",
                blocks_prefix = "gpumem.", trusted_group;
    double speed = 1.0;
    bool once = false, no_dcgm = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--listen", args->listen,
                  "Address to serve on: [HOST]:PORT, IPv4, [IPv6] or a host name; :PORT for every interface (port 0: "
                  "any free port)")
      ->capture_default_str();
  cmd->add_option("--interval", args->interval, "How often to read the GPUs and the allocators (1s, 500ms)")
      ->capture_default_str();
  cmd->add_option("--simulate", args->simulate,
                  "Replay this trace on a simulated GPU in a loop and export it (no GPU needed)");
  cmd->add_option("--speed", args->speed, "With --simulate: replay this many times faster than recorded")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_gpu_memory_option(*cmd, args->gpu, "With --simulate: the simulated GPU's memory")->capture_default_str();
  cmd->add_option("--config", args->config, "With --simulate: the allocator's settings, as GPUMEM_ALLOC_CONF");
  cmd->add_flag("--no-dcgm", args->no_dcgm, "Leave out DCGM_FI_DEV_FB_* (when dcgm-exporter already runs on the host)");
  cmd->add_flag("--once", args->once, "Collect once (after one interval with --simulate), print the metrics, exit");
  cmd->add_option("--blocks-dir", args->blocks_dir, "Where allocators' shared-memory blocks are (/dev/shm on Linux)")
      ->capture_default_str();
  cmd->add_option("--blocks-prefix", args->blocks_prefix,
                  "Read only blocks whose names start with this (and publish --simulate's under it)")
      ->capture_default_str();
  cmd->add_option("--trusted-group", args->trusted_group,
                  "Also take blocks from files owned by members of this group (name or id) for other users' "
                  "processes (docs/exporter.md, threat model)");
  return [args]() {
    monitor::ExporterOptions options;
    if (!args->trusted_group.empty()) options.read.trusted_group = group_id(args->trusted_group);
    options.listen = args->listen;
    options.interval = interval_flag(args->interval);
    options.metrics.dcgm_names = !args->no_dcgm;
    options.read.directory = args->blocks_dir;
    if (args->blocks_prefix.empty() || args->blocks_prefix.find('/') != std::string::npos) {
      throw InputError(fmt::format("--blocks-prefix '{}': expected a non-empty name without '/'", args->blocks_prefix));
    }
    options.read.prefix = args->blocks_prefix;

    std::unique_ptr<monitor::GpuMemorySource> gpus;
    std::string gpu_note;
    if (!args->simulate.empty()) {
      monitor::SimulatedWorkloadOptions sim;
      sim.trace_path = args->simulate;
      sim.speed = args->speed;
      sim.publish_name = fmt::format("/{}{}.{}", args->blocks_prefix, getpid(), sim.device);
      sim.capacity = parse_memory_flag("--gpu", args->gpu);
      if (!args->config.empty()) sim.config = alloc::parse_allocator_config(args->config);
      gpus = std::make_unique<monitor::SimulatedWorkload>(sim);
      gpu_note = fmt::format("a simulated GPU replaying {}", args->simulate);
    } else {
      std::string why;
      gpus = monitor::NvmlSource::open(&why);
      gpu_note = gpus ? "NVML" : fmt::format("no GPU metrics ({})", why);
    }

    if (args->once) {
      if (!args->simulate.empty()) std::this_thread::sleep_for(options.interval);
      monitor::MetricsCollector collector(gpus.get(), options);
      collector.refresh();
      std::fputs(monitor::to_text(collector.Collect()).c_str(), out());
      return 0;
    }

    monitor::Exporter exporter(gpus.get(), options);
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
    std::fprintf(err(), "gpumem exporter: serving http://%s:%d/metrics every %s; GPUs: %s\n",
                 listen_host(options.listen).c_str(), exporter.port(), args->interval.c_str(), gpu_note.c_str());
    exporter.run(g_stop);
    return 0;
  };
}

}  // namespace gpumem::cli
