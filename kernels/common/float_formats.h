// Bit-exact scalar conversions between float and the narrow formats, usable on host and device
// (DECODEBENCH_HD). Written once: the workload encoder, the reference, the CPU backend and the
// emulated kernels all use these; under nvcc the kernels may use hardware conversions, which
// must agree with these (round to nearest even; fp8 saturates to the largest finite value, as
// cvt.rn.satfinite does; NaN stays NaN).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DECODEBENCH_HD __host__ __device__ __forceinline__
#else
#define DECODEBENCH_HD inline
#endif

namespace decodebench::floatfmt {
// TO BE IMPLEMENTED (workload helper): declarations fixed here so kernels can be written now.
DECODEBENCH_HD float f16_to_float(std::uint16_t bits);
DECODEBENCH_HD std::uint16_t float_to_f16(float x);
DECODEBENCH_HD float bf16_to_float(std::uint16_t bits);
DECODEBENCH_HD std::uint16_t float_to_bf16(float x);
DECODEBENCH_HD float e4m3_to_float(std::uint8_t bits);   // max finite 448
DECODEBENCH_HD std::uint8_t float_to_e4m3(float x);
DECODEBENCH_HD float e5m2_to_float(std::uint8_t bits);   // max finite 57344
DECODEBENCH_HD std::uint8_t float_to_e5m2(float x);
}  // namespace decodebench::floatfmt
