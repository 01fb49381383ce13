// Model presets: configs/models/*.json, where configs/ is found (DECODEBENCH_CONFIGS, beside the
// binary, or the source tree), and a model's JSON read with errors naming the file and key.
#include <algorithm>
#include <cmath>
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

void parse_moe(const nlohmann::json& j, const std::string& file, ModelShape& m) {
  const bool experts = j.contains("num_local_experts");
  if (experts != j.contains("num_experts_per_tok")) {
    throw InputError(fmt::format(
        "{}: a mixture of experts needs both 'num_local_experts' and 'num_experts_per_tok' "
        "(the experts of a layer and how many of them each token runs); got only '{}'",
        file, experts ? "num_local_experts" : "num_experts_per_tok"));
  }
  if (!experts) {
    for (const char* key : {"n_shared_experts", "first_k_dense_replace", "dense_intermediate_size"})
      if (j.contains(key))
        throw InputError(
            fmt::format("{}: key '{}' needs a mixture of experts "
                        "('num_local_experts', 'num_experts_per_tok')",
                        file, key));
    return;
  }
  m.num_experts = positive_int(j, "num_local_experts", file);
  m.experts_per_token = positive_int(j, "num_experts_per_tok", file);
  if (j.contains("n_shared_experts")) m.shared_experts = positive_int(j, "n_shared_experts", file);
  if (j.contains("first_k_dense_replace") != j.contains("dense_intermediate_size")) {
    throw InputError(
        fmt::format("{}: 'first_k_dense_replace' (how many leading layers have a dense MLP) and "
                    "'dense_intermediate_size' (that MLP's width) go together",
                    file));
  }
  if (j.contains("first_k_dense_replace")) {
    m.first_dense_layers = positive_int(j, "first_k_dense_replace", file);
    m.dense_intermediate_size = positive_int(j, "dense_intermediate_size", file);
  }
  if (m.experts_per_token > m.num_experts) {
    throw InputError(
        fmt::format("{}: key 'num_experts_per_tok' ({}) must not exceed num_local_experts ({})",
                    file, m.experts_per_token, m.num_experts));
  }
}

// "sliding_window": W with "window_layers": "all" or {"local": L, "every": N}; "sinks": bool;
// "attn_logit_softcapping": a positive number.
void parse_attention_pattern(const nlohmann::json& j, const std::string& file, ModelShape& m) {
  constexpr const char* kLayersSyntax =
      "\"all\", or {\"local\": L, \"every\": N}: the first L of every N layers from layer 0, "
      "1 <= L <= N";
  const bool window = j.contains("sliding_window");
  if (window != j.contains("window_layers")) {
    throw InputError(
        window ? fmt::format("{}: key 'sliding_window' needs 'window_layers' to say which layers "
                             "are windowed ({})",
                             file, kLayersSyntax)
               : fmt::format("{}: key 'window_layers' needs 'sliding_window' (the window in "
                             "tokens, a positive integer)",
                             file));
  }
  if (window) {
    m.sliding_window = positive_int(j, "sliding_window", file);
    const nlohmann::json& layers = j.at("window_layers");
    const auto bad = [&] {
      return InputError(fmt::format("{}: key 'window_layers' must be {}, got {}", file,
                                    kLayersSyntax, layers.dump()));
    };
    if (layers.is_string()) {
      if (layers.get<std::string>() != "all") throw bad();
      m.window_local = m.window_every = 1;
    } else if (layers.is_object()) {
      for (const auto& [key, value] : layers.items()) {
        if (key != "local" && key != "every") throw bad();
      }
      if (!layers.contains("local") || !layers.contains("every")) throw bad();
      const nlohmann::json& local = layers.at("local");
      const nlohmann::json& every = layers.at("every");
      if (!local.is_number_integer() || !every.is_number_integer()) throw bad();
      const long long l = local.get<long long>(), n = every.get<long long>();
      if (n < 1 || l < 1 || l > n || n > std::numeric_limits<int>::max()) throw bad();
      m.window_local = static_cast<int>(l);
      m.window_every = static_cast<int>(n);
    } else {
      throw bad();
    }
  }
  if (j.contains("sinks")) {
    if (!j.at("sinks").is_boolean()) {
      throw InputError(
          fmt::format("{}: key 'sinks' must be true or false, got {}", file, j.at("sinks").dump()));
    }
    m.sinks = j.at("sinks").get<bool>();
  }
  if (j.contains("attn_logit_softcapping")) {
    const nlohmann::json& v = j.at("attn_logit_softcapping");
    // null is what a config.json writes for "none" (Gemma 3).
    if (!v.is_null()) {
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
        throw InputError(
            fmt::format("{}: key 'attn_logit_softcapping' must be a positive number (the cap c of "
                        "c * tanh(score / c)) or null for none, got {}",
                        file, v.dump()));
      }
      m.attn_logit_softcapping = v.get<double>();
    }
  }
}

