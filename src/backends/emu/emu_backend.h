// The `emu` backend: the real CUDA kernel source (kernels/paged_decode, kernels/bandwidth) run
// through the SIMT emulator on the CPU. It exists for correctness — `decodebench check --backend
// emu` and small sweeps verify every compiled kernel against the CPU reference without a GPU.
// Its timings are wall-clock times of the emulation and say nothing about GPU speed.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace decodebench {

// The SM count the emulated split_kv planner assumes: small, so that small test shapes still
// exercise more than one split and the log-sum-exp merge.
inline constexpr int kEmuSmCount = 4;

// Points whose logical K+V elements (sum of context lengths x Hkv x d x 2) exceed this are
// skipped: the emulator runs one OS thread per CUDA thread and would take minutes.
inline constexpr long long kEmuMaxKvElements = 2'000'000;

std::unique_ptr<Backend> make_emu_backend();

}  // namespace decodebench
