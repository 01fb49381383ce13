// The sweep runner: skip -> validate against the reference -> time -> roofline, per point.
// Longer than most files on purpose: it is the one place a sweep's measurement is driven
// (warm-up, samples and the stopping rule through measure.h, marks, progress and ETA,
// checkpoints, interrupt and resume, device failure), so that a reader finds all of it here; the
// validation against the reference is point_validation.cpp's.
#include "harness/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "harness/layer_step.h"
#include "harness/measure.h"
#include "harness/point_run.h"
#include "harness/point_validation.h"
#include "harness/roofline.h"
#include "harness/stats.h"
#include "harness/sweep_axes.h"
#include "harness/utilization.h"
#include "results/knees.h"
#include "results/point_identity.h"
#include "results/self_check.h"
#include "workload/byte_model.h"

namespace decodebench {

namespace {

// The identity and the model's numbers of a point: everything known before it runs.
// A layer point the layer step cannot take keeps the attention's numbers; run_point skips it.
PointResult describe(const SweepPoint& p, const std::string& backend, const PagedLayout& layout,
                     DType weights) {
  const WorkloadSpec& s = p.spec;
  PointResult r = not_run_result(p, backend);
  r.status = PointStatus::ok;
  r.hit_rate_actual = layout.hit_rate_actual;
  if (p.scope == Scope::layer && layer_support_error(s.model, weights, s.q_dtype).empty()) {
    describe_layer(s, layout, weights, r);
    return r;
  }
  const ByteModel bm = byte_model(s, layout);
  r.bytes.kv_logical = static_cast<double>(bm.kv_logical);
  r.bytes.kv_unique = static_cast<double>(bm.kv_unique);
  r.bytes.min = static_cast<double>(bm.min);
  r.flops = bm.flops;
  r.arithmetic_intensity = bm.arithmetic_intensity;
  return r;
}

}  // namespace

PointResult not_run_result(const SweepPoint& p, const std::string& backend) {
  const WorkloadSpec& s = p.spec;
  PointResult r;
  r.status = PointStatus::not_run;
  r.index = p.index;
  r.kernel_requested = p.kernel;
  r.kernel = p.kernel;
  r.backend = backend;
  r.scope = p.scope;
  r.model = s.model.name;
  r.num_q_heads = s.model.num_q_heads;
  r.num_kv_heads = s.model.num_kv_heads;
  r.head_dim = s.model.head_dim;
  r.num_layers = s.model.num_layers;
  r.windowed_layers = s.model.windowed_layers();
  r.sliding_window = r.windowed_layers > 0 ? s.model.sliding_window : 0;
  r.sinks = s.model.sinks;
  r.attn_logit_softcapping = s.model.attn_logit_softcapping;
  r.kv_lora_rank = s.model.kv_lora_rank;
  r.qk_rope_head_dim = s.model.qk_rope_head_dim;
  r.kv_dtype = s.kv_dtype;
  r.q_dtype = s.q_dtype;
  r.block_size = s.block_size;
  r.batch = s.batch;
  r.context = s.context;
  r.hit_rate = s.hit_rate;
  r.prefix_groups = s.prefix_groups;
  r.seed = s.seed;
  return r;
}

namespace {

// The full point without host data: spec, layout, block ids, scales; q/k_cache/v_cache empty
// (backend.h's layout-only convention: a backend that can, e.g. cuda, fills them where they live
// with the same counter-based values; others throw InputError).
Workload layout_only_workload(const WorkloadSpec& spec, const PagedLayout& layout) {
  Workload w;
  w.spec = spec;
  w.layout = layout;
  w.sequences.resize(static_cast<std::size_t>(spec.batch));
  std::iota(w.sequences.begin(), w.sequences.end(), 0);
  w.source_block_ids.resize(static_cast<std::size_t>(layout.num_blocks));
  std::iota(w.source_block_ids.begin(), w.source_block_ids.end(), 0);
  w.softmax_scale = spec.model.softmax_scale();
  w.k_scale = w.v_scale = kv_scale_for(spec.kv_dtype);
  if (spec.model.sinks) w.sinks = sink_logits(spec.model, spec.seed);
  return w;
}

std::vector<int> all_sequences(int batch) {
  std::vector<int> all(static_cast<std::size_t>(batch));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// One kind of layer of a point made ready and validated: the prepared step and the host
// workload it may read (the cpu backend reads the workload's buffers in place).
struct ReadyLayer {
  Workload full;
  std::unique_ptr<PreparedPoint> prepared;
  int layers = 0;  // how many of the model's layers it stands for
};

// The mean layer of a model whose layers differ (ModelShape::layer_classes): one step of each
// kind timed per sample, weighted by how many layers it stands for, so a sample is the mean
// layer's time and num_layers x it the model's attention (tokens/s). A layer point's stage
// times are weighted alike. Output and the GEMMs' values are the first kind's (each kind is
// validated on its own before).
class MeanLayerPoint final : public PreparedLayer {
 public:
  explicit MeanLayerPoint(std::vector<ReadyLayer> kinds) : kinds_(std::move(kinds)) {
    for (const ReadyLayer& k : kinds_) total_layers_ += k.layers;
  }
  void run() override {
    for (ReadyLayer& k : kinds_) k.prepared->run();
  }
  std::vector<float> output() override { return kinds_[0].prepared->output(); }
  double time_one() override {
    double t = 0;
    for (ReadyLayer& k : kinds_) t += k.layers * k.prepared->time_one();
    return t / total_layers_;
  }
  TimingRecord timing() const override { return kinds_[0].prepared->timing(); }
  std::optional<FlushRecord> flush_record() const override {
    return kinds_[0].prepared->flush_record();
  }
  std::vector<double> paired_read_samples() const override {
    return kinds_[0].prepared->paired_read_samples();  // one per sample: the first kind's
  }
  void begin_utilization() override {
    for (ReadyLayer& k : kinds_) k.prepared->begin_utilization();
  }
  void end_utilization() override {
    for (ReadyLayer& k : kinds_) k.prepared->end_utilization();
  }
  std::optional<UtilizationRecord> utilization() const override {
    std::vector<UtilizationRecord> each;
    for (const ReadyLayer& k : kinds_) {
      if (std::optional<UtilizationRecord> u = k.prepared->utilization()) each.push_back(*u);
    }
    if (each.empty()) return std::nullopt;
    return combine_utilization(each);
  }
  std::vector<std::vector<double>> stage_samples() const override {
    std::vector<std::vector<double>> mean;
    for (const ReadyLayer& k : kinds_) {
      const auto& layer = dynamic_cast<const PreparedLayer&>(*k.prepared);
      const std::vector<std::vector<double>> stages = layer.stage_samples();
      if (mean.empty()) mean.assign(stages.size(), {});
      for (std::size_t s = 0; s < stages.size(); ++s) {
        mean[s].resize(stages[s].size(), 0.0);
        for (std::size_t i = 0; i < stages[s].size(); ++i)
          mean[s][i] += k.layers * stages[s][i] / total_layers_;
      }
    }
    return mean;
  }
  GemmValues gemm_values(LayerStage stage, std::span<const int> rows) override {
    return first_layer().gemm_values(stage, rows);
  }
  std::string gemm_library() const override {
    return dynamic_cast<const PreparedLayer&>(*kinds_[0].prepared).gemm_library();
  }

 private:
  PreparedLayer& first_layer() { return dynamic_cast<PreparedLayer&>(*kinds_[0].prepared); }
  std::vector<ReadyLayer> kinds_;
  int total_layers_ = 0;
};

// Skip, materialize, prepare and validate one kind of layer of point p (p.spec.model is that
// kind's: every layer alike). False with r's status and reason set when it cannot run or is
// wrong. `stop` as run_point's.
bool prepare_layer_kind(Backend& backend, const SweepPoint& p, const PagedLayout& layout,
                        const SweepConfig& config, std::int64_t layout_only_above_bytes,
                        ReferenceCache* cache, const std::atomic<bool>* stop, PointResult& r,
                        ReadyLayer& ready) {
  const auto poll = [stop] {
    if (stop && stop->load()) throw Interrupted();
  };
  std::string skip = backend.skip_reason(p.spec, layout, r.kernel);
  const bool layer = p.scope == Scope::layer;
  const LayerOptions layer_options{config.weights_dtype};
  if (layer && skip.empty()) {
    skip = layer_support_error(p.spec.model, config.weights_dtype, p.spec.q_dtype);
    if (skip.empty()) skip = backend.layer_skip_reason(p.spec, layout, r.kernel, layer_options);
  }
  if (!skip.empty()) {
    r.status = PointStatus::skipped;
    r.reason = skip;
    return false;
  }
  TimingOptions timing;
  timing.warm_l2 = config.measure.warm_l2;
  // Scope layer: the whole layer step; everything below treats it as the point (its run() runs
  // every stage, its output() is the attention's).
  const auto prepare = [&](const Workload& w) -> std::unique_ptr<PreparedPoint> {
    if (layer) return backend.prepare_layer(w, r.kernel, layer_options, timing);
    return backend.prepare(w, r.kernel, timing);
  };
  const std::vector<int> rows = validation_subset(layout, config.validate_max_rows);
  const bool all_rows = static_cast<int>(rows.size()) == p.spec.batch;

  // Host data: the full workload when every row is validated (the reference needs it anyway);
  // otherwise only the subset, and a large point goes to the backend layout-only if it can
  // take it.
  Workload& full = ready.full;
  std::unique_ptr<PreparedPoint>& prepared = ready.prepared;
  if (!all_rows && workload_host_bytes(p.spec, layout) > layout_only_above_bytes) {
    try {
      prepared = prepare(layout_only_workload(p.spec, layout));
    } catch (const InputError&) {
      // This backend needs host data: materialize below.
    }
  }
  if (!prepared) {
    try {
      full = make_workload(p.spec, layout, all_sequences(p.spec.batch));
    } catch (const std::bad_alloc&) {
      r.status = PointStatus::skipped;
      r.reason = fmt::format("the workload ({:.2f} GB) does not fit host memory",
                             static_cast<double>(workload_host_bytes(p.spec, layout)) / 1e9);
      return false;
    }
    prepared = prepare(full);
  }
  poll();
  const Workload subset = all_rows ? Workload{} : make_workload(p.spec, layout, rows);
  if (!validate_point(*prepared, all_rows ? full : subset, rows, cache, r)) return false;
  auto* prepared_layer = layer ? dynamic_cast<PreparedLayer*>(prepared.get()) : nullptr;
  if (layer && !prepared_layer) throw std::logic_error("prepare_layer gave no PreparedLayer");
  if (layer && !validate_gemms(*prepared_layer, p.spec, config.weights_dtype, rows, r))
    return false;
  return true;
}

// Everything after the identity: skip, validate, time. Exceptions propagate to run_sweep.
// `stop` (may be null) is polled between the steps; once set, Interrupted is thrown.
void run_point(Backend& backend, const SweepPoint& p, const PagedLayout& layout,
               const SweepConfig& config, const DeviceInfo& device, bool time_it,
               std::int64_t layout_only_above_bytes, ReferenceCache* cache,
               const std::atomic<bool>* stop, PointResult& r) {
  if (p.kernel == "auto") r.kernel = backend.choose_kernel(p.spec, layout);
  const bool layer = p.scope == Scope::layer;
  // A model whose layers differ (windowed and full) runs one step of each kind; each is
  // checked against its own reference.
  const std::vector<ModelShape::LayerClass> kinds = p.spec.model.layer_classes();
  std::vector<ReadyLayer> ready;
  for (const ModelShape::LayerClass& kind : kinds) {
    SweepPoint one = p;
    if (kinds.size() > 1) one.spec.model = p.spec.model.with_window(kind.window);
    ReadyLayer& r_kind = ready.emplace_back();
    r_kind.layers = kind.layers;
    if (!prepare_layer_kind(backend, one, layout, config, layout_only_above_bytes, cache, stop, r,
                            r_kind)) {
      if (kinds.size() > 1) {
        r.reason = fmt::format("its {} layers {}: {}", kind.layers,
                               kind.window > 0 ? fmt::format("with a {}-token window", kind.window)
                                               : std::string("with full attention"),
                               r.reason);
      }
      return;
    }
  }
  r.status = PointStatus::ok;
  if (!time_it) return;

  std::unique_ptr<PreparedPoint> mean;
  if (ready.size() > 1) mean = std::make_unique<MeanLayerPoint>(std::move(ready));
  PreparedPoint* const prepared = mean ? mean.get() : ready[0].prepared.get();
  auto* prepared_layer = layer ? dynamic_cast<PreparedLayer*>(prepared) : nullptr;
  r.samples = measure(*prepared, config.measure, stop);
  r.utilization = prepared->utilization();  // finished below, once tokens/s is known
  r.paired_read_samples = prepared->paired_read_samples();
  if (!r.paired_read_samples.empty() && r.paired_read_samples.size() != r.samples.size()) {
    throw std::logic_error(fmt::format("{} paired read bandwidths for {} samples",
                                       r.paired_read_samples.size(), r.samples.size()));
  }
  r.timing = prepared->timing();  // after the samples: the steps per sample may be chosen then
  if (!r.timing->warm_l2) r.flush = prepared->flush_record();
  r.time_s = summarize(r.samples);
  if (stop_reason(r.samples, config.measure, /*wall_elapsed_s=*/0) != StopReason::converged) {
    // Still ok and published; the note says the numbers are noisier than asked for.
    // Each unmet condition with its figure: the one that failed is named, not implied.
    r.reason = fmt::format("stopped at the {:g} s timeout: {}", config.measure.timeout_s,
                           fmt::join(unmet_conditions(r.samples, config.measure), "; "));
  }
  const double paired =
      r.paired_read_samples.empty() ? kNotAvailable : summarize(r.paired_read_samples).median;
  if (layer) {
    finish_layer(*prepared_layer, device, backend.compute_unit(r.kernel), paired, r);
    if (r.utilization) finish_utilization(*r.utilization, r.time_s.median, r.tokens_per_s);
    r.flags = self_check(r, device);
    return;
  }
  RooflineInput in;
  in.bytes_min = r.bytes.min;
  in.bytes_logical = r.bytes.min - r.bytes.kv_unique + r.bytes.kv_logical;
  in.flops = r.flops;
  in.batch = p.spec.batch;
  in.num_layers = p.spec.model.num_layers;
  in.compute = backend.compute_unit(r.kernel);  // the FLOP roof of the units it runs on
  const RooflineResult roof = compute_roofline(in, r.time_s.median, device, paired);
  r.bandwidth = roof.bandwidth;
  r.roofline = roof.roofline;
  r.tokens_per_s = roof.tokens_per_s;
  if (r.utilization) finish_utilization(*r.utilization, r.time_s.median, r.tokens_per_s);
  r.flags = self_check(r, device);
}

std::string join_lines(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : "; ") + s;
  return out;
}

// Keys of two config objects whose values differ, as "measure.min_samples (report 3, now 2)".
void config_differences(const nlohmann::json& was, const nlohmann::json& now,
                        const std::string& prefix, std::vector<std::string>& out) {
  if (was.is_object() && now.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : was.items()) keys.insert(k);
    for (const auto& [k, v] : now.items()) keys.insert(k);
    for (const std::string& k : keys) {
      const nlohmann::json a = was.contains(k) ? was.at(k) : nlohmann::json("(absent)");
      const nlohmann::json b = now.contains(k) ? now.at(k) : nlohmann::json("(absent)");
      config_differences(a, b, prefix.empty() ? k : prefix + "." + k, out);
    }
    return;
  }
  if (was != now)
    out.push_back(fmt::format("{} (report {}, now {})", prefix, was.dump(), now.dump()));
}

}  // namespace

