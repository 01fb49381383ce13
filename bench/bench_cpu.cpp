// Google Benchmark microbenchmarks of the CPU side: the optimized decode at real model shapes,
// the KV conversion loop it is built on, and the bandwidth-ceiling kernels it is judged against.
//
//   decodebench_bench --benchmark_filter=decode      the decode (manual time, cold KV, the byte
//                                                    counters of bench.h: bytes_min and logical
//                                                    bytes per second, frac_of_read against the
//                                                    read ceiling measured at start); at h = 0
//                                                    and at prefix points (.../h:0.5, h:0.9)
//   decodebench_bench --benchmark_filter=paged_read  the decode's memory walk with no arithmetic
//                                                    (cpu::paged_kv_read), same points: what its
//                                                    order and prefetches cost alone
//   decodebench_bench --benchmark_filter=layout_read the same KV bytes read front to back, and
//                                                    block by block (the fastest order found for
//                                                    shuffled blocks): the gap the layout leaves
//   decodebench_bench --benchmark_filter=convert     fp16/bf16/fp8 -> fp32, cache-resident
//   decodebench_bench --benchmark_filter=ceiling     read / triad over >= 8x LLC buffers
//
// Counters: bytes_per_second (Google Benchmark's rate from SetBytesProcessed) is the byte
// model's bytes_min per step for the decode and the counted bytes for the ceilings. Shapes are
// registered at run time with RegisterBenchmark, so adding one is one line in register_decode().
// Context: decodebench.cpu (the CPU), decodebench.cpu.read_GBps / copy_GBps (the ceilings the
// decode is judged against), decodebench.cpu.path, decodebench.cpu.prefetch (the cache level of
// the decode's software prefetches), decodebench.cpu.omp_threads.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_decode.h"
#include "backends/cpu/cpu_decode_kv_walk.h"
#include "bench/bench.h"
#include "common/dtype.h"
#include "common/host_facts.h"
#include "device/float_formats.h"
#include "device/paged_kv.h"
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench::bench {
namespace {

// ---- the decode ------------------------------------------------------------------------------

// Workloads are big (the llama-3.1-8b batch-8 context-8192 point streams 268 MB per step) and
// slow to generate, so each is built once, on first use, and kept for the whole run.
struct Prepared {
  Workload w;
  ByteModel bytes;
  std::vector<std::byte> out;
};
Prepared& prepared(const BenchPoint& pt) {
  static std::map<std::string, std::unique_ptr<Prepared>> cache;
  auto& slot = cache[pt.label()];
  if (!slot) {
    const WorkloadSpec spec = pt.spec();
    slot = std::make_unique<Prepared>();
    slot->w = make_workload(spec);
    slot->bytes = byte_model(spec, slot->w.layout);
    slot->out.resize(static_cast<std::size_t>(pt.batch) * spec.model.num_q_heads *
                     spec.model.head_dim * 2);
    // As the cpu backend's prepare() does: huge pages for the scattered KV blocks.
    cpu::advise_huge_pages(slot->w.k_cache.data(), slot->w.k_cache.size());
    cpu::advise_huge_pages(slot->w.v_cache.data(), slot->w.v_cache.size());
  }
  return *slot;
}

// The ceilings the decode is judged against, measured once at start (register_cpu_benchmarks)
// by the ceiling code the `cpu` backend reports, before anything is timed; 0 when not measured.
Ceilings& measured_ceilings() {
  static Ceilings c;
  return c;
}
double read_ceiling() { return measured_ceilings().read; }

// Cheap settings (best of 3, no FMA peak): a few seconds at most; small buffers in a small run.
Ceilings measure_cpu_ceilings() {
  cpu::CeilingOptions options;
  options.repetitions = 3;
  options.fma_iterations = 1;
  if (small_run()) options.buffer_bytes = std::int64_t{8} << 20;
  return cpu::measure_ceilings(options);
}

// Runs `step` once to warm up (page in the output, the scratch, the code), then times it once
// per iteration (manual time), cold as the sweep times it: the KV cache out of every cache
// level first, outside the timed span. Without that, part of the previous step's KV is still
// in the L3.
template <class Step>
void time_cold_steps(benchmark::State& state, Prepared& p, Step step) {
  step();
  for (auto _ : state) {
    cpu::evict_from_caches(p.w.k_cache.data(), p.w.k_cache.size());
    cpu::evict_from_caches(p.w.v_cache.data(), p.w.v_cache.size());
    for (const auto* a : {&p.w.k_scales, &p.w.k_zeros, &p.w.v_scales, &p.w.v_zeros})
      if (!a->empty()) cpu::evict_from_caches(a->data(), a->size() * sizeof(std::uint16_t));
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    state.SetIterationTime(dt.count());
  }
}

void bm_decode(benchmark::State& state, BenchPoint pt, cpu::DecodePath path) {
  Prepared& p = prepared(pt);
  kernels::PagedDecodeParams params = p.w.params();
  params.out = p.out.data();
  cpu::DecodeOptions options;
  options.path = path;
  time_cold_steps(state, p, [&] { cpu::paged_decode(params, options); });
  // frac_of_read (bytes_min / t over the read ceiling): the CPU figure of merit (>= 0.7 at the
  // CPU target point).
  set_decode_counters(state, p.bytes, read_ceiling(), p.w.layout.hit_rate_actual);
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel(cpu::resolved_path_name(path));
}

// The decode's memory walk alone (cpu::paged_kv_read): same points, same cold KV, no arithmetic.
// Next to decode/..., its time is what the decode's order and prefetches cost with no arithmetic,
// and frac_of_read how far that stays from the sequential read ceiling (not a bound on the decode
// since its prefetches go to L1: see cpu::paged_kv_read).
void bm_paged_read(benchmark::State& state, BenchPoint pt, cpu::DecodePath path) {
  Prepared& p = prepared(pt);
  const kernels::PagedDecodeParams params = p.w.params();
  cpu::DecodeOptions options;
  options.path = path;
  time_cold_steps(state, p, [&] { benchmark::DoNotOptimize(cpu::paged_kv_read(params, options)); });
  const auto kv = static_cast<double>(p.bytes.kv_logical);  // every sequence's rows, shared or not
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kv));
  state.counters["frac_of_read"] = benchmark::Counter(
      kv * static_cast<double>(state.iterations()) / read_ceiling(), benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel(cpu::resolved_path_name(path));
}

// ---- the layout alone ------------------------------------------------------------------------
// How fast can the paged layout be read at all, whatever a kernel does with it? The point's KV
// bytes read in other orders than paged_read's, one 32-bit load per 64-byte line as there, cold,
// on all threads:
//   layout_read/<point>/sequential    the K and V pools front to back (each thread a contiguous
//                                     share, K and V lines interleaved): a plain stream over the
//                                     same buffers, the reference for the other orders
//   layout_read/<point>/whole_blocks  each sequence's blocks in block-table order, each block's
//                                     K and V stretch (every KV head: 32 KiB each at the target
//                                     point) front to back, K and V lines interleaved, and the
//                                     next block's lines requested one block ahead: the fastest
//                                     order for shuffled blocks measured on the Zen 5 VM, but not
//                                     one the decode can follow (a tile reads several blocks, one
//                                     KV head at a time, K rows before V rows)
// Next to paged_read/<point> (the decode's order) they split the gap between the decode and the
// read ceiling into what the kernel's order costs and what any order of these blocks costs.

inline std::uint64_t line_word(const std::byte* line) {
  std::uint32_t word;
  std::memcpy(&word, line, sizeof word);
  return word;
}

std::uint64_t read_pools_in_order(const Workload& w) {
  const std::byte* k = w.k_cache.data();
  const std::byte* v = w.v_cache.data();
  const auto lines = static_cast<std::int64_t>(w.k_cache.size() / 64);
  std::uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (std::int64_t line = 0; line < lines; ++line)
    sum += line_word(k + 64 * line) + line_word(v + 64 * line);
  return sum;
}

// The same sum as cpu::paged_kv_read (every line of every context token's K and V rows, every
// KV head) when rows are whole lines.
std::uint64_t read_whole_blocks(const kernels::PagedDecodeParams& p) {
  const std::size_t elem = dtype_size(p.kv_dtype);
  const std::size_t row = static_cast<std::size_t>(p.head_dim) * elem;
  // Byte offset of (block, KV head)'s first row: the layout as kernels/device/paged_kv.h has it.
  const auto piece = [&](std::int32_t block, int kv_head) {
    return kv_row_offset(block, kv_head, 0, p.num_kv_heads, p.block_size, p.head_dim) * elem;
  };
  const auto* k_base = static_cast<const std::byte*>(p.k_cache);
  const auto* v_base = static_cast<const std::byte*>(p.v_cache);
  std::uint64_t sum = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum)
  for (int b = 0; b < p.batch; ++b) {
    const std::int32_t* table = p.block_tables + static_cast<std::size_t>(b) * p.max_blocks_per_seq;
    const int len = p.context_lens[b];
    const int blocks = (len + p.block_size - 1) / p.block_size;
    for (int i = 0; i < blocks; ++i) {
      const std::byte* k = k_base + piece(table[i], 0);
      const std::byte* v = v_base + piece(table[i], 0);
      // The next block's lines at the same offsets (the last block re-requests its own).
      const std::size_t next = piece(i + 1 < blocks ? table[i + 1] : table[i], 0);
      const std::size_t bytes =
          static_cast<std::size_t>(std::min(p.block_size, len - i * p.block_size)) * row;
      for (int h = 0; h < p.num_kv_heads; ++h)
        for (std::size_t o = piece(0, h); o < piece(0, h) + bytes; o += 64) {
          cpu::detail::prefetch_line(k_base + next + o);  // the decode's cache level
          cpu::detail::prefetch_line(v_base + next + o);
          sum += line_word(k + o) + line_word(v + o);
        }
    }
  }
  return sum;
}

