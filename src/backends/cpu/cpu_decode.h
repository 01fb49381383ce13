// The optimized CPU paged-attention decode: one step of one layer, multi-threaded with OpenMP.
//
// Work items are (sequence[, context split]); an item walks its tiles in memory order, every KV
// head of a tile before the next tile, so it streams each block's K and V (all heads, one
// contiguous stretch each) once. Every K/V row is read ONCE and serves every query head of its
// GQA group; scores, the online softmax
// (base 2, SoftmaxState) and the output accumulate in fp32. KV rows are found through the
// shared paged-KV view (kernels/device/paged_kv.h). Per-tensor k_scale is folded into the
// pre-scaled query and v_scale into the final normalization, never applied per element.
//
// Three implementations of the inner tile kernels share the driver:
//   avx512    intrinsics (AVX-512 F/BW/VL, 32 zmm): KV rows converted to fp32 in registers
//             (vcvtph2ps for fp16, shifts for bf16, byte-table permutes for fp8 where AVX512-VBMI
//             is present, else bit tricks), scores for the whole group with each K row loaded
//             once, V rows accumulated into g accumulators; 64-token tiles at d = 128.
//   avx2      the same structure in AVX2 + F16C + FMA intrinsics for 16 ymm registers
//             (x86-64-v3: Haswell, Zen 1 and later): fp8 through bit tricks into f16, 8 FMA
//             chains per pass with q read from L1, 8-token score groups; 64-token tiles at
//             d = 128 (cpu_decode_avx2_tile.h).
//   portable  plain C++ loops (the compiler vectorizes what it can), scalar bit-exact
//             conversions from kernels/device/float_formats.h; correct on any x86-64 / any ISA.
// `automatic` picks the first compiled in of avx512 > avx2 > portable: avx512 with
// DECODEBENCH_CPU_ARCH=native on an AVX-512 machine, avx2 with native on an AVX2-only machine or
// with x86-64-v3, portable otherwise. Where avx512 is compiled, avx2 is too (and can be asked for
// by name).
//
// The prefix-aware variant (paged_decode_cascade, kernel `cascade`; cpu_decode_cascade.h) takes
// the batch's shared prefixes from p's prefix plan (kernels::plan_prefixes): each group's
// shared blocks are streamed once, every tile serving the q rows of all members, and each
// member's private suffix is walked as above; the partials merge by their softmax states. With
// a sliding window the prefix pass starts at the earliest member's window block and masks each
// member's tokens before its own window, and a suffix starts no earlier than its window block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels.h"  // PagedDecodeParams, DType

