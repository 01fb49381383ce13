// `decodebench replay`: a request trace served by a modeled continuous-batching scheduler, the
// decode steps that traffic produces sampled, built as real workloads and measured on the
// backend (docs/design.md "Trace replay"). One row per setting (KV pool x policy/TTL x KV dtype)
// and kernel: the cache's trade next to the decode bytes per step and tokens/s.
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "harness/replay.h"
#include "harness/replay_planner.h"
#include "harness/runner.h"
#include "report/replay_table.h"
#include "trace/trace.h"
#include "workload/layer_model.h"

namespace decodebench::cli {
namespace {

struct ReplayOptions {
  std::string config;
  std::string trace;
  std::string trace_format = "auto";
  int trace_block_tokens = 512;
  std::int64_t max_requests = 0;
  std::string backend = "auto";
  int device = 0;
  std::string model = "llama-3.1-8b";
  std::string scope = "auto";
  std::string kernels = "auto";
  std::string kv_dtypes = "bf16";
  std::string weights_dtype = "bf16";
  int block_size = 16;
  std::string kv_pool;  // list of bytes; empty: device memory minus weights
  std::string policies = "lru";
  std::string ttls = "300";
  std::string host_capacity = "0";  // tokens (list); 0: no host tier
  std::string link;                 // configs/devices.json "links" keys (list)
  std::string reload = "always";
  double link_overhead_s = 0;
  std::string prefill_link;  // a "links" key: disaggregated prefill
  double rate_scale = 1;
  int max_batch = 256;
  double prefill_rate = 0;      // tokens/s; 0: modeled from the device's FLOP rate
  double decode_read_rate = 0;  // bytes/s; 0: the modeled device's read rate
  std::string ceilings;         // --ceilings FILE, as sweep takes it
  std::string schedule_device = "this";
  int sample_steps = 8;
  std::int64_t max_steps = 0;
  int validate_max_rows = 64;
  SweepFlags measure;  // the sweep's measurement flags (--min-samples ... --warm)
  std::uint64_t seed = 0;
  std::string format = "table";
  std::string out = "results/replay.json";
  bool quiet = false;
};

// --config FILE: a JSON object whose keys are this command's long option names ('_' or '-'),
// each value a string, a number, a boolean or an array (joined with ','). An option given on
// the command line wins over the file. A relative "trace" is relative to the file's directory
// (configs/sweeps/trace-cpu.json names ../traces/...), so a config runs from any directory and
// from the GPU bundle.
void apply_json_config(CLI::App& cmd, const std::string& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("--config {}: cannot open the file", file));
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = parse_json_text(ss.view(), file);
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", file));
  for (const auto& [key, value] : j.items()) {
    if (key == "_comment") continue;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    CLI::Option* opt = name == "config" ? nullptr : cmd.get_option_no_throw("--" + name);
    if (opt == nullptr) {
      std::string valid;
      for (const CLI::Option* o : cmd.get_options()) {
        const std::string n = o->get_name(false, true);
        if (n.rfind("--", 0) == 0 && n != "--help" && n != "--config")
          valid += (valid.empty() ? "" : ", ") + n.substr(2);
      }
      throw InputError(fmt::format("{}: unknown key '{}'; valid: {}", file, key, valid));
    }
    if (opt->count() > 0) continue;  // the command line wins
    const auto text = [&](const nlohmann::json& v) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
      if (v.is_number()) return v.dump();
      throw InputError(
          fmt::format("{}: key '{}': expected a string, number, boolean or array", file, key));
    };
    std::string joined;
    if (name == "trace" && value.is_string()) {
      const std::filesystem::path trace(value.get<std::string>());
      joined = trace.is_relative()
                   ? (std::filesystem::path(file).parent_path() / trace).lexically_normal().string()
                   : trace.string();
    } else if (value.is_array()) {
      for (const auto& v : value) joined += (joined.empty() ? "" : ",") + text(v);
    } else {
      joined = text(value);
    }
    try {
      opt->add_result(joined);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(fmt::format("{}: key '{}': {}", file, key, e.what()));
    }
  }
}

std::vector<std::string> list_of(const std::string& s, std::string_view flag) {
  std::vector<std::string> items = split_list(s, flag);
  if (items.empty()) throw InputError(fmt::format("{}: empty list", flag));
  return items;
}

