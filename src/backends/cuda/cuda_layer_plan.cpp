#include "backends/cuda/cuda_layer_plan.h"

#include <stdexcept>

#include <fmt/format.h>

#include "backends/cuda/cuda_plan.h"
#include "common/dtype.h"
#include "common/units.h"

namespace decodebench::cuda {
namespace {

bool is_16bit_float(DType t) { return t == DType::f16 || t == DType::bf16; }

std::size_t data_type_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
    default: return 0;
  }
}

// The four GEMMs of the layer and the LM head, in the order the step runs them.
constexpr LayerStage kAllGemms[] = {LayerStage::qkv_proj, LayerStage::o_proj,
                                    LayerStage::gate_up_proj, LayerStage::down_proj,
                                    LayerStage::lm_head};

}  // namespace

std::int64_t gemm_call_rows(std::int64_t rows, DType weights) {
  if (!is_fp8(weights)) return rows;
  return (rows + kFp8RowPad - 1) / kFp8RowPad * kFp8RowPad;
}

std::int64_t gemm_input_ld(const GemmShape& shape, DType weights) {
  return is_fp8(weights) ? shape.k : shape.lda;
}

GemmInputPlan gemm_input_plan(const GemmShape& shape, DType weights, DType activations) {
  GemmInputPlan in;
  switch (shape.stage) {
    case LayerStage::qkv_proj: in.from_x = true; break;
    case LayerStage::o_proj: in.source = LayerStage::attention; break;
    case LayerStage::gate_up_proj: in.source = LayerStage::o_proj; break;
    case LayerStage::down_proj: in.source = LayerStage::gate_up_proj; break;
    case LayerStage::lm_head: in.source = LayerStage::down_proj; break;
    case LayerStage::attention: throw std::invalid_argument("attention is not a GEMM");
  }
  in.source_dtype = in.from_x ? gemm_input_dtype(weights) : activations;
  in.source_ld = shape.lda;
  in.cols = shape.k;
  in.cast = is_fp8(weights) && !in.from_x;
  in.cast_inv_scale = input_scale(weights).inv_scale;
  in.read_dtype = gemm_input_dtype(weights);
  in.read_ld = gemm_input_ld(shape, weights);
  in.scale = input_scale(weights).scale;
  return in;
}

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp8_e4m3: return CUDA_R_8F_E4M3;
    case DType::fp8_e5m2: return CUDA_R_8F_E5M2;
    default: break;  // an integer KV format, never a GEMM operand
  }
  throw std::invalid_argument(fmt::format("no cudaDataType_t for DType {}", static_cast<int>(t)));
}

GemmCall plan_gemm(const GemmShape& shape, DType weights, DType activations) {
  if (weights != DType::bf16 && weights != DType::f16 && weights != DType::fp8_e4m3) {
    throw std::invalid_argument(fmt::format(
        "plan_gemm: weights must be bf16, f16 or fp8_e4m3, got {}", dtype_name(weights)));
  }
  if (!is_16bit_float(activations) || (!is_fp8(weights) && weights != activations)) {
    throw std::invalid_argument(fmt::format("plan_gemm: {} weights with {} activations",
                                            dtype_name(weights), dtype_name(activations)));
  }
  const auto rows = static_cast<std::uint64_t>(gemm_call_rows(shape.m, weights));
  GemmCall c;
  c.stage = shape.stage;
  c.trans_a = CUBLAS_OP_T;
  c.trans_b = CUBLAS_OP_N;
  c.m = static_cast<std::uint64_t>(shape.n);
  c.n = rows;
  c.k = static_cast<std::uint64_t>(shape.k);
  // A = W, row-major [n][k]: column-major k x n, ld k.
  c.a_rows = c.k;
  c.a_cols = c.m;
  c.lda = shape.k;
  // B = x, row-major [rows][k] with row stride ld: column-major k x rows.
  c.b_rows = c.k;
  c.b_cols = rows;
  c.ldb = gemm_input_ld(shape, weights);
  // D = y^T: column-major n x rows, ld n (y row-major [rows][n]).
  c.d_rows = c.m;
  c.d_cols = rows;
  c.ldd = shape.n;
  c.a_type = cuda_data_type(weights);
  c.b_type = cuda_data_type(gemm_input_dtype(weights));
  c.c_type = cuda_data_type(activations);
  c.d_type = c.c_type;
  c.compute = CUBLAS_COMPUTE_32F;
  c.scale_type = CUDA_R_32F;
  c.alpha = weight_scale(shape, weights).scale * input_scale(weights).scale;
  c.beta = 0;
  c.fp8 = is_fp8(weights);
  c.fast_accum = 0;
  return c;
}

