// oneDNN behind cpu_gemm.h: the bf16 matmul primitive, bf16 output written by the primitive.
// Entry "packed" (the default) lets the primitive choose its weights layout (format_tag::any) and
// reorders the weights into it once, as oneDNN is meant to be used for inference; "plain" reads
// the caller's [n][k] matrix as it is.
#include <dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

#include "backends/cpu/cpu_decode.h"  // advise_huge_pages
#include "backends/cpu/cpu_gemm.h"
#include "common/errors.h"

namespace decodebench::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

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
  DnnlPlan(const Context& ctx, DnnlWeights& w, std::int64_t m, std::int64_t lda, Entry entry)
      : ctx_(ctx), entry_(entry) {
    // One row's stride is irrelevant: dense for m = 1.
    const bool strided = lda != w.k && m > 1;
    if (strided && entry != Entry::packed_strided) {
      dense_.resize(static_cast<std::size_t>(m * w.k) * 2);
      rows_ = m, row_bytes_ = static_cast<std::size_t>(w.k) * 2,
      stride_bytes_ = static_cast<std::size_t>(lda) * 2;
    }
    const memory::desc src({m, w.k}, dt::bf16,
                           memory::dims{strided && entry == Entry::packed_strided ? lda : w.k, 1});
    const memory::desc wei = entry == Entry::plain
                                 ? memory::desc({w.k, w.n}, dt::bf16, memory::dims{1, w.k})
                                 : memory::desc({w.k, w.n}, dt::bf16, tag::any);
    const memory::desc dst({m, w.n}, dt::bf16, tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), ctx.engine);
    } catch (const dnnl::error& e) {
      throw RuntimeFailure(fmt::format(
          "oneDNN: no bf16 matmul for m = {}, n = {}, k = {} on this CPU ({}): its bf16 kernels "
          "need AVX-512",
          m, w.n, w.k, e.what()));
    }
    weights_ = w.for_layout(pd.weights_desc());
    src_ = memory(src, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst, ctx.engine, DNNL_MEMORY_NONE);
    impl_ = pd.impl_info_str();
    matmul_ = dnnl::matmul(pd);
  }

  void run(const std::byte* x, std::byte* y) override {
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
                       dense_.empty() ? "" : ", strided x copied dense");
  }
  std::vector<Span> buffers() const override {
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
  std::int64_t rows_ = 0;
  std::size_t row_bytes_ = 0, stride_bytes_ = 0;
};

class Onednn final : public GemmLibrary {
 public:
  std::string name() const override { return "oneDNN"; }

  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other";
    return fmt::format("{}.{}.{} ({} threads, {})", v->major, v->minor, v->patch, runtime,
                       library_path(reinterpret_cast<const void*>(&dnnl_version)));
  }

  std::string package() const override { return "libdnnl-dev"; }

  // oneDNN 2.6 has bf16 matmul kernels from AVX-512 on (avx512_core, the bf16 instructions
  // where the core has them); below, at most its reference implementation, which does not
  // count. Probed once on a small product.
  std::string unsupported_reason(DType weights) const override {
    if (weights != DType::bf16)
      return fmt::format("oneDNN {} runs no {} matmul on this CPU (bf16 only)", version(),
                         dtype_name(weights));
    static const bool bf16 = [this] {
      try {
        const memory::desc src({8, 64}, dt::bf16, tag::ab);
        const memory::desc wei({64, 64}, dt::bf16, tag::any);
        const memory::desc dst({8, 64}, dt::bf16, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), ctx_.engine);
        return std::string_view(pd.impl_info_str()).rfind("ref", 0) != 0;
      } catch (const dnnl::error&) {
        return false;
      }
    }();
    if (!bf16)
      return "oneDNN " + version() +
             " has no bf16 matmul kernel for this CPU (its bf16 kernels need AVX-512)";
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
    return std::make_unique<DnnlPlan>(ctx_, static_cast<DnnlWeights&>(weights), m, lda, e);
  }

  std::vector<std::string> entries(std::int64_t m, std::int64_t k,
                                   std::int64_t lda) const override {
    std::vector<std::string> e = {kEntryNames[0], kEntryNames[2]};
    if (m > 1 && lda != k) e.insert(e.begin() + 1, kEntryNames[1]);
    return e;
  }

 private:
  Context ctx_;
};

}  // namespace

std::unique_ptr<GemmLibrary> make_onednn() { return std::make_unique<Onednn>(); }

}  // namespace decodebench::cpu
