#include "cli/cli_common.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <type_traits>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "common/json_text.h"
#include "common/units.h"
#include "report/results_view.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

// One setting of kSettings as a flag. Its value is checked as the flag is applied, so that the
// error names the flag as given ("--min-samples 0: ..."), not only the config key.
template <typename Setting>
void add_setting_flag(CLI::App& cmd, SweepFlags& f, const Setting& s) {
  using Cli = typename Setting::Cli;
  using Value = typename Setting::Value;
  auto value = std::make_shared<Cli>();
  CLI::Option* option = nullptr;
  if constexpr (std::is_same_v<Cli, bool>) {
    option = cmd.add_flag(std::string(s.flag), *value, std::string(s.help));
  } else {
    option = cmd.add_option(std::string(s.flag), *value, std::string(s.help));
  }
  f.bound.push_back(
      {std::string(s.flag), /*workload=*/false, option, [value, &s, option](SweepConfig& c) {
         const Value v = [&]() -> Value {
           if constexpr (std::is_same_v<Value, Cli>) {
             return s.from_cli ? s.from_cli(*value) : *value;
           } else {
             return s.from_cli(*value);
           }
         }();
         if (s.check) {
           if (const std::string why = s.check(v); !why.empty()) {
             throw InputError(
                 fmt::format("{} {}: {}", s.flag, fmt::join(option->results(), " "), why));
           }
         }
         s.set(c, v);
       }});
}

}  // namespace

void add_sweep_flags(CLI::App& cmd, SweepFlags& f, bool measure) {
  cmd.add_option("--config", f.config,
                 "Sweep config JSON (configs/sweeps/*.json); axis flags given here override it");
  // Each flag's value is held by its closure (CLI11 writes it, apply() reads it); `axis` and `s`
  // are entries of the static tables.
  for_each_axis([&](const auto& axis) {
    auto text = std::make_shared<std::string>();
    f.bound.push_back(
        {std::string(axis.flag), kShapesWorkload<decltype(axis)>,
         cmd.add_option(std::string(axis.flag), *text, std::string(axis.help)),
         [text, &axis](SweepConfig& c) { c.*axis.values = axis.parse_flag(*text, axis.flag); }});
  });
  cmd.add_option("--device", f.device, "CUDA device index (cuda backend)");
  for_each_setting([&](const auto& s) {
    if (!s.group.empty() && !measure) return;
    add_setting_flag(cmd, f, s);
  });
}

void add_measure_flags(CLI::App& cmd, SweepFlags& f) {
  for_each_setting([&](const auto& s) {
    if (s.group == "measure") add_setting_flag(cmd, f, s);
  });
}

void apply_given_flags(const SweepFlags& f, SweepConfig& c) {
  for (const auto& b : f.bound) {
    if (b.option->count() > 0) b.apply(c);
  }
}

bool flag_given(const SweepFlags& f, std::string_view name) {
  for (const auto& b : f.bound) {
    if (b.flag == name) return b.option->count() > 0;
  }
  return false;
}

bool workload_axis_given(const SweepFlags& f) {
  for (const auto& b : f.bound) {
    if (b.workload && b.option->count() > 0) return true;
  }
  return false;
}

SweepConfig resolve_sweep_config(const SweepFlags& f) {
  SweepConfig cfg;
  if (!f.config.empty()) {
    std::ifstream in(f.config);
    if (!in) throw InputError(f.config + ": cannot open the sweep config (--config)");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // The reader's own parse: the same depth cap, number checks and comments as load_sweep_config.
    cfg = sweep_config_from_json(parse_json_text(text, f.config, /*ignore_comments=*/true),
                                 f.config, cfg);
  }
  for (const auto& b : f.bound) {
    if (b.option->count() > 0) b.apply(cfg);
  }
  return cfg;
}

void note_if_partial(const Report& r, const std::string& path, std::string_view consequence) {
  const std::string note = partial_note(r);
  if (!note.empty())
    std::cerr << fmt::format("note: {} is partial: {}; {}\n", path, note, consequence);
}

OutputFormat parse_format(std::string_view s) { return parse_output_format(s); }

