#include "cli/cli_common.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "report/report.h"

namespace decodebench::cli {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
T parse_number(std::string_view item, std::string_view flag, const char* what) {
  T value{};
  const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
  if (ec != std::errc() || end != item.data() + item.size()) {
    throw InputError(fmt::format("{}: '{}' is not {}", flag, item, what));
  }
  return value;
}

}  // namespace

std::vector<std::string> split_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) {
      throw InputError(fmt::format("{}: empty item in '{}' (give a comma-separated list, e.g. 1,8,64)",
                                   flag, text));
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<int> parse_int_list(std::string_view text, std::string_view flag) {
  std::vector<int> out;
  for (const std::string& item : split_list(text, flag)) {
    out.push_back(parse_number<int>(item, flag, "an integer"));
  }
  return out;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view flag) {
  std::vector<double> out;
  for (const std::string& item : split_list(text, flag)) {
    out.push_back(parse_number<double>(item, flag, "a number"));
  }
  return out;
}

std::vector<ContextSpec> parse_context_list(std::string_view text, std::string_view flag) {
  std::vector<ContextSpec> out;
  for (std::string item : split_list(text, flag)) {
    // "512-4096" reads as the ragged range 512:4096; a leading '-' stays a (bad) negative value.
    const std::size_t dash = item.find('-', 1);
    if (dash != std::string::npos && item.find(':') == std::string::npos) item[dash] = ':';
    try {
      out.push_back(parse_context(item));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", flag, e.what()));
    }
  }
  return out;
}

std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag) {
  std::vector<DType> out;
  for (const std::string& item : split_list(text, flag)) out.push_back(parse_dtype(item, flag));
  return out;
}

void add_sweep_flags(CLI::App& cmd, SweepFlags& f, bool measure) {
  auto axis = [&](const char* name, std::string& target, const char* help) {
    f.given.emplace_back(name, cmd.add_option(name, target, help));
  };
  cmd.add_option("--config", f.config,
                 "Sweep config JSON (configs/sweeps/*.json); axis flags given here override it");
  axis("--model", f.model, "Model presets (configs/models) or model JSON paths, e.g. llama-3.1-8b,mistral-7b");
  axis("--batch", f.batch, "Batch sizes, e.g. 1,8,64");
  axis("--context", f.context,
       "Context lengths: n, nk (n*1024), or ragged lo:hi / lo-hi (uniform per sequence), e.g. 1024,8k,512-4096");
  axis("--hit-rate", f.hit_rate, "Prefix-hit rates h in [0,1], e.g. 0,0.5,0.9");
  axis("--prefix-groups", f.prefix_groups, "Prefix groups G >= 1 (sequences join groups round-robin)");
  axis("--kv-dtype", f.kv_dtype, "KV dtypes: f32 (cpu only), f16, bf16, fp8_e4m3, fp8_e5m2");
  axis("--q-dtype", f.q_dtype, "Q/output dtypes: f16, bf16");
  axis("--block-size", f.block_size, "KV block sizes (tokens per block, powers of two), e.g. 16");
  axis("--kernel", f.kernel, "Kernels: auto (backend's choice per point), all, or names (see `decodebench kernels`)");
  axis("--backend", f.backend, "Backend: auto (cuda when a GPU is present, else cpu), cpu, emu, cuda");
  axis("--shard", f.shard, "Run shard i of n of the points (index % n == i), e.g. 0/4");
  cmd.add_option("--device", f.device, "CUDA device index (cuda backend)");
  f.seed_opt = cmd.add_option("--seed", f.seed, "Seed of the workload generator");
  if (measure) {
    f.min_time_opt = cmd.add_option("--min-time", f.min_time, "Stop rule: at least this many seconds of samples (default 0.5)");
    f.max_noise_opt = cmd.add_option("--max-noise", f.max_noise, "Stop rule: relative noise of the median at most this fraction (default 0.005)");
    f.min_samples_opt = cmd.add_option("--min-samples", f.min_samples, "Stop rule: at least this many samples (default 10)");
    f.timeout_opt = cmd.add_option("--timeout", f.timeout, "Per-point time limit in seconds; stops sampling (default 10)");
    f.warm_opt = cmd.add_flag("--warm", f.warm, "Do not flush the caches before each sample (GPU: L2, CPU: last-level cache)");
  }
  f.validate_rows_opt = cmd.add_option("--validate-rows", f.validate_rows,
                                       "Validate all sequences up to this batch, else this many evenly spaced ones (default 64)");
}

bool flag_given(const SweepFlags& f, std::string_view name) {
  for (const auto& [n, opt] : f.given) {
    if (n == name) return opt->count() > 0;
  }
  return false;
}

