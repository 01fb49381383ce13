// The script of the fake NVML library (fake_nvml.cpp): the test reaches the loaded fake's state
// through its one extra symbol, fake_nvml_script(), and sets what each NVML call returns.
#pragma once

extern "C" {

struct FakeNvmlScript {
  int init_return;  // nvmlInit_v2's return (0: NVML_SUCCESS)
  int handle_return;
  // nvmlDeviceGetTotalEnergyConsumption: the counter starts at energy_start_mJ and moves by
  // energy_step_mJ on every call after the first (negative: a counter that goes backwards).
  unsigned long long energy_start_mJ;
  long long energy_step_mJ;
  int energy_return;
  unsigned utilization_gpu;  // nvmlUtilization_t::gpu
  int utilization_return;
  unsigned power_mW;
  int power_return;
  // What the library saw.
  int init_calls, shutdown_calls, energy_calls;
  int by_index_calls, by_bus_calls;
  unsigned last_index;
  char last_bus_id[64];
};

// The loaded fake's script, reset to defaults by fake_nvml_reset().
FakeNvmlScript* fake_nvml_script();
void fake_nvml_reset();
}
