// The prefix-aware (cascade) CPU decode's driver, behind cpu_decode.h's paged_decode_cascade:
// the plain driver's tiles, passes and merge (cpu_decode_driver.h), but every block of a shared
// prefix is streamed once per prefix group instead of once per member. Instantiated once per KV
// dtype in a generated translation unit (src/backends/cpu/CMakeLists.txt), each for head_dim
// 64/128/256 and every tile-kernel path compiled in.
//
// Work items, all in one dynamic OpenMP loop, the larger first:
//   prefix  (group, chunk of its prefix, KV head): the pre-scaled q rows of every member x the
//           KV head's query heads are gathered into one contiguous [rows][d] buffer, and each
//           tile of the chunk is loaded ONCE and scored and accumulated for all those rows in
//           passes of the tile's pass_width, so the tile serves the whole group while it is in
//           L1/L2. One KV head per item keeps the rows' q and accumulators small (16 members x
//           4 heads x 128 floats = 32 KiB each at the GQA target); chunks let several threads
//           share one group's prefix when there are fewer items than threads to keep busy.
//   suffix  (sequence, split) over [seq_prefix_tokens[b], context_lens[b]): the plain driver's
//           item (walk_sequence), so a sequence outside every group reads its whole context.
// A sliding window: member b attends to tokens from f_b = window_first_token(L_b, W) on. A
// group's prefix items walk from the earliest member's window start (walk_first_token: the
// block holding it, or the tile-sized piece of a larger block) and mask each row's tokens
// before its own member's f_b, so a prefix that slid out of every window is not read; a member
// whose window starts past an item's piece takes no row in it. A suffix item walks from
// max(prefix end, walk_first_token(L_b)) and masks before f_b, as the plain driver does.
// Every item leaves unnormalized accumulators and softmax states as partials; the merge folds,
// per (sequence, query head), its group's prefix chunks and then its suffix splits by their
// states (SoftmaxState::merge, as the plain driver's split merge), and rounds once. With no
// plan the items, splits and merge order are the plain driver's, so the output is bit-identical.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_decode.h"  // DecodePath
#include "backends/cpu/cpu_decode_driver.h"