SweepConfig resolve_sweep_config(const SweepFlags& f) {
  SweepConfig cfg;
  if (!f.config.empty()) {
    std::ifstream in(f.config);
    if (!in) throw InputError(f.config + ": cannot open the sweep config (--config)");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(f.config + ": not valid JSON: " + e.what());
    }
    cfg = sweep_config_from_json(j, f.config, cfg);
  }
  if (flag_given(f, "--model")) cfg.models = split_list(f.model, "--model");
  if (flag_given(f, "--batch")) cfg.batches = parse_int_list(f.batch, "--batch");
  if (flag_given(f, "--context")) cfg.contexts = parse_context_list(f.context, "--context");
  if (flag_given(f, "--hit-rate")) cfg.hit_rates = parse_double_list(f.hit_rate, "--hit-rate");
  if (flag_given(f, "--prefix-groups")) cfg.prefix_groups = parse_int_list(f.prefix_groups, "--prefix-groups");
  if (flag_given(f, "--kv-dtype")) cfg.kv_dtypes = parse_dtype_list(f.kv_dtype, "--kv-dtype");
  if (flag_given(f, "--q-dtype")) cfg.q_dtypes = parse_dtype_list(f.q_dtype, "--q-dtype");
  if (flag_given(f, "--block-size")) cfg.block_sizes = parse_int_list(f.block_size, "--block-size");
  if (flag_given(f, "--kernel")) cfg.kernels = split_list(f.kernel, "--kernel");
  if (flag_given(f, "--backend")) cfg.backend = f.backend;
  if (flag_given(f, "--shard")) parse_shard(f.shard, cfg.shard_index, cfg.shard_count);
  if (f.seed_opt->count()) cfg.seed = f.seed;
  if (f.min_time_opt && f.min_time_opt->count()) cfg.measure.min_time_s = f.min_time;
  if (f.max_noise_opt && f.max_noise_opt->count()) cfg.measure.max_noise = f.max_noise;
  if (f.min_samples_opt && f.min_samples_opt->count()) cfg.measure.min_samples = f.min_samples;
  if (f.timeout_opt && f.timeout_opt->count()) cfg.measure.timeout_s = f.timeout;
  if (f.warm_opt && f.warm_opt->count()) cfg.measure.warm_l2 = f.warm;
  if (f.validate_rows_opt->count()) cfg.validate_max_rows = f.validate_rows;
  return cfg;
}

void check_kernel_names(const SweepConfig& config, const std::vector<std::string>& available,
                        std::string_view backend) {
  for (const std::string& k : config.kernels) {
    if (k == "auto" || k == "all") continue;
    if (std::find(available.begin(), available.end(), k) == available.end()) {
      std::string valid;
      for (const std::string& n : available) valid += (valid.empty() ? "" : ", ") + n;
      throw InputError(fmt::format("--kernel: unknown kernel '{}' for backend {} (valid: auto, all, {})",
                                   k, backend, valid));
    }
  }
}

OutputFormat parse_format(std::string_view s) { return parse_output_format(s); }

std::atomic<bool>& interrupted_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
void on_sigint(int) {
  if (interrupted_flag().exchange(true)) {
    // Second Ctrl-C: the user means it. Default action, now.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}
}  // namespace

void install_sigint_handler() {
  static_assert(std::atomic<bool>::is_always_lock_free, "signal handler needs a lock-free flag");
  std::signal(SIGINT, on_sigint);
}

std::string point_label(const PointResult& r) {
  std::string kernel = r.kernel.empty() ? r.kernel_requested : r.kernel;
  if (!r.kernel_requested.empty() && r.kernel_requested != r.kernel && !r.kernel.empty()) {
    kernel += "(" + r.kernel_requested + ")";
  }
  return fmt::format("{} {} kv={} q={} P={} b={} ctx={} h={:g} G={}", kernel, r.model,
                     dtype_name(r.kv_dtype), dtype_name(r.q_dtype), r.block_size, r.batch,
                     context_label(r.context), r.hit_rate, r.prefix_groups);
}

std::string point_label(const SweepPoint& p) {
  const WorkloadSpec& s = p.spec;
  return fmt::format("{} {} kv={} q={} P={} b={} ctx={} h={:g} G={}", p.kernel, s.model.name,
                     dtype_name(s.kv_dtype), dtype_name(s.q_dtype), s.block_size, s.batch,
                     context_label(s.context), s.hit_rate, s.prefix_groups);
}

void emit(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::cout << text;
    if (!text.empty() && text.back() != '\n') std::cout << '\n';
    std::cout.flush();
  } else {
    write_text_atomic(path, text);
  }
}

}  // namespace decodebench::cli
