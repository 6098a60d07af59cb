// MiniMalloc's CSV format: reading (header forms, line endings, column order)
// and writing, round trips, and one precise one-line error per kind of bad
// input, with the line it is on.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpumem/common/error.h"
#include "gpumem/plan/csv.h"

namespace gpumem::plan {
namespace {

// MiniMalloc's README example (benchmarks/examples/input.12.csv).
constexpr const char* kExample =
    "id,lower,upper,size\n"
    "b1,0,3,4\n"
    "b2,3,9,4\n"
    "b3,0,9,4\n"
    "b4,9,21,4\n"
    "b5,0,21,4\n";

// The error message for parsing `text` as "plan.csv", or "" when it parsed.
std::string error_for(const std::string& text) {
  try {
    parse_csv(text, "plan.csv");
    return "";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    EXPECT_EQ(what.rfind("plan.csv", 0), 0u) << "does not name the file: " << what;
    return what;
  }
}

// A file of the required columns: the header, then `rows`.
std::string with_header(const std::string& rows) { return "id,lower,upper,size\n" + rows; }

void expect_buffer(const Buffer& b, const std::string& id, int64_t lower, int64_t upper, int64_t size,
                   int64_t alignment = 1) {
  EXPECT_EQ(b.id, id);
  EXPECT_EQ(b.lower, lower) << id;
  EXPECT_EQ(b.upper, upper) << id;
  EXPECT_EQ(b.size, size) << id;
  EXPECT_EQ(b.alignment, alignment) << id;
  EXPECT_FALSE(b.fixed_offset) << id << ": parse_csv never fixes offsets; the caller decides";
}

void expect_same_problem(const Problem& a, const Problem& b) {
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer& x = a.buffers[i];
    expect_buffer(b.buffers[i], x.id, x.lower, x.upper, x.size, x.alignment);
  }
}

TEST(PlanCsv, ReadsMiniMallocsExample) {
  const CsvProblem p = parse_csv(kExample, "input.12.csv");
  ASSERT_EQ(p.problem.buffers.size(), 5u);
  expect_buffer(p.problem.buffers[0], "b1", 0, 3, 4);
  expect_buffer(p.problem.buffers[1], "b2", 3, 9, 4);
  expect_buffer(p.problem.buffers[2], "b3", 0, 9, 4);
  expect_buffer(p.problem.buffers[3], "b4", 9, 21, 4);
  expect_buffer(p.problem.buffers[4], "b5", 0, 21, 4);
  EXPECT_FALSE(p.has_offsets);
  ASSERT_EQ(p.offsets.size(), 5u);  // always parallel to the buffers
  for (const auto& o : p.offsets) EXPECT_FALSE(o);
}

TEST(PlanCsv, WritesTheHeaderAndOneRowPerBuffer) {
  const CsvProblem p = parse_csv(kExample, "input.12.csv");
  EXPECT_EQ(write_csv(p.problem, {0, 0, 4, 0, 8}),
            "id,lower,upper,size,offset\n"
            "b1,0,3,4,0\n"
            "b2,3,9,4,0\n"
            "b3,0,9,4,4\n"
            "b4,9,21,4,0\n"
            "b5,0,21,4,8\n");
  EXPECT_EQ(write_csv(Problem{}, {}), "id,lower,upper,size,offset\n");
}

TEST(PlanCsv, WritesAlignmentOnlyWhenSomeBufferHasOne) {
  Problem p;
  p.buffers.push_back(Buffer{"a", 0, 5, 10, 1, std::nullopt});
  p.buffers.push_back(Buffer{"b", 2, 7, 3, 8, std::nullopt});
  EXPECT_EQ(write_csv(p, {0, 16}),
            "id,lower,upper,size,alignment,offset\n"
            "a,0,5,10,1,0\n"
            "b,2,7,3,8,16\n");
  p.buffers[1].alignment = 1;
  EXPECT_EQ(write_csv(p, {0, 16}), "id,lower,upper,size,offset\na,0,5,10,0\nb,2,7,3,16\n");
}

TEST(PlanCsv, WithoutAPlanTheOffsetColumnCarriesFixedOffsets) {
  Problem p;
  p.buffers.push_back(Buffer{"free", 0, 5, 10, 1, std::nullopt});
  p.buffers.push_back(Buffer{"pinned", 2, 7, 3, 1, 64});
  const std::string text = write_csv(p, {});
  EXPECT_EQ(text, "id,lower,upper,size,offset\nfree,0,5,10,\npinned,2,7,3,64\n");
  const CsvProblem back = parse_csv(text, "fixed.csv");
  EXPECT_TRUE(back.has_offsets);
  ASSERT_EQ(back.offsets.size(), 2u);
  EXPECT_FALSE(back.offsets[0]);  // an empty cell: no offset
  EXPECT_EQ(back.offsets[1], 64);
}

TEST(PlanCsv, RoundTripsProblemsAndPlans) {
  Problem p;
  p.buffers.push_back(Buffer{"conv1/out", 0, 1, 1, 1, std::nullopt});
  p.buffers.push_back(Buffer{"x y", 3, int64_t{1} << 62, int64_t{1} << 50, 3, std::nullopt});
  p.buffers.push_back(Buffer{"'q\"", 7, 8, 12345, 1, std::nullopt});
  p.buffers.push_back(Buffer{"0", 0, 99, 7, 1024, std::nullopt});
  const std::vector<int64_t> offsets = {5, 3, 0, int64_t{1} << 40};
  const CsvProblem back = parse_csv(write_csv(p, offsets), "rt.csv");
  expect_same_problem(p, back.problem);
  EXPECT_TRUE(back.has_offsets);
  ASSERT_EQ(back.offsets.size(), offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) EXPECT_EQ(back.offsets[i], offsets[i]);
  // And written again, byte for byte the same.
  std::vector<int64_t> again;
  for (const auto& o : back.offsets) again.push_back(*o);
  EXPECT_EQ(write_csv(back.problem, again), write_csv(p, offsets));
}

TEST(PlanCsv, RefusesToWriteIdsTheFormatCannotHold) {
  for (const std::string bad : {"a,b", "a\nb", "", " lead", "trail\t"}) {
    Problem p;
    p.buffers.push_back(Buffer{bad, 0, 1, 1, 1, std::nullopt});
    EXPECT_THROW(write_csv(p, {0}), InputError) << bad;
  }
  Problem p;
  p.buffers.push_back(Buffer{"a", 0, 1, 1, 1, std::nullopt});
  EXPECT_THROW(write_csv(p, {0, 1}), std::invalid_argument);
}

TEST(PlanCsv, LegacyHeaderHasAnInclusiveEnd) {
  const CsvProblem p = parse_csv("buffer,start,end,size\nx,0,2,4\ny,3,3,8\n", "legacy.csv");
  ASSERT_EQ(p.problem.buffers.size(), 2u);
  expect_buffer(p.problem.buffers[0], "x", 0, 3, 4);
  expect_buffer(p.problem.buffers[1], "y", 3, 4, 8);  // live at time 3 only
  EXPECT_EQ(error_for("buffer,start,end,size\nx,0,2,4\ny,5,4,8\n"),
            "plan.csv:3: end (4) must not be less than start (5); the end is inclusive");
  // Written back in today's form, half-open.
  EXPECT_EQ(write_csv(p.problem, {0, 4}), "id,lower,upper,size,offset\nx,0,3,4,0\ny,3,4,8,4\n");
}

TEST(PlanCsv, CrlfBlankLinesAndAMissingFinalNewlineReadTheSame) {
  const CsvProblem lf = parse_csv(kExample, "lf.csv");
  const std::string variants[] = {
      "id,lower,upper,size\r\nb1,0,3,4\r\nb2,3,9,4\r\nb3,0,9,4\r\nb4,9,21,4\r\nb5,0,21,4\r\n",
      "id,lower,upper,size\r\nb1,0,3,4\r\nb2,3,9,4\r\nb3,0,9,4\r\nb4,9,21,4\r\nb5,0,21,4",
      "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4",
      "\n\r\nid,lower,upper,size\n\nb1,0,3,4\n  \nb2,3,9,4\nb3,0,9,4\n\t\nb4,9,21,4\nb5,0,21,4\n\n\n",
      "\xEF\xBB\xBFid,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n",  // UTF-8 BOM
  };
  for (const auto& text : variants) {
    SCOPED_TRACE(text);
    expect_same_problem(lf.problem, parse_csv(text, "variant.csv").problem);
  }
  // Line numbers count every line, blank ones included.
  EXPECT_EQ(error_for("\r\nid,lower,upper,size\r\n\r\nb1,0,3,4\r\nb2,9,3,4\r\n"),
            "plan.csv:5: upper (3) must be greater than lower (9)");
}

TEST(PlanCsv, ColumnsComeInAnyOrderWithOptionalOnesIgnoredOrRead) {
  const CsvProblem p = parse_csv(
      "size,gaps,upper,offset,hint,id,alignment,lower\n"
      "4,1-2 2-3@0:2,3,8,7,b1,4,0\n"
      "16, , 9 , ,-1, b2 ,1,3\n",
      "any.csv");
  ASSERT_EQ(p.problem.buffers.size(), 2u);
  expect_buffer(p.problem.buffers[0], "b1", 0, 3, 4, 4);
  expect_buffer(p.problem.buffers[1], "b2", 3, 9, 16, 1);  // spaces and tabs around cells are trimmed
  EXPECT_EQ(p.problem.buffers[0].gaps, (std::vector<Gap>{{1, 2, std::nullopt}, {2, 3, Window{0, 2}}}));
  EXPECT_TRUE(p.problem.buffers[1].gaps.empty());
  EXPECT_TRUE(p.has_offsets);
  EXPECT_EQ(p.offsets[0], 8);
  EXPECT_FALSE(p.offsets[1]);
}

TEST(PlanCsv, HeaderOnlyIsZeroBuffersButAnEmptyFileIsAnError) {
  const CsvProblem p = parse_csv("id,lower,upper,size,offset\n", "none.csv");
  EXPECT_TRUE(p.problem.buffers.empty());
  EXPECT_TRUE(p.offsets.empty());
  EXPECT_TRUE(p.has_offsets);
  EXPECT_TRUE(parse_csv("id,lower,upper,size", "none.csv").problem.buffers.empty());
  const std::string empty = "plan.csv: empty file: no header line (expected id,lower,upper,size)";
  EXPECT_EQ(error_for(""), empty);
  EXPECT_EQ(error_for("\n\r\n \n"), empty);
  EXPECT_EQ(error_for("\xEF\xBB\xBF"), empty);
}

TEST(PlanCsv, BadHeaders) {
  EXPECT_EQ(error_for("id,lower,upper,size,colour\n"),
            "plan.csv:1: unknown column 'colour' (known: id, lower, upper, size, alignment, offset, hint, gaps; "
            "legacy: buffer, start, end)");
  EXPECT_EQ(error_for("\n\nid,lower,,upper,size\n").substr(0, 32), "plan.csv:3: unknown column '' (k");
  EXPECT_EQ(error_for("Id,lower,upper,size\n").substr(0, 33), "plan.csv:1: unknown column 'Id' (");
  EXPECT_EQ(error_for("id,lower,upper,size,size\n"), "plan.csv:1: duplicated column 'size'");
  EXPECT_EQ(error_for("id,lower,upper,buffer,size\n"),
            "plan.csv:1: duplicated column: 'id' and 'buffer' are the same column");
  EXPECT_EQ(error_for("buffer,start,end,upper,size\n"),
            "plan.csv:1: duplicated column: 'end' and 'upper' are the same column");
  EXPECT_EQ(error_for("lower,upper,size\nb1,0,3,4\n"), "plan.csv:1: missing required column 'id'");
  EXPECT_EQ(error_for("id,upper,size\n"), "plan.csv:1: missing required column 'lower'");
  EXPECT_EQ(error_for("id,lower,size,offset\n"), "plan.csv:1: missing required column 'upper'");
  EXPECT_EQ(error_for("\r\nid,lower,upper,alignment\r\n"), "plan.csv:2: missing required column 'size'");
  // A control byte in a column name is escaped.
  EXPECT_EQ(error_for("id,lower,upper,si\x01ze\n").substr(0, 41), "plan.csv:1: unknown column 'si\\x01ze' (kn");
}

TEST(PlanCsv, WrongFieldCounts) {
  EXPECT_EQ(error_for(with_header("b1,0,3,4\nb2,0,3\n")), "plan.csv:3: 3 fields, but the header has 4 columns");
  EXPECT_EQ(error_for(with_header("b1,0,3,4,5\n")), "plan.csv:2: 5 fields, but the header has 4 columns");
  EXPECT_EQ(error_for(with_header("b1,0,3,4,\n")), "plan.csv:2: 5 fields, but the header has 4 columns");
  EXPECT_EQ(error_for(with_header("b1\n")), "plan.csv:2: 1 field, but the header has 4 columns");
  // A line of a million commas is counted, not stored.
  EXPECT_EQ(error_for(with_header("b1,0,3,4\n" + std::string(1000000, ','))),
            "plan.csv:3: 1000001 fields, but the header has 4 columns");
}

TEST(PlanCsv, IntegersAreDecimalInt64s) {
  EXPECT_EQ(error_for(with_header("b1,0,3,1e3\n")), "plan.csv:2: size '1e3' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,3,12abc\n")), "plan.csv:2: size '12abc' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,3,\n")), "plan.csv:2: size is empty");
  EXPECT_EQ(error_for(with_header("b1,0,3,  \n")), "plan.csv:2: size is empty");
  EXPECT_EQ(error_for(with_header("b1,+0,3,4\n")), "plan.csv:2: lower '+0' is not an integer");  // no '+'
  EXPECT_EQ(error_for(with_header("b1,0,3,4.0\n")), "plan.csv:2: size '4.0' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,0x10,4\n")), "plan.csv:2: upper '0x10' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,1 0,4\n")), "plan.csv:2: upper '1 0' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,3,-\n")), "plan.csv:2: size '-' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,3,\x7f\n")), "plan.csv:2: size '\\x7f' is not an integer");
  EXPECT_EQ(error_for(with_header("b1,0,99999999999999999999,4\n")),
            "plan.csv:2: upper 99999999999999999999 is over the limit of 2^62");
  EXPECT_EQ(error_for(with_header("b1,-99999999999999999999,3,4\n")),
            "plan.csv:2: lower (-99999999999999999999) must not be negative");
  // Leading zeros and "-0" are plain decimal integers.
  const CsvProblem p = parse_csv(with_header("b1,-0,007,0004\n"), "zeros.csv");
  expect_buffer(p.problem.buffers[0], "b1", 0, 7, 4);
}

