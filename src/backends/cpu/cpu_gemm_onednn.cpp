// oneDNN behind cpu_gemm.h: the matmul primitive on bf16 weights, fp32 accumulation.
// Entry "packed" (the default) lets the primitive choose its weights layout (format_tag::any) and
// reorders the weights into it once, as oneDNN is meant to be used for inference; "plain" reads
// the caller's [n][k] matrix as it is.
// Two builds of it are used (docs/decisions.md "Layer GEMMs on the CPU"): Debian's oneDNN 2.x
// (OpenMP) runs bf16 activations on AVX-512; oneDNN 3.x (PyPI `onednn`, SYCL runtime) also runs
// bf16 weights on AVX2 with fp32 activations, the weights converted in registers as they are
// read, so they stay 16-bit in memory. A plan converts x to fp32 and the fp32 product to bf16
// around such a call.
#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "backends/cpu/cpu_decode.h"  // advise_huge_pages
#include "backends/cpu/cpu_gemm.h"
#include "common/errors.h"
#include "device/float_formats.h"

// The package that provides it, for the messages that say what to install.
#ifdef DECODEBENCH_ONEDNN_PYPI
#define DECODEBENCH_ONEDNN_PACKAGE "onednn (PyPI, installed by scripts/bootstrap.sh)"
#else
#define DECODEBENCH_ONEDNN_PACKAGE "libdnnl-dev"
#endif

namespace decodebench::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// A SYCL build of oneDNN (PyPI `onednn`) finds its CPU device through the OpenCL ICD loader,
// whose vendor file points at a path of the wheel's build machine: name the wheel's own CPU
// runtime, installed beside libdnnl, unless the caller chose one.
void point_opencl_at_bundled_cpu_runtime() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_SYCL
  if (std::getenv("OCL_ICD_FILENAMES") != nullptr) return;
  const std::filesystem::path lib = library_path(reinterpret_cast<const void*>(&dnnl_version));
  const std::filesystem::path runtime = lib.parent_path() / "libintelocl.so";
  std::error_code ec;
  if (std::filesystem::exists(runtime, ec)) setenv("OCL_ICD_FILENAMES", runtime.c_str(), 0);
#endif
}

dnnl::engine make_engine() {
  point_opencl_at_bundled_cpu_runtime();
  return dnnl::engine(dnnl::engine::kind::cpu, 0);
}

struct Context {
  dnnl::engine engine = make_engine();
  dnnl::stream stream{engine};
};

// The 2.x and 3.x APIs create a matmul differently; everything after creation is the same.
dnnl::matmul::primitive_desc matmul_pd(const dnnl::engine& engine, const memory::desc& src,
                                       const memory::desc& wei, const memory::desc& dst) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::matmul::primitive_desc(engine, src, wei, dst);
#else
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine);
#endif
}

// The activations a product runs on: bf16 (AVX-512 kernels) or fp32 around bf16 weights.
enum class Activations { none, bf16, f32 };

// What this CPU runs, probed once on a small product; a reference implementation does not count.
Activations probe_activations(const dnnl::engine& engine) {
  for (const dt act : {dt::bf16, dt::f32}) {
    try {
      const memory::desc src({8, 64}, act, tag::ab);
      const memory::desc wei({64, 64}, dt::bf16, tag::any);
      const memory::desc dst({8, 64}, act, tag::ab);
      const auto pd = matmul_pd(engine, src, wei, dst);
      if (std::string_view(pd.impl_info_str()).rfind("ref", 0) != 0)
        return act == dt::bf16 ? Activations::bf16 : Activations::f32;
    } catch (const dnnl::error&) {
    }
  }
  return Activations::none;
}

class DnnlWeights final : public GemmWeights {
 public:
  DnnlWeights(const Context& ctx, const std::byte* w, std::int64_t rows, std::int64_t cols)
      : ctx_(ctx),
        // W [n][k] row-major is the matmul's K x N weights with strides (1, k).
        raw_(memory::desc({cols, rows}, dt::bf16, memory::dims{1, cols}), ctx.engine,
             const_cast<std::byte*>(w)) {
    n = rows;
    k = cols;
  }

  // The weights in layout `md`: the caller's matrix, or a reordered copy made on first use. A
  // copy per layout (the primitive may pick another for another m); the last two are kept.
  memory for_layout(const memory::desc& md) {
    if (md == raw_.get_desc()) return raw_;
    for (const memory& p : packed_)
      if (p.get_desc() == md) return p;
    memory packed(md, ctx_.engine);
    dnnl::reorder(raw_, packed).execute(ctx_.stream, raw_, packed);
    ctx_.stream.wait();
    advise_huge_pages(packed.get_data_handle(), md.get_size());
    if (packed_.size() == 2) packed_.erase(packed_.begin());
    packed_.push_back(packed);
    return packed;
  }

