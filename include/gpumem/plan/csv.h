#pragma once
// MiniMalloc's CSV format for buffers and plans.
//
//   id,lower,upper,size[,alignment][,gaps][,offset]
//
// Columns may come in any order; `id`, `lower`, `upper` and `size` are
// required. Lifetimes are half-open. The legacy header `buffer,start,end,size`
// means an inclusive end (read as upper = end + 1, gaps' ends likewise).
// `gaps` holds space-separated time spans `lower-upper` in which the buffer
// holds nothing, or, written `lower-upper@begin:end`, only its bytes
// [begin, end) (see Gap). MiniMalloc's `hint` column is accepted and ignored.
// Errors throw InputError with the file name and line number.
#include <string>
#include <string_view>
#include <vector>

#include "gpumem/plan/problem.h"

namespace gpumem::plan {

struct CsvProblem {
  Problem problem;
  // Offsets read from an `offset` column: a plan to validate (and, where the
  // caller wants it, fixed offsets).
  std::vector<std::optional<int64_t>> offsets;
  bool has_offsets = false;
};

CsvProblem parse_csv(std::string_view text, const std::string& file_name);
// A gzip file (recognised by its magic bytes) is decompressed first, under
// the same 1 GiB limit.
CsvProblem read_csv(const std::string& path);

// `id,lower,upper,size[,alignment][,gaps],offset` (alignment only when some
// buffer has one other than 1, gaps only when some buffer has them), one
// line per buffer, in problem order.
std::string write_csv(const Problem& problem, const std::vector<int64_t>& offsets);

}  // namespace gpumem::plan