TEST(PlanCsv, SizesArePositiveAndAtMost2To50) {
  EXPECT_EQ(error_for(with_header("b1,0,3,4\nb2,0,3,0\n")), "plan.csv:3: size must be positive, not 0");
  EXPECT_EQ(error_for(with_header("b1,0,3,-4\n")), "plan.csv:2: size must be positive, not -4");
  EXPECT_EQ(error_for(with_header("b1,0,3,-99999999999999999999\n")),
            "plan.csv:2: size must be positive, not -99999999999999999999");
  EXPECT_EQ(error_for(with_header("b1,0,3,1125899906842625\n")),
            "plan.csv:2: size 1125899906842625 is over the limit of 2^50 (which keeps offset + size and sums of "
            "sizes within 64 bits)");
  EXPECT_EQ(parse_csv(with_header("b1,0,3,1125899906842624\n"), "max.csv").problem.buffers[0].size,
            int64_t{1} << 50);
}

TEST(PlanCsv, TheSumOfAllSizesIsCappedSoLowerBoundsFit) {
  // 4,096 buffers of 2^50 bytes sum to exactly 2^62: accepted. One more is not.
  std::string rows;
  for (int i = 0; i < 4096; ++i) rows += fmt::format("b{},0,1,1125899906842624\n", i);
  EXPECT_EQ(parse_csv(with_header(rows), "big.csv").problem.buffers.size(), 4096u);
  EXPECT_EQ(error_for(with_header(rows + "last,5,6,1\n")),
            "plan.csv:4098: the sizes of the buffers so far add up to more than 2^62 bytes, the limit that keeps "
            "lower bounds within 64 bits");
}

