#include "backends/cpu/cpu_decode_mla.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "backends/cpu/cpu_decode_avx2_loads.h"
#include "backends/cpu/cpu_decode_avx512_loads.h"
#include "backends/cpu/cpu_decode_common.h"
#include "backends/cpu/cpu_decode_kv_walk.h"  // prefetch_line
#include "backends/cpu/cpu_decode_scalar.h"
#include "device/float_formats.h"
#include "device/paged_kv.h"
#include "device/softmax_state.h"

namespace decodebench::cpu::detail {
namespace {

using kernels::PagedDecodeParams;
constexpr int kT = kMlaTileTokens;
// The tile is computed in whole score blocks of up to kScorePad tokens, its tail rows zero.
constexpr int kScorePad = 16;
static_assert(kT % kScorePad == 0);
constexpr int kDeepSeekDk = 576;  // DeepSeek-V2/V3's latent row (512 + 64): a compiled stride

// fp32 scratch aligned for any vector width.
struct FloatBuffer {
  explicit FloatBuffer(std::size_t n)
      : data(static_cast<float*>(
            ::operator new(std::max<std::size_t>(n, 1) * sizeof(float), std::align_val_t(64)))) {
    std::fill(data, data + n, 0.0f);
  }
  ~FloatBuffer() { ::operator delete(data, std::align_val_t(64)); }
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  float* data;
};

inline void store_out(DType q_dtype, void* out, std::size_t index, float value) {
  const std::uint16_t bits =
      q_dtype == DType::bf16 ? floatfmt::float_to_bf16(value) : floatfmt::float_to_f16(value);
  std::memcpy(static_cast<std::byte*>(out) + 2 * index, &bits, 2);
}

inline float load_q(DType q_dtype, const void* q, std::size_t index) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const std::byte*>(q) + 2 * index, 2);
  return q_dtype == DType::bf16 ? floatfmt::bf16_to_float(bits) : floatfmt::f16_to_float(bits);
}

// ---- the vector types: lanes run over heads (scores, softmax) or over dv (the output) ---------

// Plain C++ (the compiler vectorizes what it can): correct on any ISA.
struct PortableSimd {
  static constexpr int kW = 8;
  struct V {
    float x[kW];
  };
  static V zero() { return {}; }
  static V load(const float* p) {
    V v;
    std::memcpy(v.x, p, sizeof v.x);
    return v;
  }
  static void store(float* p, V v) { std::memcpy(p, v.x, sizeof v.x); }
  static V set1(float a) {
    V v;
    for (float& x : v.x) x = a;
    return v;
  }
  static V fma(V a, V b, V c) {
    for (int i = 0; i < kW; ++i) c.x[i] += a.x[i] * b.x[i];
    return c;
  }
  static V add(V a, V b) {
    for (int i = 0; i < kW; ++i) a.x[i] += b.x[i];
    return a;
  }
  static V mul(V a, V b) {
    for (int i = 0; i < kW; ++i) a.x[i] *= b.x[i];
    return a;
  }
  static V max(V a, V b) {
    for (int i = 0; i < kW; ++i) a.x[i] = a.x[i] > b.x[i] ? a.x[i] : b.x[i];
    return a;
  }
  static V exp2(V a) {  // of x <= 0 (fast_exp2)
    for (float& x : a.x) x = fast_exp2(x);
    return a;
  }
  template <DType kKv>
  static constexpr float kLoadScale = 1.0f;
  template <DType kKv>
  static void convert_row(const std::byte* row, int n, float* dst) {
    for (int i = 0; i < n; ++i) dst[i] = decode_element<kKv>(row, static_cast<std::size_t>(i));
  }
  static constexpr int kScoreHeadVecs = 2;  // score blocks: 2 head vectors x 8 tokens,
  static constexpr int kScoreTokens1 = 8;   // or 1 x kScoreTokens1
  static constexpr int kOutHeads = 2;       // output block: 2 heads x kOutVecs vectors of dv
  static constexpr int kOutVecs = 4;
};

