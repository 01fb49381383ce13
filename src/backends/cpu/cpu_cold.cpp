#include "backends/cpu/cpu_cold.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "backends/cpu/cpu_ceilings.h"
#include "common/errors.h"
#include "common/units.h"

namespace decodebench::cpu {

ColdRotationPlan plan_cold_rotation(std::int64_t step_bytes, std::int64_t copy_bytes,
                                    std::int64_t llc_bytes, std::int64_t memory_cap) {
  ColdRotationPlan p;
  p.copy_bytes = copy_bytes;
  if (llc_bytes <= 0) {
    p.flush_reason = "the last-level cache size is unknown, so no copy count is known cold";
    return p;
  }
  if (step_bytes <= 0 || copy_bytes <= 0) {
    p.flush_reason = "the step reads nothing to copy";
    return p;
  }
  const std::int64_t cold = 2 * llc_bytes;
  if (step_bytes >= cold) {
    // Re-running one copy would already be cold by the rotation's own rule (each line is read
    // again only after the rest of a step, >= 2x LLC, has streamed), so copies buy nothing here;
    // and the flush costs at most one more step's bytes. It is kept because its clflushopt also
    // evicts what a thrash-resistant LLC policy may hold back from a cyclic stream, and keeps
    // large points measured as before.
    p.flush_reason = fmt::format("one step reads {} >= 2x the last-level cache ({})",
                                 format_bytes(static_cast<double>(step_bytes)),
                                 format_bytes(static_cast<double>(cold)));
    return p;
  }
  // Each sample touches u = step + paired read (one whole copy). A copy is touched by its step
  // and, half a turn away, by a paired read: both gaps need k = ceil(2 LLC / u) samples, hence
  // distance k and 2k + 1 copies (rotation_schedule; the backend checks it with
  // rotation_cold_error).
  const std::int64_t u = step_bytes + copy_bytes;
  const std::int64_t k = (cold + u - 1) / u;
  const std::int64_t copies = 2 * k + 1;
  const double need = static_cast<double>(copies) * static_cast<double>(copy_bytes);
  if (need > static_cast<double>(memory_cap)) {
    p.flush_reason =
        fmt::format("{} copies of {} would take {}, over the rotation cap of {}", copies,
                    format_bytes(static_cast<double>(copy_bytes)), format_bytes(need),
                    format_bytes(static_cast<double>(std::max<std::int64_t>(memory_cap, 0))));
    return p;
  }
  p.copies = static_cast<int>(copies);
  p.distance = static_cast<int>(k);
  return p;
}

std::int64_t rotation_memory_cap(std::int64_t held) {
  if (const char* env = std::getenv("DECODEBENCH_CPU_ROTATION_CAP_BYTES"); env && *env) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != '\0' || v < 0)
      throw InputError("DECODEBENCH_CPU_ROTATION_CAP_BYTES='" + std::string(env) +
                       "' is not a byte count >= 0");
    return v;
  }
  return static_cast<std::int64_t>(kRotationMemoryShare *
                                   static_cast<double>(available_memory_bytes() + held));
}

std::vector<Touch> rotation_schedule(int copies, int distance, std::int64_t step_bytes,
                                     std::int64_t read_bytes) {
  std::vector<Touch> turn;
  if (copies <= 0) return turn;
  for (int t = 0; t < copies; ++t) {
    if (read_bytes > 0) turn.push_back({(t + distance) % copies, read_bytes});
    turn.push_back({t, step_bytes});
  }
  return turn;
}

std::int64_t min_bytes_between_reuses(std::span<const Touch> turn) {
  if (turn.empty()) return -1;
  // Two turns back to back: every touch of the second has its previous one within them.
  const std::size_t n = turn.size();
  std::vector<std::int64_t> prefix(2 * n + 1, 0);  // bytes of touches [0, i)
  for (std::size_t i = 0; i < 2 * n; ++i) prefix[i + 1] = prefix[i] + turn[i % n].bytes;
  int copies = 0;
  for (const Touch& t : turn) copies = std::max(copies, t.copy + 1);
  std::vector<std::int64_t> last(static_cast<std::size_t>(copies), -1);  // index of its last touch
  std::int64_t fewest = -1;
  for (std::size_t i = 0; i < 2 * n; ++i) {
    const auto c = static_cast<std::size_t>(turn[i % n].copy);
    if (last[c] >= 0 && i >= n) {
      const std::int64_t between = prefix[i] - prefix[static_cast<std::size_t>(last[c]) + 1];
      fewest = fewest < 0 ? between : std::min(fewest, between);
    }
    last[c] = static_cast<std::int64_t>(i);
  }
  return fewest;
}

std::string rotation_cold_error(std::span<const Touch> turn, std::int64_t llc_bytes) {
  if (llc_bytes <= 0) return "the last-level cache size is unknown";
  const std::int64_t between = min_bytes_between_reuses(turn);
  if (between >= 2 * llc_bytes) return {};
  return fmt::format(
      "a copy is reused after only {} of other touches, under 2x the last-level cache ({})",
      format_bytes(static_cast<double>(std::max<std::int64_t>(between, 0))),
      format_bytes(static_cast<double>(2 * llc_bytes)));
}

std::uint64_t stream_read(const std::byte* data, std::size_t bytes, int threads) {
  const std::size_t words = bytes / sizeof(std::uint64_t);
  std::uint64_t x = 0;
  const int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for num_threads(nt) schedule(static) reduction(^ : x)
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, data + i * sizeof(std::uint64_t), sizeof w);
    x ^= w;
  }
  return x;
}

}  // namespace decodebench::cpu