TEST(PlanCsv, LifetimesAreNonNegativeNonEmptyAndAtMost2To62) {
  EXPECT_EQ(error_for(with_header("b1,0,3,4\nb2,1,3,4\nb3,0,3,4\nb4,0,3,4\nb5,0,3,4\nb6,5,3,4\n")),
            "plan.csv:7: upper (3) must be greater than lower (5)");
  EXPECT_EQ(error_for(with_header("b1,3,3,4\n")), "plan.csv:2: upper (3) must be greater than lower (3)");
  EXPECT_EQ(error_for(with_header("b1,-1,3,4\n")), "plan.csv:2: lower (-1) must not be negative");
  EXPECT_EQ(error_for(with_header("b1,0,-3,4\n")), "plan.csv:2: upper (-3) must not be negative");
  EXPECT_EQ(error_for(with_header("b1,0,4611686018427387905,4\n")),
            "plan.csv:2: upper 4611686018427387905 is over the limit of 2^62");
  EXPECT_EQ(error_for("buffer,start,end,size\nb1,0,4611686018427387904,4\n"),
            "plan.csv:2: end 4611686018427387904 is over the limit of 2^62 - 1");
  const CsvProblem p = parse_csv(with_header("b1,4611686018427387903,4611686018427387904,4\n"), "max.csv");
  expect_buffer(p.problem.buffers[0], "b1", (int64_t{1} << 62) - 1, int64_t{1} << 62, 4);
  const CsvProblem legacy = parse_csv("buffer,start,end,size\nb1,0,4611686018427387903,4\n", "max.csv");
  EXPECT_EQ(legacy.problem.buffers[0].upper, int64_t{1} << 62);
}

