// Runs a sweep on a backend: for each point, skip (with the backend's reason), validate against
// the CPU reference, then time with the stopping rule and fill the report entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "backends/backend.h"
#include "harness/sweep_config.h"
#include "results/report.h"

namespace decodebench {

struct RunOptions {
  // After each point (on the calling thread): points done (a resumed sweep counts the points it
  // kept), points total, seconds since the first point, the point just finished. The CLI prints
  // "point i/N, elapsed, ETA" from this.
  std::function<void(int done, int total, double elapsed_s, const PointResult&)> progress;
  // Polled before the ceilings, between points, between a point's steps and between its samples
  // (a SIGINT/SIGTERM handler sets it): the sweep stops with completion.state = interrupted,
  // keeping finished points; the point it was in stays not_run.
  std::atomic<bool>* interrupted = nullptr;
  // Called with the report so far: once before the ceilings (every point not_run) and after each
  // point, with completion.state = running (device_failure after a device failure). The CLI
  // writes it atomically, so a killed sweep leaves every finished point on disk and never a
  // report that claims to be complete.
  std::function<void(const Report&)> checkpoint;
  // Called on a watcher thread when `interrupted` has been set for abandon_after_s and the sweep
  // is still inside a call that cannot poll it (the ceilings measurement, a reference, a long
  // kernel), with the last checkpointed report marked interrupted. It must write what it needs
  // and end the process (the stuck call still runs on the sweep's thread). Unset: the sweep
  // stops when the call returns.
  std::function<void(const Report&)> abandon;
  double abandon_after_s = 1.0;
  // Ceilings already measured in this process (e.g. by `decodebench ceilings`); when absent the
  // runner calls backend.measure_ceilings() once before the first point.
  std::optional<Ceilings> ceilings;
  // A subset-validated point whose host workload (workload_host_bytes) is larger than this is
  // offered to the backend layout-only. Below it, generating the data on the host costs well
  // under a second, and backends that need host data (cpu, emu) are not asked.
  std::int64_t layout_only_above_bytes = std::int64_t{256} << 20;
  // `sweep --resume`: a report of this same sweep (check_resumable) whose finished points are
  // kept as they are; only its not_run (or absent) points run. Its ceilings are reused when it
  // has measured ones and `ceilings` is not given.
  const Report* resume = nullptr;
};

// A planned point that has not run: its identity only (status not_run; no layout, bytes or
// times).
PointResult not_run_result(const SweepPoint& p, const std::string& backend);

// Throws InputError unless `previous` can be resumed as this sweep: the same tool version and
// git sha, the same config (every key, shard included; the message names each that differs),
// the same device (backend and name), and every point it lists is one of `points` (by index,
// with the same identity), once.
void check_resumable(const Report& previous, const SweepConfig& config, const DeviceInfo& device,
                     const std::vector<SweepPoint>& points, const std::string& backend);

// Every name in `requested` is "auto", "all" or a kernel of `backend` (InputError naming the
// kernel and listing the valid ones). The sweep, check and replay commands check before they
// start; run_sweep checks again for callers that did not.
void check_kernel_names(const std::vector<std::string>& requested, const Backend& backend);

// One report for the shard of `config` that this process runs.
//  - The report's config is to_json(config), devices[0] the backend's device with ceilings.
//  - Kernel names are checked against backend.kernel_names() first (InputError listing them);
//    "auto" is resolved per point with backend.choose_kernel() and both names are recorded.
//  - A point the backend cannot run (skip_reason non-empty) is `skipped` with that reason.
//  - Validation before timing: up to validate_max_rows sequences, all of them against
//    reference_decode(make_workload(spec)); beyond, the deterministic subset
//    validation_subset(layout, validate_max_rows) (workload.h) against the reference on the
//    subset workload, compared with those rows of the backend's output. Any element outside the
//    dtype's tolerance (or NaN) makes the point `wrong`, with the first mismatch in the reason,
//    and it is not timed: a wrong point publishes no time, bandwidth or tokens/s.
//  - Host memory: when only a subset is validated and the host workload would exceed
//    options.layout_only_above_bytes, the backend is first offered the point layout-only
//    (backend.h: q/k_cache/v_cache empty, the device fills them); a backend that throws InputError
//    gets make_workload(spec) instead. A workload that does not fit host memory (std::bad_alloc)
//    makes the point `skipped`.
//  - fp8 KV: error.quant_rel = the reference on fp8 KV vs on the unquantized values.
//  - A RuntimeFailure (device failure) records the point as `error` and ends the sweep with
//    completion.state = device_failure; any other exception makes just that point `error`. An
//    exception outside a point (the ceilings, a checkpoint write) is rethrown after the report is
//    marked failed and checkpointed once more.
//  - results[] lists every planned point in expansion order; the ones not run (interrupted,
//    device failure) have status not_run.
Report run_sweep(Backend& backend, const SweepConfig& config, const RunOptions& options = {});

// One point on a layout the caller built (a replayed decode step: ragged contexts, the trace's
// sharing, src/trace/replay_schedule.h) instead of build_layout(point.spec): skipped, validated
// and timed as run_sweep does its points, with config's measure, validation and weights
// settings; the roofline against `device`'s ceilings. The layout must have point.spec.batch rows.
// Errors of the point make it `error`; a RuntimeFailure (device failure) and Interrupted (`stop`
// set) propagate.
PointResult run_layout_point(Backend& backend, const SweepPoint& point, const PagedLayout& layout,
                             const SweepConfig& config, const DeviceInfo& device,
                             const std::atomic<bool>* stop = nullptr);

// Validation only (`decodebench check`): status ok, wrong (with the error record) or skipped
// (the backend's reason); no timing. Exceptions (RuntimeFailure, InputError) propagate.
PointResult run_check_point(Backend& backend, const SweepPoint& point, int validate_max_rows = 64);

}  // namespace decodebench