namespace decodebench::cpu {

enum class DecodePath { automatic, avx512, avx2, portable };

struct DecodeOptions {
  int num_threads = 0;    // 0: omp_get_max_threads()
  int num_splits = 0;     // context splits per (sequence, KV head); 0: planned from the threads
  int prefix_chunks = 0;  // cascade only: pieces of every group's prefix; 0: planned
  DecodePath path = DecodePath::automatic;
  // Tests only, a planted fault of the cascade: its prefix pass reads and scores the whole
  // prefix for every member as if there were no window (the suffix walks keep it).
  bool planted_prefix_ignores_window = false;
};

// True when the AVX-512 tile kernels were compiled into this build.
bool avx512_compiled();
// True when the AVX2 tile kernels were compiled into this build.
bool avx2_compiled();
// The cache level the decode's software prefetches fill, "l1" or "l2": chosen once from the CPU
// (L1 on AMD Zen 5 and later, L2 elsewhere: cpu_decode_kv_walk.h says why), or set by the
// environment variable DECODEBENCH_CPU_PREFETCH=l1|l2 for A/B runs.
const char* prefetch_level_name();
// The name of `path`, and the one `automatic` resolves to ("avx512", "avx2" or "portable").
const char* resolved_path_name(DecodePath path);

// What the CPU decode takes, in the kernel registry's terms (head_dim 64/128/256, q/out f16 or
// bf16, any KV dtype, any power-of-two block size, any GQA group and batch), so it is checked
// by the same function and with the same wording as the GPU rungs.
const kernels::KernelInfo& decode_info();
// Empty if the CPU decode can run `p`; otherwise why not, with the valid choices
// (kernels::unsupported_reason of decode_info() at `scope`). paged_decode checks the shape
// only and trusts the tables: the backend checks the layout once, at prepare.
std::string unsupported_reason(const kernels::PagedDecodeParams& p,
                               kernels::CheckScope scope = kernels::CheckScope::shape);

// How many context splits the planner uses for `p` on `num_threads` threads: the fewest that
// give every thread an even share of the (sequence, split) work items (1 when the batch
// already divides among the threads), never so many that a split is shorter than a few tiles.
int plan_cpu_splits(const kernels::PagedDecodeParams& p, int num_threads);

// How many pieces paged_decode_cascade cuts every group's prefix into on `num_threads` threads:
// 1 when the (group, KV head) prefix items already give every thread several, more when there
// are few (one group and few KV heads), never pieces shorter than a few hundred tokens. Reads
// p's prefix plan (host pointers).
int plan_prefix_chunks(const kernels::PagedDecodeParams& p, int num_threads);

// One decode step: reads p.q, p.k_cache, p.v_cache, p.block_tables, p.context_lens (host
// pointers), writes p.out [batch][Hq][d] in p.q_dtype, rounded to nearest even.
// Throws InputError when unsupported_reason(p) is not empty or the path is not compiled in.
void paged_decode(const kernels::PagedDecodeParams& p, const DecodeOptions& options = {});

// One decode step that reads every group's shared prefix once (see the top of this file): what
// paged_decode computes, from p's prefix plan as well (num_prefix_groups = 0: no sharing, the
// output is paged_decode's bit for bit). options.num_splits splits each suffix (0: planned on
// the suffix lengths), options.prefix_chunks each prefix. Throws InputError as paged_decode,
// and with prefix_plan_error's sentence when the plan does not fit p's block tables.
void paged_decode_cascade(const kernels::PagedDecodeParams& p, const DecodeOptions& options = {});
// Empty if paged_decode_cascade takes p (windows, sinks and the soft-cap included); else why
// not: the cascade has no MLA (paged_decode has).
std::string cascade_unsupported_reason(const kernels::PagedDecodeParams& p);

// The decode's memory walk without its arithmetic, for the microbenchmarks: the same work items,
// tiles, order and prefetches as paged_decode on `options.path`, but of every K and V row only
// one 32-bit word per 64-byte line is loaded, and summed. Its time is what the decode's memory
// order and prefetches cost with no arithmetic between them (bench: `paged_read/...`); with the
// prefetches into L1 it is no bound on the decode (see "The memory walk alone" in
// results/cpu-amd-epyc-zen5-2vcpu/cpu-decode-tuning.md). The returned sum (mod 2^64) covers
// every line of every context token's K and V rows once, for every KV head, so a test can check
// the walk reads the cache exactly. p.q and p.out are unused.
std::uint64_t paged_kv_read(const kernels::PagedDecodeParams& p, const DecodeOptions& options = {});

// Decodes `count` stored KV elements of `kv_dtype` at `src` to float with the loaders the tile
// kernels use on `path` (vcvtph2ps, the fp8 byte tables and bit tricks on avx512 and avx2), load
// scale applied, so the result must equal the bit-exact scalar conversion. For tests and the
// microbenchmarks.
void convert_kv_to_float(DType kv_dtype, const void* src, std::size_t count, float* dst,
                         DecodePath path = DecodePath::automatic);

// The KV blocks of a point are scattered 4 KiB pieces (P = 16, d = 128, fp16), so with 4 KiB
// pages every block costs a TLB miss, and a page walk under virtualization is expensive. This
// asks the kernel to back [data, data + bytes) with transparent huge pages now (MADV_COLLAPSE,
// Linux >= 6.1), else later (MADV_HUGEPAGE). Advice only: contents are unchanged and failure
// costs nothing but speed. The bandwidth ceilings use huge pages too, so the fraction of the
// ceiling compares like with like.
void advise_huge_pages(const void* data, std::size_t bytes);

}  // namespace decodebench::cpu
