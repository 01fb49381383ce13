// The measuring half of `decodebench replay`: schedule -> sample -> build -> validate and time ->
// interpolate, per setting and kernel.
#include "harness/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "harness/measure.h"
#include "harness/point_run.h"
#include "harness/runner.h"
#include "harness/stats.h"
#include "results/point_identity.h"
#include "trace/cache_sim.h"
#include "workload/layer_model.h"

namespace decodebench {

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A number, or null where it is not available (kNotAvailable is NaN).
json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(); }

// A setting as the plan lists it; the tier keys only with a host tier.
json setting_fields(const ReplaySetting& s) {
  json j = {{"kv_pool_bytes", s.kv_pool_bytes},
            {"policy", policy_name(s.policy)},
            {"ttl_s", s.policy == EvictionPolicy::ttl ? json(s.ttl_s) : json()},
            {"kv_dtype", dtype_name(s.kv_dtype)}};
  if (s.host_capacity_tokens > 0) {
    j["host_capacity_tokens"] = s.host_capacity_tokens;
    j["link"] = s.link.empty() ? json() : json(s.link);
    j["reload_policy"] = reload_policy_name(s.reload);
  }
  return j;
}

json setting_json(const ReplaySetting& s, const ReplaySchedule& schedule, int block_tokens) {
  json j = setting_fields(s);
  j["kv_pool_tokens"] = schedule.pool_blocks * block_tokens;
  return j;
}

json fraction_of(double busy_s, double span_s) {
  return span_s > 0 ? json(busy_s / span_s) : json();
}

// What the host tier and the links did in a setting, and what the requests waited for them.
void add_tier_json(json& out, const ReplaySchedule& s, const ReplayPlan& plan, int block_tokens) {
  const ReplayTiers& t = s.tiers;
  std::vector<double> ttft, wait;
  for (const RequestOutcome& r : s.requests) {
    if (r.first_token_s >= 0) ttft.push_back(r.first_token_s - r.arrival_s);
    if (r.admitted_s >= 0) wait.push_back(r.link_wait_s);
  }
  out["ttft_s"] = distribution_json(ttft);
  const bool prefill_link = plan.schedule.prefill_link_to_device > 0;
  if (t.host_capacity_blocks == 0 && !prefill_link) return;
  // The time to first token that waiting for a link added.
  out["link_wait_s"] = distribution_json(wait);
  out["decode_idle_waiting_s"] = t.decode_idle_waiting_s;
  const double input = static_cast<double>(s.input_tokens);
  if (t.host_capacity_blocks > 0) {
    out["tiers"] = {
        {"host_capacity_tokens", t.host_capacity_blocks * block_tokens},
        {"hit_rate_by_tier",
         {{"hbm", input > 0 ? static_cast<double>(t.hit_tokens_hbm) / input : 0.0},
          {"host", input > 0 ? static_cast<double>(t.hit_tokens_host) / input : 0.0}}},
        {"blocks",
         {{"promoted", t.blocks.promoted},
          {"demoted", t.blocks.demoted},
          {"dropped", t.blocks.dropped},
          {"host_peak", t.blocks.host_peak}}},
        {"reloads", t.reloads},
        {"reloaded_tokens", t.reloaded_tokens},
        {"recomputed_tokens", t.recomputed_tokens},
        {"link_bytes", {{"to_hbm", t.link_bytes_to_hbm}, {"to_host", t.link_bytes_to_host}}},
        {"link_busy_s", {{"to_hbm", t.link_busy_s_to_hbm}, {"to_host", t.link_busy_s_to_host}}},
        {"link_busy_fraction",
         {{"to_hbm", fraction_of(t.link_busy_s_to_hbm, s.end_s)},
          {"to_host", fraction_of(t.link_busy_s_to_host, s.end_s)}}}};
  }
  if (prefill_link) {
    // Which of the two streams into HBM has less slack: the prompts' KV over the link, or the
    // decode steps' reads.
    const double link = s.end_s > 0 ? t.prefill_link_busy_s / s.end_s : 0.0;
    const double hbm = s.end_s > 0 ? s.decode_s / s.end_s : 0.0;
    out["prefill_link"] = {
        {"link", plan.prefill_link},
        {"bytes", t.prefill_link_bytes},
        {"busy_s", t.prefill_link_busy_s},
        {"busy_fraction", fraction_of(t.prefill_link_busy_s, s.end_s)},
        {"prefill_node_busy_fraction", fraction_of(t.prefill_node_busy_s, s.end_s)},
        {"decode_busy_fraction", fraction_of(s.decode_s, s.end_s)},
        {"binds", link > hbm ? "link" : "hbm"}};
  }
}