  std::vector<Span> buffers() const override {
    std::vector<Span> spans;
    for (const memory& p : packed_)
      spans.emplace_back(p.get_data_handle(), p.get_desc().get_size());
    if (spans.empty()) spans.emplace_back(raw_.get_data_handle(), raw_.get_desc().get_size());
    return spans;
  }

 private:
  Context ctx_;
  memory raw_;
  std::vector<memory> packed_;
};

// How a plan reads x and the weights.
enum class Entry {
  packed,          // weights reordered to the primitive's layout; a strided x (lda > k, m > 1)
                   // copied to a dense one first (oneDNN 2.6 runs a strided x through gemm:jit
                   // instead of brgemm)
  packed_strided,  // the same, x read in place with its row stride
  plain,           // the caller's weights as they are, x as packed
};
constexpr std::array<const char*, 3> kEntryNames = {"packed", "packed_strided", "plain"};

class DnnlPlan final : public GemmPlan {
 public:
  DnnlPlan(const Context& ctx, DnnlWeights& w, std::int64_t m, std::int64_t lda, Entry entry,
           Activations act)
      : ctx_(ctx), entry_(entry), rows_(m), k_(w.k), n_(w.n), lda_(lda) {
    // One row's stride is irrelevant: dense for m = 1.
    const bool strided = lda != w.k && m > 1;
    if (act == Activations::f32) {
      // x is converted to a dense fp32 copy in any case, so the stride costs nothing more.
      x32_.resize(static_cast<std::size_t>(m * w.k));
      y32_.resize(static_cast<std::size_t>(m * w.n));
    } else if (strided && entry != Entry::packed_strided) {
      dense_.resize(static_cast<std::size_t>(m * w.k) * 2);
      row_bytes_ = static_cast<std::size_t>(w.k) * 2,
      stride_bytes_ = static_cast<std::size_t>(lda) * 2;
    }
    const dt adt = act == Activations::f32 ? dt::f32 : dt::bf16;
    const bool in_place_stride =
        strided && entry == Entry::packed_strided && act != Activations::f32;
    const memory::desc src({m, w.k}, adt, memory::dims{in_place_stride ? lda : w.k, 1});
    const memory::desc wei = entry == Entry::plain
                                 ? memory::desc({w.k, w.n}, dt::bf16, memory::dims{1, w.k})
                                 : memory::desc({w.k, w.n}, dt::bf16, tag::any);
    const memory::desc dst({m, w.n}, adt, tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = matmul_pd(ctx.engine, src, wei, dst);
    } catch (const dnnl::error& e) {
      throw RuntimeFailure(fmt::format(
          "oneDNN: no matmul on bf16 weights with {} activations for m = {}, n = {}, k = {} on "
          "this CPU ({})",
          act == Activations::f32 ? "fp32" : "bf16", m, w.n, w.k, e.what()));
    }
    weights_ = w.for_layout(pd.weights_desc());
    src_ = memory(src, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst, ctx.engine, DNNL_MEMORY_NONE);
    impl_ = pd.impl_info_str();
    matmul_ = dnnl::matmul(pd);
  }