#if DECODEBENCH_CPU_AVX512
struct Avx512Simd {
  static constexpr int kW = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V exp2(V x) {  // fast_exp2's: clamp, round, polynomial, vscalefps
    const V t = _mm512_max_ps(x, _mm512_set1_ps(-125.0f));
    const V r = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm512_sub_ps(t, r);
    V poly = _mm512_set1_ps(kExp2Poly[0]);
    for (int k = 1; k < 7; ++k) poly = _mm512_fmadd_ps(poly, f, _mm512_set1_ps(kExp2Poly[k]));
    return _mm512_scalef_ps(poly, r);
  }
  template <DType kKv>
  static constexpr float kLoadScale = kAvx512LoadScale<kKv>;
  template <DType kKv>
  static void convert_row(const std::byte* row, int n, float* dst) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_store_ps(dst + i, load16<kKv>(row, i));
    for (; i < n; ++i)
      dst[i] = decode_element<kKv>(row, static_cast<std::size_t>(i)) / kLoadScale<kKv>;
  }
  // 2 x 8 = 16 score accumulators (1 x 16 when the heads fit one vector, so that 16 FMAs, not
  // 8, are in flight against the 4-cycle latency of the 2 pipes) and 4 x 4 = 16 output
  // accumulators of 32 zmm.
  static constexpr int kScoreHeadVecs = 2;
  static constexpr int kScoreTokens1 = 16;
  static constexpr int kOutHeads = 4;
  static constexpr int kOutVecs = 4;
};
#endif

#if DECODEBENCH_CPU_AVX2
struct Avx2Simd {
  static constexpr int kW = 8;
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V exp2(V x) {
    const V t = _mm256_max_ps(x, _mm256_set1_ps(-125.0f));
    const V r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const V f = _mm256_sub_ps(t, r);
    V poly = _mm256_set1_ps(kExp2Poly[0]);
    for (int k = 1; k < 7; ++k) poly = _mm256_fmadd_ps(poly, f, _mm256_set1_ps(kExp2Poly[k]));
    const V scale = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(poly, scale);
  }
  template <DType kKv>
  static constexpr float kLoadScale = kAvx2LoadScale<kKv>;
  template <DType kKv>
  static void convert_row(const std::byte* row, int n, float* dst) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_store_ps(dst + i, avx2::load8<kKv>(row, i));
    for (; i < n; ++i)
      dst[i] = decode_element<kKv>(row, static_cast<std::size_t>(i)) / kLoadScale<kKv>;
  }
  // 16 ymm: 2 x 4 score accumulators (+ 2 q vectors), 2 x 4 output accumulators (+ 4 V rows).
  static constexpr int kScoreHeadVecs = 2;
  static constexpr int kScoreTokens1 = 8;
  static constexpr int kOutHeads = 2;
  static constexpr int kOutVecs = 4;
};
#endif

// ---- the kernels of one tile ------------------------------------------------------------------

