// The portable device layer: the few primitives decodebench kernels use. Under nvcc they are
// the real thing; under the host compiler they come from the SIMT emulator (kernels/emu).
//
// CONTRACT (implemented by the emulator work; kernels may rely on exactly this):
//
// CUDA spellings, provided by the emulator under the host compiler:
//   __global__ __device__ __host__ __forceinline__ __restrict__ __grid_constant__
//   __launch_bounds__(...)   (no-ops on the host)
//   threadIdx blockIdx blockDim gridDim (.x .y .z, unsigned), warpSize (32), dim3
//   __syncthreads()                       block barrier; the emulator records the call site
//   __syncwarp(mask = 0xffffffff)
//   __shfl_sync / __shfl_xor_sync / __shfl_up_sync / __shfl_down_sync (mask, var, lane|delta,
//       width = 32) for int, unsigned, float (CUDA's exact width rules)
//   atomicAdd (int, unsigned, float), atomicMax (int, unsigned), atomicExch
//   uint4 uint2 float4 float2 int4 and make_* for them
//   exp2f expf logf log2f fmaxf fminf rsqrtf __expf __logf __fdividef (CUDA math subset)
//
// decodebench additions (namespace decodebench::dev), identical on both targets:
//   DECODEBENCH_SHARED(T, name, count)      static shared array `T name[count]`
//   DECODEBENCH_DYNAMIC_SHARED(T, name)     dynamic shared memory as `T* name` (16-byte aligned)
//   DECODEBENCH_LAUNCH(kernel, grid, block, smem_bytes, stream, params) -> LaunchResult
//       launches `kernel(params)` and checks it (cudaGetLastError / the emulator's report);
//       evaluates to a kernels::LaunchResult naming the kernel on failure.
//   dev::fast_exp2(float) dev::fast_rsqrt(float)        ex2.approx / rsqrt.approx
//   dev::ld_global_nc_v4(const void* p) -> uint4        16-byte read-only load (ld.global.nc)
//   dev::ld_v4 / dev::st_v4(void* p, uint4)             16-byte generic load / store
//   dev::cp_async<N>(void* smem, const void* gmem, int src_bytes)  N = 4, 8 or 16 bytes;
//       copies min(src_bytes, N) bytes and zero-fills the rest (cp.async.ca/cg ... zfill)
//   dev::cp_async_commit()                             cp.async.commit_group
//   dev::cp_async_wait<N>()                            cp.async.wait_group N (N newest pending)
//   dev::cp_async_wait_all()
//   Conversions of packed narrow values to float (register-level, 16-byte granules):
//   dev::unpack8<DType>(uint4 raw, float (&out)[8])     for f16 / bf16 (8 elements in 16 bytes)
//   dev::unpack16<DType>(uint4 raw, float (&out)[16])   for fp8_e4m3 / fp8_e5m2 (16 in 16 bytes)
//   dev::load_q<float>(const void* p, DType q_dtype, int i) -> float   scalar f16/bf16 load
//   dev::store_out(void* p, DType q_dtype, int i, float v)            scalar f16/bf16 store (RNE)
#pragma once
