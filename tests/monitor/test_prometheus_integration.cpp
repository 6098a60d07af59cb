// The whole chain against a real Prometheus (Debian's prometheus package):
// allocator processes publish, `gpumem exporter` (with a simulated GPU)
// exports, Prometheus scrapes and evaluates deploy/prometheus's rules, and
// the test reads back through Prometheus' HTTP API:
// - the values equal what the allocator itself says (its stats, written to a
//   file by the workload when it stops);
// - the leak alert fires for a leaking process and stays silent for a steady
//   one and for the simulated replay;
// - every query of the Grafana dashboard returns data.
//
// Time is scaled: the rules' windows (minutes) are divided by 300, so ten
// minutes of alerting logic run in two seconds, scraped every 100 ms.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "monitor/http_get.h"
#include "test_paths.h"

extern char** environ;

namespace gpumem::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kTimeScale = 300;

bool have(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// A child process, stopped with SIGTERM (then SIGKILL) when the test ends.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& log) {
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(20ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

// Every duration literal ("10m", "45m", "1h") divided by kTimeScale, in ms.
std::string scale_durations(const std::string& text) {
  static const std::regex duration(R"(\b(\d+)(ms|s|m|h)\b)");
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), duration), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.append(last, m[0].first);
    const long n = std::stol(m[1].str());
    const std::string unit = m[2].str();
    const long ms = n * (unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : 3'600'000);
    out += std::to_string(std::max(1L, ms / kTimeScale)) + "ms";
    last = m[0].second;
  }
  out.append(last, text.cend());
  return out;
}

class Prometheus {
 public:
  explicit Prometheus(int port) : base_("http://127.0.0.1:" + std::to_string(port)) {}
  nlohmann::json query(const std::string& promql) const {
    const HttpResult r = http_get(base_ + "/api/v1/query?query=" + url_encode(promql));
    if (r.status != 200) return nlohmann::json::array();
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }
  // The query's single value for a series with `pid`, or -1.
  double value_for_pid(const std::string& promql, pid_t pid) const {
    for (const auto& series : query(promql)) {
      if (series["metric"].value("pid", "") == std::to_string(pid))
        return std::stod(series["value"][1].get<std::string>());
    }
    return -1;
  }
  std::set<std::string> firing_pids(const std::string& alert) const {
    std::set<std::string> pids;
    for (const auto& s : query("ALERTS{alertname=\"" + alert + "\",alertstate=\"firing\"}")) {
      pids.insert(s["metric"].value("pid", ""));
    }
    return pids;
  }
  const std::string& base() const { return base_; }

 private:
  std::string base_;
};

template <class Predicate>
bool wait_for(std::chrono::seconds limit, Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return done();
}