TEST(PlanCsv, AlignmentIsAtLeastOneAndNeedNotBeAPowerOfTwo) {
  const std::string header = "id,lower,upper,size,alignment,offset\n";
  const CsvProblem p = parse_csv(header + "b1,0,3,4,3,9\nb2,0,3,4,1,7\nb3,0,3,4,48,\n", "align.csv");
  expect_buffer(p.problem.buffers[0], "b1", 0, 3, 4, 3);
  expect_buffer(p.problem.buffers[2], "b3", 0, 3, 4, 48);
  EXPECT_EQ(p.offsets[0], 9);
  EXPECT_EQ(error_for(header + "b1,0,3,4,0,\n"), "plan.csv:2: alignment must be positive, not 0");
  EXPECT_EQ(error_for(header + "b1,0,3,4,-8,\n"), "plan.csv:2: alignment must be positive, not -8");
  EXPECT_EQ(error_for(header + "b1,0,3,4,,\n"), "plan.csv:2: alignment is empty");
  EXPECT_EQ(error_for(header + "b1,0,3,4,2251799813685248,\n"),
            "plan.csv:2: alignment 2251799813685248 is over the limit of 2^50 (which keeps offset + size and sums "
            "of sizes within 64 bits)");
}

TEST(PlanCsv, OffsetsAreNonNegativeAlignedAndAtMost2To50) {
  const std::string header = "id,lower,upper,size,alignment,offset\n";
  EXPECT_EQ(error_for(header + "b1,0,3,4,4,8\nb2,0,3,4,4,6\n"),
            "plan.csv:3: misaligned offset: 6 is not a multiple of alignment 4");
  EXPECT_EQ(error_for(header + "b1,0,3,4,3,10\n"),
            "plan.csv:2: misaligned offset: 10 is not a multiple of alignment 3");
  EXPECT_EQ(error_for(header + "b1,0,3,4,1,-8\n"), "plan.csv:2: offset (-8) must not be negative");
  EXPECT_EQ(error_for(header + "b1,0,3,4,1,x\n"), "plan.csv:2: offset 'x' is not an integer");
  EXPECT_EQ(error_for(header + "b1,0,3,4,1,1125899906842625\n").substr(0, 65),
            "plan.csv:2: offset 1125899906842625 is over the limit of 2^50 (wh");
  const CsvProblem p = parse_csv("id,lower,upper,size,offset\nb1,0,3,4,1125899906842624\nb2,0,3,4,0\n", "o.csv");
  EXPECT_EQ(p.offsets[0], int64_t{1} << 50);
  EXPECT_EQ(p.offsets[1], 0);
}

