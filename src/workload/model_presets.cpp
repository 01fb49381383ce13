// Model presets: configs/models/*.json, where configs/ is found (DECODEBENCH_CONFIGS, beside the
// binary, or the source tree), and a model's JSON read with errors naming the file and key.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"
#include "common/json_text.h"
#include "workload/workload.h"

#ifndef DECODEBENCH_SOURCE_CONFIGS_DIR
#error "DECODEBENCH_SOURCE_CONFIGS_DIR must be defined by src/workload/CMakeLists.txt"
#endif

namespace decodebench {

namespace {

int positive_int(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key)) {
    throw InputError(fmt::format("{}: missing key '{}'", file, key));
  }
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<long long>() <= 0 ||
      v.get<long long>() > std::numeric_limits<int>::max()) {
    throw InputError(
        fmt::format("{}: key '{}' must be a positive integer, got {}", file, key, v.dump()));
  }
  return v.get<int>();
}

}  // namespace

ModelShape parse_model_json(std::string_view text, const std::string& file) {
  const nlohmann::json j = parse_json_text(text, file);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", file));
  static const std::set<std::string> kKeys = {
      "name",        "num_q_heads",       "num_kv_heads", "head_dim",   "num_layers",
      "hidden_size", "intermediate_size", "vocab_size",   "num_params", "tie_word_embeddings",
      "source"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.count(key)) {
      throw InputError(fmt::format(
          "{}: unknown key '{}'; valid: name, num_q_heads, num_kv_heads, head_dim, num_layers, "
          "hidden_size, intermediate_size, vocab_size, num_params, tie_word_embeddings, source",
          file, key));
    }
  }
  ModelShape m;
  if (!j.contains("name")) throw InputError(fmt::format("{}: missing key 'name'", file));
  if (!j.at("name").is_string() || j.at("name").get<std::string>().empty()) {
    throw InputError(fmt::format("{}: key 'name' must be a non-empty string", file));
  }
  m.name = j.at("name").get<std::string>();
  m.num_q_heads = positive_int(j, "num_q_heads", file);
  m.num_kv_heads = positive_int(j, "num_kv_heads", file);
  m.head_dim = positive_int(j, "head_dim", file);
  m.num_layers = positive_int(j, "num_layers", file);
  // Optional: a model file for attention only may leave the rest of the layer out.
  if (j.contains("hidden_size")) m.hidden_size = positive_int(j, "hidden_size", file);
  if (j.contains("intermediate_size"))
    m.intermediate_size = positive_int(j, "intermediate_size", file);
  if (j.contains("vocab_size")) m.vocab_size = positive_int(j, "vocab_size", file);
  if (j.contains("num_params")) {
    const nlohmann::json& v = j.at("num_params");
    if (!v.is_number_integer() || v.get<long long>() <= 0) {
      throw InputError(
          fmt::format("{}: key 'num_params' must be a positive integer, got {}", file, v.dump()));
    }
    m.num_params = v.get<std::int64_t>();
  }
  if (j.contains("tie_word_embeddings")) {
    if (!j.at("tie_word_embeddings").is_boolean()) {
      throw InputError(fmt::format("{}: key 'tie_word_embeddings' must be true or false, got {}",
                                   file, j.at("tie_word_embeddings").dump()));
    }
    m.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
  }
  if (j.contains("source")) {
    if (!j.at("source").is_string()) {
      throw InputError(fmt::format("{}: key 'source' must be a string", file));
    }
    m.source = j.at("source").get<std::string>();
  }
  if (m.num_q_heads % m.num_kv_heads != 0) {
    throw InputError(fmt::format(
        "{}: key 'num_kv_heads' ({}) must divide num_q_heads ({}) for grouped-query attention",
        file, m.num_kv_heads, m.num_q_heads));
  }
  return m;
}

namespace {

ModelShape parse_model(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("cannot open model config {}", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_json(ss.view(), path.string());
}

}  // namespace

// ---- models -------------------------------------------------------------------------------

std::filesystem::path configs_dir_for(const char* env, const std::filesystem::path& exe,
                                      const std::filesystem::path& compiled_in) {
  if (env && *env) return env;
  // A binary copied to another machine (the GPU bundle: bin/ next to configs/) must not read the
  // build machine's source path, which is absent there or, worse, an older checkout; a binary
  // in the build tree has no ../configs and falls through to the source tree.
  if (!exe.empty()) {
    std::error_code ec;
    const std::filesystem::path beside = exe.parent_path().parent_path() / "configs";
    if (std::filesystem::is_directory(beside, ec)) return beside;
  }
  return compiled_in;
}

std::filesystem::path configs_dir() {
  std::error_code ec;  // no /proc (not Linux): the exe rule is skipped
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return configs_dir_for(std::getenv("DECODEBENCH_CONFIGS"), ec ? std::filesystem::path() : exe,
                         DECODEBENCH_SOURCE_CONFIGS_DIR);
}

std::vector<std::string> model_presets() {
  std::vector<std::string> names;
  const std::filesystem::path dir = configs_dir() / "models";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelShape load_model(const std::string& name_or_path) {
  const std::filesystem::path as_path(name_or_path);
  const bool looks_like_path = as_path.has_parent_path() || as_path.extension() == ".json";
  if (looks_like_path) {
    if (!std::filesystem::is_regular_file(as_path)) {
      throw InputError(fmt::format("model config {} does not exist", name_or_path));
    }
    return parse_model(as_path);
  }
  const std::filesystem::path preset = configs_dir() / "models" / (name_or_path + ".json");
  if (!std::filesystem::is_regular_file(preset)) {
    const std::vector<std::string> presets = model_presets();
    throw InputError(
        fmt::format("unknown model '{}'; presets in {}: {} (or give a path to a "
                    "model .json)",
                    name_or_path, (configs_dir() / "models").string(),
                    presets.empty() ? "none" : fmt::format("{}", fmt::join(presets, ", "))));
  }
  return parse_model(preset);
}

}  // namespace decodebench
