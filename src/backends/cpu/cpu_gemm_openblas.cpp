// OpenBLAS behind cpu_gemm.h. Its bf16 entry points (cblas_sbgemm, cblas_sbgemv) exist only in a
// library built with BUILD_BFLOAT16=1: cblas.h always declares them, and Debian 12's 0.3.21 does
// not export them. So they are looked up at run time: where they exist a product is bf16 in, fp32
// out (converted to bf16 in run()); where they do not, the only OpenBLAS product is cblas_sgemm /
// cblas_sgemv on fp32 copies of the weights (twice the bytes) and of the input, which
// unsupported_reason(bf16) reports as not running bf16 (the bench times it, named so; the backend
// does not run it). OpenBLAS has no public weight-packing API: it packs inside each call.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "backends/cpu/cpu_gemm.h"
#include "common/errors.h"
#include "device/float_formats.h"

#ifndef DECODEBENCH_OPENBLAS_PACKAGE
#define DECODEBENCH_OPENBLAS_PACKAGE "libopenblas-dev"
#endif

namespace decodebench::cpu {
namespace {

using Sbgemm = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint,
                        float, const bfloat16*, blasint, const bfloat16*, blasint, float, float*,
                        blasint);
using Sbgemv = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, blasint, blasint, float, const bfloat16*,
                        blasint, const bfloat16*, blasint, float, float*, blasint);

// The bf16 entry points of the OpenBLAS this process loaded, or null.
struct Bf16Entries {
  Sbgemm sbgemm = nullptr;
  Sbgemv sbgemv = nullptr;
};
const Bf16Entries& bf16_entries() {
  static const Bf16Entries e = [] {
    Bf16Entries found;
    found.sbgemm = reinterpret_cast<Sbgemm>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
    found.sbgemv = reinterpret_cast<Sbgemv>(dlsym(RTLD_DEFAULT, "cblas_sbgemv"));
    return found;
  }();
  return e;
}
bool has_bf16() { return bf16_entries().sbgemm != nullptr; }

void to_float(const std::byte* src, std::int64_t rows, std::int64_t cols, std::int64_t ld,
              float* dst) {
  const auto* s = reinterpret_cast<const std::uint16_t*>(src);
#pragma omp parallel for schedule(static) if (rows * cols >= (std::int64_t{1} << 20))
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      dst[r * cols + c] = floatfmt::bf16_to_float(s[r * ld + c]);
}

class OpenblasWeights final : public GemmWeights {
 public:
  OpenblasWeights(const std::byte* w, std::int64_t rows, std::int64_t cols) : w_(w) {
    n = rows;
    k = cols;
    if (!has_bf16()) {
      f32_.resize(static_cast<std::size_t>(n * k));
      to_float(w, n, k, k, f32_.data());
    }
  }
  std::vector<Span> buffers() const override {
    if (!f32_.empty()) return {{f32_.data(), f32_.size() * sizeof(float)}};
    return {{w_, static_cast<std::size_t>(n * k) * 2}};
  }
  const bfloat16* bf16() const { return reinterpret_cast<const bfloat16*>(w_); }
  const float* f32() const { return f32_.data(); }

 private:
  const std::byte* w_;      // [n][k] bf16, the caller's
  std::vector<float> f32_;  // [n][k]: the fp32 copy, without the bf16 entry points
};

class OpenblasPlan final : public GemmPlan {
 public:
  OpenblasPlan(const OpenblasWeights& w, std::int64_t m, std::int64_t lda, bool gemv)
      : w_(w), m_(m), lda_(lda), gemv_(gemv), c_(static_cast<std::size_t>(m * w.n)) {
    if (!has_bf16()) x32_.resize(static_cast<std::size_t>(m * w.k));
  }

