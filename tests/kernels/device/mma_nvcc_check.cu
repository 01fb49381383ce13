// Every primitive of device/mma.h in one kernel, for nvcc only: mma_nvcc_test.sh compiles it for
// the build's GPU architecture so that ptxas assembles each inline-PTX string (no GPU runs it).
// Every result reaches memory, so no instruction is dead code the compiler could drop unchecked.
// DECODEBENCH_PLANT_BAD_PTX adds an instruction ptxas must reject (the test's planted fault).
#include "device/mma.h"

namespace decodebench::mma_nvcc_check {

__global__ void every_primitive(const unsigned char* in, float* out, unsigned* raw) {
  DECODEBENCH_SHARED(std::uint16_t, tile, 32 * 8);  // 32 rows of 16 bytes
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int e = 0; e < 8; ++e) tile[lane * 8 + e] = in[lane * 8 + e];
  __syncthreads();
  const std::uint16_t* row = tile + lane * 8;
  dev::FragA a;
  dev::FragB b;
  std::uint32_t x1[1], x1t[1], x2t[2], x4t[4];
  dev::ldmatrix<4>(a.reg, row);
  dev::ldmatrix<2>(b.reg, row);
  dev::ldmatrix<1>(x1, row);
  dev::ldmatrix<1, true>(x1t, row);
  dev::ldmatrix<2, true>(x2t, row);
  dev::ldmatrix<4, true>(x4t, row);
  const dev::FragC c = {{1.f, 2.f, 3.f, 4.f}};
  const dev::FragC d16 = dev::mma_m16n8k16<DType::f16>(a, b, c);
  const dev::FragC dbf = dev::mma_m16n8k16<DType::bf16>(a, b, d16);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = dbf.reg[i];
  raw[lane * 8 + 0] = dev::fp8x2_to_f16x2<DType::fp8_e4m3>(x1[0]);
  raw[lane * 8 + 1] = dev::fp8x2_to_f16x2<DType::fp8_e5m2>(x1t[0]);
  raw[lane * 8 + 2] = x2t[0] ^ x2t[1];
  raw[lane * 8 + 3] = x4t[0] ^ x4t[1] ^ x4t[2] ^ x4t[3];
#if defined(DECODEBENCH_PLANT_BAD_PTX)
  // m16n8k16 has no .row.row form: ptxas must refuse it.
  float p0, p1, p2, p3;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.row.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(p0), "=f"(p1), "=f"(p2), "=f"(p3)
      : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]),
        "f"(c.reg[0]), "f"(c.reg[1]), "f"(c.reg[2]), "f"(c.reg[3]));
  out[128 + lane] = p0 + p1 + p2 + p3;
#endif
}

}  // namespace decodebench::mma_nvcc_check
