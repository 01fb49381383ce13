#include "backends/nvml.h"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace decodebench::nvml {
namespace {

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

template <class Fn>
Fn symbol(void* library, const char* name) {
  (void)dlerror();
  return reinterpret_cast<Fn>(dlsym(library, name));
}

void add_note(std::string& note, const std::string& line) {
  if (!note.empty()) note += "; ";
  note += line;
}

}  // namespace

std::unique_ptr<Device> Device::open(const std::string& pci_bus_id, unsigned index) {
  const char* env = std::getenv(kLibraryEnv);
  const std::string library = env && *env ? env : kDefaultLibrary;
  return open_library(library, pci_bus_id, index);
}

std::unique_ptr<Device> Device::open_library(const std::string& library,
                                             const std::string& pci_bus_id, unsigned index) {
  std::unique_ptr<Device> d(new Device());
  d->library_ = library;
  // Loaded for the life of the process (never dlclose'd), as cuBLASLt: NVML may keep threads.
  (void)dlerror();
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    d->error_ = fmt::format("NVML unavailable: cannot load {} ({})", library,
                            err ? err : "unknown dlopen error");
    return d;
  }
  const auto init = symbol<InitFn>(lib, "nvmlInit_v2");
  d->shutdown_ = symbol<ShutdownFn>(lib, "nvmlShutdown");
  const auto by_index = symbol<HandleByIndexFn>(lib, "nvmlDeviceGetHandleByIndex_v2");
  const auto by_bus = symbol<HandleByPciBusIdFn>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  d->utilization_ = symbol<UtilizationFn>(lib, "nvmlDeviceGetUtilizationRates");
  d->energy_ = symbol<EnergyFn>(lib, "nvmlDeviceGetTotalEnergyConsumption");
  d->power_ = symbol<PowerFn>(lib, "nvmlDeviceGetPowerUsage");
  d->error_string_ = symbol<ErrorStringFn>(lib, "nvmlErrorString");
  std::vector<std::string> missing;
  if (!init) missing.emplace_back("nvmlInit_v2");
  if (!d->shutdown_) missing.emplace_back("nvmlShutdown");
  if (pci_bus_id.empty() ? !by_index : !by_bus) {
    missing.emplace_back(pci_bus_id.empty() ? "nvmlDeviceGetHandleByIndex_v2"
                                            : "nvmlDeviceGetHandleByPciBusId_v2");
  }
  if (!missing.empty()) {
    d->error_ = fmt::format("NVML unavailable: {} lacks {}", library, fmt::join(missing, ", "));
    return d;
  }
  if (const Return rc = init(); rc != kSuccess) {
    d->error_ = "NVML unavailable: " + d->failure("nvmlInit_v2", rc);
    return d;
  }
  d->initialized_ = true;
  const Return rc =
      pci_bus_id.empty() ? by_index(index, &d->handle_) : by_bus(pci_bus_id.c_str(), &d->handle_);
  if (rc != kSuccess) {
    d->error_ = fmt::format(
        "NVML unavailable: no device {} ({})",
        pci_bus_id.empty() ? fmt::format("at index {}", index) : "with PCI bus id " + pci_bus_id,
        d->failure(pci_bus_id.empty() ? "nvmlDeviceGetHandleByIndex_v2"
                                      : "nvmlDeviceGetHandleByPciBusId_v2",
                   rc));
    d->handle_ = nullptr;
  }
  return d;
}

std::unique_ptr<Device> Device::unavailable(const std::string& reason) {
  std::unique_ptr<Device> d(new Device());
  d->error_ = "NVML unavailable: " + reason;
  return d;
}

Device::~Device() {
  if (initialized_ && shutdown_) (void)shutdown_();
}

std::string Device::failure(const char* call, Return rc) const {
  const char* text = error_string_ ? error_string_(rc) : nullptr;
  return text ? fmt::format("{}: {} (NVML error {})", call, text, rc)
              : fmt::format("{}: NVML error {}", call, rc);
}

Reading<unsigned long long> Device::energy_mJ() {
  Reading<unsigned long long> r;
  if (!ok()) {
    r.error = error_;
  } else if (!energy_) {
    r.error = library_ + " lacks nvmlDeviceGetTotalEnergyConsumption";
  } else if (const Return rc = energy_(handle_, &r.value); rc != kSuccess) {
    r.error = failure("nvmlDeviceGetTotalEnergyConsumption", rc);
  }
  return r;
}