TEST(PrometheusIntegration, ScrapedValuesAlertsAndDashboard) {
  if (!have("prometheus")) {
    GTEST_SKIP() << "prometheus is not installed (scripts/install-deps.sh installs Debian's prometheus package)";
  }
  const fs::path dir = fs::path(testing::TempDir()) / ("gpumem_prometheus_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "tsdb");
  const std::string prefix = "gpumemit" + std::to_string(getpid()) + ".";
  const int exporter_port = free_port(), prometheus_port = free_port();
  ASSERT_GT(exporter_port, 0);
  ASSERT_GT(prometheus_port, 0);

  // The rules, with every window scaled down.
  const std::string rules = read_file_bytes(source_dir() / "deploy" / "prometheus" / "gpumem.rules.yml");
  ASSERT_FALSE(rules.empty());
  std::ofstream(dir / "gpumem.rules.yml") << scale_durations(rules);
  std::ofstream(dir / "prometheus.yml") << "global:\n  scrape_interval: 100ms\n  evaluation_interval: 100ms\n"
                                        << "rule_files: [" << (dir / "gpumem.rules.yml").string() << "]\n"
                                        << "scrape_configs:\n  - job_name: gpumem\n    static_configs:\n"
                                        << "      - targets: ['127.0.0.1:" << exporter_port << "']\n";

  const std::string workload = GPUMEM_WORKLOAD_PATH;
  const std::string stats_file = (dir / "fixed_stats.json").string();
  Child leaky({workload, "--name", "/" + prefix + "leaky.0", "--leak-bytes", "262144"}, (dir / "leaky.log").string());
  Child steady({workload, "--name", "/" + prefix + "steady.0"}, (dir / "steady.log").string());
  Child fixed({workload, "--name", "/" + prefix + "fixed.0", "--iterations", "25", "--stats-file", stats_file},
              (dir / "fixed.log").string());
  Child exporter({GPUMEM_CLI_PATH, "exporter", "--listen", "127.0.0.1:" + std::to_string(exporter_port), "--interval",
                  "100ms", "--blocks-prefix", prefix, "--simulate", trace_path("resnet18_train.json"), "--speed", "20"},
                 (dir / "exporter.log").string());
  Child prometheus({"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
                    "--storage.tsdb.path=" + (dir / "tsdb").string(),
                    "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port)},
                   (dir / "prometheus.log").string());
  const Prometheus prom(prometheus_port);
  ASSERT_TRUE(wait_for(30s, [&] { return http_get(prom.base() + "/-/ready").status == 200; }))
      << read_file_bytes(dir / "prometheus.log");

  // 1. What Prometheus stored equals the allocator's own statistics.
  ASSERT_TRUE(wait_for(30s, [&] { return fs::exists(stats_file); })) << read_file_bytes(dir / "fixed.log");
  const nlohmann::json own = nlohmann::json::parse(read_file_bytes(stats_file));
  for (const auto& [field, value] : own.items()) {
    const std::string metric = "gpumem_allocator_" + field;
    double seen = -1;
    EXPECT_TRUE(wait_for(20s,
                         [&] {
                           seen = prom.value_for_pid(metric, fixed.pid());
                           return seen == value.get<double>();
                         }))
        << metric << ": Prometheus has " << seen << ", the allocator says " << value << "\n"
        << read_file_bytes(dir / "exporter.log");
  }
  EXPECT_GT(own["reserved_bytes"].get<double>(), 0);

  // 2. The leak alert fires for the leaking process, and for no other.
  EXPECT_TRUE(wait_for(60s, [&] { return prom.firing_pids("GpumemAllocatorLeak").count(std::to_string(leaky.pid())); }))
      << "ALERTS: " << prom.query("ALERTS").dump();
  const std::set<std::string> leaking = prom.firing_pids("GpumemAllocatorLeak");
  EXPECT_EQ(leaking, std::set<std::string>{std::to_string(leaky.pid())})
      << "steady " << steady.pid() << ", fixed " << fixed.pid() << ", exporter " << exporter.pid();
  EXPECT_TRUE(leaky.running() && steady.running() && exporter.running());

  // 3. Every dashboard query returns data.
  const nlohmann::json dashboard =
      nlohmann::json::parse(read_file_bytes(source_dir() / "deploy" / "grafana" / "gpumem.json"));
  std::vector<std::string> exprs;
  const std::function<void(const nlohmann::json&)> collect = [&](const nlohmann::json& j) {
    if (j.is_object()) {
      if (j.contains("expr") && j["expr"].is_string() && j.contains("refId")) exprs.push_back(j["expr"]);
      for (const auto& [k, v] : j.items()) collect(v);
    } else if (j.is_array()) {
      for (const auto& v : j) collect(v);
    }
  };
  collect(dashboard["panels"]);
  ASSERT_GE(exprs.size(), 8u);
  for (std::string expr : exprs) {
    expr = std::regex_replace(expr, std::regex(R"(\$\{?[A-Za-z_]+\}?)"), ".*");
    EXPECT_FALSE(prom.query(expr).empty()) << "no data for the dashboard's query: " << expr;
  }
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace gpumem::test
