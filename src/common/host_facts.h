// Facts about the host machine that reports and the CPU backend both record.
#pragma once

#include <string>

namespace decodebench {

// /proc/cpuinfo's "model name" of the first CPU, or "unknown CPU".
std::string cpu_model_name();

}  // namespace decodebench
