// The measuring half of `decodebench replay` (docs/design.md "Trace replay"): for each setting
// of the operator's table (KV pool, cache policy and TTL, KV dtype) the trace's schedule is
// simulated (src/trace/replay_schedule.h), a sample of its decode steps is built as real
// workloads (step_layout: ragged contexts, the trace's sharing as shared physical pages),
// validated against the CPU reference and timed on the backend with each kernel, and the
// trace's decode tokens/s is estimated from them. The report is a sweep report whose results[]
// are the measured steps, plus the `replay` section (docs/report-schema.md "replay").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "harness/runner.h"
#include "harness/sweep_config.h"
#include "results/report.h"
#include "trace/prefix_cache.h"
#include "trace/replay_schedule.h"
#include "trace/trace.h"

namespace decodebench {

// One cell of the operator's table: what the schedule depends on besides the trace.
struct ReplaySetting {
  std::int64_t kv_pool_bytes = 0;
  EvictionPolicy policy = EvictionPolicy::lru;
  double ttl_s = 0;  // ttl only
  DType kv_dtype = DType::bf16;
  // A host tier behind the pool (tokens, 0: none), the link its blocks cross (a configs/
  // devices.json "links" key and its rates; empty: bytes counted, no time) and what a host hit
  // does.
  double host_capacity_tokens = 0;
  std::string link{};  // {}: GCC warns where a designated initializer omits a member without one
  double link_to_device = 0;
  double link_to_host = 0;
  ReloadPolicy reload = ReloadPolicy::always;
};

// Everything the settings share.
struct ReplayPlan {
  ModelShape model;
  Scope scope = Scope::layer;                // what each sampled step times
  std::vector<std::string> kernels{"auto"};  // each sampled step runs with each
  DType q_dtype = DType::bf16;               // the activations': 16-bit weights' own, else bf16
  int block_size = 16;                       // the kernels' page size (and the schedule's)
  int sample_steps = 8;                      // steps measured per setting
  // The schedule's fixed inputs (kv_pool_bytes, policy, ttl_s and kv_dtype come per setting).
  ScheduleConfig schedule;
  // Where the modeled rates come from, for the report: "NVIDIA H200 (datasheet): ...".
  std::string schedule_device;
  std::string prefill_rate_basis;
  std::string read_rate_basis;
  // How each step is measured: measure, validate_max_rows, weights_dtype, seed.
  SweepConfig measure;
  std::string prefill_link;  // disaggregated prefill: the link's key (schedule has its rate)
};

// The schedule of one setting: the plan's fixed inputs with the setting's.
ScheduleConfig schedule_config(const ReplayPlan& plan, const ReplaySetting& setting);

struct ReplayRunOptions {
  // Each measured step is a point of the run, as a sweep's (point_run.h): run.interrupted is
  // polled between and inside steps, run.checkpoint gets the report after each step, run.abandon
  // a stop that a call did not heed, and run.progress each step as the sweep prints a point (the
  // steps measured so far, of how many: those of the settings not yet simulated counted at
  // sample_steps). Its ceilings, resume and layout_only_above_bytes are not used.
  RunOptions run;
  // A line per setting (its schedule simulated): for the CLI's progress on stderr.
  std::function<void(const std::string&)> progress;
};

// The report of the whole table. devices[0] is `device` (its ceilings measured: the rooflines of
// the steps use them). A device failure stops the replay with completion.state device_failure,
// an interrupt with interrupted; the settings finished stay in `replay`.
Report run_replay(Backend& backend, const DeviceInfo& device, const Trace& trace,
                  const ReplayPlan& plan, const std::vector<ReplaySetting>& settings,
                  const ReplayRunOptions& options = {});

// A sampled step as a sweep point: the spec (batch = the step's sequences, context ragged over
// their [min, max], hit_rate 0: the sharing is the layout's), and its layout (step_layout).
struct StepPoint {
  SweepPoint point;
  PagedLayout layout;
};
StepPoint step_point(const Trace& trace, const ReplaySchedule& schedule, std::int64_t step,
                     const ReplayPlan& plan, DType kv_dtype, const std::string& kernel, int index);

// The time of the whole model's decode step from a measured step: at scope layer
// batch / tokens_per_s_with_lm_head (every layer and the LM head), at scope attention
// time x num_layers (the attention alone). kNotAvailable when the step is not ok.
double model_step_seconds(const PointResult& r);

// Summary statistics the replay section gives for distributions.
nlohmann::json distribution_json(
    std::vector<double> values);  // {count, mean, p10, p50, p90, p99, max}

}  // namespace decodebench
