// `decodebench check`: validate every kernel of a backend against the CPU reference on a set of
// small, deliberately odd shapes (or on the axes given), plus the backend's ceiling kernels.
// No timing. One line per case; exit 1 if anything is wrong.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "backends/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "harness/runner.h"
#include "results/report.h"

namespace decodebench::cli {
namespace {

struct CheckOptions {
  SweepFlags flags;
  std::string out;
  bool verbose = false;
};

// MLA's absorbed shape under `num_q_heads` heads: DeepSeek's latent (512 + 64), its scale from
// qk_head_dim 192 (the model's, not the 576 of the row).
ModelShape check_mla_model(int num_q_heads) {
  ModelShape m;
  m.name = fmt::format("check-mla-h{}", num_q_heads);
  m.num_q_heads = num_q_heads;
  m.num_kv_heads = 1;
  m.head_dim = 576;
  m.num_layers = 1;
  m.kv_lora_rank = 512;
  m.qk_rope_head_dim = 64;
  m.qk_nope_head_dim = 128;
  m.v_head_dim = 128;
  return m;
}

// A synthetic attention shape for the default cases (not a real model: only the shape matters).
ModelShape check_model(int num_q_heads, int num_kv_heads, int head_dim) {
  ModelShape m;
  m.name = fmt::format("check-h{}-kv{}-d{}", num_q_heads, num_kv_heads, head_dim);
  m.num_q_heads = num_q_heads;
  m.num_kv_heads = num_kv_heads;
  m.head_dim = head_dim;
  m.num_layers = 1;
  return m;
}

// The default cases, odd on purpose (STYLE.md 16): a partial last block, a single token, MHA
// and GQA 4/8, every block size the kernels take, ragged lengths, hit rates 0/0.5/1 with two
// prefix groups, bf16 q, a long single sequence on few KV heads so split_kv really splits, and
// the attention variants (a window starting mid-block with sinks and a soft-cap; sinks and a
// soft-cap over shared prefixes), which the rungs that do not take them skip; and MLA's latent
// (16 heads in each float format over shared prefixes, 128 heads long enough to split), which
// only the kernels that take MLA run. Every (kernel, kv
// dtype, head_dim) gets the main case; the extra shapes run at the first dtype/head_dim only,
// keeping `check --backend emu` to a few minutes.
std::vector<SweepPoint> default_points(const std::vector<std::string>& kernels,
                                       std::uint64_t seed) {
  struct Shape {
    int hq, hkv, batch;
    ContextSpec context;
    int block_size;
    double hit_rate;
    int groups;
    DType q_dtype;
    int window = 0;
    bool sinks = false;
    double softcap = 0;
    bool mla = false;  // hq heads over MLA's latent (hkv 1)
  };
  const Shape main_case{8, 2, 3, ContextSpec::fixed(17), 16, 0.5, 1, DType::f16};
  const Shape extra[] = {
      {2, 2, 1, ContextSpec::fixed(1), 8, 0.0, 1, DType::f16},          // one token, MHA
      {8, 1, 7, ContextSpec::ragged(15, 97), 32, 1.0, 2, DType::bf16},  // GQA 8, ragged, h = 1
      {4, 1, 1, ContextSpec::fixed(1000), 16, 0.0, 1, DType::f16},      // long, few heads: splits
      // window 37 from mid-block, sinks, soft-cap 3
      {8, 2, 5, ContextSpec::ragged(15, 300), 16, 0.0, 1, DType::f16, 37, true, 3.0},
      // sinks and soft-cap over shared prefixes
      {8, 2, 4, ContextSpec::fixed(200), 16, 0.5, 1, DType::bf16, 0, true, 3.0},
  };
  const Shape mla_case{16,    1, 3,   ContextSpec::ragged(15, 150), 16, 0.5, 1, DType::bf16, 0,
                       false, 0, true};
  const Shape mla_long{128,   1, 1,   ContextSpec::fixed(600), 64, 0.0, 1, DType::bf16, 0,
                       false, 0, true};
  const int head_dims[] = {64, 128, 256};
  std::vector<SweepPoint> points;
  auto add = [&](const std::string& kernel, const Shape& s, DType kv, int d) {
    SweepPoint p;
    p.spec.model =
        s.mla ? check_mla_model(s.hq) : check_model(s.hq, s.hkv, d).with_window(s.window);
    p.spec.model.sinks = s.sinks;
    p.spec.model.attn_logit_softcapping = s.softcap;
    p.spec.batch = s.batch;
    p.spec.context = s.context;
    p.spec.hit_rate = s.hit_rate;
    p.spec.prefix_groups = s.groups;
    p.spec.kv_dtype = kv;
    p.spec.q_dtype = s.q_dtype;
    p.spec.block_size = s.block_size;
    p.spec.seed = seed;
    p.kernel = kernel;
    p.index = static_cast<int>(points.size());
    points.push_back(std::move(p));
  };
  for (const std::string& kernel : kernels) {
    for (DType kv : all_dtypes()) {
      for (int d : head_dims) add(kernel, main_case, kv, d);
    }
    for (const Shape& s : extra) add(kernel, s, DType::f16, 128);
    for (DType kv : {DType::f16, DType::bf16, DType::fp8_e4m3}) add(kernel, mla_case, kv, 576);
    add(kernel, mla_long, DType::bf16, 576);
  }
  return points;
}

bool any_axis_given(const SweepFlags& f) { return !f.config.empty() || workload_axis_given(f); }

std::string shape_label(const SweepPoint& p) {
  const WorkloadSpec& s = p.spec;
  std::string variants;
  if (s.model.sliding_window > 0) variants += fmt::format(" W={}", s.model.sliding_window);
  if (s.model.sinks) variants += " sinks";
  if (s.model.attn_logit_softcapping > 0) {
    variants += fmt::format(" cap={:g}", s.model.attn_logit_softcapping);
  }
  return fmt::format(
      "{:<9} kv={:<8} q={:<4} d={:<3} Hq/Hkv={}/{} P={:<2} b={} ctx={} h={:g} G={}{}", p.kernel,
      dtype_name(s.kv_dtype), dtype_name(s.q_dtype), s.model.head_dim, s.model.num_q_heads,
      s.model.num_kv_heads, s.block_size, s.batch, context_label(s.context), s.hit_rate,
      s.prefix_groups, variants);
}

int run(const CheckOptions& o) {
  SweepConfig cfg = resolve_sweep_config(o.flags);
  if (!flag_given(o.flags, "--kernel") && o.flags.config.empty()) cfg.kernels = {"all"};
  validate(cfg);
  std::unique_ptr<Backend> backend = make_backend(cfg.backend, o.flags.device);
  cfg.backend = backend->name();
  const std::vector<std::string> all_kernels = backend->kernel_names();
  if (backend->name() == "emu") {
    std::cout << "note: backend emu runs the CUDA kernel source in the SIMT emulator on the CPU "
                 "(one OS thread per CUDA thread): slow, and for correctness only.\n";
  }

  check_kernel_names(cfg.kernels, *backend);

  std::vector<SweepPoint> points;
  const bool defaults = !any_axis_given(o.flags);
  if (defaults) {
    std::vector<std::string> kernels = cfg.kernels;
    if (std::find(kernels.begin(), kernels.end(), "all") != kernels.end()) kernels = all_kernels;
    points = default_points(kernels, cfg.seed);
  } else {
    points = expand(cfg, all_kernels);
  }

  Report report = new_report();
  report.config = to_json(cfg);
  report.devices.push_back(backend->device_info());
  int ok = 0, wrong = 0, skipped_unbuilt = 0, skipped = 0, errors = 0;
  for (SweepPoint& p : points) {
    const std::string kernel = p.kernel == "auto" ? backend->choose_kernel(p.spec) : p.kernel;
    if (p.kernel == "auto") p.kernel = kernel;
    const std::string reason = backend->skip_reason(p.spec, kernel);
    if (!reason.empty()) {
      // In the default set, combinations this build did not compile (a narrowed head_dim or
      // dtype list) are counted, and listed with --verbose; explicitly requested ones are shown.
      if (defaults && !o.verbose) {
        ++skipped_unbuilt;
      } else {
        ++skipped;
        std::cout << fmt::format("skip   {}  {}\n", shape_label(p), reason);
      }
      continue;
    }
    PointResult r;
    try {
      r = run_check_point(*backend, p, cfg.validate_max_rows);
    } catch (const std::exception& e) {  // an emulator fault, a refused launch: this case only
      r.status = PointStatus::error;
      r.reason = e.what();
    }
    switch (r.status) {
      case PointStatus::ok:
        ++ok;
        std::cout << fmt::format("ok     {}  max_abs {:.2e} max_rel {:.2e} rows {}\n",
                                 shape_label(p), r.error.max_abs, r.error.max_rel,
                                 r.error.rows_checked);
        break;
      case PointStatus::wrong:
        ++wrong;
        std::cout << fmt::format("WRONG  {}  {}\n", shape_label(p), r.reason);
        break;
      case PointStatus::skipped:
        ++skipped;
        std::cout << fmt::format("skip   {}  {}\n", shape_label(p), r.reason);
        break;
      case PointStatus::error:
        ++errors;
        std::cout << fmt::format("ERROR  {}  {}\n", shape_label(p), r.reason);
        break;
      case PointStatus::not_run: break;  // only a sweep leaves points not run
    }
    std::cout.flush();
    report.results.push_back(std::move(r));
  }

  for (const Backend::SelfCheck& c : backend->check_ceiling_kernels()) {
    c.ok ? ++ok : ++wrong;
    std::cout << fmt::format("{:<6} {:<16} {}\n", c.ok ? "ok" : "WRONG", c.name, c.detail);
  }

  std::cout << fmt::format("{} ok, {} wrong, {} errors, {} skipped", ok, wrong, errors, skipped);
  if (skipped_unbuilt > 0) {
    std::cout << fmt::format(
        ", {} default cases this build or kernel does not take (--verbose lists them)",
        skipped_unbuilt);
  }
  std::cout << '\n';
  report.completion.points_planned = static_cast<int>(points.size());
  if (!o.out.empty()) write_report_atomic(o.out, report);
  if (wrong > 0) return kExitWrongOrRegression;
  if (errors > 0) return kExitRuntimeFailure;
  return kExitOk;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Validate every kernel of the backend (or --kernel) against the CPU reference on small odd "
      "shapes, or on the axes given, and check the ceiling kernels' results. No timing. "
      "Exit 1 if anything is wrong.");
  add_sweep_flags(*cmd, o->flags, /*measure=*/false);
  add_out_option(*cmd, o->out, "the results as a report");
  cmd->add_flag("--verbose,-v", o->verbose, "List default cases this build does not support");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace decodebench::cli
