#include "harness/abandon_watch.h"

#include <chrono>

#include <fmt/format.h>

#include "harness/measure.h"

namespace decodebench {

AbandonWatch::AbandonWatch(const RunOptions& o) : options_(o) {
  if (!o.abandon || !o.interrupted) return;
  thread_ = std::thread([this] { watch(); });
}

AbandonWatch::~AbandonWatch() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AbandonWatch::publish(const Report& r, std::string phase) {
  if (!thread_.joinable()) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  snapshot_ = r;
  phase_ = std::move(phase);
}

void AbandonWatch::phase(std::string phase) {
  if (!thread_.joinable()) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  phase_ = std::move(phase);
}

void AbandonWatch::acknowledge() {
  if (!thread_.joinable()) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  acknowledged_ = true;
}

void AbandonWatch::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  double since = -1;
  while (!done_) {
    wake_.wait_for(lock, std::chrono::milliseconds(20));
    if (done_ || acknowledged_ || !options_.interrupted->load()) continue;
    if (since < 0) since = steady_seconds();
    if (steady_seconds() - since < options_.abandon_after_s) continue;
    Report r = snapshot_;
    r.completion.state = Completion::State::interrupted;
    r.completion.reason =
        fmt::format("interrupted during {}, which did not stop within {:g} s and was abandoned",
                    phase_, options_.abandon_after_s);
    options_.abandon(r);  // ends the process
    return;
  }
}

}  // namespace decodebench