void check_resumable(const Report& previous, const SweepConfig& config, const DeviceInfo& device,
                     const std::vector<SweepPoint>& points, const std::string& backend) {
  std::vector<std::string> differ;
  const ToolInfo tool = this_tool();
  if (previous.tool.version != tool.version || previous.tool.git_sha != tool.git_sha) {
    differ.push_back(fmt::format("tool (report {} {}, now {} {})", previous.tool.version,
                                 previous.tool.git_sha, tool.version, tool.git_sha));
  }
  std::vector<std::string> keys;
  config_differences(previous.config, to_json(config), "", keys);
  for (const std::string& k : keys) differ.push_back("config." + k);
  if (previous.devices.empty()) {
    differ.push_back("device (report names none)");
  } else if (previous.devices[0].backend != device.backend ||
             previous.devices[0].name != device.name) {
    differ.push_back(fmt::format("device (report {} '{}', now {} '{}')",
                                 previous.devices[0].backend, previous.devices[0].name,
                                 device.backend, device.name));
  }
  if (!differ.empty()) {
    throw InputError("--resume: the report was not made by this sweep: it differs in " +
                     join_lines(differ) +
                     " (resume with the same build, config, flags and device)");
  }
  std::map<int, const SweepPoint*> planned;
  for (const SweepPoint& p : points) planned[p.index] = &p;
  std::set<int> seen;
  for (const PointResult& r : previous.results) {
    const auto it = planned.find(r.index);
    if (it == planned.end()) {
      throw InputError(
          fmt::format("--resume: the report's point {} is not in this sweep's points", r.index));
    }
    if (!seen.insert(r.index).second) {
      throw InputError(fmt::format("--resume: the report lists point {} twice", r.index));
    }
    const std::string want = point_identity(not_run_result(*it->second, backend));
    if (point_identity(r) != want) {
      throw InputError(fmt::format("--resume: the report's point {} is '{}', this sweep's is '{}'",
                                   r.index, point_identity(r), want));
    }
  }
}

