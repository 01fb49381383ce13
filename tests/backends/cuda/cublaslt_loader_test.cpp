// The run-time cuBLASLt loader (src/backends/cuda/cublaslt_loader.h): the search order as a
// pure function, the site directories, the version text, and real loads on this machine: a
// library without the symbols (libm), a missing file, a file that is no library, a fake wheel
// layout, and the toolkit's own cuBLASLt where it is installed (no GPU needed to load it).
#include "backends/cuda/cublaslt_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace decodebench::cuda {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr const char* kToolkitLib = "/usr/local/cuda/lib64/libcublasLt.so.13";

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::temp_directory_path() /
            ("cublaslt_loader_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---- the search order ----------------------------------------------------------------------

TEST(CublasLtSearch, EnvironmentIsTheOnlyCandidate) {
  EXPECT_EQ(cublaslt_search_order("/opt/x/libcublasLt.so.12", "/opt/cuda", {"/sp/site-packages"}),
            std::vector<std::string>{"/opt/x/libcublasLt.so.12"});
}

TEST(CublasLtSearch, ToolkitMajorsNewestFirstThenWheels) {
  const std::vector<std::string> want = {
      "libcublasLt.so.13",
      "/opt/cuda-12.4/lib64/libcublasLt.so.13",
      "/usr/local/cuda/lib64/libcublasLt.so.13",
      "libcublasLt.so.12",
      "/opt/cuda-12.4/lib64/libcublasLt.so.12",
      "/usr/local/cuda/lib64/libcublasLt.so.12",
      "/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
      "/venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.13",
      "/venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
      "/usr/lib/python3/dist-packages/nvidia/cu13/lib/libcublasLt.so.13",
      "/usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublasLt.so.13",
      "/usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublasLt.so.12",
  };
  EXPECT_EQ(cublaslt_search_order(
                "", "/opt/cuda-12.4/",
                {"/venv/lib/python3.11/site-packages", "/usr/lib/python3/dist-packages/"}),
            want);
}

TEST(CublasLtSearch, SystemToolkitOnceAndNoWheelsWithoutSiteDirs) {
  const std::vector<std::string> want = {
      "libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.13", "libcublasLt.so.12",
      "/usr/local/cuda/lib64/libcublasLt.so.12"};
  EXPECT_EQ(cublaslt_search_order("", "/usr/local/cuda", {}), want);
  EXPECT_EQ(cublaslt_search_order("", "", {}), want);
}

TEST(CublasLtSearch, SiteDirsFromPythonFirstEachOnce) {
  const std::vector<std::string> python = {
      "",
      "/root/.pyenv/versions/3.11.7/lib/python311.zip",
      "/root/.pyenv/versions/3.11.7/lib/python3.11",
      "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages",
      "/usr/lib/python3/dist-packages/",
  };
  const std::vector<std::string> globbed = {"/usr/lib/python3/dist-packages",
                                            "/usr/local/lib/python3.11/dist-packages"};
  const std::vector<std::string> want = {
      "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages", "/usr/lib/python3/dist-packages",
      "/usr/local/lib/python3.11/dist-packages"};
  EXPECT_EQ(merge_site_dirs(python, globbed), want);
}

// This machine's own: whatever it finds must be existing site directories.
TEST(CublasLtSearch, PythonSiteDirsExist) {
  for (const std::string& d : python_site_dirs()) {
    EXPECT_TRUE(fs::is_directory(d)) << d;
    EXPECT_TRUE(d.ends_with("site-packages") || d.ends_with("dist-packages")) << d;
  }
}

TEST(CublasLtSearch, VersionText) {
  EXPECT_EQ(cublaslt_version_text(120405), "12.4.5");
  EXPECT_EQ(cublaslt_version_text(130100), "13.1.0");
  EXPECT_EQ(cublaslt_version_major(120405), 12);
  EXPECT_EQ(cublaslt_version_major(130100), 13);
  // cuBLAS 11 encoded major * 1000 + minor * 100 + patch, which is ambiguous past minor 9.
  EXPECT_EQ(cublaslt_version_major(11201), 0);
  EXPECT_TRUE(contains(cublaslt_version_text(11201), "older than 12.0"))
      << cublaslt_version_text(11201);
}

// ---- loads that fail, each with its reason ---------------------------------------------------

TEST(CublasLtLoad, LibraryWithoutTheSymbolsIsRefusedByName) {
  const CublasLtLoad load = load_cublaslt("libm.so.6", nullptr);
  ASSERT_FALSE(load.ok());
  EXPECT_TRUE(contains(load.error, "$DECODEBENCH_CUBLASLT=libm.so.6 does not load")) << load.error;
  EXPECT_TRUE(contains(load.error, "cublasLtMatmul")) << load.error;
  EXPECT_TRUE(contains(load.error, "not a cuBLASLt library")) << load.error;
  EXPECT_TRUE(contains(load.error, "set DECODEBENCH_CUBLASLT")) << load.error;
  EXPECT_EQ(load.api.matmul, nullptr);
}

TEST(CublasLtLoad, MissingFileAndNotALibrary) {
  CublasLtLoad load = load_cublaslt("/nonexistent/libcublasLt.so.13", nullptr);
  ASSERT_FALSE(load.ok());
  EXPECT_TRUE(contains(load.error, "/nonexistent/libcublasLt.so.13 (no such file)")) << load.error;
  ScratchDir dir;
  const fs::path text = dir.path() / "libcublasLt.so.13";
  std::ofstream(text) << "not an ELF file\n";
  load = load_cublaslt(text.c_str(), nullptr);
  ASSERT_FALSE(load.ok());
  EXPECT_TRUE(contains(load.error, text.string())) << load.error;
  EXPECT_FALSE(contains(load.error, "no such file")) << load.error;
}

TEST(CublasLtLoad, EveryCandidateIsListed) {
  const CublasLtLoad load = load_cublaslt_from(
      {"/nonexistent/a/libcublasLt.so.13", "libzz_not_cublas.so.1"}, "no cuBLASLt found");
  ASSERT_FALSE(load.ok());
  EXPECT_TRUE(contains(load.error, "no cuBLASLt found: tried")) << load.error;
  EXPECT_TRUE(contains(load.error, "/nonexistent/a/libcublasLt.so.13 (no such file)"))
      << load.error;
  EXPECT_TRUE(contains(load.error, "libzz_not_cublas.so.1 via the dynamic linker (not found)"))
      << load.error;
  EXPECT_EQ(load_cublaslt_from({}, "none").error, "none: tried nothing");
}

// ---- loads that work (where this machine has the toolkit's cuBLASLt) --------------------------

TEST(CublasLtLoad, ToolkitLibraryLoadsWithItsVersionAndPath) {
  if (!fs::exists(kToolkitLib)) GTEST_SKIP() << kToolkitLib << " not installed here";
  const CublasLtLoad load = load_cublaslt(kToolkitLib, nullptr);
  ASSERT_TRUE(load.ok()) << load.error;
  EXPECT_EQ(load.error, "");
  EXPECT_GE(cublaslt_version_major(load.api.version), kMinCublasLtMajor);
  EXPECT_TRUE(load.api.path.ends_with("libcublasLt.so.13")) << load.api.path;
  const std::string d = load.api.description();
  EXPECT_TRUE(d.starts_with("cuBLASLt " + cublaslt_version_text(load.api.version) + " (")) << d;
  EXPECT_TRUE(contains(d, load.api.path)) << d;
  for (const void* fn : {reinterpret_cast<const void*>(load.api.create),
                         reinterpret_cast<const void*>(load.api.matmul),
                         reinterpret_cast<const void*>(load.api.algo_get_heuristic),
                         reinterpret_cast<const void*>(load.api.matrix_layout_create)}) {
    EXPECT_NE(fn, nullptr);
  }
  EXPECT_TRUE(
      contains(load.api.status_text(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED"))
      << load.api.status_text(CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST(CublasLtLoad, DefaultSearchFindsTheToolkit) {
  if (!fs::exists(kToolkitLib)) GTEST_SKIP() << kToolkitLib << " not installed here";
  const CublasLtLoad load = load_cublaslt(nullptr, nullptr);
  ASSERT_TRUE(load.ok()) << load.error;
  EXPECT_GE(cublaslt_version_major(load.api.version), kMinCublasLtMajor);
}

// A wheel's layout: site-packages/nvidia/cublas/lib/libcublasLt.so.12 (here a link to the
// toolkit's library, standing in for the wheel's file).
TEST(CublasLtLoad, WheelLayoutIsFound) {
  if (!fs::exists(kToolkitLib)) GTEST_SKIP() << kToolkitLib << " not installed here";
  ScratchDir dir;
  const fs::path site = dir.path() / "lib/python3.12/site-packages";
  fs::create_directories(site / "nvidia/cublas/lib");
  fs::create_symlink(kToolkitLib, site / "nvidia/cublas/lib/libcublasLt.so.12");
  const std::vector<std::string> candidates = cublaslt_wheel_candidates({site.string()});
  ASSERT_EQ(candidates.size(), 3u);
  const CublasLtLoad load = load_cublaslt_from(candidates, "wheel");
  ASSERT_TRUE(load.ok()) << load.error;
  EXPECT_GE(cublaslt_version_major(load.api.version), kMinCublasLtMajor);
}

}  // namespace
}  // namespace decodebench::cuda