std::string gemm_call_error(const GemmCall& c) {
  const std::string_view stage = stage_name(c.stage);
  if (c.m == 0 || c.n == 0 || c.k == 0) {
    return fmt::format("{}: empty GEMM (m {}, n {}, k {})", stage, c.m, c.n, c.k);
  }
  if (!c.fp8) return "";
  if (c.trans_a != CUBLAS_OP_T || c.trans_b != CUBLAS_OP_N) {
    return fmt::format("{}: cuBLASLt fp8 matmul needs A transposed and B not (the TN form)", stage);
  }
  if (c.compute != CUBLAS_COMPUTE_32F || c.scale_type != CUDA_R_32F) {
    return fmt::format("{}: cuBLASLt fp8 matmul needs compute and scale type 32F", stage);
  }
  if (c.d_type != CUDA_R_16BF && c.d_type != CUDA_R_16F && c.d_type != CUDA_R_32F) {
    return fmt::format("{}: cuBLASLt fp8 matmul writes bf16, f16 or f32 here", stage);
  }
  struct Dim {
    const char* what;
    std::uint64_t bytes;
  };
  const Dim dims[] = {
      {"the weight's row (k)", static_cast<std::uint64_t>(c.lda) * data_type_bytes(c.a_type)},
      {"the input's row stride", static_cast<std::uint64_t>(c.ldb) * data_type_bytes(c.b_type)},
      {"the output's row (n)", static_cast<std::uint64_t>(c.ldd) * data_type_bytes(c.d_type)},
      {"the batch (rows)", c.n * data_type_bytes(c.b_type)}};
  for (const Dim& d : dims) {
    if (d.bytes % 16 != 0) {
      return fmt::format(
          "{}: cuBLASLt fp8 matmul needs every dimension 16-byte aligned; {} is {} bytes", stage,
          d.what, d.bytes);
    }
  }
  return "";
}

LayerFootprint layer_footprint(const ModelShape& model, int rows, DType weights, DType activations,
                               std::size_t attention_bytes) {
  LayerFootprint f;
  const auto call_rows = static_cast<std::size_t>(gemm_call_rows(rows, weights));
  const std::size_t w = dtype_size(weights);
  const std::size_t a = dtype_size(activations);
  for (LayerStage s : kAllGemms) {
    const GemmShape g = gemm_shape(model, s, rows);
    f.weights += static_cast<std::size_t>(g.n * g.k) * w;
    f.outputs += call_rows * static_cast<std::size_t>(g.n) * a;
    if (is_fp8(weights) && s != LayerStage::qkv_proj) {
      f.quantized += call_rows * static_cast<std::size_t>(g.k) * dtype_size(weights);
    }
  }
  f.x = call_rows * static_cast<std::size_t>(model.hidden_size) *
        dtype_size(gemm_input_dtype(weights));
  f.workspace = kCublasLtWorkspaceBytes;
  f.attention = attention_bytes;
  return f;
}

std::string layer_memory_skip_reason(const LayerFootprint& need, std::size_t free_bytes) {
  const std::size_t total = need.total();
  if (total + kMemoryHeadroomBytes <= free_bytes) return "";
  auto gb = [](std::size_t b) { return format_gb(static_cast<double>(b)); };
  return fmt::format(
      "layer step needs {} of device memory (weights {}, KV and attention {}, activations {}, "
      "cuBLASLt workspace {}) plus {} headroom, device has {} free",
      gb(total), gb(need.weights), gb(need.attention), gb(need.x + need.outputs + need.quantized),
      gb(need.workspace), gb(kMemoryHeadroomBytes), gb(free_bytes));
}

std::string fp8_gemm_device_error(int cc_major, int cc_minor) {
  if (cc_major > 8 || (cc_major == 8 && cc_minor >= 9)) return "";
  return fmt::format(
      "fp8_e4m3 weights need cuBLASLt fp8 matmul, which runs on compute capability 8.9 and later "
      "(Ada, Hopper, Blackwell); this device is {}.{}",
      cc_major, cc_minor);
}

Backend::GemmCeiling tensor_gemm_ceiling(const DeviceInfo& info, DType weights) {
  Backend::GemmCeiling c;
  const double peak = is_fp8(weights) ? info.flops_peak_tensor_fp8 : info.flops_peak_tensor_f16;
  if (peak > 0) {
    c.flops = peak;
    c.name = fmt::format("tensor-core {} (datasheet)", dtype_name(weights));
  } else {
    c.name = fmt::format("tensor-core {}: no datasheet peak for {} in configs/devices.json",
                         dtype_name(weights), info.name);
  }
  return c;
}

}  // namespace decodebench::cuda
