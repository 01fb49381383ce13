// Runs a sweep on a backend: for each point, skip (with the backend's reason), validate against
// the CPU reference, then time with the stopping rule and fill the report entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "backends/backend.h"
#include "harness/sweep_config.h"
#include "report/report.h"

namespace decodebench {

struct RunOptions {
  // After each point (on the calling thread): points done, points total, seconds since start,
  // the point just finished. The CLI prints "point i/N, elapsed, ETA" from this.
  std::function<void(int done, int total, double elapsed_s, const PointResult&)> progress;
  // Polled between points (a SIGINT handler sets it): the sweep stops, keeping finished points,
  // with completion.state = interrupted.
  std::atomic<bool>* interrupted = nullptr;
  // Called with the report so far after each point (the CLI writes it atomically, so a killed
  // sweep leaves every finished point on disk).
  std::function<void(const Report&)> checkpoint;
  // Ceilings already measured in this process (e.g. by `decodebench ceilings`); when absent the
  // runner calls backend.measure_ceilings() once before the first point.
  std::optional<Ceilings> ceilings;
  // A subset-validated point whose host workload (workload_host_bytes) is larger than this is
  // offered to the backend layout-only. Below it, generating the data on the host costs well
  // under a second, and backends that need host data (cpu, emu) are not asked.
  std::int64_t layout_only_above_bytes = std::int64_t{256} << 20;
};

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
//    completion.state = device_failure; any other exception makes just that point `error`.
Report run_sweep(Backend& backend, const SweepConfig& config, const RunOptions& options = {});

// Validation only (`decodebench check`): status ok, wrong (with the error record) or skipped
// (the backend's reason); no timing. Exceptions (RuntimeFailure, InputError) propagate.
PointResult run_check_point(Backend& backend, const SweepPoint& point, int validate_max_rows = 64);

}  // namespace decodebench