// The schedule's side of one setting: the cache's trade and the decode steps it produced.
json schedule_json(const Trace& trace, const ReplaySchedule& s, const ReplayPlan& plan,
                   double simulate_s) {
  const ModelShape& model = plan.model;
  std::int64_t admitted = 0;
  std::vector<double> per_request;
  for (const RequestOutcome& r : s.requests) {
    if (r.admitted_s >= 0) ++admitted;
    if (r.decode_kv_tokens > 0) per_request.push_back(r.decode_kv_tokens * s.kv_bytes_per_token);
  }
  std::vector<double> step_bytes, batches;
  step_bytes.reserve(s.steps.size());
  batches.reserve(s.steps.size());
  double kv_tokens = 0, shared_tokens = 0;
  for (const DecodeStep& st : s.steps) {
    step_bytes.push_back(static_cast<double>(st.kv_tokens) * s.kv_bytes_per_token);
    batches.push_back(st.batch);
    kv_tokens += static_cast<double>(st.kv_tokens);
    shared_tokens += static_cast<double>(st.shared_tokens);
  }
  const std::int64_t params = model.num_params > 0      ? model.num_params
                              : model.has_layer_shape() ? params_from_shape(model)
                                                        : 0;
  // Host hits recomputed instead of reloaded saved nothing.
  const std::int64_t saved = s.hit_tokens - s.tiers.recomputed_tokens;
  json out = {
      {"requests",
       {{"total", static_cast<std::int64_t>(trace.requests.size())},
        {"admitted", admitted},
        {"rejected", s.rejected}}},
      {"hit_rate", s.hit_rate},
      {"input_tokens", s.input_tokens},
      {"hit_tokens", s.hit_tokens},
      {"blocks",
       {{"inserted", s.cache.inserted},
        {"evicted", s.cache.evicted},
        {"expired", s.cache.expired},
        {"peak", s.cache.peak_blocks}}},
      {"prefill_tokens_computed", s.prefill_tokens},
      {"prefill_tokens_saved", saved},
      {"prefill_flops_saved", 2.0 * static_cast<double>(params) * static_cast<double>(saved)},
      {"recomputed_tokens", s.recomputed_tokens},
      {"preemptions", s.preemptions},
      {"steps", static_cast<std::int64_t>(s.steps.size())},
      {"decode_tokens", s.decode_tokens},
      {"batch", distribution_json(batches)},
      {"kv_bytes_per_step", distribution_json(step_bytes)},
      {"decode_kv_bytes_per_request", distribution_json(per_request)},
      // What reading each concurrently shared page once would not read: cascade's saving.
      {"shareable_fraction", kv_tokens > 0 ? shared_tokens / kv_tokens : 0.0},
      {"weights_bytes_per_step", s.weights_bytes_per_step},
      {"modeled",
       {{"prefill_s", s.prefill_s},
        {"decode_s", s.decode_s},
        {"end_s", s.end_s},
        {"decode_tokens_per_s", s.decode_s > 0 ? json(s.decode_tokens / s.decode_s) : json()},
        {"cut_at_max_steps", s.cut}}},
      {"simulate_s", simulate_s},
  };
  add_tier_json(out, s, plan, trace.block_tokens);
  return out;
}

