// README.md's kernel table is printed by the binary, never typed: the block between its
// kernel-table markers must equal `decodebench kernels --format md` byte for byte. Regenerate it
// with the command the failure message names.
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_run.h"

namespace decodebench::testing {
namespace {

constexpr const char* kBegin = "<!-- kernel-table:begin -->\n";
constexpr const char* kEnd = "<!-- kernel-table:end -->";

// The text between the markers (the begin marker's line excluded), or why there is none.
struct Block {
  bool found = false;
  std::string text;
  std::string why;
};

Block table_block(const std::string& readme) {
  Block b;
  const std::size_t begin = readme.find(kBegin);
  if (begin == std::string::npos) {
    b.why = std::string("no line ") + kBegin;
    return b;
  }
  const std::size_t start = begin + std::string(kBegin).size();
  const std::size_t end = readme.find(kEnd, start);
  if (end == std::string::npos) {
    b.why = std::string("no ") + kEnd + " after the begin marker";
    return b;
  }
  if (readme.find(kBegin, start) != std::string::npos) {
    b.why = "the begin marker appears twice";
    return b;
  }
  b.found = true;
  b.text = readme.substr(start, end - start);
  return b;
}

std::string printed_table(const TempDir& dir) {
  const CliResult r = run_cli("kernels --format md", dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// The comparison itself, so the test of the test can plant a fault in it.
::testing::AssertionResult readme_matches(const std::string& readme, const std::string& printed) {
  const Block b = table_block(readme);
  if (!b.found) return ::testing::AssertionFailure() << "README.md: " << b.why;
  if (b.text == printed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "README.md's kernel table differs from `decodebench kernels --format md`; paste the "
            "command's output between the markers.\nREADME.md has:\n"
         << b.text << "\nthe binary prints:\n"
         << printed;
}

TEST(ReadmeKernelTable, EqualsTheRegistry) {
  if (!DECODEBENCH_ALL_RUNGS_BUILT) {
    GTEST_SKIP() << "this build narrowed DECODEBENCH_KERNELS, so it lists fewer rungs than the "
                    "README; the table is checked in a build of every rung";
  }
  TempDir dir;
  const std::string printed = printed_table(dir);
  ASSERT_FALSE(printed.empty());
  EXPECT_TRUE(readme_matches(read_file(DECODEBENCH_README), printed));
}

// The check must be able to fail: a README whose table differs by one character, one that lost
// a row, one that gained a trailing space, and one without markers are all caught.
TEST(ReadmeKernelTable, PlantedDifferencesAreCaught) {
  TempDir dir;
  const std::string printed = printed_table(dir);
  ASSERT_FALSE(printed.empty());
  const std::string good = std::string("# x\n\n") + kBegin + printed + kEnd + "\n\nmore\n";
  EXPECT_TRUE(readme_matches(good, printed));

  std::string one_char = good;
  const std::size_t pos = one_char.find("| v0");
  ASSERT_NE(pos, std::string::npos) << printed;
  one_char[pos + 3] = '9';  // "| v0" -> "| v9"
  EXPECT_FALSE(readme_matches(one_char, printed));

  std::string lost_row = good;
  const std::size_t last_row = lost_row.rfind("\n| v", lost_row.find(kEnd));
  ASSERT_NE(last_row, std::string::npos);
  lost_row.erase(last_row + 1, lost_row.find('\n', last_row + 1) - last_row);
  EXPECT_FALSE(readme_matches(lost_row, printed));

  const std::size_t end = good.find(kEnd);
  ASSERT_NE(end, std::string::npos);
  const std::string trailing_space = good.substr(0, end - 1) + " " + good.substr(end - 1);
  EXPECT_FALSE(readme_matches(trailing_space, printed));

  EXPECT_FALSE(readme_matches("# x\nno markers here\n", printed));
}

}  // namespace
}  // namespace decodebench::testing