namespace decodebench::cpu::detail {

// One prefix item's walk: tokens [t_begin, t_end) of KV head `kv_head` through sequence b0's
// block table (every member's table is the same over the prefix), each tile loaded once and
// run for all `num_rows` q rows (q_rows, acc [num_rows][d], state [num_rows]). Row r attends
// from token row_first[r] on (its member's window start; 0 without a window): its earlier
// tokens are masked, and a tile wholly before it leaves the row's state as it is. The next unit
// prefetched is this KV head's next tile.
template <class Tile, DType kKv, int kHeadDim>
inline void walk_shared_prefix(const PagedDecodeParams& p, int b0, int kv_head, int t_begin,
                               int t_end, const float* q_rows, const int* row_first, int num_rows,
                               Tile& tile, TileRows<Tile::kTile> (&rows)[2], float* s, float* acc,
                               SoftmaxState<float>* state) {
  constexpr int kTile = Tile::kTile;
  constexpr std::size_t kRowBytes = kv_row_bytes(kKv, kHeadDim);
  const std::size_t head_offset = static_cast<std::size_t>(kv_head) * p.block_size * kRowBytes;
  int cur = 0;
  find_tile_rows<kTile, kRowBytes>(p, b0, t_begin, t_end, head_offset, rows[cur]);
  for (int t0 = t_begin; t0 < t_end; t0 += kTile) {
    const int n = rows[cur].n;
    find_tile_rows<kTile, kRowBytes>(p, b0, t0 + kTile, t_end, head_offset, rows[1 - cur]);
    tile.load(TileUnit<kTile>{&rows[cur], head_offset},
              TileUnit<kTile>{&rows[1 - cur], head_offset});
    for (int r0 = 0; r0 < num_rows;) {
      const int nh = Tile::pass_width(num_rows - r0);
      const std::size_t first = static_cast<std::size_t>(r0);
      tile.scores(q_rows + first * kHeadDim, nh, n, s);
      if constexpr (Tile::kArithmetic) {
        // The soft-cap as the plain walk applies it; the window's mask is per row (member).
        if (p.softcap > 0) finish_scores(p, kTile, nh, n, t0, /*first=*/0, s);
        for (int h = 0; h < nh; ++h) {
          float* s_h = s + h * kTile;
          const int masked = std::clamp(row_first[first + h] - t0, 0, n);
          if (masked == n) {
            // No token of the tile is in this row's window: weight 0, and no softmax step,
            // which on an empty state would take exp2(-inf - -inf).
            std::fill_n(s_h, n, 0.0f);
            continue;
          }
          std::fill_n(s_h, masked, -INFINITY);
          Tile::softmax(s_h, n, state[first + h], acc + (first + h) * kHeadDim);
        }
      }
      tile.accumulate(s, nh, n, acc + first * kHeadDim);
      r0 += nh;
    }
    cur = 1 - cur;
  }
}

// Tokens [begin, end) cut into `parts` pieces of whole tiles: piece `i`, clipped to the range.
template <int kTile>
inline void piece_of(int begin, int end, int parts, int i, int& t_begin, int& t_end) {
  const int len = end - begin;
  const int chunk = ((len + parts - 1) / parts + kTile - 1) / kTile * kTile;
  t_begin = std::min(end, begin + i * chunk);
  t_end = std::min(end, t_begin + chunk);
}

// p's prefix fields are a valid plan (prefix_plan_error), num_splits the suffix splits and
// prefix_chunks the pieces of every group's prefix. prefix_window false is a planted fault for
// the tests: the prefix items read and score the whole prefix for every member, as if the
// window were 0 there (the suffix items keep it). Returns the tiles' checksum sum (0 for the
// decode), as decode_step.
template <class Tile, DType kKv, int kHeadDim>
std::uint64_t cascade_step(const PagedDecodeParams& p, int num_threads, int num_splits,
                           int prefix_chunks, bool prefix_window) {
  constexpr int kTile = Tile::kTile;
  const int batch = p.batch, num_q_heads = p.num_q_heads, num_kv_heads = p.num_kv_heads;
  const int group = num_q_heads / num_kv_heads;
  const int groups = p.num_prefix_groups;
  const int chunks = groups > 0 ? prefix_chunks : 0;
  const int splits = num_splits;

  // Q in fp32, pre-scaled as in decode_step.   // [batch][Hq][d]
  const float q_scale = p.softmax_scale * p.k_scale * Tile::kLoadScale * kLog2e;
  const float out_scale = p.v_scale * Tile::kLoadScale;
  const std::size_t q_elems = static_cast<std::size_t>(batch) * num_q_heads * kHeadDim;
  std::vector<float> q32(q_elems);

  int max_members = 0;
  for (int g = 0; g < groups; ++g)
    max_members = std::max(max_members, p.prefix_group_start[g + 1] - p.prefix_group_start[g]);
  const int max_rows = max_members * group;  // q rows of the largest prefix item

  // Each sequence's window start, and where each group's prefix items start walking: the
  // earliest of its members' window walks (the prefix end when every window starts past it).
  std::vector<int> window_first(batch), prefix_begin(groups);
  for (int b = 0; b < batch; ++b) window_first[b] = window_first_token(p.context_lens[b], p.window);
  for (int g = 0; g < groups; ++g) {
    prefix_begin[g] = prefix_window ? p.prefix_group_tokens[g] : 0;
    for (int m = p.prefix_group_start[g]; prefix_window && m < p.prefix_group_start[g + 1]; ++m)
      prefix_begin[g] = std::min(
          prefix_begin[g], walk_first_token<kTile>(p, p.context_lens[p.prefix_group_seqs[m]]));
  }

  // Partials, unnormalized: suffix splits of every sequence, prefix chunks of every member.
  const std::size_t rows_total = static_cast<std::size_t>(batch) * num_q_heads;
  std::vector<float> suffix_acc;                  // [batch][Hq][splits][d]
  std::vector<SoftmaxState<float>> suffix_state;  // [batch][Hq][splits]
  std::vector<float> prefix_acc;                  // [batch][Hq][chunks][d], members only
  std::vector<SoftmaxState<float>> prefix_state;  // [batch][Hq][chunks]
  if constexpr (Tile::kArithmetic) {
    suffix_acc.resize(rows_total * splits * kHeadDim);
    suffix_state.resize(rows_total * splits);
    prefix_acc.resize(rows_total * chunks * kHeadDim);
    prefix_state.resize(rows_total * chunks);
  }

  // Prefix items first: they are the larger ones, and the dynamic schedule then fills the
  // threads' tails with the short suffix items. KV head fastest, so threads running side by
  // side read neighbouring heads of the same blocks.
  const int num_prefix_items = groups * chunks * num_kv_heads;
  const int num_items = num_prefix_items + batch * splits;
  std::uint64_t checksum = 0;

#pragma omp parallel num_threads(num_threads)
  {
    auto tile = std::make_unique<Tile>();
    bind_tile(*tile, p);
    const std::size_t scratch_rows = static_cast<std::size_t>(std::max(num_q_heads, max_rows));
    std::vector<float> acc(scratch_rows * kHeadDim);                           // [rows][d]
    std::vector<SoftmaxState<float>> state(scratch_rows);                      // [rows]
    std::vector<float> q_rows(static_cast<std::size_t>(max_rows) * kHeadDim);  // [rows][d]
    std::vector<int> row_first(max_rows);        // [rows] the row's window start
    std::vector<int> active(max_members);        // the members whose window reaches into the piece
    alignas(64) float s[kMaxPassHeads * kTile];  // [pass rows][kTile]
    TileRows<kTile> rows[2];                     // current, next tile

#pragma omp for schedule(static)
    for (std::size_t i = 0; i < q_elems; ++i) q32[i] = load_q(p.q_dtype, p.q, i) * q_scale;
      // (the loop's implicit barrier publishes q32 to every thread)

#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < num_items; ++item) {
      if (item < num_prefix_items) {
        const int g = item / (chunks * num_kv_heads);
        const int chunk = item / num_kv_heads % chunks;
        const int kv_head = item % num_kv_heads;
        const std::int32_t* members = p.prefix_group_seqs + p.prefix_group_start[g];
        const int num_members = p.prefix_group_start[g + 1] - p.prefix_group_start[g];
        int t_begin, t_end;
        piece_of<kTile>(prefix_begin[g], p.prefix_group_tokens[g], chunks, chunk, t_begin, t_end);
        // A member whose window starts at or past the piece's end takes no row: its partial
        // for this piece stays empty (max -inf, weight 0 in the merge).
        int num_active = 0;
        for (int m = 0; m < num_members; ++m)
          if (!prefix_window || window_first[members[m]] < t_end) active[num_active++] = members[m];
        if (t_begin >= t_end || num_active == 0) continue;
        const int num_rows = num_active * group;
        // Row m * group + h: active member m's query head kv_head * group + h.
        for (int m = 0; m < num_active; ++m) {
          const float* src =
              q32.data() +
              (static_cast<std::size_t>(active[m]) * num_q_heads + kv_head * group) * kHeadDim;
          std::copy(src, src + static_cast<std::size_t>(group) * kHeadDim,
                    q_rows.data() + static_cast<std::size_t>(m) * group * kHeadDim);
          std::fill_n(row_first.begin() + m * group, group,
                      prefix_window ? window_first[active[m]] : 0);
        }
        std::fill_n(acc.begin(), static_cast<std::size_t>(num_rows) * kHeadDim, 0.0f);
        std::fill_n(state.begin(), num_rows, SoftmaxState<float>{});
        walk_shared_prefix<Tile, kKv, kHeadDim>(p, members[0], kv_head, t_begin, t_end,
                                                q_rows.data(), row_first.data(), num_rows, *tile,
                                                rows, s, acc.data(), state.data());
        if constexpr (!Tile::kArithmetic) continue;
        for (int r = 0; r < num_rows; ++r) {
          const std::size_t qh = static_cast<std::size_t>(active[r / group]) * num_q_heads +
                                 kv_head * group + r % group;
          prefix_state[qh * chunks + chunk] = state[r];
          const float* acc_r = acc.data() + static_cast<std::size_t>(r) * kHeadDim;
          std::copy(acc_r, acc_r + kHeadDim, prefix_acc.data() + (qh * chunks + chunk) * kHeadDim);
        }
      } else {
        const int b = (item - num_prefix_items) / splits;
        const int split = (item - num_prefix_items) % splits;
        // From the prefix's end or the window's walk start, whichever is later.
        const int walk_first = walk_first_token<kTile>(p, p.context_lens[b]);
        const int begin = std::max(groups > 0 ? p.seq_prefix_tokens[b] : 0, walk_first);
        int t_begin, t_end;
        piece_of<kTile>(begin, p.context_lens[b], splits, split, t_begin, t_end);
        const float* q_seq = q32.data() + static_cast<std::size_t>(b) * num_q_heads * kHeadDim;
        std::fill_n(acc.begin(), static_cast<std::size_t>(num_q_heads) * kHeadDim, 0.0f);
        std::fill_n(state.begin(), num_q_heads, SoftmaxState<float>{});
        walk_sequence<Tile, kKv, kHeadDim>(p, b, t_begin, t_end, window_first[b], q_seq, *tile,
                                           rows, s, acc.data(), state.data());
        if constexpr (!Tile::kArithmetic) continue;
        for (int h = 0; h < num_q_heads; ++h) {
          const std::size_t qh = static_cast<std::size_t>(b) * num_q_heads + h;
          suffix_state[qh * splits + split] = state[h];
          const float* acc_h = acc.data() + static_cast<std::size_t>(h) * kHeadDim;
          std::copy(acc_h, acc_h + kHeadDim, suffix_acc.data() + (qh * splits + split) * kHeadDim);
        }
      }
    }

    if constexpr (!Tile::kArithmetic) {
#pragma omp atomic
      checksum += tile->checksum;
    } else {
      // The implicit barrier of the loop above has made every partial visible. Per (sequence,
      // query head): its group's prefix chunks, then its suffix splits; an empty partial (an
      // empty suffix, a chunk past a short prefix or before the window) has max -inf and weighs 0.
#pragma omp for schedule(static)
      for (int qh = 0; qh < batch * num_q_heads; ++qh) {
        const int b = qh / num_q_heads;
        SoftmaxState<float> merged;
        float out[kHeadDim] = {};
        auto fold = [&](const SoftmaxState<float>& part_state, const float* part) {
          float self_factor, other_factor;
          merged.merge(part_state, self_factor, other_factor);
          for (int c = 0; c < kHeadDim; ++c) out[c] = out[c] * self_factor + part[c] * other_factor;
        };
        if (groups > 0 && p.seq_prefix_tokens[b] > 0)
          for (int c = 0; c < chunks; ++c) {
            const std::size_t idx = static_cast<std::size_t>(qh) * chunks + c;
            fold(prefix_state[idx], prefix_acc.data() + idx * kHeadDim);
          }
        for (int sp = 0; sp < splits; ++sp) {
          const std::size_t idx = static_cast<std::size_t>(qh) * splits + sp;
          fold(suffix_state[idx], suffix_acc.data() + idx * kHeadDim);
        }
        // Every window has >= 1 token, so some partial holds the max and sum >= 1. A head's
        // sink joins once, in the merged state (merge_sink), as in the plain driver's merge.
        const float scale = out_scale * merge_sink(p, qh % num_q_heads, merged) / merged.sum;
        for (int c = 0; c < kHeadDim; ++c)
          store_out(p.q_dtype, p.out, static_cast<std::size_t>(qh) * kHeadDim + c, out[c] * scale);
      }
    }
  }
  return checksum;
}