json plan_json(const Trace& trace, const ReplayPlan& plan,
               const std::vector<ReplaySetting>& settings) {
  json cells = json::array();
  for (const ReplaySetting& s : settings) {
    cells.push_back(setting_fields(s));
  }
  const MeasureOptions& m = plan.measure.measure;
  return {{"trace", trace.source},
          {"trace_format", trace_format_name(trace.format)},
          {"trace_block_tokens", trace.block_tokens},
          {"requests", static_cast<std::int64_t>(trace.requests.size())},
          {"model", plan.model.name},
          {"scope", scope_name(plan.scope)},
          {"kernel", plan.kernels},
          {"q_dtype", dtype_name(plan.q_dtype)},
          {"weights_dtype", dtype_name(plan.measure.weights_dtype)},
          {"block_size", plan.block_size},
          {"sample_steps", plan.sample_steps},
          {"rate_scale", plan.schedule.rate_scale},
          {"max_batch", plan.schedule.max_batch},
          {"max_steps", plan.schedule.max_steps},
          {"prefill_tokens_per_s", plan.schedule.prefill_tokens_per_s},
          {"decode_read_bytes_per_s", plan.schedule.decode_read_bytes_per_s},
          {"link_overhead_s", plan.schedule.link_overhead_s},
          {"prefill_link", plan.prefill_link.empty() ? json() : json(plan.prefill_link)},
          {"schedule_device", plan.schedule_device},
          {"seed", plan.measure.seed},
          {"validate_max_rows", plan.measure.validate_max_rows},
          {"measure",
           {{"min_samples", m.min_samples},
            {"min_time_s", m.min_time_s},
            {"max_noise", m.max_noise},
            {"timeout_s", m.timeout_s},
            {"warm_l2", m.warm_l2}}},
          {"settings", cells}};
}

}  // namespace

ScheduleConfig schedule_config(const ReplayPlan& plan, const ReplaySetting& setting) {
  ScheduleConfig sc = plan.schedule;
  sc.model = plan.model;
  sc.kv_dtype = setting.kv_dtype;
  sc.weights_dtype = plan.measure.weights_dtype;
  sc.page_tokens = plan.block_size;
  sc.kv_pool_bytes = setting.kv_pool_bytes;
  sc.policy = setting.policy;
  sc.ttl_s = setting.ttl_s;
  sc.host_capacity_tokens = setting.host_capacity_tokens;
  sc.link_to_device = setting.link_to_device;
  sc.link_to_host = setting.link_to_host;
  sc.reload = setting.reload;
  return sc;
}