CLI::Option* add_out_option(CLI::App& cmd, std::string& out, std::string_view what) {
  return cmd.add_option("--out", out,
                        fmt::format("The JSON document: {} (written atomically)", what));
}

CLI::Option* add_format_option(CLI::App& cmd, std::string& format, std::string_view choices) {
  return cmd.add_option("--format", format, fmt::format("What stdout prints: {}", choices))
      ->capture_default_str();
}

void add_renamed_option(CLI::App& cmd, const std::string& old_name, const std::string& new_name,
                        std::string& target) {
  const std::string command = cmd.get_name();
  cmd.add_option_function<std::string>(
         old_name,
         [&target, old_name, new_name, command](const std::string& value) {
           std::cerr << fmt::format(
               "decodebench: note: {} {} is now {} (the old name goes in a "
               "later release)\n",
               command, old_name, new_name);
           target = value;
         })
      ->group("");  // hidden from --help
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// `hidden`: also the old spellings kept for one release (known, but never suggested).
std::vector<std::string> long_options(const CLI::App& cmd, bool hidden) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options()) {
    if (!hidden && o->get_group().empty()) continue;
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

}  // namespace

std::string nearest_option(const CLI::App& cmd, std::string_view word) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& name : long_options(cmd, false)) {
    // A prefix ("--kv" for "--kv-dtype") is as good as a typo of one character.
    const std::size_t d = name.rfind(word, 0) == 0 ? 1 : edit_distance(word, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::string first_unknown_option(const CLI::App& cmd, const std::vector<std::string>& args) {
  const std::vector<std::string> known = long_options(cmd, true);
  for (const std::string& arg : args) {
    if (arg == "--") break;  // what follows is positional
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), name) == known.end()) return name;
  }
  return {};
}

Ceilings load_ceilings(const std::string& file, Backend& backend) {
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot open the ceilings file (--ceilings)");
  DeviceRecord rec;
  try {
    rec = device_record_from_json(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file +
                     ": not a device record written by `decodebench ceilings --out`: " + e.what());
  } catch (const InputError& e) {
    throw InputError(file + ": " + e.what());
  }
  const DeviceInfo here = backend.device_info();
  if (rec.backend != here.backend || rec.name != here.name) {
    throw InputError(
        fmt::format("{}: ceilings were measured on {} '{}', this sweep runs on {} '{}'", file,
                    rec.backend, rec.name, here.backend, here.name));
  }
  return rec.measured;
}

CLI::Option* add_ceilings_option(CLI::App& cmd, std::string& file) {
  return cmd.add_option("--ceilings", file,
                        "Reuse the ceilings `decodebench ceilings --out FILE` measured on this "
                        "device instead of measuring them again");
}

void print_progress(int done, int kept, int total, double elapsed_s, const PointResult& r,
                    const nlohmann::json& config, double max_noise) {
  const int ran = done - kept;
  const double eta = ran > 0 ? elapsed_s / ran * (total - done) : 0;
  std::string result = status_text(r, config, max_noise);
  if (r.status == PointStatus::ok) {
    result += fmt::format(" {}", format_seconds(r.time_s.median));
  } else if (!r.reason.empty()) {
    result += ": " + r.reason;
  }
  std::cerr << fmt::format("[{}/{}] elapsed {:.1f} s, ETA {:.0f} s \u2014 {}: {}\n", done, total,
                           elapsed_s, eta, point_label(r), result);
}

std::atomic<bool>& interrupted_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<int>& interrupt_signal() {
  static std::atomic<int> sig{0};
  return sig;
}

int interrupted_exit_code() {
  const int sig = interrupt_signal().load();
  return 128 + (sig != 0 ? sig : SIGINT);
}

