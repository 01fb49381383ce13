// The cpu backend's busy figure (docs/design.md "Busy beside the roof"): the CPU time of this
// process's threads in a window around each timed step, over the windows' wall time times the
// threads the step runs (the OpenMP team, devices[].sm_count). What `top` would show for those
// threads during the steps: a memory-bound step keeps them at 100 % while they wait on DRAM.
//
// Each thread's CPU time is read from its own Linux thread CPU clock (the clock id glibc's
// pthread_getcpuclockid builds from a thread id), which the kernel brings up to date when it is
// read, also for a thread running on another core at that moment. CLOCK_PROCESS_CPUTIME_ID and
// getrusage are not brought up to date for the other running threads: they lag by up to a
// scheduler tick (4 ms at 250 Hz) per thread, longer than many steps. The threads are those of
// /proc/self/task when the samples begin: the OpenMP team and any pool a GEMM library keeps.
//
// A window: the wall clock, then every thread's CPU clock (start); the step with its own clock
// reads; every thread's CPU clock, then the wall clock (stop). Each thread's CPU time is read
// inside the window, so it cannot exceed the window: the sum exceeds window x threads only when
// more threads than the team were on a core (a second pool spinning against the team), which is
// reported, never clamped (src/harness/utilization.h). The cold flush before a sample is outside.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "results/utilization_record.h"

namespace decodebench::cpu {

// The thread ids of /proc/self/task, ascending.
std::vector<pid_t> process_thread_ids();

class ThreadBusyMeter {
 public:
  // `threads`: the threads a step runs, the denominator (>= 1).
  explicit ThreadBusyMeter(int threads);

  void reset();   // lists the process's threads, drops the sums (begin_utilization)
  void start();   // right before the step's first clock read
  void stop();    // right after its last: adds the threads' CPU time and the window
  void finish();  // lists the threads again (end_utilization): a thread that started or ended
                  // during the samples makes the figure unavailable, named in the note
  UtilizationRecord record() const;

  int listed() const { return static_cast<int>(tids_.size()); }  // threads whose clocks are read
  int windows() const { return windows_; }

 private:
  // Every listed thread's CPU time now, ns, into `out`; false (with failure_ set) when a clock
  // cannot be read (its thread ended).
  bool read_clocks(std::vector<std::int64_t>& out);

  int threads_;
  std::vector<pid_t> tids_;
  std::vector<clockid_t> clocks_;
  std::vector<std::int64_t> at_start_, at_stop_;
  std::int64_t window_start_ns_ = 0;
  std::int64_t cpu_ns_ = 0, window_ns_ = 0;
  int windows_ = 0;
  bool started_ = false;
  std::string failure_;  // the first reason the figure is unavailable
};

}  // namespace decodebench::cpu
