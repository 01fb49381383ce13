// The paged-KV view, written once: the CPU reference, the CPU backend and every kernel find a
// token's K/V row through these functions. Plain C++, usable on host and device.
//
// Cache layout (K and V alike):  [num_blocks][Hkv][P][d]   (P = block_size tokens per block)
// Block table:                   [batch][max_blocks_per_seq] int32, unused entries -1
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/float_formats.h"  // DECODEBENCH_HD

namespace decodebench {

// Element offset of row (physical block, kv head, slot) in a cache [num_blocks][Hkv][P][d].
DECODEBENCH_HD std::size_t kv_row_offset(std::int32_t block, int kv_head, int slot,
                                         int num_kv_heads, int block_size, int head_dim) {
  return ((static_cast<std::size_t>(block) * num_kv_heads + kv_head) * block_size + slot) *
         static_cast<std::size_t>(head_dim);
}

// Physical block holding logical token `token` of sequence `seq`.
DECODEBENCH_HD std::int32_t physical_block(const std::int32_t* block_tables, int max_blocks_per_seq,
                                           int seq, int token, int block_size) {
  return block_tables[static_cast<std::size_t>(seq) * max_blocks_per_seq + token / block_size];
}

// Element offset of the K/V row of logical token `token` of `seq` for `kv_head`.
DECODEBENCH_HD std::size_t token_row_offset(const std::int32_t* block_tables,
                                            int max_blocks_per_seq, int seq, int token, int kv_head,
                                            int num_kv_heads, int block_size, int head_dim) {
  const std::int32_t block =
      physical_block(block_tables, max_blocks_per_seq, seq, token, block_size);
  return kv_row_offset(block, kv_head, token % block_size, num_kv_heads, block_size, head_dim);
}

// A sliding window (PagedDecodeParams::window, 0 = none) lets a layer attend to the last
// `window` tokens of its context: tokens [window_first_token, len). A block-granular walk starts
// at the block holding that token (window_first_block) and masks the tokens of that block
// before it; no earlier block is read.
DECODEBENCH_HD int window_first_token(int len, int window) {
  return window > 0 && len > window ? len - window : 0;
}
DECODEBENCH_HD int window_first_block(int len, int window, int block_size) {
  return window_first_token(len, window) / block_size;
}

}  // namespace decodebench
