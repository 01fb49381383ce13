// A stand-in for libnvidia-ml.so.1 with scripted readings (fake_nvml.h), loaded by src/backends/
// nvml.cpp through $DECODEBENCH_NVML_LIBRARY or by path. Built twice: fake_nvml exports every
// function decodebench uses; fake_nvml_no_energy (FAKE_NVML_NO_ENERGY) lacks
// nvmlDeviceGetTotalEnergyConsumption, as a driver without it would.
#include "backends/nvml/fake_nvml.h"

#include <cstring>

namespace {

FakeNvmlScript g_script;
unsigned long long g_energy = 0;

struct FakeDevice {
  int id;
} g_device{7};

constexpr int kNotFound = 6;  // NVML_ERROR_NOT_FOUND

}  // namespace

extern "C" {

FakeNvmlScript* fake_nvml_script() { return &g_script; }

void fake_nvml_reset() {
  std::memset(&g_script, 0, sizeof g_script);
  g_script.energy_start_mJ = 5'000'000;
  g_script.energy_step_mJ = 1'300'000;
  g_script.utilization_gpu = 97;
  g_script.power_mW = 650'000;
  g_energy = 0;
}

int nvmlInit_v2() {
  ++g_script.init_calls;
  return g_script.init_return;
}

int nvmlShutdown() {
  ++g_script.shutdown_calls;
  return 0;
}

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case kNotFound: return "Not Found";
    case 999: return "Unknown Error";
    default: return "fake error";
  }
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, FakeDevice** device) {
  ++g_script.by_index_calls;
  g_script.last_index = index;
  if (g_script.handle_return != 0) return g_script.handle_return;
  *device = &g_device;
  return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, FakeDevice** device) {
  ++g_script.by_bus_calls;
  std::strncpy(g_script.last_bus_id, bus_id, sizeof g_script.last_bus_id - 1);
  if (g_script.handle_return != 0) return g_script.handle_return;
  *device = &g_device;
  return 0;
}

struct FakeUtilization {
  unsigned gpu, memory;
};

int nvmlDeviceGetUtilizationRates(FakeDevice* device, FakeUtilization* u) {
  if (device != &g_device) return kNotFound;
  if (g_script.utilization_return != 0) return g_script.utilization_return;
  u->gpu = g_script.utilization_gpu;
  u->memory = 40;
  return 0;
}

#ifndef FAKE_NVML_NO_ENERGY
int nvmlDeviceGetTotalEnergyConsumption(FakeDevice* device, unsigned long long* mJ) {
  if (device != &g_device) return kNotFound;
  if (g_script.energy_return != 0) return g_script.energy_return;
  g_energy = g_script.energy_calls == 0
                 ? g_script.energy_start_mJ
                 : static_cast<unsigned long long>(static_cast<long long>(g_energy) +
                                                   g_script.energy_step_mJ);
  ++g_script.energy_calls;
  *mJ = g_energy;
  return 0;
}
#endif

int nvmlDeviceGetPowerUsage(FakeDevice* device, unsigned* mW) {
  if (device != &g_device) return kNotFound;
  if (g_script.power_return != 0) return g_script.power_return;
  *mW = g_script.power_mW;
  return 0;
}
}