void check_kernel_names(const std::vector<std::string>& requested, const Backend& backend) {
  const std::vector<std::string> names = backend.kernel_names();
  for (const std::string& k : requested) {
    if (k == "auto" || k == "all") continue;
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      std::string valid;
      for (const std::string& n : names) valid += (valid.empty() ? "" : ", ") + n;
      throw InputError(
          fmt::format("--kernel: unknown kernel '{}' for backend {} (valid: auto, all, {})", k,
                      backend.name(), valid));
    }
  }
}

Report run_sweep(Backend& backend, const SweepConfig& config, const RunOptions& options) {
  validate(config);
  check_kernel_names(config.kernels, backend);
  const std::vector<SweepPoint> points = expand(config, backend.kernel_names());
  // Bad shapes are bad input: find them all before any time is spent.
  for (const auto& p : points) validate(p.spec);
  DeviceInfo device = backend.device_info();
  const Report* previous = options.resume;
  if (previous) check_resumable(*previous, config, device, points, backend.name());

  // Every planned point is listed from the start, not_run until it has run; a resumed sweep
  // keeps the previous report's finished points as they were.
  Report report = new_report();
  if (previous) {
    report.created = previous->created;
    report.host = previous->host;
  }
  report.config = to_json(config);
  const int total = static_cast<int>(points.size());
  report.completion.points_planned = total;
  std::vector<bool> finished(points.size(), false);
  std::map<int, std::size_t> position;
  for (std::size_t k = 0; k < points.size(); ++k) {
    report.results.push_back(not_run_result(points[k], backend.name()));
    position[points[k].index] = k;
  }
  int done = 0;
  if (previous) {
    for (const PointResult& r : previous->results) {
      if (r.status == PointStatus::not_run) continue;
      const std::size_t k = position.at(r.index);
      report.results[k] = r;
      finished[k] = true;
      ++done;
    }
  }
  report.devices = {device};
  report.knees = compute_knees(report.results);
  PointRun run(report, options, "sweep");
  // An error that is not the point's own (the ceilings, a checkpoint write) leaves the file
  // failed, not running.
  try {
    // Before the ceilings: a process killed from here on leaves a report that says `running`.
    run.start();
    if (run.stop_requested()) {
      run.interrupt("interrupted before the ceilings measurement");
      return report;
    }

    // Ceilings first: a backend may describe its device from them (the cpu's FLOP peak is its
    // measured FMA rate). A resumed sweep keeps the ones its first points were measured against.
    if (previous && !previous->devices.empty() && previous->devices[0].measured.read > 0 &&
        !options.ceilings) {
      device = previous->devices[0];
    } else {
      run.phase("the ceilings measurement");
      const Ceilings ceilings = options.ceilings ? *options.ceilings : backend.measure_ceilings();
      device.measured = ceilings;
      if (!(device.flops_peak > 0)) device.flops_peak = ceilings.fma_flops;
    }
    // The layer GEMMs' roof, once per sweep (its weights dtype is one setting).
    const bool any_layer = std::any_of(points.begin(), points.end(),
                                       [](const SweepPoint& p) { return p.scope == Scope::layer; });
    if (any_layer && device.measured.gemm_ceiling_name.empty() && !run.stop_requested()) {
      run.phase("the GEMM ceiling measurement");
      const Backend::GemmCeiling g = backend.gemm_ceiling(config.weights_dtype);
      device.measured.gemm_flops = g.flops;
      device.measured.gemm_ceiling_name = g.name.empty() ? "GEMM (unknown)" : g.name;
    }
    report.devices = {device};
    if (run.stop_requested()) {
      run.interrupt("interrupted during the ceilings measurement");
      return report;
    }

    ReferenceCache references;
    const double start = steady_seconds();
    for (std::size_t k = 0; k < points.size(); ++k) {
      if (finished[k]) continue;
      const SweepPoint& p = points[k];
      if (run.stop_requested()) {
        run.interrupt(fmt::format("interrupted before point {} ({} of {} points finished)", p.index,
                                  done, total));
        break;
      }
      run.at(fmt::format("point {}", p.index));
      const PagedLayout layout = build_layout(p.spec);
      PointResult r = describe(p, backend.name(), layout, config.weights_dtype);
      const PointEnd end = run.measure(r, [&](PointResult& out) {
        run_point(backend, p, layout, config, device, /*time_it=*/true,
                  options.layout_only_above_bytes, &references, options.interrupted, out);
      });
      if (end == PointEnd::interrupted) {
        run.interrupt(fmt::format("interrupted during point {} ({} of {} points finished)", p.index,
                                  done, total));
        break;  // the point stays not_run: nothing half-measured is published
      }
      const bool device_failed = end == PointEnd::device_failed;
      report.results[k] = std::move(r);
      finished[k] = true;
      ++done;
      if (device_failed) {
        run.device_failure(fmt::format("point {} ({} of {} points done)", p.index, done, total),
                           report.results[k].reason);
      }
      report.knees = compute_knees(report.results);
      run.point_done();
      if (options.progress)
        options.progress(done, total, steady_seconds() - start, report.results[k]);
      if (device_failed) break;
    }
    run.finish();
    report.knees = compute_knees(report.results);
    return report;
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    run.fail(e);
    throw;
  }
}