namespace {
void on_stop_signal(int sig) {
  int none = 0;
  interrupt_signal().compare_exchange_strong(none, sig);
  if (interrupted_flag().exchange(true)) {
    // The second signal: the user means it. The default action, now.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}
}  // namespace

void install_stop_handlers() {
  static_assert(std::atomic<bool>::is_always_lock_free, "signal handler needs a lock-free flag");
  static_assert(std::atomic<int>::is_always_lock_free, "signal handler needs a lock-free int");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write or sleep in progress goes on; the flag is polled
  for (int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
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

void write_report(const std::string& out, const Report& r) {
  if (out.empty()) return;
  const std::filesystem::path path(out);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      throw RuntimeFailure("cannot create " + path.parent_path().string() + ": " + ec.message());
  }
  write_report_atomic(path, r);
}

void check_can_create_in(const std::filesystem::path& dir, std::string_view flag,
                         const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw InputError(fmt::format("{} {}: cannot create the directory {} ({})", flag, path,
                                 dir.string(), ec.message()));
  }
  std::string probe = (dir / ".decodebench-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw InputError(fmt::format("{} {}: cannot create a file in {} ({})", flag, path, dir.string(),
                                 std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_output_file(const std::string& path, std::string_view flag) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) {
    throw InputError(fmt::format("{} {}: is a directory; give the report's file name", flag, path));
  }
  check_can_create_in(p.has_parent_path() ? p.parent_path() : ".", flag, path);
}

void check_output_dir(const std::string& path, std::string_view flag) {
  if (path.empty()) return;
  if (std::filesystem::exists(path) && !std::filesystem::is_directory(path)) {
    throw InputError(fmt::format("{} {}: exists and is not a directory", flag, path));
  }
  check_can_create_in(path, flag, path);
}

int results_exit_code(const Report& report) {
  bool wrong = false, error = false;
  for (const PointResult& r : report.results) {
    wrong |= r.status == PointStatus::wrong;
    error |= r.status == PointStatus::error;
  }
  if (wrong) return kExitWrongOrRegression;
  if (error || report.completion.state == Completion::State::device_failure) {
    if (!report.completion.reason.empty())
      std::cerr << "failure: " << report.completion.reason << '\n';
    return kExitRuntimeFailure;
  }
  return kExitOk;
}

TierOptions parse_tier_options(const std::string& host_capacity, const std::string& link,
                               const std::string& reload, double link_overhead_s) {
  TierOptions t;
  for (const std::string& item : split_list(host_capacity, "--host-capacity")) {
    const double v = parse_double_list(item, "--host-capacity").front();
    if (!(v >= 0) || !(v <= kMaxHostCapacityTokens)) {
      throw InputError(
          fmt::format("--host-capacity: '{}' is not a capacity; valid: a number of tokens >= 0 and "
                      "<= {:g} (e.g. "
                      "1e7; 0: no host tier)",
                      item, kMaxHostCapacityTokens));
    }
    t.host_capacities.push_back(v);
  }
  for (const std::string& key :
       link.empty() ? std::vector<std::string>{} : split_list(link, "--link")) {
    try {
      t.links.push_back(link_by_key(key));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--link: {}", e.what()));
    }
  }
  for (const std::string& r : split_list(reload, "--reload-policy")) {
    try {
      t.reloads.push_back(parse_reload_policy(r));
    } catch (const InputError& e) {
      throw InputError(fmt::format("--reload-policy: {}", e.what()));
    }
  }
  if (!(link_overhead_s >= 0) || std::isinf(link_overhead_s)) {
    throw InputError(fmt::format("--link-overhead: {} s; valid: a finite number of seconds >= 0",
                                 link_overhead_s));
  }
  t.link_overhead_s = link_overhead_s;
  const bool any_host = std::any_of(t.host_capacities.begin(), t.host_capacities.end(),
                                    [](double h) { return h > 0; });
  const bool only_always = std::all_of(t.reloads.begin(), t.reloads.end(),
                                       [](ReloadPolicy r) { return r == ReloadPolicy::always; });
  if ((!t.links.empty() || !only_always) && !any_host) {
    throw InputError(
        "--link and --reload-policy price the host tier's hits; add --host-capacity (e.g. 1e7)");
  }
  if (t.links.empty() && !only_always) {
    throw InputError("--reload-policy needs a --link to price a reload against a recompute");
  }
  return t;
}

}  // namespace decodebench::cli