// "mla": {"kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim" (positive
// integers), "rope_scaling": {"factor", "mscale_all_dim"} (optional: YaRN)}. The decode shape
// follows from it (num_kv_heads 1, head_dim kv_lora_rank + qk_rope_head_dim), so the file gives
// neither; the softmax scale is DeepSeek's: 1 / sqrt(qk_nope + qk_rope) times mscale squared,
// mscale = 0.1 mscale_all_dim ln(factor) + 1 for a YaRN factor above 1 (modeling_deepseek.py's
// yarn_get_mscale), else 1.
void parse_mla(const nlohmann::json& j, const std::string& file, ModelShape& m) {
  if (!j.contains("mla")) return;
  const nlohmann::json& a = j.at("mla");
  const std::string where = file + ": key 'mla'";
  constexpr const char* kKeys =
      "kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim, q_lora_rank, rope_scaling";
  if (!a.is_object()) throw InputError(fmt::format("{} must be an object with {}", where, kKeys));
  for (const auto& [key, value] : a.items()) {
    if (key != "kv_lora_rank" && key != "qk_rope_head_dim" && key != "qk_nope_head_dim" &&
        key != "v_head_dim" && key != "q_lora_rank" && key != "rope_scaling")
      throw InputError(fmt::format("{}: unknown key '{}'; valid: {}", where, key, kKeys));
  }
  for (const char* key : {"num_kv_heads", "head_dim"}) {
    if (j.contains(key)) {
      throw InputError(
          fmt::format("{}: an MLA model gives no '{}': its decode reads one latent row per token "
                      "(num_kv_heads 1, head_dim kv_lora_rank + qk_rope_head_dim)",
                      file, key));
    }
  }
  m.kv_lora_rank = positive_int(a, "kv_lora_rank", where);
  m.qk_rope_head_dim = positive_int(a, "qk_rope_head_dim", where);
  m.qk_nope_head_dim = positive_int(a, "qk_nope_head_dim", where);
  m.v_head_dim = positive_int(a, "v_head_dim", where);
  if (a.contains("q_lora_rank") && !a.at("q_lora_rank").is_null())
    m.q_lora_rank = positive_int(a, "q_lora_rank", where);
  m.num_kv_heads = 1;
  m.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
  double mscale = 1.0;
  if (a.contains("rope_scaling")) {
    const nlohmann::json& r = a.at("rope_scaling");
    const auto bad = [&] {
      return InputError(fmt::format(
          "{}: 'rope_scaling' must be {{\"factor\": F, \"mscale_all_dim\": M}} with positive "
          "numbers (YaRN's), got {}",
          where, r.dump()));
    };
    if (!r.is_object() || r.size() != 2) throw bad();
    const auto number = [&](const char* key) {
      if (!r.contains(key) || !r.at(key).is_number()) throw bad();
      const double x = r.at(key).get<double>();
      if (!(x > 0) || !std::isfinite(x)) throw bad();
      return x;
    };
    const double factor = number("factor");
    const double mscale_all_dim = number("mscale_all_dim");
    if (factor > 1) mscale = 0.1 * mscale_all_dim * std::log(factor) + 1.0;
  }
  m.attention_scale =
      mscale * mscale / std::sqrt(static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim));
}

}  // namespace

