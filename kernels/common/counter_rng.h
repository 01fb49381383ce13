// Counter-based normal generator (host and device). TO BE IMPLEMENTED by the workload work:
//   DECODEBENCH_HD float counter_normal(std::uint64_t seed, std::uint32_t tensor, std::uint64_t index);
// N(0,1) samples, |x| <= kGeneratorBound, a pure function of its arguments.
#pragma once
#include <cstdint>
#include "common/float_formats.h"