  void run(const std::byte* x, std::byte* y) override {
    if (!x32_.empty()) {
      run_f32(x, y);
      return;
    }
    if (!dense_.empty()) {
      for (std::int64_t r = 0; r < rows_; ++r)
        std::memcpy(dense_.data() + r * row_bytes_, x + r * stride_bytes_, row_bytes_);
      x = dense_.data();
    }
    src_.set_data_handle(const_cast<std::byte*>(x));
    dst_.set_data_handle(y);
    matmul_.execute(ctx_.stream,
                    {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}});
    ctx_.stream.wait();
  }

  std::string entry_point() const override {
    return fmt::format("dnnl matmul {} ({}{})", impl_, kEntryNames[static_cast<int>(entry_)],
                       !x32_.empty()    ? ", fp32 activations"
                       : dense_.empty() ? ""
                                        : ", strided x copied dense");
  }
  std::vector<Span> buffers() const override {
    if (!x32_.empty())
      return {{x32_.data(), x32_.size() * sizeof(float)},
              {y32_.data(), y32_.size() * sizeof(float)}};
    if (dense_.empty()) return {};
    return {{dense_.data(), dense_.size()}};
  }

 private:
  Context ctx_;
  Entry entry_;
  memory src_, dst_, weights_;
  dnnl::matmul matmul_;
  std::string impl_;
  std::vector<std::byte> dense_;  // [m][k] bf16: a strided x made dense
  std::vector<float> x32_, y32_;  // [m][k], [m][n]: fp32 activations around the product
  std::int64_t rows_ = 0, k_ = 0, n_ = 0, lda_ = 0;
  std::size_t row_bytes_ = 0, stride_bytes_ = 0;

  // bf16 x -> fp32, the product, fp32 -> bf16 y: both conversions are part of the stage's time,
  // as the quantize-and-cast around a real engine's GEMM would be.
  void run_f32(const std::byte* x, std::byte* y) {
    const auto* xb = reinterpret_cast<const std::uint16_t*>(x);
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t c = 0; c < k_; ++c)
        x32_[static_cast<std::size_t>(r * k_ + c)] = floatfmt::bf16_to_float(xb[r * lda_ + c]);
    src_.set_data_handle(x32_.data());
    dst_.set_data_handle(y32_.data());
    matmul_.execute(ctx_.stream,
                    {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}});
    ctx_.stream.wait();
    store_bf16(y32_.data(), y32_.size(), y);
  }
};

class Onednn final : public GemmLibrary {
 public:
  std::string name() const override { return "oneDNN"; }

  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP    ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_SYCL ? "SYCL"
                          : v->cpu_runtime == DNNL_RUNTIME_TBB  ? "TBB"
                                                                : "other";
    return fmt::format("{}.{}.{} ({} threads, {})", v->major, v->minor, v->patch, runtime,
                       library_path(reinterpret_cast<const void*>(&dnnl_version)));
  }

  std::string package() const override { return DECODEBENCH_ONEDNN_PACKAGE; }

  // oneDNN 2.x has bf16 matmul kernels from AVX-512 on (avx512_core, the bf16 instructions
  // where the core has them); 3.x also has AVX2 kernels for bf16 weights with fp32 activations.
  // Below that, at most a reference implementation, which does not count.
  std::string unsupported_reason(DType weights) const override {
    if (weights != DType::bf16)
      return fmt::format("oneDNN {} runs no {} matmul on this CPU (bf16 only)", version(),
                         dtype_name(weights));
    if (activations_ == Activations::none)
      return "oneDNN " + version() +
             " has no bf16 matmul kernel for this CPU (oneDNN 2.x needs AVX-512; on an AVX2 CPU "
             "scripts/bootstrap.sh installs oneDNN 3.x from PyPI, `onednn`, which has them)";
    return "";
  }

  std::unique_ptr<GemmWeights> prepare_weights(const std::byte* w, std::int64_t n,
                                               std::int64_t k) override {
    return std::make_unique<DnnlWeights>(ctx_, w, n, k);
  }

  std::unique_ptr<GemmPlan> plan(GemmWeights& weights, std::int64_t m, std::int64_t lda,
                                 std::string_view entry) override {
    const std::vector<std::string> valid = entries(m, weights.k, lda);
    if (entry.empty()) entry = valid.front();
    if (std::find(valid.begin(), valid.end(), entry) == valid.end()) {
      throw InputError(fmt::format("oneDNN: no entry point '{}' for m = {}, lda = {} (valid: {})",
                                   entry, m, lda, fmt::join(valid, ", ")));
    }
    const auto e = static_cast<Entry>(std::find(kEntryNames.begin(), kEntryNames.end(), entry) -
                                      kEntryNames.begin());
    return std::make_unique<DnnlPlan>(ctx_, static_cast<DnnlWeights&>(weights), m, lda, e,
                                      activations_);
  }

  std::vector<std::string> entries(std::int64_t m, std::int64_t k,
                                   std::int64_t lda) const override {
    std::vector<std::string> e = {kEntryNames[0], kEntryNames[2]};
    // fp32 activations are a converted dense copy: no strided entry.
    if (m > 1 && lda != k && activations_ == Activations::bf16)
      e.insert(e.begin() + 1, kEntryNames[1]);
    return e;
  }

 private:
  Context ctx_;
  Activations activations_ = probe_activations(ctx_.engine);
};

}  // namespace

std::unique_ptr<GemmLibrary> make_onednn() { return std::make_unique<Onednn>(); }

}  // namespace decodebench::cpu