enum class LayoutOrder { sequential, whole_blocks };

void bm_layout_read(benchmark::State& state, BenchPoint pt, LayoutOrder order) {
  Prepared& p = prepared(pt);
  const kernels::PagedDecodeParams params = p.w.params();
  if (dtype_size(pt.kv) * static_cast<std::size_t>(params.head_dim) % 64 != 0) {
    state.SkipWithError("layout_read needs K/V rows of whole 64-byte lines");
    return;
  }
  double bytes = 0;
  if (order == LayoutOrder::sequential) {
    time_cold_steps(state, p, [&] { benchmark::DoNotOptimize(read_pools_in_order(p.w)); });
    bytes = 2.0 * static_cast<double>(p.w.k_cache.size() / 64 * 64);
  } else {
    // The walk must read exactly the lines the decode reads.
    if (read_whole_blocks(params) != cpu::paged_kv_read(params)) {
      state.SkipWithError("whole_blocks read other lines than paged_kv_read");
      return;
    }
    time_cold_steps(state, p, [&] { benchmark::DoNotOptimize(read_whole_blocks(params)); });
    bytes = static_cast<double>(p.bytes.kv_logical);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
  state.counters["frac_of_read"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / read_ceiling(),
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
}

// The automatic path, and beside it every other path compiled in (avx2 where automatic is
// avx512, portable): the same code twice would be registered twice under one name.
std::vector<cpu::DecodePath> distinct_paths() {
  std::vector<cpu::DecodePath> paths = {cpu::DecodePath::automatic};
  const std::string_view automatic = cpu::resolved_path_name(cpu::DecodePath::automatic);
  for (auto [path, compiled] : {std::pair{cpu::DecodePath::avx2, cpu::avx2_compiled()},
                                std::pair{cpu::DecodePath::portable, true}})
    if (compiled && automatic != cpu::resolved_path_name(path)) paths.push_back(path);
  return paths;
}

void register_decode() {
  const BenchPoint points[] = {
      {"llama-3.1-8b", 8, 8192, 0, DType::f16},  // the CPU target point
      {"llama-3.1-8b", 1, 8192, 0, DType::f16},
      {"llama-3.1-8b", 8, 8192, 0, DType::bf16},
      {"llama-3.1-8b", 8, 8192, 0, DType::fp8_e4m3},
      {"llama-3.1-8b", 8, 8192, 0, DType::fp8_e5m2},
      {"qwen2.5-7b", 8, 8192, 0, DType::f16},  // GQA 7: passes of 4 + 2 + 1 heads
      {"llama-2-7b", 4, 4096, 0, DType::f16},  // MHA
      // The integer KV formats (kv-formats-cpu.json's model): codes widened in registers, MHA
      // and group 4.
      {"llama-2-7b", 4, 4096, 0, DType::int8},
      {"llama-2-7b", 4, 4096, 0, DType::int4},
      {"llama-3.1-8b", 8, 8192, 0, DType::int4},
      // Prefix points: the target point with a shared prefix of h of every context (one group,
      // as the sweep lays it out); bytes_min_GBps counts each shared block once,
      // bytes_logical_GBps once per sequence.
      {"llama-3.1-8b", 8, 8192, 0.5, DType::f16},
      {"llama-3.1-8b", 8, 8192, 0.9, DType::f16},
  };
  for (const BenchPoint& registered : points) {
    const BenchPoint pt = registered.sized();
    for (cpu::DecodePath path : distinct_paths()) {
      // The other paths beside automatic's at the f16 h = 0 points only: portable is slow, and
      // avx2 next to avx512 is a comparison, not a target.
      if (path != cpu::DecodePath::automatic && (pt.kv != DType::f16 || pt.hit_rate > 0)) continue;
      // The hit rate before the path, so "^decode/<point>/avx512" (scripts/cpu-layout-split.sh)
      // keeps matching the h = 0 point only.
      const std::string point = pt.label() + "/" + cpu::resolved_path_name(path);
      timed_manually(
          benchmark::RegisterBenchmark(("decode/" + point).c_str(), bm_decode, pt, path));
      if (path == cpu::DecodePath::automatic)
        timed_manually(
            benchmark::RegisterBenchmark(("paged_read/" + point).c_str(), bm_paged_read, pt, path));
    }
  }
  const BenchPoint target = points[0].sized();
  for (auto [label, order] : {std::pair{"sequential", LayoutOrder::sequential},
                              std::pair{"whole_blocks", LayoutOrder::whole_blocks}})
    timed_manually(benchmark::RegisterBenchmark(
        ("layout_read/" + target.label() + "/" + label).c_str(), bm_layout_read, target, order));
}

// ---- the KV conversion loop --------------------------------------------------------------------

void bm_convert(benchmark::State& state, DType kv, cpu::DecodePath path) {
  // 64 Ki elements: in L2, so this is the instruction cost per element, not memory bandwidth.
  const std::size_t count = 64 * 1024;
  std::vector<std::byte> src(count * dtype_size(kv));
  for (std::size_t i = 0; i < count; ++i)
    encode_value(kv, static_cast<float>(i % 97) * 0.03125f - 1.5f, &src[i * dtype_size(kv)]);
  std::vector<float> dst(count);
  for (auto _ : state) {
    cpu::convert_kv_to_float(kv, src.data(), count, dst.data(), path);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(src.size()));
  state.counters["elements_per_s"] =
      benchmark::Counter(static_cast<double>(count) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(cpu::resolved_path_name(path));
}

void register_convert() {
  for (DType kv : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    for (cpu::DecodePath path : distinct_paths()) {
      const std::string name =
          "convert/" + std::string(dtype_name(kv)) + "_to_f32/" + cpu::resolved_path_name(path);
      benchmark::RegisterBenchmark(name.c_str(), bm_convert, kv, path)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// ---- the ceiling kernels ---------------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const { ::operator delete(p, std::align_val_t(64)); }
};
using Buffer = std::unique_ptr<float, AlignedFree>;
Buffer allocate(std::size_t n) {
  return Buffer(static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t(64))));
}

// Buffer elements for the DRAM-sized runs: 8x the last-level cache, at most a sixth of the
// available memory (three triad buffers in half of it), a multiple of the kernels' chunk.
// 4 MiB in a small run.
std::size_t dram_elements() {
  if (small_run()) return (std::size_t{4} << 20) / sizeof(float);
  const std::int64_t llc = std::max<std::int64_t>(cpu::last_level_cache_bytes(), 32 << 20);
  std::int64_t bytes = 8 * llc;
  if (const std::int64_t avail = cpu::available_memory_bytes(); avail > 0)
    bytes = std::min(bytes, avail / 6);
  return static_cast<std::size_t>(bytes) / sizeof(float) / cpu::kCeilingChunk * cpu::kCeilingChunk;
}

void bm_read(benchmark::State& state, std::size_t n) {
  Buffer b = allocate(n);
  cpu::fill_pattern(b.get(), n, 1.0f, 0);  // first touch by the threads that read it
  for (auto _ : state) benchmark::DoNotOptimize(cpu::read_kernel(b.get(), n, 0));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void bm_triad(benchmark::State& state, std::size_t n) {
  Buffer a = allocate(n), b = allocate(n), c = allocate(n);
  cpu::fill_pattern(a.get(), n, 0.0f, 0);
  cpu::fill_pattern(b.get(), n, 1.0f, 0);
  cpu::fill_pattern(c.get(), n, 2.0f, 0);
  for (auto _ : state) {
    cpu::triad_kernel(a.get(), b.get(), c.get(), 3.0f, n, 0);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<std::int64_t>(n * sizeof(float)));
}

void register_ceilings() {
  const std::size_t cache_n = (1 << 20) / sizeof(float);  // 1 MiB: L2-resident on any current core
  const std::size_t dram_n = dram_elements();
  for (auto [label, n] : {std::pair{"l2", cache_n}, std::pair{"8xLLC", dram_n}}) {
    benchmark::RegisterBenchmark((std::string("ceiling/read/") + label).c_str(), bm_read, n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("ceiling/triad/") + label).c_str(), bm_triad, n)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

double cpu_read_ceiling() { return read_ceiling(); }

void register_cpu_benchmarks(bool measure) {
  register_decode();
  register_convert();
  register_ceilings();
  benchmark::AddCustomContext("decodebench.cpu", cpu_model_name());
  benchmark::AddCustomContext("decodebench.cpu.path",
                              cpu::resolved_path_name(cpu::DecodePath::automatic));
  benchmark::AddCustomContext("decodebench.cpu.prefetch", cpu::prefetch_level_name());
  benchmark::AddCustomContext("decodebench.cpu.omp_threads", std::to_string(omp_get_max_threads()));
  if (!measure) return;
  measured_ceilings() = measure_cpu_ceilings();
  const Ceilings& c = measured_ceilings();
  benchmark::AddCustomContext("decodebench.cpu.read_GBps", fmt::format("{:.1f}", c.read / 1e9));
  benchmark::AddCustomContext("decodebench.cpu.copy_GBps", fmt::format("{:.1f}", c.copy / 1e9));
  if (!c.note.empty()) benchmark::AddCustomContext("decodebench.cpu.ceilings_note", c.note);
}

}  // namespace decodebench::bench
