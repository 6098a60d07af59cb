// libFuzzer target: arbitrary bytes through the MiniMalloc CSV reader, then
// the planning checks on whatever it accepts.
//
// The contract under test: parse_csv either returns a problem or throws
// gpumem::InputError. Once a problem is accepted, its limits must make
// lower_bound, validate, arena_size and write_csv safe (no exception, no
// overflow), writing it out and reading it back must give the same problem,
// and on small problems validate must agree with a pairwise brute force.
// Anything else aborts (a crash for libFuzzer), as does any sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/common/error.h"
#include "gpumem/plan/csv.h"
#include "gpumem/plan/problem.h"
#include "gpumem/plan/validate.h"

#include "fuzz_check.h"

using gpumem::fuzz::check;

namespace {

using gpumem::plan::Buffer;
using gpumem::plan::Problem;

// Pairwise, over what each occupies (gaps and windows included).
bool collide(const Buffer& a, int64_t oa, const Buffer& b, int64_t ob) {
  for (const auto& p : gpumem::plan::occupancy(a)) {
    for (const auto& q : gpumem::plan::occupancy(b)) {
      if (p.lower < q.upper && q.lower < p.upper && oa + p.begin < ob + q.end && ob + q.begin < oa + p.end) return true;
    }
  }
  return false;
}

bool same(const Problem& a, const Problem& b) {
  if (a.buffers.size() != b.buffers.size()) return false;
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer& x = a.buffers[i];
    const Buffer& y = b.buffers[i];
    if (x.id != y.id || x.lower != y.lower || x.upper != y.upper || x.size != y.size || x.alignment != y.alignment ||
        x.gaps != y.gaps) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpumem::plan::CsvProblem parsed;
  try {
    parsed = gpumem::plan::parse_csv(text, "fuzz.csv");
  } catch (const gpumem::InputError&) {
    return 0;  // rejected with a message: the expected outcome for bad input
  }
  const Problem& problem = parsed.problem;
  check(parsed.offsets.size() == problem.buffers.size());
  std::vector<int64_t> offsets;
  for (const auto& o : parsed.offsets) offsets.push_back(o.value_or(0));

  const int64_t bound = gpumem::plan::lower_bound(problem);
  const auto violation = gpumem::plan::validate(problem, offsets);
  if (!violation) check(gpumem::plan::arena_size(problem, offsets) >= bound);

  // The same plan with its offsets pinned: still the same verdict.
  Problem pinned = problem;
  for (size_t i = 0; i < offsets.size(); ++i) pinned.buffers[i].fixed_offset = offsets[i];
  check(gpumem::plan::validate(pinned, offsets).has_value() == violation.has_value());

  // Small problems: against the O(n^2) check (parsed offsets are aligned and
  // non-negative, so only overlaps can be wrong).
  if (problem.buffers.size() <= 64) {
    bool any = false;
    for (size_t i = 0; i < offsets.size() && !any; ++i) {
      for (size_t j = i + 1; j < offsets.size() && !any; ++j) {
        any = collide(problem.buffers[i], offsets[i], problem.buffers[j], offsets[j]);
      }
    }
    check(any == violation.has_value());
    if (violation) {
      check(violation->kind == gpumem::plan::Violation::Kind::Overlap);
      const auto a = static_cast<size_t>(violation->first), b = static_cast<size_t>(violation->second);
      check(a < b && b < offsets.size() && collide(problem.buffers[a], offsets[a], problem.buffers[b], offsets[b]));
    }
  }

  // Round trip: what was accepted is written, and read back the same.
  const std::string written = gpumem::plan::write_csv(problem, offsets);
  const gpumem::plan::CsvProblem again = gpumem::plan::parse_csv(written, "roundtrip.csv");
  check(same(problem, again.problem) && again.has_offsets && again.offsets.size() == offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) check(again.offsets[i] == offsets[i]);
  return 0;
}

// Sanitizer reports with a stack, and every UB report is fatal.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