// The numeric options that reach the schedule or the measurement only after the ceilings are
// measured: checked first, so that a bad one costs nothing and writes nothing. A rate left out
// (0) is modeled; one given must be a rate.
void check_numbers(const CLI::App& cmd, const ReplayOptions& o) {
  const auto given = [&](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  for (const auto& [flag, value, unit] :
       {std::tuple{"--prefill-rate", o.prefill_rate, "tokens/s"},
        std::tuple{"--decode-read-rate", o.decode_read_rate, "bytes/s"}}) {
    if (given(flag) && !(std::isfinite(value) && value > 0)) {
      throw InputError(fmt::format(
          "{} {}: not a rate; valid: a finite number of {} > 0 (leave it out to model it)", flag,
          value, unit));
    }
  }
  if (o.validate_max_rows < 1) {
    throw InputError(
        fmt::format("--validate-max-rows {}; valid: an integer >= 1", o.validate_max_rows));
  }
  if (o.sample_steps < 1) {
    throw InputError(
        fmt::format("--sample-steps must be >= 1, got {} (the decode steps measured per setting)",
                    o.sample_steps));
  }
}

double positive_number(const std::string& item, std::string_view flag, std::string_view what) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != item.size() || !(x > 0) || !std::isfinite(x)) {
    throw InputError(fmt::format("{}: '{}' is not {}", flag, item, what));
  }
  return x;
}

// The largest --kv-pool in bytes (2^53, 9 PB): its int64 holds it exactly (1e30 did not fit).
constexpr double kMaxKvPoolBytes = 9007199254740992.0;

// The settings of the table: every KV pool x policy (ttl: x every --ttl) x KV dtype x host tier
// (with a link: x every link x reload policy).
std::vector<ReplaySetting> expand_settings(const ReplayOptions& o, std::int64_t default_pool) {
  const TierOptions tiers =
      parse_tier_options(o.host_capacity, o.link, o.reload, o.link_overhead_s);
  std::vector<std::int64_t> pools;
  if (o.kv_pool.empty()) {
    pools.push_back(default_pool);
  } else {
    for (const std::string& p : list_of(o.kv_pool, "--kv-pool")) {
      const double bytes = positive_number(p, "--kv-pool", "a positive number of bytes (e.g. 8e9)");
      if (bytes > kMaxKvPoolBytes) {
        throw InputError(fmt::format("--kv-pool: '{}' bytes; valid: a number of bytes in (0, {:g}]",
                                     p, kMaxKvPoolBytes));
      }
      pools.push_back(static_cast<std::int64_t>(bytes));
    }
  }
  std::vector<double> ttls;
  for (const std::string& t : list_of(o.ttls, "--ttl"))
    ttls.push_back(positive_number(t, "--ttl", "a positive number of seconds"));
  const std::vector<DType> kv = parse_dtype_list(o.kv_dtypes, "--kv-dtype");
  std::vector<ReplaySetting> settings;
  for (std::int64_t pool : pools) {
    for (const std::string& name : list_of(o.policies, "--policy")) {
      const EvictionPolicy policy = parse_policy(name);
      const std::vector<double> per = policy == EvictionPolicy::ttl ? ttls : std::vector<double>{0};
      for (double ttl : per) {
        for (DType d : kv) {
          for (double host : tiers.host_capacities) {
            ReplaySetting base;
            base.kv_pool_bytes = pool;
            base.policy = policy;
            base.ttl_s = ttl;
            base.kv_dtype = d;
            base.host_capacity_tokens = host;
            if (host == 0 || tiers.links.empty()) {
              settings.push_back(base);
              continue;
            }
            for (const LinkDatasheet& l : tiers.links) {
              for (ReloadPolicy r : tiers.reloads) {
                ReplaySetting s = base;
                s.link = l.key;
                s.link_to_device = l.to_device;
                s.link_to_host = l.to_host;
                s.reload = r;
                settings.push_back(s);
              }
            }
          }
        }
      }
    }
  }
  return settings;
}

