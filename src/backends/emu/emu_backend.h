// The `emu` backend: the real CUDA kernel source (kernels/paged_decode, kernels/bandwidth) run
// through the SIMT emulator on the CPU. It exists for correctness — `decodebench check --backend
// emu` and small sweeps verify every compiled kernel against the CPU reference without a GPU.
// Its timings are wall-clock times of the emulation and say nothing about GPU speed.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "kernels.h"

namespace decodebench {

// The device the emulated split_kv planner assumes: a small one (4 SMs, 2 resident blocks of
// any instance on each), so that small test shapes still exercise more than one split and the
// log-sum-exp merge. The emulator has no occupancy of its own; the planner is the GPU's.
inline constexpr int kEmuSmCount = 4;
inline constexpr kernels::ResidentCtas kEmuResidentCtas{kEmuSmCount, /*ctas_per_sm=*/2};

// Points whose logical K+V elements (sum of context lengths x Hkv x d x 2) exceed this are
// skipped: the emulator runs one OS thread per CUDA thread and would take minutes.
inline constexpr long long kEmuMaxKvElements = 2'000'000;

std::unique_ptr<Backend> make_emu_backend();

}  // namespace decodebench
