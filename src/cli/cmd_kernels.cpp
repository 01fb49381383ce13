// `decodebench kernels`: the paged-decode ladder this build has and which backend runs which
// rung; `kernels --static`: the static model of the compiled decode kernels (src/static_model).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/datasheet.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "common/text.h"
#include "kernels.h"
#include "report/table.h"
#include "results/report.h"
#include "static_model/cuobjdump.h"
#include "static_model/sass_parse.h"
#include "static_model/static_report.h"
#include "workload/workload.h"
#ifdef DECODEBENCH_WITH_CUDA
#include "backends/cuda/occupancy_model.h"
#endif

namespace decodebench::cli {
namespace {

// ---------------------------------------------------------------------------------- kernels
struct KernelsOptions {
  std::string format = "table";
  bool static_model = false;
  bool summary = false;
  std::string binary;
  std::string cuobjdump;
  std::string out;
};

std::string dtype_list(const std::vector<DType>& types) {
  std::vector<std::string> names;
  for (DType t : types) names.emplace_back(dtype_name(t));
  return join(names);
}

// The attention variants a rung takes (KernelInfo::window, sinks, softcap): "window, sinks,
// soft-cap", or "none".
std::vector<std::string> variant_names(const kernels::KernelInfo& k) {
  std::vector<std::string> names;
  if (k.window) names.emplace_back("window");
  if (k.sinks) names.emplace_back("sinks");
  if (k.softcap) names.emplace_back("soft-cap");
  return names;
}

std::string int_list(const std::vector<int>& v) {
  std::vector<std::string> names;
  for (int x : v) names.push_back(std::to_string(x));
  return join(names);
}

// The ladder as a Markdown table, the one README.md carries between its kernel-table markers
// (a test compares the two byte for byte). Only what a rung is, never what a build compiled:
// head dims and KV dtypes are left out because DECODEBENCH_HEAD_DIMS / _KV_DTYPES narrow them,
// and the README must read the same whichever build printed it; q dtypes and block sizes too,
// which every rung shares (README says so above the table).
std::string kernels_markdown(const std::vector<kernels::KernelInfo>& ladder) {
  Table t;
  t.columns = {{"rung"}, {"idea"}, {"GQA group"}, {"workspace"}, {"variants"}};
  int rung = 0;
  for (const kernels::KernelInfo& k : ladder) {
    const std::vector<std::string> variants = variant_names(k);
    t.add_row({fmt::format("v{} `{}`", rung++, k.name), k.idea,
               k.max_group > 0 ? "1 to " + std::to_string(k.max_group) : "any",
               k.uses_workspace ? "split partials" : "none",
               variants.empty() ? "none" : join(variants)});
  }
  return render_md(t);
}

// ---------------------------------------------------------------------------- kernels --static
#ifdef DECODEBENCH_WITH_CUDA
// The devices the static model prints an issue bound for (their SMs and clock from
// configs/devices.json), and the one README.md's summary is for.
constexpr const char* kStaticDevices[] = {"h100-sxm", "h200"};
constexpr const char* kSummaryDevice = "h200";

static_model::DeviceFigures device_figures(const std::string& key) {
  const Datasheet d = datasheet_by_key(key);
  if (d.sm_count <= 0 || d.boost_clock_hz <= 0) {
    throw InputError(datasheet_file().string() + ": key 'devices[" + key +
                     "]': the static model needs its sm_count and boost_clock_hz");
  }
  return {d.key, d.name, d.sm_count, d.boost_clock_hz, d.bandwidth};
}
#endif

int run_static(const KernelsOptions& o) {
#ifndef DECODEBENCH_WITH_CUDA
  (void)o;
  throw InputError(
      "--static: the static model reads the CUDA kernels compiled into the binary and needs a "
      "CUDA build (this one was configured without nvcc)");
#else
  const OutputFormat format = parse_format(o.format);
  if (format == OutputFormat::csv) {
    throw InputError("--format: `kernels --static` prints table, md or json (got " + o.format +
                     ")");
  }
  if (o.summary && format != OutputFormat::md) {
    throw InputError("--summary: README.md's summary is Markdown; use it with --format md");
  }
  check_output_file(o.out, "--out");
  const std::string binary = o.binary.empty() ? static_model::this_executable() : o.binary;
  if (!std::filesystem::is_regular_file(binary)) {
    throw InputError("--binary " + binary + ": no such file");
  }
  const std::string cuobjdump = static_model::find_cuobjdump(o.cuobjdump);
  const std::string sass = static_model::run_cuobjdump(cuobjdump, {"-sass", binary});
  if (sass.find("Function : ") == std::string::npos) {
    throw InputError(binary + ": no device code (`" + cuobjdump + " -sass` lists no function)");
  }
  const std::vector<static_model::Function> functions = static_model::parse_sass(sass, binary);
  const std::vector<static_model::ResourceUsage> resources = static_model::parse_resource_usage(
      static_model::run_cuobjdump(cuobjdump, {"--dump-resource-usage", binary}), binary);

  static_model::Hooks hooks;
  // The launch of each instance as its rung's launcher shapes it (kernels::cuda::launch_shape,
  // the split planner's source too), asked with a one-sequence point of the instance's dtype,
  // head_dim and group cap. It describes the main kernel of instances compiled into this build;
  // others (a split_kv merge, a --binary with instances this build lacks) stay n/a.
  hooks.launch_shape =
      [](const static_model::KernelName& k) -> std::optional<static_model::LaunchShape> {
    if (!k.decode || !k.kv_dtype || k.head_dim == 0) return std::nullopt;
    WorkloadSpec spec;
    spec.model.num_kv_heads = 1;
    spec.model.num_q_heads = std::max(k.group_cap, 1);
    spec.model.head_dim = k.head_dim;
    spec.batch = 1;
    spec.context = ContextSpec::fixed(256);
    spec.kv_dtype = *k.kv_dtype;
    spec.block_size = k.half_blocks ? 8 : 16;  // int4's P = 8 instance has its own shape
    const kernels::KernelInfo* rung = kernels::find_kernel(k.rung);
    if (rung != nullptr && rung->mla_only) {
      // MLA's latent under 64 heads (a whole thread block of the rung), q in the MMA type.
      spec.model.num_q_heads = 64;
      spec.model.kv_lora_rank = k.head_dim - 64;
      spec.model.qk_rope_head_dim = 64;
      spec.model.qk_nope_head_dim = 128;
      spec.model.v_head_dim = 128;
      spec.q_dtype = *k.kv_dtype == DType::bf16 ? DType::bf16 : DType::f16;
    }
    const kernels::LaunchShape s =
        kernels::cuda::launch_shape(k.rung, shape_params(spec, build_layout(spec)));
    if (!s.status.ok() || s.function != k.kernel || s.group_cap != k.group_cap) {
      return std::nullopt;
    }
    return static_model::LaunchShape{s.threads, s.dynamic_smem};
  };
  hooks.occupancy = [](int registers, std::size_t static_smem,
                       const static_model::LaunchShape& launch) {
    const cuda::Occupancy occ = cuda::occupancy(
        {registers, static_smem, launch.dynamic_smem, launch.threads}, cuda::hopper_sm());
    return static_model::OccupancyFigure{occ.ctas_per_sm, occ.limited_by, occ.error};
  };
  std::vector<std::string> rungs;
  for (const kernels::KernelInfo& k : kernels::kernel_ladder()) rungs.push_back(k.name);
  const std::vector<static_model::Instance> instances =
      static_model::analyze_instances(functions, resources, hooks, rungs);

  static_model::ModelSettings settings;
  for (const char* key : kStaticDevices) settings.devices.push_back(device_figures(key));
  nlohmann::json j = static_model::static_json(instances, settings);
  j["binary"] = binary;
  j["cuobjdump"] = cuobjdump;
  std::string text;
  if (format == OutputFormat::json) {
    text = j.dump(2) + "\n";
  } else if (format == OutputFormat::md && o.summary) {
    text = static_model::static_summary_markdown(instances, settings, kSummaryDevice);
    // The summary is at one head_dim: a rung built only for another (mla: 576) is not in it.
    std::vector<std::string> summarized;
    for (const kernels::KernelInfo& k : kernels::kernel_ladder()) {
      if (std::find(k.head_dims.begin(), k.head_dims.end(), static_model::kSummaryHeadDim) !=
          k.head_dims.end())
        summarized.push_back(k.name);
    }
    for (const std::string& m : static_model::summary_missing(instances, summarized)) {
      std::cerr << "decodebench: note: the summary lacks " << m << " (not in " << binary << ")\n";
    }
  } else if (format == OutputFormat::md) {
    text = static_model::static_markdown(instances, settings);
  } else {
    text = static_model::static_table(instances, settings) +
           fmt::format("  read from {} by {}\n", binary, cuobjdump);
  }
  emit(text, "");
  if (!o.out.empty()) emit(j.dump(2) + "\n", o.out);
  return kExitOk;
#endif
}

int run_kernels(const KernelsOptions& o) {
  if (o.static_model) return run_static(o);
  for (const auto& [given, flag] :
       {std::pair{!o.binary.empty(), "--binary"}, std::pair{!o.cuobjdump.empty(), "--cuobjdump"},
        std::pair{o.summary, "--summary"}, std::pair{!o.out.empty(), "--out"}}) {
    if (given) throw InputError(std::string(flag) + " belongs to the static model: add --static");
  }
  const OutputFormat format = parse_format(o.format);
  const auto& ladder = kernels::kernel_ladder();
  nlohmann::json j = {{"ladder", nlohmann::json::array()}, {"backends", nlohmann::json::object()}};
  std::string table = "The paged-decode ladder (kernels/, each rung adds one idea; this build):\n";
  int rung = 0;
  for (const kernels::KernelInfo& k : ladder) {
    const std::string group = k.max_group > 0 ? "<= " + std::to_string(k.max_group) : "any";
    const std::string blocks = "powers of two >= " + std::to_string(k.min_block_size);
    table += fmt::format("  v{} {}\n", rung++, k.name);
    table += fmt::format("      idea:        {}\n", k.idea);
    table += fmt::format("      head_dim:    {}\n", int_list(k.head_dims));
    table += fmt::format("      kv dtypes:   {}\n", dtype_list(k.kv_dtypes));
    table += fmt::format("      q dtypes:    {}\n", dtype_list(k.q_dtypes));
    table += fmt::format("      block sizes: {}\n", blocks);
    table += fmt::format("      GQA group:   {}{}\n", group,
                         k.uses_workspace ? "; needs a split workspace (planned per point)" : "");
    const std::vector<std::string> variants = variant_names(k);
    table += fmt::format("      variants:    {}\n", variants.empty() ? "none" : join(variants));
    nlohmann::json entry = {{"name", k.name},           {"idea", k.idea},
                            {"head_dims", k.head_dims}, {"min_block_size", k.min_block_size},
                            {"max_group", k.max_group}, {"uses_workspace", k.uses_workspace}};
    entry["variants"] = variant_names(k);
    entry["kv_dtypes"] = nlohmann::json::array();
    for (DType t : k.kv_dtypes) entry["kv_dtypes"].push_back(dtype_name(t));
    entry["q_dtypes"] = nlohmann::json::array();
    for (DType t : k.q_dtypes) entry["q_dtypes"].push_back(dtype_name(t));
    j["ladder"].push_back(std::move(entry));
  }
  if (ladder.empty()) table += "  (no paged-decode kernel compiled: see DECODEBENCH_KERNELS)\n";
  table += "\nKernels per backend (`--kernel auto` lets the backend choose per point):\n";
  for (const std::string& name : backend_names()) {
    try {
      const std::vector<std::string> names = make_backend(name)->kernel_names();
      table += fmt::format("  {:<5} {}\n", name, join(names));
      j["backends"][name] = names;
    } catch (const RuntimeFailure& e) {
      // cuda compiled in but no device here: it runs the ladder above when one is present.
      std::vector<std::string> names;
      for (const kernels::KernelInfo& k : ladder) names.push_back(k.name);
      table += fmt::format("  {:<5} {} (no device here: {})\n", name, join(names), e.what());
      j["backends"][name] = names;
    }
  }
  if (format == OutputFormat::json) {
    emit(j.dump(2), "");
  } else if (format == OutputFormat::table) {
    emit(table, "");
  } else if (format == OutputFormat::md) {
    emit(kernels_markdown(ladder), "");
  } else {
    throw InputError("--format: `kernels` prints table, json or md (got " + o.format + ")");
  }
  return kExitOk;
}

}  // namespace

void add_kernels_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<KernelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kernels",
      "List the kernel ladder of this build: idea, head dims, dtypes, block sizes, GQA "
      "groups, and which backend runs which kernels.");
  add_format_option(*cmd, o->format,
                    "table or json (this build), or md (the ladder as README.md's Markdown table)");
  cmd->add_flag("--static", o->static_model,
                "The static model instead: per decode kernel instance, its main loop read from "
                "the SASS (cuobjdump): warp-instructions per KV byte, the issue-bound bandwidth "
                "on H100 SXM and H200, CTAs per SM, KV bytes in flight, barriers (CUDA builds)");
  cmd->add_option("--binary", o->binary,
                  "--static: the binary or kernel library (.a) to read (default: this executable)");
  cmd->add_option("--cuobjdump", o->cuobjdump,
                  "--static: the cuobjdump to run (default: $DECODEBENCH_CUOBJDUMP, $CUOBJDUMP, "
                  "PATH, $CUDA_HOME/bin, beside nvcc, /usr/local/cuda/bin, the PyPI wheel)");
  cmd->add_flag("--summary", o->summary,
                "--static --format md: README.md's summary table (head_dim 128, f16 / fp8_e4m3)");
  add_out_option(*cmd, o->out, "--static: the static model (what --format json prints)");
  cmd->callback([o, &exit_code] { exit_code = run_kernels(*o); });
}

}  // namespace decodebench::cli
