// Plans every MiniMalloc-format CSV in a folder and prints a table:
// instance, buffers, lower bound, arena, optimal?, seconds (median of runs).
//
//   build/bench/gpumem_plan_suite DIR [--capacity BYTES] [--minimize] [--runs N] [--time-limit S]
//
// With --capacity the search stops at the first plan within it (MiniMalloc's
// decision problem); with --minimize it looks for the smallest arena and a
// proof. The challenging suite: ../shared/minimalloc-benchmarks/challenging.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/plan/csv.h"
#include "gpumem/plan/solver.h"
#include "gpumem/plan/validate.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--capacity BYTES] [--minimize] [--runs N] [--time-limit S]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  gpumem::plan::SolveOptions options;
  options.minimize = false;
  int runs = 3;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--capacity" && i + 1 < argc) {
      options.capacity = std::atoll(argv[++i]);
    } else if (a == "--minimize") {
      options.minimize = true;
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--time-limit" && i + 1 < argc) {
      options.time_limit_seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".csv") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::printf("%-16s %8s %12s %12s %9s %12s %12s %10s\n", "instance", "buffers", "lower_bound", "arena",
              "optimal", "within_cap", "nodes", "seconds");
  int failures = 0;
  for (const auto& f : files) {
    try {
      const auto csv = gpumem::plan::read_csv(f.string());
      std::vector<double> seconds;
      gpumem::plan::SolveResult r;
      for (int k = 0; k < runs; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        r = gpumem::plan::solve(csv.problem, options);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(seconds.begin(), seconds.end());
      const auto bad = gpumem::plan::validate(csv.problem, r.plan.offsets);
      const bool within = !options.capacity || r.plan.arena <= *options.capacity;
      failures += (bad || !within) ? 1 : 0;
      std::printf("%-16s %8zu %12lld %12lld %9s %12s %12llu %10.3f%s\n", f.stem().string().c_str(),
                  csv.problem.buffers.size(), static_cast<long long>(r.lower_bound),
                  static_cast<long long>(r.plan.arena), r.optimal ? "yes" : "no", within ? "yes" : "NO",
                  static_cast<unsigned long long>(r.nodes), seconds[seconds.size() / 2],
                  bad ? (" INVALID: " + bad->message).c_str() : "");
    } catch (const gpumem::InputError& e) {
      std::printf("%-16s error: %s\n", f.stem().string().c_str(), e.what());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
