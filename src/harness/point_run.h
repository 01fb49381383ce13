// How a command that runs points into a report (sweep, replay) keeps that report while it runs
// and how the run ends: the one implementation of these rules. What a point is and the order of
// the points are the caller's.
//
//   start()           completion `running` (a file left so was written by a process that is
//                     still running or was killed), checkpointed before anything is measured
//   stop_requested()  the stop flag (SIGINT/SIGTERM), polled by the caller between points;
//                     interrupt(reason) ends the run `interrupted`, finished points kept
//   measure()         one point: how it ends (measure_guarded); a device failure marks the run
//                     `device_failure` (device_failure()) and the caller stops
//   point_done()      after each published point: the checkpoint
//   finish()          a run still `running` becomes `complete`
//   fail(e)           an error that is not a point's own (the ceilings, a checkpoint write): the
//                     run `failed`, checkpointed once more; the caller rethrows
// A stop that a call cannot poll (the ceilings, a reference, a long kernel) is handed to the
// AbandonWatch (abandon_watch.h) with the report last published by start(), at() or
// point_done().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "harness/runner.h"
#include "results/report.h"

namespace decodebench {

class AbandonWatch;

// How one point's measurement ended. `measure` fills `r`; Interrupted leaves the point to be
// dropped unpublished (interrupted); a RuntimeFailure (a device failure, which may leave the
// device unusable: a sticky CUDA error) makes it `error` and must end the run (device_failed);
// any other exception makes just that point `error`. A point that is not ok keeps no samples.
enum class PointEnd { measured, interrupted, device_failed };
PointEnd measure_guarded(PointResult& r, const std::function<void(PointResult&)>& measure);
// The run's completion after a device failure at `where` ("point 3 (3 of 8 points done)").
void mark_device_failure(Report& report, const std::string& where, const std::string& reason);

class PointRun {
 public:
  // `report` and `options` outlive this. `what` names the run in the running state's reason
  // ("sweep", "replay"). Uses options.interrupted, checkpoint, abandon and abandon_after_s.
  PointRun(Report& report, const RunOptions& options, std::string what);
  ~PointRun();
  PointRun(const PointRun&) = delete;
  PointRun& operator=(const PointRun&) = delete;

  void start();
  bool stop_requested() const;
  // Ends the run `interrupted` with `reason`; the watcher stands down.
  void interrupt(std::string reason);
  // Where the run is now, for a stop that cannot be polled there: `at` also hands the watcher
  // the report as it stands.
  void at(std::string where);
  void phase(std::string where);
  PointEnd measure(PointResult& r, const std::function<void(PointResult&)>& measure) const;
  void device_failure(const std::string& where, const std::string& reason);
  void point_done();
  void finish();
  void fail(const std::exception& error);

 private:
  Report& report_;
  const RunOptions& options_;
  std::string what_;
  std::unique_ptr<AbandonWatch> watch_;
};

}  // namespace decodebench