// s[t][h0 + i W .. + W) for the kTokens tokens from t0: sum over d of qt[d][h] kf[t][d].
// qt [dk][hp], kf [T][dk], s [T][hp]. kDk: dk known at compile time (0: not), so that each
// token's element is a displacement off one pointer rather than a pointer of its own (GCC spilled
// the 16 tokens' pointers to the stack inside the loop).
template <class S, int kHeadVecs, int kTokens, int kDk>
inline void score_block(const float* __restrict qt, const float* __restrict kf, int dk_arg, int hp,
                        int t0, int h0, float* __restrict s) {
  const int dk = kDk != 0 ? kDk : dk_arg;
  using V = typename S::V;
  V acc[kHeadVecs][kTokens];
  for (auto& row : acc)
    for (V& a : row) a = S::zero();
  const float* k0 = kf + static_cast<std::size_t>(t0) * dk;
  for (int d = 0; d < dk; ++d) {
    V q[kHeadVecs];
    for (int i = 0; i < kHeadVecs; ++i)
      q[i] = S::load(qt + static_cast<std::size_t>(d) * hp + h0 + i * S::kW);
    for (int t = 0; t < kTokens; ++t) {
      const V k = S::set1(k0[static_cast<std::size_t>(t) * dk + d]);
      for (int i = 0; i < kHeadVecs; ++i) acc[i][t] = S::fma(q[i], k, acc[i][t]);
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int i = 0; i < kHeadVecs; ++i)
      S::store(s + static_cast<std::size_t>(t0 + t) * hp + h0 + i * S::kW, acc[i][t]);
}

// o[h0 + h][j0 + c W ..] += sum over the tile's tokens of s[t][h0 + h] kf[t][j0 + c W ..].
template <class S, int kHeads, int kVecs>
inline void out_block(const float* __restrict s, const float* __restrict kf, int dk, int hp,
                      int tokens, int h0, int j0, float* __restrict o, int dv) {
  using V = typename S::V;
  V acc[kHeads][kVecs];
  for (auto& row : acc)
    for (V& a : row) a = S::zero();
  for (int t = 0; t < tokens; ++t) {
    V v[kVecs];
    const float* row = kf + static_cast<std::size_t>(t) * dk + j0;
    for (int c = 0; c < kVecs; ++c) v[c] = S::load(row + c * S::kW);
    for (int h = 0; h < kHeads; ++h) {
      const V pr = S::set1(s[static_cast<std::size_t>(t) * hp + h0 + h]);
      for (int c = 0; c < kVecs; ++c) acc[h][c] = S::fma(pr, v[c], acc[h][c]);
    }
  }
  for (int h = 0; h < kHeads; ++h) {
    float* oh = o + static_cast<std::size_t>(h0 + h) * dv + j0;
    for (int c = 0; c < kVecs; ++c)
      S::store(oh + c * S::kW, S::add(S::load(oh + c * S::kW), acc[h][c]));
  }
}

// The tile's scores: kScoreHeadVecs x 8 accumulators, or 1 x kScoreTokens1 when the heads fit
// one vector.
template <class S, int kDk>
inline void scores(const float* qt, const float* kf, int dk, int hp, int padded, float* s) {
  int h0 = 0;
  for (; h0 + S::kScoreHeadVecs * S::kW <= hp; h0 += S::kScoreHeadVecs * S::kW)
    for (int tb = 0; tb < padded; tb += 8)
      score_block<S, S::kScoreHeadVecs, 8, kDk>(qt, kf, dk, hp, tb, h0, s);
  for (; h0 < hp; h0 += S::kW)
    for (int tb = 0; tb < padded; tb += S::kScoreTokens1)
      score_block<S, 1, S::kScoreTokens1, kDk>(qt, kf, dk, hp, tb, h0, s);
}

// One (sequence, split) work item's state: out [hp][dv] unnormalized, max and sum [hp].
struct ItemState {
  float* o;
  float* max;
  float* sum;
};

// Folds the tile's scores s [T][hp] (n real tokens, the rest of the padded rows ignored) into
// the running state, turning them into probabilities (padded rows 0) and rescaling o.
template <class S>
inline void softmax_tile(float* __restrict s, int n, int padded, int hp, int dv, ItemState st,
                         float* __restrict factor) {
  using V = typename S::V;
  for (int h0 = 0; h0 < hp; h0 += S::kW) {
    V tile_max = S::set1(-INFINITY);
    for (int t = 0; t < n; ++t)
      tile_max = S::max(tile_max, S::load(s + static_cast<std::size_t>(t) * hp + h0));
    const V old_max = S::load(st.max + h0);
    const V new_max = S::max(old_max, tile_max);
    // exp2(old - new): 0 for the first tile (old = -inf is clamped to 2^-125, times a 0 sum).
    const V f = S::exp2(S::add(old_max, S::mul(new_max, S::set1(-1.0f))));
    V sum = S::mul(S::load(st.sum + h0), f);
    const V neg_max = S::mul(new_max, S::set1(-1.0f));
    for (int t = 0; t < n; ++t) {
      float* row = s + static_cast<std::size_t>(t) * hp + h0;
      const V pr = S::exp2(S::add(S::load(row), neg_max));
      S::store(row, pr);
      sum = S::add(sum, pr);
    }
    for (int t = n; t < padded; ++t) S::store(s + static_cast<std::size_t>(t) * hp + h0, S::zero());
    S::store(st.max + h0, new_max);
    S::store(st.sum + h0, sum);
    S::store(factor + h0, f);
  }
  for (int h = 0; h < hp; ++h) {
    const typename S::V fh = S::set1(factor[h]);
    float* oh = st.o + static_cast<std::size_t>(h) * dv;
    for (int j = 0; j < dv; j += S::kW) S::store(oh + j, S::mul(S::load(oh + j), fh));
  }
}

// Per-thread scratch.
struct MlaScratch {
  MlaScratch(int dk, int dv, int hp)
      : kf(static_cast<std::size_t>(kT) * dk),
        qt(static_cast<std::size_t>(dk) * hp),
        s(static_cast<std::size_t>(kT) * hp),
        o(static_cast<std::size_t>(hp) * dv),
        max(static_cast<std::size_t>(hp)),
        sum(static_cast<std::size_t>(hp)),
        factor(static_cast<std::size_t>(hp)) {}
  FloatBuffer kf, qt, s, o, max, sum, factor;
};

// The latent row of token `token` of sequence b.
inline const std::byte* latent_row(const PagedDecodeParams& p, int b, int token,
                                   std::size_t row_bytes) {
  const std::int32_t block =
      physical_block(p.block_tables, p.max_blocks_per_seq, b, token, p.block_size);
  const std::size_t row = static_cast<std::size_t>(block) * p.block_size + token % p.block_size;
  return static_cast<const std::byte*>(p.k_cache) + row * row_bytes;
}

template <class S, DType kKv>
void decode_mla_path(const PagedDecodeParams& p, int num_threads, int splits) {
  const int batch = p.batch, hq = p.num_q_heads, dk = p.head_dim, dv = p.v_head_dim;
  const int hp = (hq + S::kW - 1) / S::kW * S::kW;  // heads padded to whole vectors (q 0)
  const std::size_t row_bytes = kv_row_bytes(kKv, dk);
  constexpr float kLoad = S::template kLoadScale<kKv>;
  const float q_scale = p.softmax_scale * p.k_scale * kLoad * kLog2e;
  const float out_scale = p.v_scale * kLoad;  // V is K: the same stored values and scale

  std::vector<float> part_o, part_max, part_sum;  // [batch][splits][hp][dv], [batch][splits][hp]
  if (splits > 1) {
    part_o.resize(static_cast<std::size_t>(batch) * splits * hp * dv);
    part_max.resize(static_cast<std::size_t>(batch) * splits * hp);
    part_sum.resize(static_cast<std::size_t>(batch) * splits * hp);
  }
  const int num_items = batch * splits;

#pragma omp parallel num_threads(num_threads)
  {
    auto scratch = std::make_unique<MlaScratch>(dk, dv, hp);
    float* const kf = scratch->kf.data;
    float* const qt = scratch->qt.data;
    float* const s = scratch->s.data;
    const ItemState st{scratch->o.data, scratch->max.data, scratch->sum.data};

#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < num_items; ++item) {
      const int b = item / splits;
      const int split = item % splits;
      const int len = p.context_lens[b];
      const int chunk = ((len + splits - 1) / splits + kT - 1) / kT * kT;
      const int t_begin = std::min(len, split * chunk);
      const int t_end = std::min(len, t_begin + chunk);

      // q of sequence b, transposed to [dk][hp] and pre-scaled (padded heads 0).
      for (int h = 0; h < hp; ++h)
        for (int d = 0; d < dk; ++d)
          qt[static_cast<std::size_t>(d) * hp + h] =
              h < hq ? load_q(p.q_dtype, p.q, (static_cast<std::size_t>(b) * hq + h) * dk + d) *
                           q_scale
                     : 0.0f;
      std::fill(st.o, st.o + static_cast<std::size_t>(hp) * dv, 0.0f);
      std::fill(st.max, st.max + hp, -INFINITY);
      std::fill(st.sum, st.sum + hp, 0.0f);

      for (int t0 = t_begin; t0 < t_end; t0 += kT) {
        const int n = std::min(kT, t_end - t0);
        const int padded = (n + kScorePad - 1) / kScorePad * kScorePad;
        const int next = t0 + kT;
        for (int t = 0; t < n; ++t) {
          // The next tile's row t, requested while this one's is converted.
          if (next + t < t_end) {
            const std::byte* ahead = latent_row(p, b, next + t, row_bytes);
            for (std::size_t line = 0; line < row_bytes; line += 64) prefetch_line(ahead + line);
          }
          S::template convert_row<kKv>(latent_row(p, b, t0 + t, row_bytes), dk,
                                       kf + static_cast<std::size_t>(t) * dk);
        }
        std::fill(kf + static_cast<std::size_t>(n) * dk, kf + static_cast<std::size_t>(padded) * dk,
                  0.0f);
        if (dk == kDeepSeekDk)
          scores<S, kDeepSeekDk>(qt, kf, dk, hp, padded, s);
        else
          scores<S, 0>(qt, kf, dk, hp, padded, s);
        softmax_tile<S>(s, n, padded, hp, dv, st, scratch->factor.data);
        constexpr int kVecWidth = S::kOutVecs * S::kW;
        int j0 = 0;
        for (; j0 + kVecWidth <= dv; j0 += kVecWidth) {
          int h = 0;
          for (; h + S::kOutHeads <= hq; h += S::kOutHeads)
            out_block<S, S::kOutHeads, S::kOutVecs>(s, kf, dk, hp, n, h, j0, st.o, dv);
          for (; h < hq; ++h) out_block<S, 1, S::kOutVecs>(s, kf, dk, hp, n, h, j0, st.o, dv);
        }
        for (; j0 < dv; j0 += S::kW)
          for (int h = 0; h < hq; ++h) out_block<S, 1, 1>(s, kf, dk, hp, n, h, j0, st.o, dv);
      }

      if (splits == 1) {
        for (int h = 0; h < hq; ++h) {
          const float scale = out_scale / st.sum[h];  // len >= 1: the max's own term is 1
          const float* oh = st.o + static_cast<std::size_t>(h) * dv;
          for (int j = 0; j < dv; ++j)
            store_out(p.q_dtype, p.out, (static_cast<std::size_t>(b) * hq + h) * dv + j,
                      oh[j] * scale);
        }
      } else {
        const std::size_t at = static_cast<std::size_t>(item) * hp;
        std::copy(st.o, st.o + static_cast<std::size_t>(hp) * dv, part_o.data() + at * dv);
        std::copy(st.max, st.max + hp, part_max.data() + at);
        std::copy(st.sum, st.sum + hp, part_sum.data() + at);
      }
    }

    if (splits > 1) {
      // The loop's implicit barrier published every partial: merge each (sequence, head).
#pragma omp for schedule(static)
      for (int bh = 0; bh < batch * hq; ++bh) {
        const int b = bh / hq, h = bh % hq;
        SoftmaxState<float> merged;
        std::vector<float> acc(static_cast<std::size_t>(dv), 0.0f);
        for (int sp = 0; sp < splits; ++sp) {
          const std::size_t at = (static_cast<std::size_t>(b) * splits + sp) * hp + h;
          float self_factor, other_factor;
          merged.merge({part_max[at], part_sum[at]}, self_factor, other_factor);
          const float* po = part_o.data() + at * dv;
          for (int j = 0; j < dv; ++j) acc[j] = acc[j] * self_factor + po[j] * other_factor;
        }
        const float scale = out_scale / merged.sum;
        for (int j = 0; j < dv; ++j)
          store_out(p.q_dtype, p.out, static_cast<std::size_t>(bh) * dv + j, acc[j] * scale);
      }
    }
  }
}