TEST(PlanCsv, IdsAreNonEmptyAndUnique) {
  EXPECT_EQ(error_for(with_header("b1,0,3,4\nb2,0,3,4\nb3,0,3,4\nb2,5,6,4\n")),
            "plan.csv:5: duplicated id 'b2', first on line 3");
  EXPECT_EQ(error_for(with_header("b1,0,3,4\n\n\r\nb1,5,6,4\n")), "plan.csv:5: duplicated id 'b1', first on line 2");
  EXPECT_EQ(error_for(with_header("b1,0,3,4\n,0,3,4\n")), "plan.csv:3: id is empty");
  EXPECT_EQ(error_for("buffer,start,end,size\n \t,0,3,4\n"), "plan.csv:2: buffer is empty");
  // Ids are compared after trimming, and shown escaped.
  EXPECT_EQ(error_for(with_header("a\x1b[31m,0,3,4\n a\x1b[31m ,1,3,4\n")),
            "plan.csv:3: duplicated id 'a\\x1b[31m', first on line 2");
}

TEST(PlanCsv, ReadsFilesAndNamesMissingOnes) {
  try {
    read_csv("/nonexistent/plan.csv");
    FAIL() << "read a missing file";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/plan.csv: no such file");
  }
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("gpumem_plan_csv_{}", std::random_device{}());
  std::filesystem::create_directories(dir);
  try {
    read_csv(dir.string());
    ADD_FAILURE() << "read a directory";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": is a directory, not a CSV file");
  }

  const auto good = dir / "input.12.csv";
  std::ofstream(good, std::ios::binary) << kExample;
  const CsvProblem p = read_csv(good.string());
  EXPECT_EQ(p.problem.buffers.size(), 5u);

  const auto bad = dir / "bad.csv";
  std::ofstream(bad, std::ios::binary) << "id,lower,upper,size\nb1,5,3,4\n";
  try {
    read_csv(bad.string());
    ADD_FAILURE() << "read a bad file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), bad.string() + ":2: upper (3) must be greater than lower (5)");
  }

  // Over 1 GiB is refused before reading (a sparse file: no real disk used).
  const auto huge = dir / "huge.csv";
  std::ofstream(huge, std::ios::binary) << "id";
  std::filesystem::resize_file(huge, (uintmax_t{1} << 30) + 1);
  try {
    read_csv(huge.string());
    ADD_FAILURE() << "read a file over 1 GiB";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), huge.string() + ": 1073741825 bytes is over the 1 GiB limit for a CSV file");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpumem::plan
