// The watcher that ends a run (sweep, replay) stuck in a call which cannot poll the stop flag
// (the ceilings, a reference, a long kernel): once the flag has been set for
// RunOptions::abandon_after_s and the run has not seen it, the last published report goes to
// RunOptions::abandon (on the watcher's thread) marked interrupted. Without options.abandon or
// options.interrupted it does nothing. Used through PointRun (point_run.h).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "harness/runner.h"
#include "results/report.h"

namespace decodebench {

class AbandonWatch {
 public:
  explicit AbandonWatch(const RunOptions& o);
  ~AbandonWatch();
  AbandonWatch(const AbandonWatch&) = delete;
  AbandonWatch& operator=(const AbandonWatch&) = delete;

  // What to hand over if the run gets stuck from here on, and where it is stuck.
  void publish(const Report& r, std::string phase);
  void phase(std::string phase);
  // The run has seen the stop flag and finishes the report itself.
  void acknowledge();

 private:
  void watch();

  const RunOptions& options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Report snapshot_;
  std::string phase_ = "the run";
  bool acknowledged_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace decodebench
