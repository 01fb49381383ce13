// Planted kernels for the spill gate's test (check_spills_test.sh). Each PLANT_* block is
// compiled into its own object (decode_clean.cu, decode_spill.cu, ... include this file), and the
// test assembles libraries from them. Namespaces follow kernels/: the target namespace is `cuda`.
#if defined(PLANT_DECODE_CLEAN)
// A decode kernel of a rung the ladder does not have: the gate finds rungs by namespace alone.
namespace decodebench::kernels::cuda::paged_decode::planted_rung {
__global__ void clean_kernel(const float* in, float* out) {
  out[threadIdx.x] = 2.f * in[threadIdx.x];
}
}  // namespace decodebench::kernels::cuda::paged_decode::planted_rung
#elif defined(PLANT_DECODE_SPILL)
// Forced to spill: 1024 threads x 2 blocks caps it at 32 registers, and a dynamically indexed
// local array cannot live in registers at all, so ptxas gives it a stack frame.
namespace decodebench::kernels::cuda::paged_decode::planted_rung {
__global__ void __launch_bounds__(1024, 2) spill_kernel(const float* in, float* out, int k) {
  float local[256];
  for (int i = 0; i < 256; ++i) local[i] = in[i * k + threadIdx.x];
  out[threadIdx.x] = local[(k * threadIdx.x) % 256] + local[(k + threadIdx.x) % 256];
}
}  // namespace decodebench::kernels::cuda::paged_decode::planted_rung
#elif defined(PLANT_OTHERS)
// The known non-decode classes: a bandwidth ceiling, a fill and a quantize kernel, clean.
namespace decodebench::kernels::cuda::bandwidth_detail {
__global__ void copy_kernel(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }
}  // namespace decodebench::kernels::cuda::bandwidth_detail
namespace decodebench::kernels::cuda::fill_detail {
__global__ void fill_kernel(float* out) { out[threadIdx.x] = 1.f; }
}  // namespace decodebench::kernels::cuda::fill_detail
namespace decodebench::kernels::cuda::quantize_detail {
__global__ void quantize_kernel(float* out) { out[threadIdx.x] = 2.f; }
}  // namespace decodebench::kernels::cuda::quantize_detail
#elif defined(PLANT_STRAY)
// A kernel in no known namespace (a new rung written outside paged_decode, say): must fail.
namespace decodebench::kernels::cuda::planted_rung {
__global__ void stray_kernel(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }
}  // namespace decodebench::kernels::cuda::planted_rung
#else
#error "define one PLANT_* (see check_spills_test.sh)"
#endif
