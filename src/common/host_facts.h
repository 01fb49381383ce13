// Facts about the host machine that reports and the CPU backend both record.
#pragma once

#include <string>

namespace decodebench {

// /proc/cpuinfo's "model name" of the first CPU, with its family and model when the name has
// no model number (a VM's masked name), or "unknown CPU".
std::string cpu_model_name();

}  // namespace decodebench
