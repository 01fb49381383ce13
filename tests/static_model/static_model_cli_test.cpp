// `decodebench kernels --static`'s bad input, through the binary: every case is a clear error
// with exit code 2, in a build with or without CUDA.
#include <string>

#include <gtest/gtest.h>

#include "cli/cli_run.h"

namespace decodebench::testing {
namespace {

void expect_bad_input(const std::string& args, const std::string& message) {
  TempDir dir;
  const CliResult r = run_cli(args, dir.path());
  EXPECT_EQ(r.code, 2) << args << ": " << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
}

TEST(StaticModelCli, OptionsWithoutStaticAreRefused) {
  expect_bad_input("kernels --binary x", "--binary belongs to the static model: add --static");
  expect_bad_input("kernels --summary", "--summary belongs to the static model");
}

#if DECODEBENCH_CUDA_BUILD
TEST(StaticModelCli, BadCuobjdumpBinaryOrFormat) {
  expect_bad_input("kernels --static --cuobjdump /nonexistent/cuobjdump",
                   "--cuobjdump /nonexistent/cuobjdump: not an executable file");
  expect_bad_input("kernels --static --binary /nonexistent/lib.a",
                   "--binary /nonexistent/lib.a: no such file");
  expect_bad_input("kernels --static --format csv", "prints table, md or json");
  expect_bad_input("kernels --static --summary", "use it with --format md");
}
#else
TEST(StaticModelCli, NeedsACudaBuild) {
  expect_bad_input("kernels --static", "needs a CUDA build");
}
#endif

}  // namespace
}  // namespace decodebench::testing