Reading<unsigned> Device::utilization_gpu_percent() {
  Reading<unsigned> r;
  Utilization u{};
  if (!ok()) {
    r.error = error_;
  } else if (!utilization_) {
    r.error = library_ + " lacks nvmlDeviceGetUtilizationRates";
  } else if (const Return rc = utilization_(handle_, &u); rc != kSuccess) {
    r.error = failure("nvmlDeviceGetUtilizationRates", rc);
  } else {
    r.value = u.gpu;
  }
  return r;
}

Reading<unsigned> Device::power_mW() {
  Reading<unsigned> r;
  if (!ok()) {
    r.error = error_;
  } else if (!power_) {
    r.error = library_ + " lacks nvmlDeviceGetPowerUsage";
  } else if (const Return rc = power_(handle_, &r.value); rc != kSuccess) {
    r.error = failure("nvmlDeviceGetPowerUsage", rc);
  }
  return r;
}

UtilizationRecord record_from(const SpanReadings& r) {
  UtilizationRecord u;
  u.source = BusySource::nvml;
  if (!r.unavailable.empty()) {
    u.note = r.unavailable;
    return u;
  }
  if (!r.utilization_percent.ok()) {
    add_note(u.note, "busy unavailable: " + r.utilization_percent.error);
  } else if (r.utilization_percent.value > 100) {
    add_note(u.note, fmt::format("busy unavailable: NVML gave a GPU utilization of {} %, not a "
                                 "percentage",
                                 r.utilization_percent.value));
  } else {
    u.busy = r.utilization_percent.value / 100.0;
  }
  const double window = r.end_s - r.begin_s;
  if (window > 0) u.window_s = window;
  if (!r.energy_begin_mJ.ok() || !r.energy_end_mJ.ok()) {
    add_note(u.note,
             "energy and power unavailable: " +
                 (r.energy_begin_mJ.ok() ? r.energy_end_mJ.error : r.energy_begin_mJ.error));
  } else if (r.energy_end_mJ.value < r.energy_begin_mJ.value) {
    add_note(u.note, fmt::format("energy and power unavailable: the energy counter went "
                                 "backwards ({} mJ before the samples, {} mJ after)",
                                 r.energy_begin_mJ.value, r.energy_end_mJ.value));
  } else if (!(window > 0)) {
    add_note(u.note, fmt::format("energy and power unavailable: the samples' span of {} s is "
                                 "not positive",
                                 window));
  } else {
    // mJ -> J; the difference first, exact in integers.
    u.energy_J = static_cast<double>(r.energy_end_mJ.value - r.energy_begin_mJ.value) / 1000.0;
    u.power_W = u.energy_J / window;
  }
  if (!r.power_mW.ok()) {
    add_note(u.note, "power reading unavailable: " + r.power_mW.error);
  } else {
    u.power_reading_W = r.power_mW.value / 1000.0;
  }
  if (window > 0 && window < kUtilizationPeriodS && !std::isnan(u.busy)) {
    add_note(u.note, fmt::format("the samples took {:.3g} s, less than NVML's utilization period "
                                 "(up to {:g} s): busy may include time before them",
                                 window, kUtilizationPeriodS));
  }
  return u;
}

SpanMeter::SpanMeter(Device* device, Clock clock)
    : device_(device), clock_(clock ? std::move(clock) : Clock(steady_seconds)) {}

void SpanMeter::begin() {
  readings_ = SpanReadings{};
  begun_ = true;
  ended_ = false;
  if (device_ == nullptr) {
    readings_.unavailable = "NVML unavailable: the backend opened no NVML device";
    return;
  }
  readings_.unavailable = device_->error();
  if (!readings_.unavailable.empty()) return;
  readings_.energy_begin_mJ = device_->energy_mJ();
  readings_.begin_s = clock_();
}

void SpanMeter::end() {
  if (!begun_ || !readings_.unavailable.empty()) {
    ended_ = true;
    return;
  }
  readings_.end_s = clock_();
  readings_.energy_end_mJ = device_->energy_mJ();
  readings_.utilization_percent = device_->utilization_gpu_percent();
  readings_.power_mW = device_->power_mW();
  ended_ = true;
}

UtilizationRecord SpanMeter::record() const {
  if (!begun_ || !ended_) {
    UtilizationRecord u;
    u.source = BusySource::nvml;
    u.note = "the samples' span was not measured";
    return u;
  }
  return record_from(readings_);
}

}  // namespace decodebench::nvml
