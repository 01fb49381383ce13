// Helpers shared by the host libraries' tests (trace, report, workload, harness, backends):
// temporary files, a tiny model, InputError checks.
#pragma once

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"

namespace decodebench::test {

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "decodebench-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// A small GQA model (Hq 4, Hkv 2, d 64, 3 layers) so reference runs stay quick.
inline std::string tiny_model_json() {
  return R"({"name": "tiny", "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 64,
             "num_layers": 3})";
}

// Expect an InputError whose message contains every one of `parts`.
template <class F>
void expect_input_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// The message of the InputError `f` throws, or "<no InputError>".
inline std::string input_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

}  // namespace decodebench::test
