// NVML, the NVIDIA Management Library of the GPU machine's driver (libnvidia-ml.so.1), loaded at
// run time with dlopen: no build dependency and no nvml.h (the few types used are declared below
// from NVML's documented ABI), so this compiles and is tested without CUDA, against a fake
// library (tests/backends/nvml). The cuda backend reads through it how busy the GPU was over a
// point's samples, the energy they took and the board's power (docs/design.md "Busy beside the
// roof"); the cpu backend has its own figure (src/backends/cpu/cpu_busy.h).
//
// Nothing here stops a sweep: a missing library, a missing symbol or a failing call makes the
// figures it would have given unavailable (null), with the reason in UtilizationRecord::note.
//
// The library: $DECODEBENCH_NVML_LIBRARY when set (a path, or a bare name for the dynamic
// linker; the only candidate then: tests load a fake through it), else libnvidia-ml.so.1.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "results/utilization_record.h"

namespace decodebench::nvml {

// ---- the ABI used (nvml.h, NVML API version 11+) ----------------------------------------------
using Return = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
inline constexpr Return kSuccess = 0;
struct DeviceOpaque;                 // struct nvmlDevice_st
using DeviceHandle = DeviceOpaque*;  // nvmlDevice_t
struct Utilization {                 // nvmlUtilization_t
  unsigned int gpu;                  // % of the last sampling period in which a kernel ran
  unsigned int memory;               // % of it in which device memory was read or written
};
using InitFn = Return (*)();                                        // nvmlInit_v2
using ShutdownFn = Return (*)();                                    // nvmlShutdown
using HandleByIndexFn = Return (*)(unsigned int, DeviceHandle*);    // ...ByIndex_v2
using HandleByPciBusIdFn = Return (*)(const char*, DeviceHandle*);  // ...ByPciBusId_v2
using UtilizationFn = Return (*)(DeviceHandle, Utilization*);       // ...GetUtilizationRates
using EnergyFn = Return (*)(DeviceHandle, unsigned long long*);     // ...GetTotalEnergyConsumption
using PowerFn = Return (*)(DeviceHandle, unsigned int*);            // ...GetPowerUsage
using ErrorStringFn = const char* (*)(Return);                      // nvmlErrorString

inline constexpr const char* kLibraryEnv = "DECODEBENCH_NVML_LIBRARY";
inline constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

// A value read from NVML, or why it could not be (`error` non-empty).
template <class T>
struct Reading {
  T value{};
  std::string error;
  bool ok() const { return error.empty(); }
};

// One GPU as NVML sees it. open() never throws: whatever fails leaves the device unavailable,
// error() saying why, and every reading then fails with that reason.
class Device {
 public:
  // The library above ($DECODEBENCH_NVML_LIBRARY, else libnvidia-ml.so.1), nvmlInit_v2, and the
  // device whose PCI bus id is `pci_bus_id` ("0000:3B:00.0", as cudaDeviceGetPCIBusId writes
  // it: the CUDA device's own, whatever CUDA_VISIBLE_DEVICES renumbered); empty: NVML's device
  // `index`.
  static std::unique_ptr<Device> open(const std::string& pci_bus_id, unsigned index = 0);
  // The same with the library named (a path or a bare name).
  static std::unique_ptr<Device> open_library(const std::string& library,
                                              const std::string& pci_bus_id, unsigned index = 0);
  // A device that is unavailable for `reason` (the caller could not name it), nothing loaded.
  static std::unique_ptr<Device> unavailable(const std::string& reason);
  ~Device();  // nvmlShutdown, when nvmlInit_v2 succeeded
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& library() const { return library_; }  // what was loaded (or tried)

  Reading<unsigned long long> energy_mJ();      // total energy since the driver loaded, mJ (Volta+)
  Reading<unsigned> utilization_gpu_percent();  // nvmlUtilization_t::gpu
  Reading<unsigned> power_mW();                 // the board's power draw, mW

 private:
  Device() = default;
  std::string failure(const char* call, Return rc) const;  // "nvmlX: <NVML's text> (rc N)"

  std::string library_;
  std::string error_;
  bool initialized_ = false;
  DeviceHandle handle_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  UtilizationFn utilization_ = nullptr;
  EnergyFn energy_ = nullptr;
  PowerFn power_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
};

// What NVML gave over a point's samples, and the pure step from it to the record.
struct SpanReadings {
  std::string unavailable;  // the device's error(): every figure unavailable
  Reading<unsigned long long> energy_begin_mJ, energy_end_mJ;
  double begin_s = 0, end_s = 0;  // the wall clock at the two energy readings
  Reading<unsigned> utilization_percent;
  Reading<unsigned> power_mW;
};
// busy = utilization / 100; energy_J = (end - begin) / 1000 over window_s = end_s - begin_s;
// power_W = energy_J / window_s; power_reading_W = power_mW / 1000. Each figure that cannot be
// given (a failed reading, a counter that went backwards, a utilization above 100 %, a window
// that is not positive) is left NaN with its reason in `note`; a window shorter than NVML's
// utilization period (up to 1 s, kUtilizationPeriodS) is noted, the figure kept.
UtilizationRecord record_from(const SpanReadings& r);
inline constexpr double kUtilizationPeriodS = 1.0;

// The cuda backend's PreparedPoint::*_utilization: begin() reads the energy counter and the
// clock right before the first sample; end() reads them again right after the last, with the
// utilization (NVML's last period) and the power. `device` (may be null: no NVML) outlives this.
class SpanMeter {
 public:
  using Clock = std::function<double()>;  // seconds; injectable for tests
  explicit SpanMeter(Device* device, Clock clock = {});
  void begin();
  void end();
  UtilizationRecord record() const;

 private:
  Device* device_;
  Clock clock_;
  SpanReadings readings_;
  bool begun_ = false, ended_ = false;
};

}  // namespace decodebench::nvml
