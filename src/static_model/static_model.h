// The static performance model of one compiled kernel, read from its SASS alone (no GPU): the
// main loop's warp-instructions per KV byte, and from it the bandwidth at which instruction
// issue, not HBM, becomes the limit; the KV bytes a thread block has in flight; the barriers per
// iteration. docs/design.md "Static model" has the definitions and the assumptions.
//
// Rules, in the order they apply:
//   loop        a backward BRA (target below its own address) closes the loop [target, BRA];
//               several back edges to one head are one loop (the furthest); a loop inside
//               another's address range is nested in it.
//   KV load     a global load of 64 or 128 bits that bypasses L1 (LDG.E.64/.128, LDGSTS
//               .BYPASS.128): the KV codes, counted by width x 32 lanes.
//   scale load  an LDGSTS through L1 (no .BYPASS, any width): the integer formats' scales and
//               zeros staged with the codes (cp.async.ca, tc_int.cuh). Which lanes issue one is
//               not visible in the SASS, so their bytes are not read from it: the iteration's
//               scale and zero bytes are the format's (quant::bytes_per_token_head at P = 16)
//               for the tokens its KV loads bring (add_format_bytes).
//   narrow load an LDG of 32 bits or less (block-table entries, context lengths, scalars, a
//               scale read directly): an instruction, never KV bytes; counted and printed.
//   main loop   of the innermost loops holding KV loads (none of their nested loops holds one),
//               the one with the most instructions (a cp.async prologue that only issues loads
//               is smaller than the loop that also computes). KV loops says how many there were.
//   counted     every instruction of the main loop's range once (forward branches not
//               followed: at group == cap every head's path runs; a rescale taken only when the
//               running max rises is counted too), a nested loop's body times its trip count
//               when that is known statically (a counter set from an immediate before the loop,
//               stepped by an immediate and compared with one), else not at all: then the
//               main loop is "nested, inner trip count unknown" and inner_instructions says
//               what one inner iteration would add.
//   in flight   cp.async (LDGSTS) loops: the commit groups outstanding when the loop waits
//               (DEPBAR.LE SB0, N: the oldest one plus N) x the KV bytes of one group (the
//               iteration's bytes / its LDGDEPBARs). LDG loops: the KV loads issued from the
//               loop head, in address order, before the first instruction that reads a register
//               one of them writes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kernels.h"  // DType
#include "static_model/sass_parse.h"

namespace decodebench::static_model {

inline constexpr int kLanesPerWarp = 32;
// Hopper (and Ampere) SMs have four sub-partitions, each issuing one warp-instruction per clock.
inline constexpr double kWarpInstructionsPerClockPerSm = 4;
// The loaded DRAM latency Little's law is evaluated at (an assumption, printed with the table).
inline constexpr double kAssumedDramLatencySeconds = 600e-9;

// KV bytes one lane of `in` loads: 16 or 8 for a 128- or 64-bit LDG or L1-bypassing LDGSTS,
// else 0.
int kv_bytes_per_lane(const Instruction& in);

struct Loop {
  std::size_t first = 0;           // index of the head instruction (the branch target)
  std::size_t last = 0;            // index of the (furthest) backward branch
  int parent = -1;                 // index into the loop list of the innermost enclosing loop
  std::optional<long> trip_count;  // when recognized statically
  bool has_kv_loads = false;       // in its range, nested loops included
  std::size_t size() const { return last - first + 1; }
};

// Every loop of `f`, ordered by head address (outer before inner at the same head).
std::vector<Loop> find_loops(const Function& f);

struct MainLoop {
  bool found = false;
  std::uint32_t head = 0;  // address range of the main loop
  std::uint32_t tail = 0;
  int kv_loops = 0;               // innermost loops with KV loads (the main loop is one of them)
  long instructions = 0;          // warp-instructions counted per iteration (rules above)
  bool nested_unknown = false;    // holds a loop whose trip count is not known statically
  long inner_instructions = 0;    // those loops' bodies, not counted in `instructions`
  long nested_known = 0;          // instructions added by nested loops of known trip count
  int kv_loads = 0;               // KV load instructions per iteration
  long kv_bytes_per_warp = 0;     // Σ width x 32 lanes
  int scale_loads = 0;            // LDGSTS through L1 per iteration (scales and zeros)
  int narrow_loads = 0;           // LDG of <= 32 bits per iteration
  long scale_bytes_per_warp = 0;  // the format's scales and zeros for the same tokens
  long barriers = 0;              // BAR.* per iteration
  bool async_copies = false;      // the KV loads are LDGSTS (cp.async)
  long commit_groups = 0;         // LDGDEPBAR per iteration
  int wait_depth = -1;            // N of the loop's first DEPBAR.LE SB0, N; -1 when none
  long in_flight_per_warp = 0;    // KV bytes in flight (rules above)
  long bytes_per_warp() const { return kv_bytes_per_warp + scale_bytes_per_warp; }
  double instructions_per_byte() const {
    return kv_bytes_per_warp > 0 ? static_cast<double>(instructions) / bytes_per_warp() : 0;
  }
};

MainLoop analyze_main_loop(const Function& f);

// The block size add_format_bytes counts a per-block scale at (the README's summary point).
inline constexpr int kFormatBlockSize = 16;
// Sets m.scale_bytes_per_warp for a loop reading KV format `kv` at `head_dim`: its KV bytes are
// codes (K and V rows, kv_row_bytes each a token), and each token also costs the format's
// scales and zeros at kFormatBlockSize. 0 for the float formats.
void add_format_bytes(MainLoop& m, DType kv, int head_dim);

// Whole-function figures, for kernels without a KV loop (the split_kv merge).
struct FunctionTotals {
  long instructions = 0;  // up to the last EXIT (the NOP padding and trap loop after it left out)
  int loops = 0;
  long barriers = 0;
};
FunctionTotals function_totals(const Function& f);

// What a kernel's demangled name says: void decodebench::kernels::cuda::paged_decode::
// pipelined_detail::pipelined_kernel<(decodebench::DType)1, 128, 4>(...) -> decode, rung
// pipelined, kernel pipelined_kernel, f16, head_dim 128, group cap 4.
struct KernelName {
  std::string demangled;
  bool decode = false;  // in namespace decodebench::kernels::<target>::paged_decode
  std::string rung;     // the sub-namespace without "_detail" (the kernel's name when none)
  std::string kernel;   // unqualified
  std::optional<DType> kv_dtype;
  int head_dim = 0;          // 0 when the template has no such argument
  int group_cap = 0;         // 0 when none (naive serves any group)
  bool half_blocks = false;  // a `true` argument: int4's block-size-8 instance of tc / cascade
};
KernelName parse_kernel_name(const std::string& demangled);

// What the bandwidth figures need of a device (configs/devices.json).
struct DeviceFigures {
  std::string key;   // "h200"
  std::string name;  // "NVIDIA H200 SXM 141GB"
  int sm_count = 0;
  double boost_clock_hz = 0;
  double bandwidth = 0;  // datasheet B/s
};

// 4 warp-instructions per clock per SM x SMs x boost clock / (instructions per byte): the KV
// bandwidth at which the loop issues as fast as the SMs can; 0 when instructions_per_byte is 0.
double issue_bound_bandwidth(double instructions_per_byte, const DeviceFigures& d);
// Little's law per SM: datasheet bandwidth x latency / SMs, the bytes each SM must keep in flight.
double littles_law_bytes_per_sm(const DeviceFigures& d, double latency_seconds);

}  // namespace decodebench::static_model
