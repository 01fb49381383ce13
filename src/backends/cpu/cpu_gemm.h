// The GEMM libraries behind the cpu backend's layer scope (never a hand-written GEMM): one
// interface over OpenBLAS (cblas_sbgemm / cblas_sbgemv) and oneDNN (the bf16 matmul primitive),
// each compiled in when the build found it. The backend runs the first of gemm_libraries();
// bench/bench_gemm.cpp times every one on the layer's shapes (docs/decisions.md "Layer GEMMs on
// the CPU").
//
// The product is the layer's (src/workload/layer_model.h): y[m][n] = sum_k x[m][k] W[n][k], x
// with row stride lda, W row-major [n][k], bf16 inputs, fp32 accumulation, bf16 output [m][n]
// (a library that writes fp32 converts in its plan, inside run()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/dtype.h"

namespace decodebench::cpu {

// A buffer a product reads, for the cold-cache eviction before a timed sample.
using Span = std::pair<const void*, std::size_t>;

// One weight matrix in the form the library reads it (the caller's [n][k], or a packed copy
// made once: reordering weights ahead of inference is how oneDNN is meant to be used).
class GemmWeights {
 public:
  virtual ~GemmWeights() = default;
  std::int64_t n = 0;
  std::int64_t k = 0;
  // What a product reads of the weights: the packed copies where the library made them, else the
  // caller's matrix.
  virtual std::vector<Span> buffers() const = 0;
};

// One product shape made ready (primitive created, scratch allocated): run() does no setup.
class GemmPlan {
 public:
  virtual ~GemmPlan() = default;
  // y[m][n] = x[m][k] W^T: x [m][lda] bf16, y [m][n] bf16.
  virtual void run(const std::byte* x, std::byte* y) = 0;
  // What run() calls: "cblas_sbgemm", "dnnl matmul brg:avx512_core_bf16 (packed weights)".
  virtual std::string entry_point() const = 0;
  virtual std::vector<Span> buffers() const { return {}; }  // scratch it reads (fp32 output)
};

class GemmLibrary {
 public:
  virtual ~GemmLibrary() = default;
  virtual std::string name() const = 0;  // "OpenBLAS", "oneDNN"
  // With where it was loaded from: "2.6.3 (OpenMP threads, /lib/x86_64-linux-gnu/libdnnl.so.2)".
  virtual std::string version() const = 0;
  virtual std::string package() const = 0;  // the Debian dev package: "libopenblas-openmp-dev"
  // "" when it runs products of `weights` as such (bf16 in, fp32 accumulation) on this CPU,
  // else why not; a library that would convert them to fp32 first does not run them.
  virtual std::string unsupported_reason(DType weights) const = 0;
  bool supports(DType weights) const { return unsupported_reason(weights).empty(); }
  // `w` ([n][k] bf16, row-major) must outlive the result and every plan made from it.
  virtual std::unique_ptr<GemmWeights> prepare_weights(const std::byte* w, std::int64_t n,
                                                       std::int64_t k) = 0;
  // A product of m rows of stride lda >= k with `weights`. `entry`: one of entries(m, k, lda), ""
  // for the library's default (what the cpu backend runs). Throws InputError for an unknown
  // entry.
  virtual std::unique_ptr<GemmPlan> plan(GemmWeights& weights, std::int64_t m, std::int64_t lda,
                                         std::string_view entry = "") = 0;
  // The ways a product of m rows of k elements at stride lda can be run, the default first.
  virtual std::vector<std::string> entries(std::int64_t m, std::int64_t k,
                                           std::int64_t lda) const = 0;
};

// Every library this build found, in the cpu backend's order of preference (the decision in
// docs/decisions.md); empty when none was found.
std::vector<std::unique_ptr<GemmLibrary>> gemm_libraries();
// Why the layer scope has no GEMM library here ("" when it has one): the packages to install.
std::string missing_gemm_library();

// The library's bf16 rate, FLOP/s, on a size^3 product (x size x size, W size x size), best of
// `repetitions` after one warm-up: the compute roof of the layer's GEMMs.
double measure_square_flops(GemmLibrary& lib, std::int64_t size = 2048, int repetitions = 3);

// The file of the shared object that holds `symbol` ("/usr/lib/.../libdnnl.so.2"), or "static".
std::string library_path(const void* symbol);

// bf16 <- fp32, round to nearest even, on all OpenMP threads when it is large enough to pay.
void store_bf16(const float* src, std::size_t count, std::byte* dst);

}  // namespace decodebench::cpu
