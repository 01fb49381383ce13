#include "common/units.h"

#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace decodebench {

std::string format_bandwidth(double bytes_per_s) { return format_si(bytes_per_s, "B/s"); }
std::string format_bytes(double bytes) { return format_si(bytes, "B"); }

std::string format_si(double x, std::string_view unit) {
  if (!std::isfinite(x)) return "-";
  // Scaled to [1, 1000) with an SI prefix; 3 significant digits.
  static constexpr std::array<std::pair<double, const char*>, 5> kUp{
      {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}};
  for (const auto& [scale, prefix] : kUp) {
    if (std::fabs(x) >= scale) {
      const double v = x / scale;
      std::string out =
          fmt::format("{:.{}f} {}{}", v, v >= 100 ? 0 : (v >= 10 ? 1 : 2), prefix, unit);
      if (out.back() == ' ') out.pop_back();  // no prefix and no unit
      return out;
    }
  }
  return unit.empty() ? fmt::format("{:.3g}", x) : fmt::format("{:.3g} {}", x, unit);
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return fmt::format("{:.1f}%", 100 * fraction);
}

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "-";
  auto three = [](double v) { return fmt::format("{:.{}f}", v, v >= 100 ? 0 : (v >= 10 ? 1 : 2)); };
  if (s >= 1) return three(s) + " s";
  if (s >= 1e-3) return three(s * 1e3) + " ms";
  if (s >= 1e-6) return three(s * 1e6) + " µs";
  return three(s * 1e9) + " ns";
}

std::string format_flops(double v) {
  if (v <= 0) return "n/a";
  return v >= 1e12 ? fmt::format("{:.1f} TFLOP/s", v / 1e12)
                   : fmt::format("{:.1f} GFLOP/s", v / 1e9);
}

std::string format_gb(double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); }

}  // namespace decodebench
