#include "backends/cpu/cpu_busy.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace decodebench::cpu {
namespace {

// Linux's clock id of thread `tid`'s CPU time (CPUCLOCK_SCHED, per thread): what glibc's
// pthread_getcpuclockid returns, built from a thread id (include/linux/posix-timers.h).
clockid_t thread_cpu_clock(pid_t tid) {
  constexpr clockid_t kPerThread = 4, kSched = 2;
  return static_cast<clockid_t>((~static_cast<clockid_t>(tid) << 3) | kPerThread | kSched);
}

std::int64_t to_ns(const timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

std::int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return to_ns(t);
}

}  // namespace

std::vector<pid_t> process_thread_ids() {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long id = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && id > 0) tids.push_back(static_cast<pid_t>(id));
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

ThreadBusyMeter::ThreadBusyMeter(int threads) : threads_(threads) {
  if (threads < 1)
    throw std::invalid_argument(fmt::format("threads must be >= 1, got {}", threads));
}

void ThreadBusyMeter::reset() {
  tids_ = process_thread_ids();
  clocks_.clear();
  for (pid_t tid : tids_) clocks_.push_back(thread_cpu_clock(tid));
  at_start_.assign(tids_.size(), 0);
  at_stop_.assign(tids_.size(), 0);
  cpu_ns_ = window_ns_ = 0;
  windows_ = 0;
  started_ = false;
  failure_.clear();
  if (tids_.empty()) failure_ = "/proc/self/task lists no thread";
}

bool ThreadBusyMeter::read_clocks(std::vector<std::int64_t>& out) {
  for (std::size_t i = 0; i < clocks_.size(); ++i) {
    timespec t{};
    if (clock_gettime(clocks_[i], &t) != 0) {
      const int err = errno;
      failure_ = fmt::format(
          "thread {} ended during the samples: its CPU time cannot be read ({}), so the threads' "
          "busy time is not known",
          tids_[i], std::strerror(err));
      return false;
    }
    out[i] = to_ns(t);
  }
  return true;
}

void ThreadBusyMeter::start() {
  started_ = false;
  if (!failure_.empty()) return;
  window_start_ns_ = monotonic_ns();
  started_ = read_clocks(at_start_);
}

void ThreadBusyMeter::stop() {
  if (!started_ || !failure_.empty()) return;
  started_ = false;
  if (!read_clocks(at_stop_)) return;
  const std::int64_t window_end = monotonic_ns();
  for (std::size_t i = 0; i < at_stop_.size(); ++i) cpu_ns_ += at_stop_[i] - at_start_[i];
  window_ns_ += window_end - window_start_ns_;
  ++windows_;
}

void ThreadBusyMeter::finish() {
  if (!failure_.empty()) return;
  const std::vector<pid_t> now = process_thread_ids();
  if (now == tids_) return;
  std::vector<pid_t> started, ended;
  std::set_difference(now.begin(), now.end(), tids_.begin(), tids_.end(),
                      std::back_inserter(started));
  std::set_difference(tids_.begin(), tids_.end(), now.begin(), now.end(),
                      std::back_inserter(ended));
  failure_ = fmt::format(
      "the process's threads changed during the samples (started: {}; ended: {}), so the CPU "
      "time of some is not counted",
      started.empty() ? std::string("none") : fmt::format("{}", fmt::join(started, ", ")),
      ended.empty() ? std::string("none") : fmt::format("{}", fmt::join(ended, ", ")));
}

UtilizationRecord ThreadBusyMeter::record() const {
  UtilizationRecord r;
  r.source = BusySource::cpu_threads;
  r.threads = threads_;
  if (!failure_.empty()) {
    r.note = failure_;
    return r;
  }
  if (windows_ == 0) {
    r.note = "no timed step was measured";
    return r;
  }
  r.cpu_time_s = static_cast<double>(cpu_ns_) * 1e-9;
  r.window_s = static_cast<double>(window_ns_) * 1e-9;
  r.busy =
      r.window_s > 0 ? r.cpu_time_s / (r.window_s * threads_) : UtilizationRecord::kNotAvailable;
  if (!(r.window_s > 0)) r.note = "the windows around the timed steps took no measurable time";
  return r;
}

}  // namespace decodebench::cpu