int run(CLI::App& cmd, ReplayOptions& o) {
  if (!o.config.empty()) apply_json_config(cmd, o.config);
  if (o.trace.empty()) throw InputError("--trace is required (a .jsonl or .csv request trace)");
  check_numbers(cmd, o);
  SweepConfig measured;  // the sweep's measurement defaults, then the flags given
  apply_given_flags(o.measure, measured);
  const OutputFormat format = parse_format(o.format);
  check_output_file(o.out, "--out");
  const Trace trace = load_trace(o.trace, o.trace_format, o.trace_block_tokens, o.max_requests);
  const ModelShape model = load_model(o.model);
  const DType weights = parse_dtype(o.weights_dtype, "--weights-dtype");

  std::unique_ptr<Backend> backend = make_backend(o.backend, o.device);
  std::vector<std::string> kernels = list_of(o.kernels, "--kernel");
  {
    check_kernel_names(kernels, *backend);
    if (std::find(kernels.begin(), kernels.end(), "all") != kernels.end())
      kernels = backend->kernel_names();
  }
  ReplayPlan plan;
  plan.model = model;
  plan.kernels = kernels;
  plan.block_size = o.block_size;
  plan.sample_steps = o.sample_steps;
  plan.q_dtype = default_activation_dtype(weights, DType::bf16);
  plan.measure.measure = measured.measure;
  plan.measure.validate_max_rows = o.validate_max_rows;
  plan.measure.weights_dtype = weights;
  plan.measure.seed = o.seed;
  plan.schedule.rate_scale = o.rate_scale;
  plan.schedule.max_batch = o.max_batch;
  plan.schedule.max_steps = o.max_steps;
  plan.schedule.link_overhead_s = o.link_overhead_s;
  if (!o.prefill_link.empty()) {
    try {
      const LinkDatasheet l = link_by_key(o.prefill_link);
      plan.prefill_link = l.key;
      plan.schedule.prefill_link_to_device = l.to_device;
    } catch (const InputError& e) {
      throw InputError(fmt::format("--prefill-link: {}", e.what()));
    }
  }

  const ReplayScopeChoice scope =
      choose_replay_scope(*backend, model, weights, plan.q_dtype, o.block_size, o.scope);
  plan.scope = scope.scope;
  ReplayDeviceRequest request;
  request.schedule_device = o.schedule_device;
  request.prefill_tokens_per_s = o.prefill_rate;
  request.decode_read_bytes_per_s = o.decode_read_rate;
  request.kv_pool_given = !o.kv_pool.empty();
  if (!o.ceilings.empty()) request.ceilings = load_ceilings(o.ceilings, *backend);
  ReplayDevice modeled = plan_replay_device(*backend, model, weights, request);
  const std::vector<ReplaySetting> settings = expand_settings(o, modeled.default_pool_bytes);
  // Every setting's input checked before anything is measured (the rates are checked with
  // placeholders here: they are measured or modeled below).
  for (const ReplaySetting& s : settings) {
    ScheduleConfig c = schedule_config(plan, s);
    c.prefill_tokens_per_s = 1;
    c.decode_read_bytes_per_s = 1;
    validate(c, trace);
  }

  install_stop_handlers();
  if (!o.quiet && !request.ceilings)
    std::cerr << "measuring the ceilings of " << backend->name() << "...\n";
  set_replay_rates(*backend, modeled, weights, request, plan);
  const DeviceInfo& device = modeled.device;
  if (!o.quiet) {
    std::cerr << fmt::format(
        "replay of {} ({} requests) on {} '{}', scope {}, schedule modeled for {}\n", trace.source,
        trace.requests.size(), device.backend, device.name, scope_name(plan.scope),
        plan.schedule_device);
    if (!scope.note.empty()) std::cerr << "note: " << scope.note << '\n';
  }

  ReplayRunOptions run_options;
  run_options.run.interrupted = &interrupted_flag();
  std::string write_error;
  run_options.run.checkpoint = [&](const Report& partial) {
    if (!write_error.empty()) return;
    try {
      write_report(o.out, partial);
    } catch (const RuntimeFailure& e) {
      write_error = e.what();
      interrupted_flag() = true;
    }
  };
  if (!o.quiet) {
    run_options.progress = [](const std::string& line) { std::cerr << line << '\n'; };
    // Each measured step as the sweep prints a point: its status with the sweep's marks.
    run_options.run.progress = [config = to_json(measured), max_noise = measured.measure.max_noise](
                                   int done, int total, double elapsed, const PointResult& r) {
      print_progress(done, 0, total, elapsed, r, config, max_noise);
    };
  }
  // The report written and printed, the exit code: at the end, or from the watcher when a stop
  // was not heeded (the stuck call is not waited for), as the sweep does.
  const auto finish = [&](const Report& report) {
    if (write_error.empty()) {
      try {
        write_report(o.out, report);
      } catch (const RuntimeFailure& e) {
        write_error = e.what();
      }
    }
    emit(format_replay(report, format), "");
    if (!write_error.empty()) {
      std::cerr << "failure: " << write_error << '\n';
      return kExitRuntimeFailure;
    }
    if (!o.out.empty() && !o.quiet) std::cerr << "report written to " << o.out << '\n';
    if (report.completion.state == Completion::State::interrupted || interrupt_signal() != 0)
      return interrupted_exit_code();
    return results_exit_code(report);
  };
  run_options.run.abandon = [&](const Report& r) {
    int code = kExitRuntimeFailure;
    try {
      code = finish(r);
    } catch (...) {
    }
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  };
  return finish(run_replay(*backend, device, trace, plan, settings, run_options));
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Serve a request trace with a modeled continuous-batching scheduler (one KV pool shared by "
      "running sequences and the prefix cache), sample the decode steps that traffic produces, "
      "build each as a real workload (ragged contexts, the trace's shared prefix blocks), "
      "validate and time it on the backend, and report the cache's trade (hit rate, evictions, "
      "prefill saved) next to decode bytes per step and tokens/s. With --host-capacity a host "
      "tier behind the pool, its hits reloaded over --link or recomputed; with --prefill-link "
      "every prompt's KV sent from a prefill node. Lists multiply: every KV pool x policy (x "
      "TTL) x KV dtype x host tier (x link x reload policy) is one setting, each measured with "
      "every kernel.");
  cmd->add_option("--config", o->config,
                  "JSON file of this command's options (keys: the long option names); the "
                  "command line wins");
  cmd->add_option("--trace", o->trace, "Request trace: Mooncake .jsonl or a .csv (docs)");
  cmd->add_option("--trace-format", o->trace_format, "auto (by extension), mooncake, csv")
      ->capture_default_str();
  cmd->add_option("--trace-block-tokens", o->trace_block_tokens, "Tokens per trace hash id")
      ->capture_default_str();
  cmd->add_option("--max-requests", o->max_requests, "Only the first N requests (0: all)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, "auto, cpu, emu, cuda")->capture_default_str();
  cmd->add_option("--device", o->device, "CUDA device index")->capture_default_str();
  cmd->add_option("--model", o->model, "Model preset or .json")->capture_default_str();
  cmd->add_option("--scope", o->scope,
                  "What each step times: layer (the whole layer step and the LM head), "
                  "attention, or auto (layer where the backend has it)")
      ->capture_default_str();
  cmd->add_option("--kernel", o->kernels, "Kernels (list): auto, all, or names")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtypes, "KV dtypes (list)")->capture_default_str();
  cmd->add_option("--weights-dtype", o->weights_dtype, "Layer scope weights: bf16, f16, fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "The kernels' page size in tokens")
      ->capture_default_str();
  cmd->add_option("--kv-pool", o->kv_pool,
                  "KV pool bytes over all layers (list, e.g. 4e9,8e9); default: the modeled "
                  "device's memory minus the weights");
  cmd->add_option("--policy", o->policies, "Prefix-cache eviction policies (list): lru, lfu, ttl")
      ->capture_default_str();
  cmd->add_option("--ttl", o->ttls, "TTLs in seconds of simulated time (list; policy ttl)")
      ->capture_default_str();
  cmd->add_option("--host-capacity", o->host_capacity,
                  "Host-memory tier behind the KV pool, tokens (list; 0: none): the pool's "
                  "victims are demoted to it, its hits reloaded or recomputed")
      ->capture_default_str();
  cmd->add_option("--link", o->link,
                  "The link the host tier's blocks cross (list of configs/devices.json \"links\" "
                  "keys, e.g. pcie-gen5-x16); without one only bytes are counted")
      ->capture_default_str();
  cmd->add_option("--reload-policy", o->reload,
                  "What a host hit does (list): always (reload), never (recompute), cheaper")
      ->capture_default_str();
  cmd->add_option("--link-overhead", o->link_overhead_s,
                  "Seconds per transfer on every link (no datasheet gives it)")
      ->capture_default_str();
  cmd->add_option("--prefill-link", o->prefill_link,
                  "Disaggregated prefill: every prompt is prefilled on a prefill node and its KV "
                  "sent over this link (a configs/devices.json \"links\" key)");
  cmd->add_option("--rate-scale", o->rate_scale, "Arrival rate multiplier (2: twice as fast)")
      ->capture_default_str();
  cmd->add_option("--max-batch", o->max_batch, "Most sequences running at once")
      ->capture_default_str();
  cmd->add_option("--prefill-rate", o->prefill_rate,
                  "Prefill tokens/s; default modeled from the device's FLOP rate");
  cmd->add_option("--decode-read-rate", o->decode_read_rate,
                  "Bytes/s a modeled decode step reads at; default the device's read rate");
  cmd->add_option("--schedule-device", o->schedule_device,
                  "Whose memory and rates the schedule models: 'this' (the backend's device) or "
                  "a configs/devices.json key (h200, h100-sxm, ...)")
      ->capture_default_str();
  cmd->add_option("--sample-steps", o->sample_steps, "Decode steps measured per setting")
      ->capture_default_str();
  cmd->add_option("--max-steps", o->max_steps, "Stop each schedule after N steps (0: none)")
      ->capture_default_str();
  cmd->add_option("--validate-max-rows", o->validate_max_rows,
                  "Validate every sequence of a step up to this batch, else a subset")
      ->capture_default_str();
  add_measure_flags(*cmd, o->measure);
  add_ceilings_option(*cmd, o->ceilings);
  cmd->add_option("--seed", o->seed, "Seed of the workloads' values")->capture_default_str();
  add_format_option(*cmd, o->format, "table, json, csv or md");
  add_out_option(*cmd, o->out, "the replay report, after every step; '' for none")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
  cmd->callback([cmd, o, &exit_code] { exit_code = run(*cmd, *o); });
}

}  // namespace decodebench::cli
