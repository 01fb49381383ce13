// Numbers with their units as decodebench prints them, written once for the printers, the CLI and
// the backends' messages. SI prefixes (GB = 1e9 B).
#pragma once

#include <string>
#include <string_view>

namespace decodebench {

// "3.35 TB/s", "812 µs", "1.2 MB": 3 significant digits, "-" for NaN.
std::string format_bandwidth(double bytes_per_s);
std::string format_seconds(double s);
std::string format_bytes(double bytes);
std::string format_si(double x, std::string_view unit);
std::string format_percent(double fraction);  // "80.0%", "-" for NaN
// A FLOP rate as the device lines print it: "989.4 TFLOP/s", "475.0 GFLOP/s"; "n/a" for <= 0.
std::string format_flops(double flops_per_s);
// Memory sizes in messages about what fits: "12.35 GB" (two decimals, whatever the size).
std::string format_gb(double bytes);
// `format(v)` for a positive value, "n/a" for an unknown one (0).
inline std::string or_na(double v, std::string (*format)(double)) {
  return v > 0 ? format(v) : "n/a";
}

}  // namespace decodebench