json distribution_json(std::vector<double> v) {
  if (v.empty()) return {{"count", 0}};
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (numpy's default), so plots agree with it.
  const auto q = [&](double p) {
    const double pos = p * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return {{"count", static_cast<std::int64_t>(v.size())},
          {"mean", mean},
          {"p10", q(0.10)},
          {"p50", q(0.50)},
          {"p90", q(0.90)},
          {"p99", q(0.99)},
          {"max", v.back()}};
}

double model_step_seconds(const PointResult& r) {
  if (r.status != PointStatus::ok) return kNotAvailable;
  if (r.scope == Scope::layer) {
    if (!r.layer || !(r.layer->tokens_per_s_with_lm_head > 0)) return kNotAvailable;
    return r.batch / r.layer->tokens_per_s_with_lm_head;
  }
  if (!(r.time_s.median > 0)) return kNotAvailable;
  return r.time_s.median * r.num_layers;
}

StepPoint step_point(const Trace& trace, const ReplaySchedule& schedule, std::int64_t step,
                     const ReplayPlan& plan, DType kv_dtype, const std::string& kernel, int index) {
  StepPoint sp;
  sp.layout = step_layout(trace, schedule, step, plan.block_size);
  const auto [lo, hi] =
      std::minmax_element(sp.layout.context_lens.begin(), sp.layout.context_lens.end());
  WorkloadSpec& spec = sp.point.spec;
  spec.model = plan.model;
  spec.batch = static_cast<int>(sp.layout.context_lens.size());
  spec.context = *lo == *hi ? ContextSpec::fixed(*lo) : ContextSpec::ragged(*lo, *hi);
  spec.hit_rate = 0;  // the sharing is the layout's (hit_rate_actual), not the generator's
  spec.prefix_groups = 1;
  spec.kv_dtype = kv_dtype;
  spec.q_dtype = plan.q_dtype;
  spec.block_size = plan.block_size;
  spec.seed = plan.measure.seed;
  sp.point.scope = plan.scope;
  sp.point.kernel = kernel;
  sp.point.index = index;
  return sp;
}

Report run_replay(Backend& backend, const DeviceInfo& device, const Trace& trace,
                  const ReplayPlan& plan, const std::vector<ReplaySetting>& settings,
                  const ReplayRunOptions& options) {
  if (settings.empty()) throw InputError("replay: no settings to run");
  if (plan.sample_steps < 1) {
    throw InputError(fmt::format(
        "--sample-steps must be >= 1, got {} (the steps measured per setting)", plan.sample_steps));
  }
  Report report = new_report();
  report.devices = {device};
  report.config = plan_json(trace, plan, settings);
  report.completion.points_planned =
      static_cast<int>(settings.size() * plan.kernels.size()) * plan.sample_steps;
  json finished = json::array();
  json replay = {
      {"trace", trace_summary_json(trace)},
      {"model", plan.model.name},
      {"scope", scope_name(plan.scope)},
      {"schedule_model",
       {{"device", plan.schedule_device},
        {"prefill_tokens_per_s", plan.schedule.prefill_tokens_per_s},
        {"prefill_rate_basis", plan.prefill_rate_basis},
        {"decode_read_bytes_per_s", plan.schedule.decode_read_bytes_per_s},
        {"read_rate_basis", plan.read_rate_basis},
        {"rate_scale", plan.schedule.rate_scale},
        {"max_batch", plan.schedule.max_batch},
        {"page_tokens", plan.block_size},
        {"definition",
         "continuous batching over one device (src/trace/replay_schedule.h): FCFS admission while "
         "the batch and the KV pool allow, the uncached prompt prefilled at the modeled rate, one "
         "token per running sequence per step at the modeled read rate, recompute preemption; "
         "with a host tier its hits reloaded over the link (one transfer at a time per direction, "
         "the sequence waiting) or recomputed; with a prefill link every prefill done on a "
         "prefill node and its KV sent over the link"},
        {"link_overhead_s", plan.schedule.link_overhead_s},
        {"prefill_link", plan.prefill_link.empty() ? json() : json(plan.prefill_link)}}},
      {"interpolation", kInterpolationMethod},
      {"settings", finished},
  };
  const auto publish = [&](const json* current) {
    json all = finished;
    if (current) all.push_back(*current);
    report.replay = replay;
    report.replay["settings"] = all;
  };
  PointRun run(report, options.run, "replay");
  publish(nullptr);
  run.start();

  // The steps to measure: each simulated setting's sampled count, sample_steps for the rest.
  const auto start = std::chrono::steady_clock::now();
  int steps_planned = static_cast<int>(settings.size() * plan.kernels.size()) * plan.sample_steps;
  try {
    int index = 0;
    bool stopped = false;
    for (std::size_t si = 0; si < settings.size() && !stopped; ++si) {
      const ReplaySetting& setting = settings[si];
      const ScheduleConfig sc = schedule_config(plan, setting);
      const auto t0 = std::chrono::steady_clock::now();
      const ReplaySchedule schedule = simulate_schedule(trace, sc);
      const double simulate_s = seconds_since(t0);
      const std::vector<std::int64_t> sampled = sample_steps(schedule, plan.sample_steps);
      steps_planned -= static_cast<int>(plan.kernels.size()) *
                       (plan.sample_steps - static_cast<int>(sampled.size()));
      json cell = {{"setting", setting_json(setting, schedule, trace.block_tokens)},
                   {"schedule", schedule_json(trace, schedule, plan, simulate_s)},
                   {"kernels", json::array()}};
      if (options.progress) {
        options.progress(fmt::format(
            "setting {}/{}: pool {:.3g} GB {} kv={}: {} steps simulated in {:.2f} s, hit rate "
            "{:.3f}, measuring {} of them",
            si + 1, settings.size(), static_cast<double>(setting.kv_pool_bytes) / 1e9,
            policy_name(setting.policy), dtype_name(setting.kv_dtype), schedule.steps.size(),
            simulate_s, schedule.hit_rate, sampled.size()));
      }
      for (const std::string& kernel : plan.kernels) {
        json steps = json::array();
        std::vector<double> times;
        std::string failed;
        for (std::int64_t step : sampled) {
          if (run.stop_requested()) {
            stopped = true;
            break;
          }
          const StepPoint sp =
              step_point(trace, schedule, step, plan, setting.kv_dtype, kernel, index);
          PointResult r = not_run_result(sp.point, backend.name());
          run.at(fmt::format("replay step {} ({})", step, kernel));
          const PointEnd end = run.measure(r, [&](PointResult& out) {
            out = run_layout_point(backend, sp.point, sp.layout, plan.measure, device,
                                   options.run.interrupted);
          });
          if (end == PointEnd::interrupted) {
            stopped = true;
            break;
          }
          if (end == PointEnd::device_failed) {
            run.device_failure(fmt::format("replay step {}", step), r.reason);
            stopped = true;
          }
          r.index = index++;
          const DecodeStep& st = schedule.steps[static_cast<std::size_t>(step)];
          const double t = model_step_seconds(r);
          steps.push_back(
              {{"step", step},
               {"batch", st.batch},
               {"kv_tokens", st.kv_tokens},
               {"shared_tokens", st.shared_tokens},
               {"kv_bytes", static_cast<double>(st.kv_tokens) * schedule.kv_bytes_per_token},
               {"read_bytes", st.read_bytes},
               {"result", r.index},
               {"kernel", r.kernel},
               {"status", status_name(r.status)},
               {"step_s", number_or_null(t)},
               {"modeled_s", st.modeled_s}});
          if (!std::isfinite(t) && failed.empty()) {
            failed = fmt::format("step {} is {}{}{}", step, status_name(r.status),
                                 r.reason.empty() ? "" : ": ", r.reason);
          }
          times.push_back(t);
          if (options.run.progress) {
            options.run.progress(static_cast<int>(report.results.size()) + 1, steps_planned,
                                 seconds_since(start), r);
          }
          report.results.push_back(std::move(r));
          json current = cell;
          current["kernels"].push_back(
              {{"kernel", kernel}, {"steps", steps}, {"measured", nullptr}});
          publish(&current);
          run.point_done();
          if (stopped) break;
        }
        json measured;
        if (!stopped && failed.empty() && !times.empty()) {
          const double decode_s = interpolate_decode_time(schedule, sampled, times);
          measured = {
              {"decode_s", decode_s},
              {"tokens_per_s", decode_s > 0 ? json(schedule.decode_tokens / decode_s) : json()},
              {"steps_measured", static_cast<std::int64_t>(times.size())}};
        } else if (!failed.empty()) {
          measured = {{"reason", failed}};
        }
        cell["kernels"].push_back({{"kernel", kernel}, {"steps", steps}, {"measured", measured}});
        if (stopped) break;
      }
      finished.push_back(cell);
    }
    publish(nullptr);
    if (report.completion.state == Completion::State::running) {
      if (stopped)
        run.interrupt(fmt::format("interrupted after {} measured steps", report.results.size()));
      else
        report.completion.points_planned = static_cast<int>(report.results.size());
    }
    run.finish();
    return report;
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    publish(nullptr);
    run.fail(e);
    throw;
  }
}

}  // namespace decodebench
