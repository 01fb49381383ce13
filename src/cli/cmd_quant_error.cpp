// `decodebench quant-error`: what each KV format costs in accuracy on given K/V (built-in or
// dumped from a real model by scripts/kv_dump.py), next to the bytes a decode step reads in it and
// the tokens/s a sweep measures for it in the same run (docs/design.md "KV formats").
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "quant/quant_error.h"
#include "report/quant_error_view.h"
#include "report/results_view.h"
#include "workload/workload.h"

namespace decodebench::cli {
namespace {

// The default --kv-dtype: f16, fp8_e4m3 and every integer format of kernels/kv_formats.h.
std::string default_formats() {
  std::string s = "f16,fp8_e4m3";
  for (const KvFormatInfo& f : kKvFormats) {
    if (!f.is_float) s += std::string(",") + f.name;
  }
  return s;
}

struct QuantErrorArgs {
  std::string data;
  std::string formats = default_formats();  // --kv-dtype
  std::string model = "llama-3.1-8b";
  std::string batch_text = "16";
  std::string context_text = "4096";
  int batch = 16;      // from batch_text, by the sweep's axis parser
  int context = 4096;  // from context_text
  std::string backend = "auto";
  int tokens = 2048;    // built-in data
  int block_size = 16;  // built-in data
  bool no_speed = false;
  bool per_layer = false;
  std::string format = "table";
  std::string out;       // the JSON document
  SweepFlags measure;    // the sweep's measurement flags (--min-time, --timeout, ...)
  std::string ceilings;  // --ceilings FILE, as sweep takes it
  bool quiet = false;
};

// One value of an axis, read by the sweep's parser (so 1k and 8k work as they do there).
int one_value(std::vector<int> values, std::string_view flag, std::string_view text) {
  if (values.size() != 1) {
    throw InputError(
        fmt::format("{} {}: quant-error measures one point per KV format (got {} "
                    "values); `decodebench sweep` takes lists",
                    flag, text, values.size()));
  }
  return values.front();
}

// The sweep's half: each format's bytes per attention step, and tokens/s where a kernel of the
// backend reads that format.
void measure_speed(const QuantErrorArgs& a, const ModelShape& m, QuantErrorResult& r) {
  std::unique_ptr<Backend> backend = make_backend(a.backend);
  SweepConfig cfg;
  cfg.models = {a.model};
  cfg.batches = {a.batch};
  cfg.contexts = {ContextSpec::fixed(a.context)};
  cfg.block_sizes = {a.block_size};
  cfg.backend = backend->name();
  cfg.kv_dtypes.clear();
  for (const QuantFormatResult& f : r.formats) cfg.kv_dtypes.push_back(f.format);
  apply_given_flags(a.measure, cfg);
  Report report;
  if (!cfg.kv_dtypes.empty()) {
    validate(cfg);
    RunOptions options;
    options.interrupted = &interrupted_flag();
    if (!a.ceilings.empty()) options.ceilings = load_ceilings(a.ceilings, *backend);
    if (!a.quiet) {
      // The sweep's own progress line, its marks judged by this run's config.
      options.progress = [config = to_json(cfg), max_noise = cfg.measure.max_noise](
                             int done, int total, double elapsed, const PointResult& p) {
        print_progress(done, 0, total, elapsed, p, config, max_noise);
      };
    }
    report = run_sweep(*backend, cfg, options);
  }
  const DeviceInfo device = report.devices.empty() ? backend->device_info() : report.devices[0];
  r.backend = backend->name();
  r.device = device.name;
  r.model = m.name;
  r.batch = a.batch;
  r.context = a.context;
  r.num_layers = m.num_layers;
  // The read ceiling is measured once before the points; on a shared machine a point's paired
  // read (measured beside its samples) can be higher, and a bound must not be beaten.
  r.read_ceiling_Bps = device.measured.read;
  for (const PointResult& p : report.results) {
    if (available(p.roofline.paired_read_Bps)) {
      r.read_ceiling_Bps = std::max(r.read_ceiling_Bps, p.roofline.paired_read_Bps);
    }
  }
  const double q_out_bytes = 2.0 * a.batch * m.num_q_heads * m.head_dim * 2;  // f16 q and out
  for (QuantFormatResult& f : r.formats) {
    const double per_token = kv_bytes_per_token_head(f.format, m.head_dim, a.block_size);
    f.bytes_per_step =
        static_cast<double>(a.batch) * a.context * m.num_kv_heads * per_token + q_out_bytes;
    // As the sweep counts tokens/s: every layer's attention step for one token per sequence.
    if (r.read_ceiling_Bps > 0) {
      f.tokens_per_s_roof =
          a.batch * r.read_ceiling_Bps / (f.bytes_per_step * std::max(m.num_layers, 1));
    }
    f.not_measured = "the sweep did not run it";
    for (const PointResult& p : report.results) {
      if (p.kv_dtype != f.format) continue;
      // The results table's status: "ok*~" when the point stopped at the timeout or its noise
      // is above the bound, so a tokens/s that cannot be trusted says so here too.
      f.status = status_text(p, report.config, cfg.measure.max_noise);
      if (p.status == PointStatus::ok) {
        f.tokens_per_s = p.tokens_per_s;
        f.kernel = p.kernel;
        f.not_measured.clear();
      } else {
        f.not_measured = fmt::format("{}: {}", status_name(p.status), p.reason);
      }
    }
  }
}

int run_quant_error(QuantErrorArgs a) {
  std::vector<quant::KvFormat> formats;
  for (const std::string& name : split_list(a.formats, "--kv-dtype")) {
    formats.push_back(quant::parse_format(name, "--kv-dtype"));
  }
  if (formats.empty()) throw InputError("--kv-dtype: empty (valid: " + default_formats() + ")");
  a.batch = one_value(parse_int_list(a.batch_text, "--batch"), "--batch", a.batch_text);
  std::vector<int> contexts;
  for (const ContextSpec& c : parse_context_list(a.context_text, "--context")) {
    if (c.kind != ContextSpec::Kind::fixed) {
      throw InputError(
          fmt::format("--context {}: quant-error takes a fixed length (1024, 8k), "
                      "not a ragged range",
                      a.context_text));
    }
    contexts.push_back(c.lo);
  }
  a.context = one_value(contexts, "--context", a.context_text);
  if (a.batch < 1) throw InputError(fmt::format("--batch: {} must be >= 1", a.batch));
  if (a.context < 1) throw InputError(fmt::format("--context: {} must be >= 1", a.context));
  if (a.tokens < 2) throw InputError(fmt::format("--tokens: {} must be >= 2", a.tokens));
  if (a.block_size < 1 || (a.block_size & (a.block_size - 1)) != 0) {
    throw InputError(fmt::format("--block-size: {} must be a power of two", a.block_size));
  }
  const OutputFormat out_format = parse_format(a.format);
  // The measurement options are checked before the accuracy half runs, and refused where no
  // sweep will read them.
  for (const auto& b : a.measure.bound) {
    if (a.no_speed && b.option->count() > 0) {
      throw InputError(b.flag + ": --no-speed measures nothing (drop one of the two)");
    }
  }
  if (a.no_speed && !a.ceilings.empty()) {
    throw InputError("--ceilings: --no-speed measures nothing (drop one of the two)");
  }
  SweepConfig measured;
  apply_given_flags(a.measure, measured);
  validate(measured);
  const ModelShape model = load_model(a.model);
  if (model.is_mla()) {
    throw InputError(fmt::format(
        "--model {}: an MLA model's latent cache is read in float formats only; quant-error "
        "compares the integer KV formats of per-head K and V (valid: a model without 'mla')",
        a.model));
  }

  std::vector<std::string> skipped;
  const std::vector<quant::AttentionCase> cases =
      quant::is_builtin_data(a.data)
          ? quant::builtin_cases(a.data, model.num_q_heads, model.num_kv_heads, model.head_dim,
                                 a.tokens, a.block_size)
          : quant::load_cases(a.data, &skipped);
  for (const std::string& s : skipped) {
    std::cerr << fmt::format(
        "note: --data {}: skipped {}/ (no meta.json and none of a dump's .npy files: not a "
        "layer)\n",
        a.data, s);
  }
  // Before the sweep measures anything: the document can be written.
  check_output_file(a.out, "--out");
  QuantErrorResult r;
  r.data = a.data;
  r.num_q_heads = cases.front().num_q_heads;
  r.num_kv_heads = static_cast<int>(cases.front().shape.kv_heads);
  r.head_dim = static_cast<int>(cases.front().shape.head_dim);
  r.block_size = static_cast<int>(cases.front().shape.block_size);
  for (const quant::AttentionCase& c : cases) r.layers.push_back(c.name);
  for (quant::KvFormat f : formats) {
    QuantFormatResult fr;
    fr.format = f;
    quant::ErrorSums all;
    for (const quant::AttentionCase& c : cases) {
      const quant::ErrorSums s = quant::measure_format(c, f);
      fr.layers.push_back(quant::measures(s));
      all.add(s);
    }
    fr.overall = quant::measures(all);
    r.formats.push_back(std::move(fr));
  }
  if (!a.no_speed) measure_speed(a, model, r);

  std::string text;
  switch (out_format) {
    case OutputFormat::json: text = quant_error_json(r).dump(2) + "\n"; break;
    case OutputFormat::csv: text = render_csv(quant_error_table(r, a.per_layer)); break;
    case OutputFormat::md:
      text = quant_error_header(r) + "\n" + render_md(quant_error_table(r, a.per_layer)) + "\n" +
             quant_error_footer(r);
      break;
    default:
      text = quant_error_header(r) + render_text(quant_error_table(r, a.per_layer)) +
             quant_error_footer(r);
  }
  emit(text, "");
  if (!a.out.empty()) emit(quant_error_json(r).dump(2) + "\n", a.out);
  return interrupted_flag() ? interrupted_exit_code() : kExitOk;
}

}  // namespace

void add_quant_error_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<QuantErrorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quant-error",
      "What each KV format costs in accuracy (K/V error, attention output error, KL of the "
      "attention weights against the unquantized cache) next to the bytes and tokens/s it buys");
  cmd->add_option("--data", o->data,
                  "gaussian, outliers (keys with outlier channels), or a directory: one `sweep "
                  "--dump` or scripts/kv_dump.py's layer_NN/ directories")
      ->required();
  cmd->add_option("--kv-dtype", o->formats, "KV formats (list)")->capture_default_str();
  add_renamed_option(*cmd, "--formats", "--kv-dtype", o->formats);
  cmd->add_option("--model", o->model, "The sweep's model, and the heads of the built-in data")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch_text, "The sweep's batch (one)")->capture_default_str();
  cmd->add_option("--context", o->context_text, "The sweep's context (one: 4096, 8k)")
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, "The sweep's backend: auto, cpu, cuda, emu")
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "Tokens of the built-in data")->capture_default_str();
  cmd->add_option("--block-size", o->block_size,
                  "Tokens per KV block of the built-in data and the sweep (int4 keys are scaled "
                  "per block); a directory's data keeps its own")
      ->capture_default_str();
  cmd->add_flag("--no-speed", o->no_speed, "Accuracy only: no sweep");
  add_measure_flags(*cmd, o->measure);
  add_ceilings_option(*cmd, o->ceilings);
  cmd->add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
  cmd->add_flag("--per-layer", o->per_layer, "A row per layer under each format's overall row");
  add_format_option(*cmd, o->format, "table, json, csv or md");
  add_out_option(*cmd, o->out, "each format's errors, bytes and tokens/s");
  add_renamed_option(*cmd, "--json", "--out", o->out);
  cmd->callback([o, &exit_code] {
    install_stop_handlers();
    exit_code = run_quant_error(*o);
  });
}

}  // namespace decodebench::cli