float ModelShape::softmax_scale() const {
  return attention_scale > 0 ? static_cast<float>(attention_scale)
                             : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

ModelShape parse_model_json(std::string_view text, const std::string& file) {
  const nlohmann::json j = parse_json_text(text, file);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", file));
  static const std::set<std::string> kKeys = {"name",
                                              "num_q_heads",
                                              "num_kv_heads",
                                              "head_dim",
                                              "num_layers",
                                              "hidden_size",
                                              "intermediate_size",
                                              "vocab_size",
                                              "num_params",
                                              "tie_word_embeddings",
                                              "num_local_experts",
                                              "num_experts_per_tok",
                                              "n_shared_experts",
                                              "first_k_dense_replace",
                                              "dense_intermediate_size",
                                              "sliding_window",
                                              "window_layers",
                                              "sinks",
                                              "attn_logit_softcapping",
                                              "query_pre_attn_scalar",
                                              "mla",
                                              "source"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.count(key)) {
      throw InputError(fmt::format(
          "{}: unknown key '{}'; valid: name, num_q_heads, num_kv_heads, head_dim, num_layers, "
          "hidden_size, intermediate_size, vocab_size, num_params, tie_word_embeddings, "
          "num_local_experts, num_experts_per_tok, n_shared_experts, first_k_dense_replace, "
          "dense_intermediate_size, sliding_window, window_layers, sinks, "
          "attn_logit_softcapping, query_pre_attn_scalar, mla, source",
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
  if (j.contains("mla")) {
    parse_mla(j, file, m);
  } else {
    m.num_kv_heads = positive_int(j, "num_kv_heads", file);
    m.head_dim = positive_int(j, "head_dim", file);
  }
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
  parse_moe(j, file, m);
  parse_attention_pattern(j, file, m);
  // Gemma's query_pre_attn_scalar: q.k is scaled by its inverse square root instead of head_dim's
  // (Gemma 3 27B: 168 with head_dim 128).
  if (j.contains("query_pre_attn_scalar")) {
    const nlohmann::json& v = j.at("query_pre_attn_scalar");
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
      throw InputError(fmt::format(
          "{}: key 'query_pre_attn_scalar' must be a positive number (the softmax scale is its "
          "inverse square root), got {}",
          file, v.dump()));
    }
    if (m.is_mla()) {
      throw InputError(fmt::format(
          "{}: key 'query_pre_attn_scalar': an MLA model's softmax scale comes from its 'mla' "
          "section (qk_nope_head_dim + qk_rope_head_dim, rope_scaling); give one of the two",
          file));
    }
    m.attention_scale = 1.0 / std::sqrt(v.get<double>());
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

int ModelShape::windowed_layers() const {
  int n = 0;
  for (int l = 0; l < num_layers; ++l) n += layer_window(l) > 0;
  return n;
}

std::vector<ModelShape::LayerClass> ModelShape::layer_classes() const {
  const int windowed = windowed_layers();
  std::vector<LayerClass> classes;
  if (windowed > 0) classes.push_back({sliding_window, windowed});
  if (windowed < num_layers) classes.push_back({0, num_layers - windowed});
  return classes;
}

ModelShape ModelShape::with_window(int window) const {
  ModelShape m = *this;
  m.sliding_window = window > 0 ? window : 0;
  m.window_local = m.window_every = window > 0 ? 1 : 0;
  return m;
}

int ModelShape::uniform_window() const {
  const std::vector<LayerClass> classes = layer_classes();
  if (classes.size() > 1) {
    throw InputError(fmt::format(
        "model {} mixes layers with a {}-token window and full-attention layers; one layer step "
        "computes one kind of layer (ModelShape::with_window)",
        name, sliding_window));
  }
  return classes.empty() ? 0 : classes[0].window;
}

std::string ModelShape::attention_summary() const {
  std::string s;
  if (is_mla())
    s = fmt::format("MLA: latent {} + RoPE {}, {} heads", kv_lora_rank, qk_rope_head_dim,
                    num_q_heads);
  const int windowed = windowed_layers();
  if (windowed > 0) {
    s += s.empty() ? "" : ", ";
    s += windowed == num_layers
             ? fmt::format("window {} on every layer", sliding_window)
             : fmt::format("window {} on {} of {} layers", sliding_window, windowed, num_layers);
  }
  if (sinks) s += s.empty() ? "sinks" : ", sinks";
  if (attn_logit_softcapping > 0) {
    s += fmt::format("{}soft-cap {:g}", s.empty() ? "" : ", ", attn_logit_softcapping);
  }
  return s;
}

}  // namespace decodebench
