// A planted decode kernel for the static model's test (static_model_planted_test.cpp): one
// 16-byte load per thread per iteration (512 KV bytes per warp) and PLANT_FMAS dependent FMAs on
// it, in a loop nvcc must not unroll. Compiled twice, with PLANT_FMAS 4 and 8.
#ifndef PLANT_FMAS
#error "define PLANT_FMAS (4 or 8)"
#endif
namespace decodebench::kernels::cuda::paged_decode::planted_rung {
__global__ void planted_kernel(const uint4* __restrict__ kv, float* out, int n, float a) {
  float acc = 0.f;
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    const uint4 v = __ldg(kv + static_cast<long>(i) * blockDim.x + threadIdx.x);
    const float x[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                        __uint_as_float(v.w)};
#pragma unroll
    for (int j = 0; j < PLANT_FMAS; ++j) acc = fmaf(x[j % 4], a, acc);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
}  // namespace decodebench::kernels::cuda::paged_decode::planted_rung
