// What the SIMD tiles (AVX-512 and AVX2, float and quantized) share, free of any ISA: the unit
// of rows being computed and the next one, whose rows are prefetched once (K during the first
// scores pass after load, V spread over the accumulate slices), and the passes of 8, 4, 2 or 1
// heads, dispatched to the tile's own scores_n<kNH> / accumulate_n<kNH>: fixed trip counts keep
// every accumulator of a pass in a register. `Tile` is the most derived tile (CRTP), so a
// quantized tile built on a float one gets its own loops from the same dispatch.
#pragma once

#include <type_traits>

#include "backends/cpu/cpu_decode_kv_walk.h"

namespace decodebench::cpu::detail {

template <class Tile, int kTileTokens>
struct HeadPasses {
  TileUnit<kTileTokens> unit;       // the rows being computed
  TileUnit<kTileTokens> next;       // the rows requested meanwhile
  bool k_prefetch_pending = false;  // next's K rows: during the first scores pass
  bool v_prefetch_pending = false;  // next's V rows: spread over the accumulate slices

  static int pass_width(int remaining) {
    return remaining >= 8 ? 8 : remaining >= 4 ? 4 : remaining >= 2 ? 2 : 1;
  }

  void load(const TileUnit<kTileTokens>& current, const TileUnit<kTileTokens>& upcoming) {
    unit = current;
    next = upcoming;
    k_prefetch_pending = v_prefetch_pending = true;
  }

  // How many of next's rows this pass prefetches: all of them the first time after load, then
  // none.
  int take_k_prefetch() {
    const int n = k_prefetch_pending ? next.n() : 0;
    k_prefetch_pending = false;
    return n;
  }
  int take_v_prefetch() {
    const int n = v_prefetch_pending ? next.n() : 0;
    v_prefetch_pending = false;
    return n;
  }

  void scores(const float* q, int nh, int n, float* s) {
    Tile& t = static_cast<Tile&>(*this);
    switch (nh) {
      case 8: t.template scores_n<8>(q, n, s); break;
      case 4: t.template scores_n<4>(q, n, s); break;
      case 2: t.template scores_n<2>(q, n, s); break;
      default: t.template scores_n<1>(q, n, s); break;
    }
  }
  void accumulate(const float* p, int nh, int n, float* acc) {
    Tile& t = static_cast<Tile&>(*this);
    switch (nh) {
      case 8: t.template accumulate_n<8>(p, n, acc); break;
      case 4: t.template accumulate_n<4>(p, n, acc); break;
      case 2: t.template accumulate_n<2>(p, n, acc); break;
      default: t.template accumulate_n<1>(p, n, acc); break;
    }
  }
};

// The tile a HeadPasses dispatches to: `Self` when a derived tile names itself, else `Own`.
template <class Self, class Own>
using MostDerived = std::conditional_t<std::is_void_v<Self>, Own, Self>;

}  // namespace decodebench::cpu::detail
