// The CUDA layer step's decisions that need no GPU (src/workload/layer_model.h has the step):
// the cuBLASLt call of each GEMM, the device memory the step holds, the GEMMs' compute roof.
// Pure functions, kept apart from the runtime calls so tests check them on any machine.
//
// A GEMM of the step is y[m][n] = sum_k x[m][k] W[n][k], all row-major. cuBLASLt is
// column-major: a row-major [r][c] matrix with row stride ld is a column-major c x r matrix
// with leading dimension ld. So the step computes y^T = W x^T:
//   A = W    stored k x n (ld k),       op(A) = A^T: n x k      (CUBLAS_OP_T)
//   B = x    stored k x m (ld = input row stride), op(B) = B: k x m   (CUBLAS_OP_N)
//   D = y^T  n x m (ld n): y row-major [m][n]
// cuBLASLt's (m, n, k) is then (n, m, k) of the GEMM. This is the "TN" form fp8 matmul requires.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "results/device_info.h"
#include "workload/layer_model.h"

namespace decodebench::cuda {

// cuBLASLt's workspace for every GEMM of a step (the heuristic may pick split-K or stream-K
// algorithms that need one); 32 MiB is what cuBLAS itself reserves per stream on Hopper.
inline constexpr std::size_t kCublasLtWorkspaceBytes = std::size_t{32} << 20;

// fp8 GEMMs run on a batch padded to a multiple of this many rows (zero rows: the padding costs
// no weight bytes, the bytes that matter at decode): cuBLASLt's fp8 kernels want every matrix
// dimension 16-byte aligned, the batch included.
inline constexpr std::int64_t kFp8RowPad = 16;

// The rows a GEMM of `rows` sequences is called with at these weights: rows, padded to
// kFp8RowPad for fp8.
std::int64_t gemm_call_rows(std::int64_t rows, DType weights);
// The row stride of a GEMM's input as the matmul reads it: 16-bit weights read the previous
// stage's output in place (shape.lda; down_proj: 2 I, the gate half); fp8 weights read the
// quantized copy, packed (shape.k).
std::int64_t gemm_input_ld(const GemmShape& shape, DType weights);

// Where a GEMM's input comes from and how the matmul reads it: the chain of the step.
//   qkv_proj      x, generated in the GEMM input dtype (fp8: e4m3 directly, no cast)
//   o_proj        the attention's output [rows][Hq d]
//   gate_up_proj  o_proj's output [rows][hidden]
//   down_proj     gate_up_proj's output [rows][2 I], its first I columns (the gate half)
//   lm_head       down_proj's output [rows][hidden]
// 16-bit weights read the source in place; fp8 weights read a packed e4m3 copy of its `cols`
// columns, cast with kActivationFp8Scale right before the matmul (in the GEMM's stage).
struct GemmInputPlan {
  bool from_x = false;                        // qkv_proj
  LayerStage source = LayerStage::attention;  // else whose output is read
  DType source_dtype = DType::bf16;           // x: gemm_input_dtype; else the q dtype
  std::int64_t source_ld = 0;                 // the source's row stride, elements (shape.lda)
  std::int64_t cols = 0;                      // elements read of each row (shape.k)
  bool cast = false;                          // fp8 and not from x
  float cast_inv_scale = 1;                   // the cast's: input_scale(weights).inv_scale
  DType read_dtype = DType::bf16;             // what the matmul's B holds: the weights dtype
  std::int64_t read_ld = 0;                   // B's row stride: gemm_input_ld
  float scale = 1;                            // a value of B = stored x scale
};
GemmInputPlan gemm_input_plan(const GemmShape& shape, DType weights, DType activations);

// One cublasLtMatmul: D = alpha op(A) op(B) + beta C, with C = D and beta 0.
struct GemmCall {
  LayerStage stage = LayerStage::qkv_proj;
  cublasOperation_t trans_a = CUBLAS_OP_T;
  cublasOperation_t trans_b = CUBLAS_OP_N;
  // cuBLASLt's problem: op(A) m x k, op(B) k x n, D m x n.
  std::uint64_t m = 0, n = 0, k = 0;
  // The stored matrices' layouts (rows x cols, leading dimension), before op.
  std::uint64_t a_rows = 0, a_cols = 0;
  std::int64_t lda = 0;
  std::uint64_t b_rows = 0, b_cols = 0;
  std::int64_t ldb = 0;
  std::uint64_t d_rows = 0, d_cols = 0;
  std::int64_t ldd = 0;  // C has D's layout
  cudaDataType_t a_type = CUDA_R_16BF, b_type = CUDA_R_16BF;
  cudaDataType_t c_type = CUDA_R_16BF, d_type = CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;  // alpha and beta are floats
  // The per-tensor scales folded into alpha: weight_scale().scale x input_scale().scale (1 for
  // 16-bit weights; fp8: the weight's and kActivationFp8Scale). Host pointer mode.
  float alpha = 1, beta = 0;
  // fp8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM. Off: Hopper's fp8 MMA accumulates in reduced
  // precision, and the default promotes to fp32 at intervals; a decode GEMM is bound by its
  // weight bytes, not its MMAs, so the slower accumulation costs nothing that is measured.
  bool fp8 = false;
  std::int8_t fast_accum = 0;
};

// cudaDataType_t of `t` (f32, f16, bf16, fp8_e4m3, fp8_e5m2).
cudaDataType_t cuda_data_type(DType t);

// The call for GEMM `shape` (from gemm_shape) with these weights and activations (the q dtype:
// every GEMM's output), called on gemm_call_rows(shape.m, weights) rows. Throws
// std::invalid_argument where layer_support_error(weights, activations) would refuse.
GemmCall plan_gemm(const GemmShape& shape, DType weights, DType activations);

// "" when cuBLASLt can run `call` as planned; else why not: fp8 needs the TN form, compute 32F,
// scale 32F, bf16/f16/f32 output, and every leading dimension (bytes) and the batch (rows) a
// multiple of 16 bytes; 16-bit calls need positive sizes only.
std::string gemm_call_error(const GemmCall& call);

// Device memory of one layer step beyond the attention's point_footprint, per tensor, bytes.
struct LayerFootprint {
  std::size_t weights = 0;    // the four GEMMs' and the LM head's, n x k weights dtype
  std::size_t x = 0;          // the step's input [call rows][hidden], weights dtype
  std::size_t outputs = 0;    // each GEMM's output [call rows][n], q dtype
  std::size_t quantized = 0;  // fp8: the casts of o_proj's, gate_up's, down's, lm_head's inputs
  std::size_t workspace = 0;  // kCublasLtWorkspaceBytes
  std::size_t attention = 0;  // point_footprint(...).total() of the attention rung
  std::size_t total() const { return weights + x + outputs + quantized + workspace + attention; }
};
// For `model` (has_layer_shape) and `rows` sequences.
LayerFootprint layer_footprint(const ModelShape& model, int rows, DType weights, DType activations,
                               std::size_t attention_bytes);
// Empty when `need` fits into `free_bytes` less kMemoryHeadroomBytes; else "layer step needs
// 20.10 GB of device memory (weights 16.06 GB, KV and attention 3.50 GB, ...), device has
// 12.00 GB free".
std::string layer_memory_skip_reason(const LayerFootprint& need, std::size_t free_bytes);

// "" when a device of compute capability major.minor runs cuBLASLt fp8 matmul (8.9 and later:
// Ada, Hopper, Blackwell); else why not.
std::string fp8_gemm_device_error(int cc_major, int cc_minor);

// The layer GEMMs' compute roof on `info`'s device: its datasheet's dense tensor-core peak for
// the weights dtype (bf16/f16: flops_peak_tensor_f16; fp8: flops_peak_tensor_fp8), named
// "tensor-core bf16 (datasheet)"; flops 0 (and the name saying so) when the datasheet has none.
Backend::GemmCeiling tensor_gemm_ceiling(const DeviceInfo& info, DType weights);

}  // namespace decodebench::cuda