PointResult run_layout_point(Backend& backend, const SweepPoint& point, const PagedLayout& layout,
                             const SweepConfig& config, const DeviceInfo& device,
                             const std::atomic<bool>* stop) {
  validate(point.spec);
  if (static_cast<int>(layout.context_lens.size()) != point.spec.batch) {
    throw std::invalid_argument(fmt::format("run_layout_point: the layout has {} rows, batch {}",
                                            layout.context_lens.size(), point.spec.batch));
  }
  PointResult r = describe(point, backend.name(), layout, config.weights_dtype);
  try {
    // No reference cache: two layouts of one spec are different workloads.
    run_point(backend, point, layout, config, device, /*time_it=*/true,
              RunOptions{}.layout_only_above_bytes, /*cache=*/nullptr, stop, r);
  } catch (const Interrupted&) {
    throw;
  } catch (const RuntimeFailure&) {
    throw;
  } catch (const std::exception& e) {
    r.status = PointStatus::error;
    r.reason = e.what();
  }
  if (r.status != PointStatus::ok) {
    r.samples.clear();
    r.timing.reset();
  }
  return r;
}

PointResult run_check_point(Backend& backend, const SweepPoint& point, int validate_max_rows) {
  validate(point.spec);
  const PagedLayout layout = build_layout(point.spec);
  PointResult r = describe(point, backend.name(), layout, DType::bf16);
  SweepConfig config;
  config.validate_max_rows = validate_max_rows;
  run_point(backend, point, layout, config, DeviceInfo{}, /*time_it=*/false,
            RunOptions{}.layout_only_above_bytes, /*cache=*/nullptr, /*stop=*/nullptr, r);
  return r;
}

}  // namespace decodebench