template <DType kKv>
void decode_mla_dtype(const PagedDecodeParams& p, int num_threads, int splits, DecodePath path) {
#if DECODEBENCH_CPU_AVX512
  if (path == DecodePath::avx512) return decode_mla_path<Avx512Simd, kKv>(p, num_threads, splits);
#endif
#if DECODEBENCH_CPU_AVX2
  if (path == DecodePath::avx2) return decode_mla_path<Avx2Simd, kKv>(p, num_threads, splits);
#endif
  (void)path;
  decode_mla_path<PortableSimd, kKv>(p, num_threads, splits);
}

}  // namespace

void decode_mla(const PagedDecodeParams& p, int num_threads, int num_splits, DecodePath path) {
  switch (p.kv_dtype) {
    case DType::f16: return decode_mla_dtype<DType::f16>(p, num_threads, num_splits, path);
    case DType::bf16: return decode_mla_dtype<DType::bf16>(p, num_threads, num_splits, path);
    case DType::f32: return decode_mla_dtype<DType::f32>(p, num_threads, num_splits, path);
    case DType::fp8_e4m3:
      return decode_mla_dtype<DType::fp8_e4m3>(p, num_threads, num_splits, path);
    case DType::fp8_e5m2:
      return decode_mla_dtype<DType::fp8_e5m2>(p, num_threads, num_splits, path);
    default: break;  // the integer formats: refused by paged_decode before this
  }
}

}  // namespace decodebench::cpu::detail