// Entry for one KV dtype: picks the head_dim instance and the tile kernel of `path` (resolved:
// not automatic, and compiled in). Instantiated in the generated cpu_decode_cascade_<dtype>.cpp.
template <DType kKv>
void cascade_for_dtype(const PagedDecodeParams& p, int num_threads, int num_splits,
                       int prefix_chunks, DecodePath path, bool prefix_window) {
  auto run = [&]<int kHeadDim>() {
#if DECODEBENCH_CPU_AVX512
    if (path == DecodePath::avx512) {
      cascade_step<Avx512TileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits,
                                                                prefix_chunks, prefix_window);
      return;
    }
#endif
#if DECODEBENCH_CPU_AVX2
    if (path == DecodePath::avx2) {
      cascade_step<Avx2TileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits,
                                                              prefix_chunks, prefix_window);
      return;
    }
#endif
    (void)path;
    cascade_step<PortableTileFor<kKv, kHeadDim>, kKv, kHeadDim>(p, num_threads, num_splits,
                                                                prefix_chunks, prefix_window);
  };
  switch (p.head_dim) {
    case 64: run.template operator()<64>(); break;
    case 128: run.template operator()<128>(); break;
    case 256: run.template operator()<256>(); break;
    default: break;  // rejected by unsupported_reason() before we get here
  }
}

}  // namespace decodebench::cpu::detail
