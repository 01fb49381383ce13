#include "harness/point_run.h"

#include <utility>

#include <fmt/format.h>

#include "common/errors.h"
#include "harness/abandon_watch.h"
#include "harness/measure.h"

namespace decodebench {

PointEnd measure_guarded(PointResult& r, const std::function<void(PointResult&)>& measure) {
  PointEnd end = PointEnd::measured;
  try {
    measure(r);
  } catch (const Interrupted&) {
    return PointEnd::interrupted;
  } catch (const RuntimeFailure& e) {
    r.status = PointStatus::error;
    r.reason = e.what();
    end = PointEnd::device_failed;
  } catch (const std::exception& e) {
    r.status = PointStatus::error;
    r.reason = e.what();
  }
  if (r.status != PointStatus::ok) {
    r.samples.clear();
    r.timing.reset();
  }
  return end;
}

void mark_device_failure(Report& report, const std::string& where, const std::string& reason) {
  report.completion.state = Completion::State::device_failure;
  report.completion.reason = fmt::format("device failure at {}: {}", where, reason);
}

PointRun::PointRun(Report& report, const RunOptions& options, std::string what)
    : report_(report),
      options_(options),
      what_(std::move(what)),
      watch_(std::make_unique<AbandonWatch>(options)) {}

PointRun::~PointRun() = default;

void PointRun::start() {
  report_.completion.state = Completion::State::running;
  report_.completion.reason = fmt::format(
      "written while the {} ran: a file left so was written by a process that is "
      "still running or was killed",
      what_);
  watch_->publish(report_, "the start");
  if (options_.checkpoint) options_.checkpoint(report_);
}

bool PointRun::stop_requested() const {
  return options_.interrupted && options_.interrupted->load();
}

void PointRun::interrupt(std::string reason) {
  watch_->acknowledge();
  report_.completion.state = Completion::State::interrupted;
  report_.completion.reason = std::move(reason);
}

void PointRun::at(std::string where) { watch_->publish(report_, std::move(where)); }

void PointRun::phase(std::string where) { watch_->phase(std::move(where)); }

PointEnd PointRun::measure(PointResult& r, const std::function<void(PointResult&)>& measure) const {
  return measure_guarded(r, measure);
}

void PointRun::device_failure(const std::string& where, const std::string& reason) {
  mark_device_failure(report_, where, reason);
}

void PointRun::point_done() {
  if (options_.checkpoint) options_.checkpoint(report_);
}

void PointRun::finish() {
  if (report_.completion.state != Completion::State::running) return;
  report_.completion.state = Completion::State::complete;
  report_.completion.reason.clear();
}

void PointRun::fail(const std::exception& error) {
  record_failure(report_, error, options_.checkpoint);
}

}  // namespace decodebench