  void run(const std::byte* x, std::byte* y) override {
    const auto n = static_cast<blasint>(w_.n);
    const auto k = static_cast<blasint>(w_.k);
    const auto m = static_cast<blasint>(m_);
    if (has_bf16()) {
      const auto* xb = reinterpret_cast<const bfloat16*>(x);
      // y[n] = W[n][k] x[k]: W row-major is the matrix itself. C[m][n] = x[m][k] (lda) * W^T.
      if (gemv_)
        bf16_entries().sbgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w_.bf16(), k, xb, 1, 0.0f,
                              c_.data(), 1);
      else
        bf16_entries().sbgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, xb,
                              static_cast<blasint>(lda_), w_.bf16(), k, 0.0f, c_.data(), n);
    } else {
      to_float(x, m_, w_.k, lda_, x32_.data());
      if (gemv_)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w_.f32(), k, x32_.data(), 1, 0.0f,
                    c_.data(), 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x32_.data(), k,
                    w_.f32(), k, 0.0f, c_.data(), n);
    }
    store_bf16(c_.data(), c_.size(), y);
  }

  std::string entry_point() const override {
    if (has_bf16()) return gemv_ ? "cblas_sbgemv" : "cblas_sbgemm";
    return gemv_ ? "cblas_sgemv (fp32 copies)" : "cblas_sgemm (fp32 copies)";
  }
  std::vector<Span> buffers() const override {
    std::vector<Span> spans = {{c_.data(), c_.size() * sizeof(float)}};
    if (!x32_.empty()) spans.emplace_back(x32_.data(), x32_.size() * sizeof(float));
    return spans;
  }

 private:
  const OpenblasWeights& w_;
  std::int64_t m_, lda_;
  bool gemv_;
  std::vector<float> c_;    // [m][n] fp32: what OpenBLAS writes
  std::vector<float> x32_;  // [m][k] fp32 input, without the bf16 entry points
};

constexpr const char* kGemm = "gemm";
constexpr const char* kGemv = "gemv";

class Openblas final : public GemmLibrary {
 public:
  std::string name() const override { return "OpenBLAS"; }

  std::string version() const override {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"
    const std::string config = openblas_get_config();
    std::string number = "?";
    if (config.rfind("OpenBLAS ", 0) == 0) number = config.substr(9, config.find(' ', 9) - 9);
    const int parallel = openblas_get_parallel();  // 0 sequential, 1 pthreads, 2 OpenMP
    const char* threads = parallel == 2 ? "OpenMP" : parallel == 1 ? "pthreads" : "sequential";
    return fmt::format("{} ({} kernels, {} {} threads, {}, {})", number, openblas_get_corename(),
                       openblas_get_num_threads(), threads,
                       has_bf16() ? "cblas_sbgemm" : "no cblas_sbgemm in this build",
                       library_path(reinterpret_cast<const void*>(&openblas_get_config)));
  }

  std::string package() const override { return DECODEBENCH_OPENBLAS_PACKAGE; }

  std::string unsupported_reason(DType weights) const override {
    if (weights != DType::bf16)
      return fmt::format("OpenBLAS has no {} GEMM (bf16 only, as cblas_sbgemm)",
                         dtype_name(weights));
    if (!has_bf16())
      return "OpenBLAS " + version() +
             ": this build exports no cblas_sbgemm (built without BUILD_BFLOAT16, as Debian 12's "
             "0.3.21 is)";
    return "";
  }

  std::unique_ptr<GemmWeights> prepare_weights(const std::byte* w, std::int64_t n,
                                               std::int64_t k) override {
    return std::make_unique<OpenblasWeights>(w, n, k);
  }

  std::unique_ptr<GemmPlan> plan(GemmWeights& weights, std::int64_t m, std::int64_t lda,
                                 std::string_view entry) override {
    const std::vector<std::string> valid = entries(m, weights.k, lda);
    if (entry.empty()) entry = valid.front();
    if (std::find(valid.begin(), valid.end(), entry) == valid.end()) {
      throw InputError(fmt::format("OpenBLAS: no entry point '{}' for m = {} (valid: {})", entry, m,
                                   fmt::join(valid, ", ")));
    }
    return std::make_unique<OpenblasPlan>(static_cast<OpenblasWeights&>(weights), m, lda,
                                          entry == kGemv);
  }

  std::vector<std::string> entries(std::int64_t m, std::int64_t, std::int64_t) const override {
    if (m == 1) return {kGemv, kGemm};
    return {kGemm};
  }
};

}  // namespace

std::unique_ptr<GemmLibrary> make_openblas() { return std::make_unique<Openblas>(); }

}  // namespace decodebench::cpu
