// The CPU decode of multi-head latent attention (MLA, absorbed: ModelShape::is_mla), behind
// cpu_decode.h's paged_decode. Every query head reads the same latent row of each token (MQA with
// one KV head), so a tile of tokens against all heads is a small matrix product, not Hq dot
// products of one row each: per tile of kMlaTileTokens tokens,
//   1. the tile's latent rows are converted once to fp32 (K [T][dk]; V is each row's first dv);
//   2. scores S [T][heads] = K q^T by a register-blocked kernel whose vectors run over heads
//      (q transposed once per sequence to [dk][heads]), each K element broadcast from L1;
//   3. the online softmax per head, vectorized over heads;
//   4. out [heads][dv] += P^T V by a register-blocked kernel whose vectors run over dv, each
//      probability broadcast.
// With 16 (DeepSeek-V2-Lite) to 128 (DeepSeek-V3) heads a latent byte feeds 30-240 FLOP, so the
// step is bound by the cores' FMAs rather than by memory on most CPUs (the roofline says which);
// no horizontal reductions, the K element and the probability are the only broadcasts.
#pragma once

#include "backends/cpu/cpu_decode.h"  // DecodePath
#include "kernels.h"

namespace decodebench::cpu::detail {

inline constexpr int kMlaTileTokens = 64;

// One MLA decode step on `path` (resolved and compiled in), `num_splits` pieces of each context.
// p.v_head_dim < p.head_dim, p.v_cache == p.k_cache, float KV: checked by the caller.
void decode_mla(const kernels::PagedDecodeParams& p, int num_threads, int num_splits,
                DecodePath path);

}  // namespace decodebench::cpu::detail
