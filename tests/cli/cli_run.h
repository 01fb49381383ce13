// Runs the decodebench binary as a subprocess and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace decodebench::testing {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scratch directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("decodebench_cli_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// `args` is appended to the binary's path as shell words (tests quote where needed).
inline CliResult run_cli(const std::string& args, const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / "stdout.txt";
  const std::filesystem::path err = scratch / "stderr.txt";
  const std::string cmd = std::string("'") + DECODEBENCH_BIN + "' " + args + " >'" + out.string() +
                          "' 2>'" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// A ceilings file for this machine's CPU device, as `decodebench ceilings --out` writes it, with
// made-up values: a measuring command given it (--ceilings) skips the ~10 s measurement, and its
// report shows exactly these values.
inline std::filesystem::path fake_cpu_ceilings(const TempDir& dir) {
  const CliResult r = run_cli("devices --format json", dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json devices = nlohmann::json::parse(r.out);
  nlohmann::json record;
  for (const nlohmann::json& b : devices.at("backends")) {
    if (b.at("name") == "cpu") record = b.at("device");
  }
  EXPECT_FALSE(record.is_null()) << r.out << r.err;
  record["bandwidth"]["measured"] = {{"read", 1.0e10},
                                     {"copy", 0.9e10},
                                     {"triad", 0.8e10},
                                     {"buffer_bytes", 1 << 30},
                                     {"note", "fake, for tests"}};
  record["flops_measured"] = 1.0e11;
  const std::filesystem::path path = dir / "ceilings.json";
  write_file(path, record.dump());
  return path;
}

}  // namespace decodebench::testing
