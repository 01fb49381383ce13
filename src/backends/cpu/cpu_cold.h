// Cold samples by rotation (docs/design.md "Cold caches on the CPU"): instead of emptying the
// caches before every sample (CacheFlusher, ~2x the last-level cache read per sample), a point
// keeps N byte-identical copies of what its step reads and runs each sample on the next copy in
// turn, so that between two touches of one copy the other samples have streamed at least 2x the
// LLC. Each sample also times a streaming read of the copy that is half a turn away (the paired
// read, PreparedPoint::paired_read_samples), which counts in those bytes.
//
//   plan_cold_rotation    how many copies, or why the point falls back to the flush (pure)
//   rotation_schedule     the touches of one turn: (copy, bytes) in order
//   rotation_cold_error   the checker: "" when every reuse follows >= 2x LLC of other bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace decodebench::cpu {

// The copies may take this share of the available host memory. The point's own workload
// (kMemoryShare of it in cpu_backend.cpp) is already there, and a sweep's next point, the
// reference output and a second process on a shared host need the rest; a quarter leaves
// rotation to every point whose copies are small against the host, which is where the flush
// costs most (a step of 0.2 ms beside a 40 ms flush).
inline constexpr double kRotationMemoryShare = 0.25;

struct ColdRotationPlan {
  int copies = 0;            // >= 2: rotate over this many copies; 0: flush
  int distance = 0;          // the paired read of sample t reads copy (t + distance) % copies
  std::string flush_reason;  // why the flush is used; "" when rotating
  // Every copy's bytes together (copies x copy_bytes).
  std::int64_t bytes() const { return static_cast<std::int64_t>(copies) * copy_bytes; }
  std::int64_t copy_bytes = 0;
};

// `step_bytes`: what one step reads (the byte model's unique bytes); `copy_bytes`: one copy of
// every buffer the step touches (also what the paired read streams); `llc_bytes`: the last-level
// cache (0: unknown); `memory_cap`: the most the copies together may take. The copy count is the
// least whose rotation is cold by rotation_cold_error with one paired read of a copy per sample.
ColdRotationPlan plan_cold_rotation(std::int64_t step_bytes, std::int64_t copy_bytes,
                                    std::int64_t llc_bytes, std::int64_t memory_cap);

// The memory cap for this host: kRotationMemoryShare x (available_memory_bytes() + `held`, what
// the caller already holds of the point), or the environment variable
// DECODEBENCH_CPU_ROTATION_CAP_BYTES when set (0 forces the flush: tests, and the paired
// comparison of results/cpu-amd-epyc-zen4-2vcpu/cold-rotation).
std::int64_t rotation_memory_cap(std::int64_t held = 0);

struct Touch {
  int copy = 0;
  std::int64_t bytes = 0;
};
// One turn of a rotation: for t in [0, copies), the paired read of copy (t + distance) % copies
// (`read_bytes`; none when 0), then the step on copy t (`step_bytes`).
std::vector<Touch> rotation_schedule(int copies, int distance, std::int64_t step_bytes,
                                     std::int64_t read_bytes);
// The fewest bytes touched strictly between two consecutive touches of one copy, the schedule
// repeated as turns (0 when a copy is touched twice in a row); -1 for an empty turn.
// Counting whole touches only (not the rest of the touch a line sits in) errs cold-side.
std::int64_t min_bytes_between_reuses(std::span<const Touch> turn);
// "" when every reuse in `turn` follows >= 2 x llc_bytes of other touches, else why not.
std::string rotation_cold_error(std::span<const Touch> turn, std::int64_t llc_bytes);

// A timed-read helper for the paired read: XORs every 8-byte word of [data, data + bytes) on
// `threads` threads (<= 0: all), a static partition; the result keeps the loads live. Bytes
// past the last whole word are not read.
std::uint64_t stream_read(const std::byte* data, std::size_t bytes, int threads = 0);

}  // namespace decodebench::cpu
