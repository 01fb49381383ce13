// decodebench kernels: the one plain C++ header the host includes.
//
// Everything under kernels/ is device code written once and compiled twice: by nvcc for the GPU
// (namespace decodebench::kernels::cuda) and by the host compiler against the SIMT emulator in
// kernels/emu (namespace decodebench::kernels::emu). This header has no CUDA types in it, so
// src/ can include it whether or not the CUDA toolkit is present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kv_formats.h"

namespace decodebench {

// DType, the KV formats' table (kKvFormats) and its helpers (dtype_size, is_fp8, is_int_kv,
// is_int4_kv, kv_row_bytes, kInt4GroupChannels): kv_formats.h.

// The units a kernel's multiply-adds run on, which decide its FLOP ceiling
// (src/harness/roofline.h): the fp32 FMA pipes of the CUDA cores (or of a CPU), or the tensor
// cores (mma.sync with f16/bf16 inputs and fp32 accumulation; fp8 KV is converted to f16 first).
enum class ComputeUnit : std::uint8_t { fma, tensor_core };

namespace kernels {

// One decode step of one attention layer over a paged KV cache (the flashinfer "page.cuh" view).
// Pointers are device pointers for the CUDA target and host pointers for the emulator target.
struct PagedDecodeParams {
  const void* q = nullptr;        // [batch][Hq][d]                     q_dtype
  void* out = nullptr;            // [batch][Hq][d]                     q_dtype
  const void* k_cache = nullptr;  // [num_blocks][Hkv][block_size][d]   kv_dtype (stored values)
  const void* v_cache = nullptr;  // [num_blocks][Hkv][block_size][d]   kv_dtype (stored values)
  const std::int32_t* block_tables = nullptr;  // [batch][max_blocks_per_seq], unused entries -1
  const std::int32_t* context_lens = nullptr;  // [batch], each >= 1
  std::int32_t batch = 0;
  std::int32_t num_q_heads = 0;   // Hq
  std::int32_t num_kv_heads = 0;  // Hkv; Hq % Hkv == 0, group = Hq / Hkv
  std::int32_t head_dim = 0;      // d: the width of q and of a K row (and of V, unless MLA)
  std::int32_t block_size = 0;    // P, tokens per KV block, power of two
  std::int32_t max_blocks_per_seq = 0;
  std::int32_t num_blocks = 0;  // physical blocks in the pool
  DType q_dtype = DType::f16;   // also the output dtype
  DType kv_dtype = DType::f16;
  float softmax_scale = 0.f;  // 1/sqrt(d)
  // Per-tensor dequantization scales: real value = stored value * scale. 1 unless fp8. Kernels
  // fold k_scale into the softmax scale and v_scale into the output; never per element.
  float k_scale = 1.f;
  float v_scale = 1.f;
  // Integer KV formats only (null otherwise): f16 bits, real value = code * scale (+ zero), laid
  // out as src/quant/kv_quant.h's ScaleAxis says: int8 K and V [num_blocks][Hkv][P]; int4 K
  // [num_blocks][Hkv][d], V [num_blocks][Hkv][P][d / 32]; int4_token K and V
  // [num_blocks][Hkv][P][d / 32]. Zeros (int4 formats) in the scales' layout.
  const std::uint16_t* k_scales = nullptr;
  const std::uint16_t* k_zeros = nullptr;
  const std::uint16_t* v_scales = nullptr;
  const std::uint16_t* v_zeros = nullptr;
  // The attention's variants (a kernel that does not take one refuses it: KernelInfo::variants).
  // window: attend to the last `window` tokens of each context only (0: all of it); the walk
  // starts at the block holding the window's first token (device/paged_kv.h).
  std::int32_t window = 0;
  // Attention sinks: a learned logit per query head, in the units of the scaled scores, that
  // joins the softmax (its max and its denominator) and adds no value.
  bool has_sinks = false;
  const float* sinks = nullptr;  // [Hq] fp32, set when has_sinks
  // Logit soft-capping: a score s (after softmax_scale) becomes softcap * tanh(s / softcap)
  // before the softmax; 0: none.
  float softcap = 0.f;
  // split_kv only (others ignore them): the planner's split count and the workspace it needs.
  std::int32_t num_splits = 1;
  // Both point into one allocation laid out by split_kv_workspace().
  float* partial_out = nullptr;  // [batch][Hq][num_splits][d]   fp32, normalized per split
  float* partial_lse =
      nullptr;  // [batch][Hq][num_splits]      fp32, log2-sum-exp2 of the split's scores
  // Prefix-aware kernels only (others ignore them): the shared prefixes of the batch, groups of
  // sequences whose block tables start with the same physical blocks, as plan_prefixes() finds
  // them; PrefixPlan::bind points these into its arrays (host or device copy). A sequence in no
  // group reads its whole context privately. Checked at launch scope by prefix_plan_error().
  std::int32_t num_prefix_groups = 0;
  const std::int32_t* prefix_group_start = nullptr;   // [G + 1] offsets into prefix_group_seqs
  const std::int32_t* prefix_group_seqs = nullptr;    // members of group g, ascending
  const std::int32_t* prefix_group_tokens = nullptr;  // [G] shared leading tokens, whole blocks
  const std::int32_t* seq_prefix_tokens = nullptr;    // [batch] its group's prefix tokens, or 0
  // Cascade's prefix pass (set by SplitKvWorkspace::bind with the workspace): each group's
  // prefix is cut into num_prefix_chunks pieces (plan_prefix_chunks), whose partials follow the
  // num_splits suffix splits in every workspace row of a member; num_prefix_tiles is the M
  // tiles of all groups, prefix_tiles(p): grid.y of the prefix pass.
  std::int32_t num_prefix_chunks = 0;
  std::int32_t num_prefix_tiles = 0;
  // The width of a V row and of out: 0 means head_dim. MLA (absorbed, ModelShape::is_mla): the
  // first v_head_dim values of each K row are its V row, v_cache == k_cache, out [batch][Hq][dv].
  // Last, so the fields the GPU rungs read keep their parameter offsets: moving them once tipped
  // prefix_kernel<int4, 256> (255 registers) into a spill.
  std::int32_t v_head_dim = 0;
  // Derived from softcap by the tensor-core launchers (with_score_cap); callers leave them 0:
  // a raw q . k times score_cap_in is 2 log2(e) s / softcap (s the scaled score), and
  // score_cap_out is softcap / (softmax_scale k_scale). The inner loop reads them from the
  // parameter bank, not registers.
  float score_cap_in = 0.f;
  float score_cap_out = 0.f;
};

// MLA's absorbed shape: values narrower than the keys, read from the K rows.
inline bool is_mla(const PagedDecodeParams& p) {
  return p.v_head_dim > 0 && p.v_head_dim != p.head_dim;
}

// The mla rung (kernels/paged_decode/mla.cuh): one thread block serves up to kMlaMaxHeadTiles
// MMA tiles of kMlaHeadTile query heads (half as many when q needs a hi + lo split in the MMA
// type: its shared memory) and walks the latent cache in tiles of kMlaTileTokens tokens, the
// unit in which its splits cut a context.
inline constexpr int kMlaHeadTile = 16;
inline constexpr int kMlaMaxHeadTiles = 4;
inline constexpr int kMlaTileTokens = 32;
// Head tiles per thread block for p (its heads, q dtype and KV dtype); >= 1.
int mla_head_tiles(const PagedDecodeParams& p);
// Thread blocks along the heads: ceil(Hq / (16 x mla_head_tiles)).
int mla_head_blocks(const PagedDecodeParams& p);

// What one rung of the kernel ladder is and what it takes. The harness learns kernel names only
// from kernel_ladder(); it never names a kernel itself.
struct KernelInfo {
  std::string name;              // "naive", "gqa", "pipelined", "split_kv"
  std::string idea;              // one line: what this rung adds over the previous one
  std::vector<int> head_dims;    // compiled in (narrowed by DECODEBENCH_HEAD_DIMS)
  std::vector<DType> kv_dtypes;  // compiled in (DECODEBENCH_KV_DTYPES, _INT_KV_DTYPES)
  std::vector<DType> q_dtypes;   // f16, bf16
  int min_block_size = 8;        // any power of two >= this
  int max_group = 0;             // largest Hq/Hkv supported, 0 = any
  int max_batch = 65535;         // grid.y = batch on the GPU; 0 = any (the CPU decode)
  bool uses_workspace = false;   // needs partial_out/partial_lse (split_kv)
  bool prefix_aware = false;     // reads the prefix plan (cascade): plan_prefixes() at prepare
  // ladder.json "compute": "fma" (CUDA cores) or "tensor_core" (mma)
  ComputeUnit compute = ComputeUnit::fma;
  // The attention variants it takes (PagedDecodeParams' window, has_sinks, softcap; ladder.json
  // "variants"); a rung refuses a point that sets one it does not take, naming it.
  bool window = false;
  bool sinks = false;
  bool softcap = false;
  // Takes MLA's absorbed shape too: v_head_dim below head_dim, V inside the K rows (the cpu
  // decode's mla path); a rung that does not refuses such a point.
  bool mla = false;
  // Takes MLA's absorbed shape and nothing else (the mla rung, ladder.json "mla"): its tiles are
  // cut for the one latent head and its widths.
  bool mla_only = false;
};

// The ladder, in order, with what this build compiled. Same list for both targets.
const std::vector<KernelInfo>& kernel_ladder();
// The rung called `name`, or nullptr; and the ladder's names as "naive, gqa, ..." for messages.
const KernelInfo* find_kernel(std::string_view name);
std::string ladder_names();

// The one check of a kernel's run-time preconditions; launchers trust it and keep only
// static_asserts. Empty when `kernel` can run `p`; otherwise one sentence naming the kernel, the
// value and the valid choices ("kernel 'gqa' does not take head_dim 96 in this build (valid:
// 64, 128)").
//   shape:  what a sweep point decides (head_dim, dtypes, block size, heads, GQA group, batch);
//           pointers and the pool size are not looked at, so a layout-only view can be checked
//           (skip reasons, `--kernel auto`).
//   layout: shape, plus the paged layout the host block tables describe: block_tables and
//           context_lens set, a non-empty table and pool, every context length in
//           1..max_blocks_per_seq x block_size, and every entry a context reads (the first
//           ceil(context / block_size) of its row) in [0, num_blocks); later entries are never
//           read, whatever they hold. The kernels index the cache with these unchecked, so
//           every backend checks this at prepare, before it plans, uploads or launches, and
//           outside the timed steps. O(batch + blocks read).
//   launch: layout, plus what a launch needs: non-null tensors, 16-byte aligned K/V, positive
//           scales, for a workspace rung num_splits and the workspace pointers, and for a
//           prefix-aware rung a valid prefix plan (prefix_plan_error, which reads the plan and
//           the tables: host pointers) with its chunk and tile counts.
//   launch_device: launch with p's pointers on the device (the CUDA target): neither the
//           tables nor the plan's contents are read, only the plan's counts and pointers; the
//           backend checked its host copies (layout scope, prefix_plan_error) before uploading.
enum class CheckScope { shape, layout, launch, launch_device };
std::string unsupported_reason(const KernelInfo& kernel, const PagedDecodeParams& p,
                               CheckScope scope = CheckScope::shape);

// What the device holds at once of one kernel instance: `sm_count` SMs, each with room for
// `ctas_per_sm` thread blocks of it (its registers, shared memory and threads against the SM's).
// One wave is slots() blocks. On a GPU the cuda backend asks the runtime for the instance that
// would launch (cuda::resident_ctas_per_sm); the emulator assumes a nominal device.
struct ResidentCtas {
  int sm_count = 0;
  int ctas_per_sm = 0;
  long long slots() const {
    return static_cast<long long>(sm_count > 0 ? sm_count : 1) *
           (ctas_per_sm > 0 ? ctas_per_sm : 1);
  }
};

// `--kernel auto`, for every backend that runs the ladder (cuda with the device's residency of
// the instance, emu with its nominal device, so both pick the same rung for the same device
// shape). The rung that splits the context (KernelInfo::uses_workspace) when the split planner
// cuts the context in more than one piece for `resident(rung)` (batch x Hkv thread blocks leave
// most of a wave empty) and the longest context has at least kSplitKvMinContext tokens (shorter
// ones do not repay the merge launch); otherwise the highest rung of `ladder` that runs `p`
// (pipelined > gqa > naive in a full build); else any rung that runs it (a build narrowed to
// split_kv). Never names a kernel itself: the ladder's order and flags decide; `resident` is
// asked only about a splitting rung that runs `p`. Never a prefix-aware rung (cascade: not
// measured on a GPU yet; name it). If no rung runs `p`, the first one
// (unsupported_reason then says why); "" for an empty ladder. Reads p.context_lens when set
// (host pointer), else plans for the table's capacity (max_blocks_per_seq x block_size).
inline constexpr int kSplitKvMinContext = 1024;
using ResidencyOf = std::function<ResidentCtas(const KernelInfo& rung)>;
std::string choose_kernel(const std::vector<KernelInfo>& ladder, const PagedDecodeParams& p,
                          const ResidencyOf& resident);
// The same, for callers whose every instance has the same residency (tests, the emulator).
std::string choose_kernel(const std::vector<KernelInfo>& ladder, const PagedDecodeParams& p,
                          const ResidentCtas& resident);

// Tokens per K/V tile of the gqa, pipelined and split_kv rungs: 4 passes x (128 threads /
// (head_dim / 8) lanes) = 4096 / head_dim (decode::Tiling::kTileTokens, which split_kv.cuh
// checks against this). The unit in which split_kv divides a context and the planner counts work.
constexpr int kv_tile_tokens(int head_dim) { return head_dim > 0 ? 4096 / head_dim : 1; }

// split_kv planner: how many splits of the context to launch for `gpu`, the residency of the
// split kernel instance that would run `p` (rule and worked examples: split_kv_plan.cpp). For
// MLA (is_mla) the mla rung's: batch x mla_head_blocks thread blocks, kMlaTileTokens units.
// Never more splits than KV tiles of the longest context, so no split of it is empty. Reads
// p.context_lens when set (host pointer), else plans for the table's capacity. Host-side,
// deterministic, in 1..kMaxSplits.
inline constexpr int kMaxSplits = 256;
inline constexpr int kMinTokensPerSplit = 256;
int plan_num_splits(const PagedDecodeParams& p, const ResidentCtas& gpu);
// The rule itself, for any set of `blocks` equal thread blocks whose longest range has
// `longest_tokens` tokens cut in kv_tile_tokens(head_dim) units: plan_num_splits, and the
// cascade prefix pass's chunk count.
int plan_pieces(long long blocks, long long longest_tokens, int head_dim, const ResidentCtas& gpu);
// The same rule in units of `unit_tokens` (the mla rung's kMlaTileTokens).
int plan_pieces_in_units(long long blocks, long long longest_tokens, int unit_tokens,
                         const ResidentCtas& gpu);

// The split_kv workspace: one allocation of total_bytes holding, in this order,
//   partial_out [batch][Hq][slots][dv] fp32  at partial_out_offset (0); dv: v_head_dim or d
//   partial_lse [batch][Hq][slots]     fp32  at partial_lse_offset (a multiple of 16)
// with slots = num_splits (split_kv, tc) or num_splits + num_prefix_chunks (cascade: a row's
// suffix splits, then its group's prefix chunks). Every user (the backends, the tests) sizes
// and splits the workspace with this, through plan_workspace() when it runs a ladder rung.
struct SplitKvWorkspace {
  int num_splits = 1;
  int num_prefix_chunks = 0;  // cascade with a plan; else 0
  int num_prefix_tiles = 0;   // prefix_tiles(p) when num_prefix_chunks > 0
  std::size_t partial_out_offset = 0;
  std::size_t partial_out_bytes = 0;
  std::size_t partial_lse_offset = 0;
  std::size_t partial_lse_bytes = 0;
  std::size_t total_bytes = 0;
  // Sets p.num_splits (and the prefix counts) and points p.partial_out / p.partial_lse into
  // `base` (total_bytes, 16-byte aligned).
  void bind(PagedDecodeParams& p, void* base) const {
    auto* bytes = static_cast<unsigned char*>(base);
    p.num_splits = num_splits;
    p.num_prefix_chunks = num_prefix_chunks;
    p.num_prefix_tiles = num_prefix_tiles;
    p.partial_out = reinterpret_cast<float*>(bytes + partial_out_offset);
    p.partial_lse = reinterpret_cast<float*>(bytes + partial_lse_offset);
  }
};
// num_prefix_chunks > 0 (cascade) needs p's prefix plan bound (host pointers) for the tiles.
SplitKvWorkspace split_kv_workspace(const PagedDecodeParams& p, int num_splits,
                                    int num_prefix_chunks = 0);

// The shared prefixes of a batch, for prefix-aware (cascade) kernels: each group's members
// read its first group_tokens[g] tokens through the same physical blocks, so one pass over
// those blocks can serve every member's queries; each member's suffix [seq_prefix_tokens[b],
// context_lens[b]) and every sequence outside a group is read privately. Host-side.
struct PrefixPlan {
  std::vector<std::int32_t> group_start;        // [G + 1], group_start[0] = 0
  std::vector<std::int32_t> group_seqs;         // [group_start[G]] members, ascending per group
  std::vector<std::int32_t> group_tokens;       // [G] multiple of the block size, > 0
  std::vector<std::int32_t> seq_prefix_tokens;  // [batch] group_tokens of b's group, else 0
  int num_groups() const { return static_cast<int>(group_tokens.size()); }
  // Members of group g, and the tokens the prefix passes read once instead of once per member.
  int group_size(int g) const { return group_start[g + 1] - group_start[g]; }
  std::int64_t tokens_shared() const;  // sum_g (group_size(g) - 1) * group_tokens[g]
  // The four arrays back to back, in the order above: what a device copy holds.
  std::vector<std::int32_t> packed() const;
  // Sets p's prefix fields to this plan, `base` pointing at a copy of packed() (host or
  // device); bind(p) uses this plan's own vectors (host pointers, valid while the plan lives).
  void bind(PagedDecodeParams& p, const std::int32_t* base) const;
  void bind(PagedDecodeParams& p) const;
};

// The planner (rule and why: prefix_plan.cpp): sequences whose first physical block is the same
// form a group when there are at least two of them; the group shares the longest run of leading
// table entries common to all members, cut to whole blocks inside every member's context. Reads
// p.block_tables and p.context_lens (host pointers), p.batch, p.block_size, p.max_blocks_per_seq.
PrefixPlan plan_prefixes(const PagedDecodeParams& p);

// Empty when p's prefix fields describe a plan a prefix-aware kernel can trust (host pointers):
// offsets ascending from 0, every group non-empty, members in [0, batch) and in at most one
// group, group tokens a positive multiple of the block size within every member's context,
// seq_prefix_tokens matching, and every member's table entries identical over the prefix.
// Otherwise one sentence naming the first violation. num_prefix_groups = 0 is a valid plan
// (nothing shared).
std::string prefix_plan_error(const PagedDecodeParams& p);

// Cascade's prefix pass (rule and why: cascade_plan.cpp). One M tile of 16 MMA rows packs
// prefix_members_per_tile(group) = floor(16 / group) members' query groups (16 at MHA, 2 at
// group 8); prefix_tiles(p) is Σ_g ceil(members_g / that) over p's plan (host pointers), and
// plan_prefix_chunks the pieces each group's prefix is cut into so that Hkv x tiles x chunks
// fills the wave (plan_pieces on the longest prefix; 0 without a plan). Deterministic.
inline constexpr int kPrefixTileRows = 16;
constexpr int prefix_members_per_tile(int group) { return group > 0 ? kPrefixTileRows / group : 0; }
int prefix_tiles(const PagedDecodeParams& p);
int plan_prefix_chunks(const PagedDecodeParams& p, const ResidentCtas& gpu);
// The suffix pass's split count: plan_num_splits over the suffixes context_lens[b] -
// seq_prefix_tokens[b] (whole contexts without a plan).
int plan_suffix_splits(const PagedDecodeParams& p, const ResidentCtas& gpu);

// The workspace `kernel` needs for `p` on `gpu`, planned: none (total_bytes 0) for a rung
// without one; plan_num_splits for split_kv and tc; for a prefix-aware rung, with p's plan
// bound (host pointers), plan_suffix_splits and plan_prefix_chunks. What the backends and
// tests allocate and bind; the cuda backend's footprint counts the same.
SplitKvWorkspace plan_workspace(const KernelInfo& kernel, const PagedDecodeParams& p,
                                const ResidentCtas& gpu);

// Result of a launch. For CUDA, `message` names the CUDA error; for the emulator it carries the
// emulator's report (race-free barrier mismatch, timeout, ...).
enum class LaunchStatus { ok, unsupported, failed };
struct LaunchResult {
  LaunchStatus status = LaunchStatus::ok;
  std::string message;
  bool ok() const { return status == LaunchStatus::ok; }
};

// Bandwidth-ceiling kernels (kernels/bandwidth): grid-stride, 16-byte vector accesses.
// `bytes` is a multiple of 16 and the pointers are 16-byte aligned.
//  read:  reads src, writes one value per thread block into sink[gridDim] so the loads are live.
//  copy:  dst = src.
//  triad: a = b + scalar * c (fp32).
struct BandwidthParams {
  const void* src = nullptr;
  void* dst = nullptr;
  float* sink = nullptr;  // read: [num_blocks_launched]
  const float* b = nullptr;
  const float* c = nullptr;
  float* a = nullptr;
  float scalar = 3.f;
  std::size_t bytes = 0;  // read/copy: bytes of src; triad: bytes of each of a, b, c
  int grid = 0;           // 0 = launcher's choice
  int block = 0;          // 0 = launcher's choice
};
enum class BandwidthKernel { read, copy, triad };

// Device-side workload fill (kernels/fill): dst[i] = encode(dtype, counter_normal(seed, tensor,
// index_offset + i) * inv_scale) for i < count, the same values src/workload computes on the
// host (so huge points need no host copy and a host subset can be rebuilt exactly).
struct FillParams {
  void* dst = nullptr;
  DType dtype = DType::f16;
  std::uint64_t count = 0;  // elements
  std::uint64_t seed = 0;
  std::uint32_t tensor = 0;  // Tensor::q / k / v of src/workload/workload.h
  std::uint64_t index_offset = 0;
  float inv_scale = 1.f;  // 1 / per-tensor scale
};

// Activation quantization for the layer step's fp8 GEMMs (kernels/layer/quantize.cu): each of
// `rows` rows of `cols` elements, read with row stride src_ld, is written with row stride dst_ld
// as dst[r][c] = encode(dst_dtype, src[r][c] * inv_scale), round to nearest even and saturating
// (device/float_formats.h: bit for bit what src/common/dtype.h's encode_value stores). Strides
// are in elements; the padding of a dst row past `cols` is left alone.
struct QuantizeParams {
  const void* src = nullptr;
  DType src_dtype = DType::bf16;  // f16 or bf16
  std::int64_t src_ld = 0;        // >= cols
  void* dst = nullptr;
  DType dst_dtype = DType::fp8_e4m3;  // fp8_e4m3 or fp8_e5m2
  std::int64_t dst_ld = 0;            // >= cols
  std::int64_t rows = 0;              // <= 65535 (grid.y)
  std::int64_t cols = 0;
  float inv_scale = 1.f;  // 1 / the per-tensor scale of dst
};

// How the main kernel of a paged-decode rung launches for `p`: the kernel that streams the KV
// cache (split_kv: the split kernel, not its merge). Host-side and GPU-free, the same numbers
// on both targets; for the occupancy query, the static resource model and the tests.
struct LaunchShape {
  LaunchResult status;        // not ok: unknown kernel, `p` unsupported (the reason), not built
  std::string_view function;  // the __global__'s name, "split_kernel": cuobjdump shows it as
                              // function<kv dtype, head_dim[, group_cap]>
  int group_cap = 0;          // the compiled group cap serving p's group; 0 if the kernel has none
  int grid[3] = {0, 0, 0};    // x, y, z (split_kv: z = p.num_splits)
  int threads = 0;            // per thread block
  std::size_t dynamic_smem = 0;           // bytes passed at launch (static __shared__ not included)
  const void* device_function = nullptr;  // CUDA target: the __global__, for the runtime's
                                          // cudaFuncGetAttributes / cudaOccupancy*; emu: nullptr
};

// Each target exposes the same launch functions. `stream` is a cudaStream_t on the CUDA target
// and ignored by the emulator (which runs the launch to completion before returning).
// launch_shape checks `p` at CheckScope::shape (pointers are not needed).
#define DECODEBENCH_DECLARE_TARGET(ns)                                                          \
  namespace ns {                                                                                \
  LaunchResult launch_paged_decode(std::string_view kernel, const PagedDecodeParams& p,         \
                                   void* stream);                                               \
  LaunchShape launch_shape(std::string_view kernel, const PagedDecodeParams& p);                \
  LaunchResult launch_bandwidth(BandwidthKernel which, const BandwidthParams& p, void* stream); \
  LaunchResult launch_fill(const FillParams& p, void* stream);                                  \
  LaunchResult launch_quantize(const QuantizeParams& p, void* stream);                          \
  }
DECODEBENCH_DECLARE_TARGET(emu)
DECODEBENCH_DECLARE_TARGET(cuda)
#undef DECODEBENCH_DECLARE_TARGET

namespace cuda {
// Thread blocks of the main kernel of `kernel` for `p` (launch_shape) that one SM of the current
// device holds at once: cudaOccupancyMaxActiveBlocksPerMultiprocessor on that instance with its
// threads and dynamic shared memory (opted into first, as the launch does). Needs a device;
// ctas_per_sm is 0 when status is not ok. Uncached: callers keep one answer per instance.
struct Residency {
  LaunchResult status;
  int ctas_per_sm = 0;
};
Residency resident_ctas_per_sm(std::string_view kernel, const PagedDecodeParams& p);
}  // namespace cuda

}  // namespace kernels
}  // namespace decodebench
