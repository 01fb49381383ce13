// Google Benchmark microbenchmarks of the layer scope's GEMMs (src/backends/cpu/cpu_gemm.h) on
// every GEMM library this build found, at llama-3.1-8b's real shapes: the measurement behind the
// choice of library in docs/decisions.md ("Layer GEMMs on the CPU").
//
//   decodebench_bench --benchmark_filter=gemm/         each GEMM of the step alone,
//       gemm/<library>/<entry>/<stage>/m:<m>           cold weights (evicted before every
//                                                      iteration, as the sweep's cold samples),
//                                                      weights reused across calls; entry: each
//                                                      way the library can run it (the default
//                                                      first: what the cpu backend runs)
//   decodebench_bench --benchmark_filter=gemm_step/    qkv_proj, an OpenMP region standing in for
//       gemm_step/<library>/m:<m>                      the attention, o_proj, gate_up_proj,
//                                                      down_proj back to back: what handing the
//                                                      cores between the library's threads and
//                                                      the decode's OpenMP pool costs
//   decodebench_bench --benchmark_filter=gemm_square/  a warm 2048^3 product: the library's bf16
//                                                      FLOP rate (the backend's gemm_ceiling)
//   decodebench_bench --benchmark_filter=layer_step/   the whole layer step through the cpu
//                                                      backend's layer scope (run_layer)
//
// Counters: weight_GBps (the weight bytes per second, what batch 1 is bound by), bytes_GBps
// (weights + input + output, layer_model.h's gemm_model), frac_of_read (bytes over the read
// ceiling of register_cpu_benchmarks), paired_read_GBps and frac_of_paired (the read bandwidth
// sampled right before each product by the cold-cache flush, and bytes over it), GFLOPs. Shapes are
// llama-3.1-8b's at m = 1, 8, 64, 256 (small shapes, m = 1 and 8, under DECODEBENCH_BENCH_SMALL=1).
// Context: decodebench.gemm (every library with its version), decodebench.gemm.first (what the cpu
// backend runs). OpenBLAS's thread variants (Debian's libopenblas0-openmp and -pthread) share one
// soname: run the binary with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread to time
// the other.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_layer.h"
#include "bench/bench.h"
#include "common/errors.h"
#include "workload/layer_model.h"
#include "workload/workload.h"

namespace decodebench::bench {
namespace {

using cpu::GemmLibrary;

constexpr std::uint64_t kSeed = 1;
constexpr std::array<LayerStage, 5> kStages = {LayerStage::qkv_proj, LayerStage::o_proj,
                                               LayerStage::gate_up_proj, LayerStage::down_proj,
                                               LayerStage::lm_head};

ModelShape bench_model() {
  if (!small_run()) return load_model("llama-3.1-8b");
  ModelShape m{"small", 4, 2, 64, 1, ""};
  m.hidden_size = 256;
  m.intermediate_size = 512;
  m.vocab_size = 1000;
  return m;
}

std::vector<std::unique_ptr<GemmLibrary>>& libraries() {
  static std::vector<std::unique_ptr<GemmLibrary>> libs = cpu::gemm_libraries();
  return libs;
}

// Each weight is generated once (the lm_head is 1 GB) and prepared once per library (oneDNN's
// packed copies): the benchmarks of every m reuse them, as consecutive decode steps do.
const cpu::HostBuffer& raw_weight(const GemmShape& shape) {
  static std::map<LayerStage, cpu::HostBuffer> cache;
  auto [it, fresh] = cache.try_emplace(shape.stage);
  if (fresh) {
    it->second = cpu::HostBuffer(static_cast<std::size_t>(shape.n * shape.k) * 2);
    cpu::advise_huge_pages(it->second.data(), it->second.size());
    cpu::fill_weight(kSeed, shape, DType::bf16, it->second.data());
  }
  return it->second;
}
cpu::GemmWeights& weights(GemmLibrary& lib, const GemmShape& shape) {
  static std::map<std::pair<GemmLibrary*, LayerStage>, std::unique_ptr<cpu::GemmWeights>> cache;
  auto& slot = cache[{&lib, shape.stage}];
  if (!slot) slot = lib.prepare_weights(raw_weight(shape).data(), shape.n, shape.k);
  return *slot;
}

// One product ready to time: its input (filled from the generator, lda wide) and output.
struct Product {
  GemmShape shape;
  cpu::GemmWeights* w = nullptr;
  std::unique_ptr<cpu::GemmPlan> plan;
  cpu::HostBuffer x, y;
  GemmModel model;
  Product(GemmLibrary& lib, const GemmShape& s, const std::string& entry)
      : shape(s),
        w(&weights(lib, s)),
        plan(lib.plan(*w, s.m, s.lda, entry)),
        x(static_cast<std::size_t>(s.m * s.lda) * 2),
        y(static_cast<std::size_t>(s.m * s.n) * 2),
        model(gemm_model(s, DType::bf16, DType::bf16)) {
    cpu::fill_counter_values(x.data(), DType::bf16, s.m * s.lda, kSeed, LayerTensor::x, 0, 1.0f);
  }
  void run() { plan->run(x.data(), y.data()); }
  void evict() const {
    for (const auto& [data, bytes] : w->buffers()) cpu::evict_from_caches(data, bytes);
    for (const auto& [data, bytes] : plan->buffers()) cpu::evict_from_caches(data, bytes);
    cpu::evict_from_caches(x.data(), x.size());
    cpu::evict_from_caches(y.data(), y.size());
  }
};

// Cold, as the sweep's samples (cpu_ceilings.h "Cold caches"): the product's buffers evicted,
// then the timed read of 2x the LLC that empties the caches of the rest and samples the read
// bandwidth of that moment. The host's memory bandwidth drifts within seconds on a shared VM;
// frac_of_paired judges each product against the bandwidth measured right before it.
class ColdStart {
 public:
  void operator()() {
    static cpu::CacheFlusher flusher;
    const auto t0 = std::chrono::steady_clock::now();
    flusher.flush();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    read_Bps_sum_ += static_cast<double>(flusher.bytes()) / dt.count();
    ++samples_;
  }
  double mean_read_Bps() const { return samples_ ? read_Bps_sum_ / samples_ : 0; }

 private:
  double read_Bps_sum_ = 0;
  int samples_ = 0;
};

void set_gemm_counters(benchmark::State& state, double weight_bytes, double bytes, double flops,
                       const ColdStart& cold) {
  const auto per_s = [&](double per_step, double unit) {
    return benchmark::Counter(per_step * static_cast<double>(state.iterations()) / unit,
                              benchmark::Counter::kIsRate);
  };
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
  state.counters["weight_GBps"] = per_s(weight_bytes, 1e9);
  state.counters["bytes_GBps"] = per_s(bytes, 1e9);
  if (cpu_read_ceiling() > 0) state.counters["frac_of_read"] = per_s(bytes, cpu_read_ceiling());
  state.counters["GFLOPs"] = per_s(flops, 1e9);
  state.counters["threads"] = omp_get_max_threads();
  if (cold.mean_read_Bps() > 0) {
    state.counters["paired_read_GBps"] = cold.mean_read_Bps() / 1e9;
    state.counters["frac_of_paired"] = per_s(bytes, cold.mean_read_Bps());
  }
}

void run_gemm(benchmark::State& state, GemmLibrary* lib, GemmShape shape, std::string entry) {
  Product p(*lib, shape, entry);
  p.run();  // warm-up: threads started, the output paged in
  ColdStart cold;
  for (auto _ : state) {
    p.evict();
    cold();
    const auto t0 = std::chrono::steady_clock::now();
    p.run();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    state.SetIterationTime(dt.count());
  }
  set_gemm_counters(state, static_cast<double>(p.model.weight_bytes),
                    static_cast<double>(p.model.bytes()), p.model.flops, cold);
  state.SetLabel(p.plan->entry_point());
}

// The four layer GEMMs with an OpenMP region between qkv_proj and o_proj where the attention
// runs: a read of an L2-sized buffer on every thread (~0.1 ms), the cheapest region that needs
// both cores.
void run_step(benchmark::State& state, GemmLibrary* lib, int m) {
  const ModelShape model = bench_model();
  std::vector<std::unique_ptr<Product>> gemms;
  double weight_bytes = 0, bytes = 0, flops = 0;
  for (LayerStage s : kLayerGemms) {
    gemms.push_back(std::make_unique<Product>(*lib, gemm_shape(model, s, m), ""));
    weight_bytes += static_cast<double>(gemms.back()->model.weight_bytes);
    bytes += static_cast<double>(gemms.back()->model.bytes());
    flops += gemms.back()->model.flops;
  }
  const std::size_t region_floats = (std::size_t{1} << 20) / sizeof(float);
  std::vector<float> region(region_floats);
  cpu::fill_pattern(region.data(), region.size(), 1.0f, 0);
  const auto step = [&] {
    gemms[0]->run();
    benchmark::DoNotOptimize(cpu::read_kernel(region.data(), region.size(), 0));
    for (std::size_t i = 1; i < gemms.size(); ++i) gemms[i]->run();
  };
  step();
  ColdStart cold;
  for (auto _ : state) {
    for (const auto& g : gemms) g->evict();
    cold();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    state.SetIterationTime(dt.count());
  }
  set_gemm_counters(state, weight_bytes, bytes, flops, cold);
  state.SetLabel(gemms[0]->plan->entry_point());
}

// Warm: the rate of the arithmetic, what a compute roof is.
void run_square(benchmark::State& state, GemmLibrary* lib, std::int64_t size) {
  GemmShape shape{LayerStage::qkv_proj, size, size, size, size};
  cpu::HostBuffer w(static_cast<std::size_t>(size * size) * 2);
  cpu::fill_weight(kSeed, shape, DType::bf16, w.data());
  std::unique_ptr<cpu::GemmWeights> prepared = lib->prepare_weights(w.data(), size, size);
  std::unique_ptr<cpu::GemmPlan> plan = lib->plan(*prepared, size, size);
  cpu::HostBuffer x(w.size()), y(w.size());
  cpu::fill_counter_values(x.data(), DType::bf16, size * size, kSeed, LayerTensor::x, 0, 1.0f);
  plan->run(x.data(), y.data());
  for (auto _ : state) plan->run(x.data(), y.data());
  const double flops = 2.0 * static_cast<double>(size * size) * static_cast<double>(size);
  state.counters["GFLOPs"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
  state.SetLabel(plan->entry_point());
}

// One layer step through the cpu backend's layer scope (prepare_layer, time_one: cold, its own
// paired read), llama-3.1-8b bf16 at a batch and context: the sweep's layer point in small.
// Counters: bytes_GBps of the layer's bytes_min (weights, activations, the attention's minimum),
// frac_of_paired (over the read bandwidth of each sample's flush), lm_head_ms (the LM head, a
// separate term), evict_ms (what the cold start costs outside the clock).
void run_layer(benchmark::State& state, int batch, int context) {
  WorkloadSpec spec;
  spec.model = bench_model();
  spec.batch = batch;
  spec.context = ContextSpec::fixed(context);
  spec.kv_dtype = DType::bf16;
  spec.q_dtype = DType::bf16;
  spec.seed = kSeed;
  static std::unique_ptr<Backend> backend = make_cpu_backend();
  if (const std::string why = backend->layer_skip_reason(spec, "cpu", {}); !why.empty())
    throw RuntimeFailure(why);
  const Workload w = make_workload(spec);
  const LayerModel model = layer_model(spec, w.layout, DType::bf16);
  auto layer = backend->prepare_layer(w, "cpu", {}, {});
  layer->run();
  double evict = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double t = layer->time_one();
    evict += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - t;
    state.SetIterationTime(t);
  }
  const auto stages = layer->stage_samples();
  const std::vector<double> paired = layer->paired_read_samples();
  double frac = 0, lm_head = 0;
  for (std::size_t i = 0; i < paired.size(); ++i) {
    double t = 0;
    for (int s = 0; s <= static_cast<int>(LayerStage::down_proj); ++s) t += stages[s][i];
    frac += static_cast<double>(model.bytes_min) / t / paired[i];
    lm_head += stages[static_cast<int>(LayerStage::lm_head)][i];
  }
  const auto n = static_cast<double>(paired.size());
  state.SetBytesProcessed(state.iterations() * model.bytes_min);
  state.counters["bytes_GBps"] = benchmark::Counter(
      static_cast<double>(model.bytes_min) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
  state.counters["frac_of_paired"] = frac / n;
  state.counters["lm_head_ms"] = lm_head / n * 1e3;
  state.counters["evict_ms"] = evict / n * 1e3;
  for (int s = 0; s < kNumLayerStages; ++s) {
    double sum = 0;
    for (double t : stages[s]) sum += t;
    if (s != static_cast<int>(LayerStage::lm_head))
      state.counters[std::string(stage_name(static_cast<LayerStage>(s))) + "_ms"] = sum / n * 1e3;
  }
  state.SetLabel(layer->gemm_library());
}

// A library that cannot make a plan on this CPU (oneDNN has no bf16 matmul below AVX-512) skips
// its benchmarks with its reason; it throws before any timed iteration.
template <auto kRun, class... Args>
void guarded(benchmark::State& state, Args... args) {
  try {
    kRun(state, args...);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("skipped: ") + e.what()).c_str());
  }
}
constexpr auto bm_gemm = guarded<run_gemm, GemmLibrary*, GemmShape, std::string>;
constexpr auto bm_step = guarded<run_step, GemmLibrary*, int>;
constexpr auto bm_square = guarded<run_square, GemmLibrary*, std::int64_t>;
constexpr auto bm_layer = guarded<run_layer, int, int>;

}  // namespace

void register_gemm_benchmarks(bool) {
  std::vector<std::string> names;
  const ModelShape model = bench_model();
  const std::vector<int> ms =
      small_run() ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 64, 256};
  for (const auto& lib : libraries()) {
    names.push_back(fmt::format("{} {} ({})", lib->name(), lib->version(), lib->package()));
    for (LayerStage stage : kStages) {
      for (int m : ms) {
        const GemmShape shape = gemm_shape(model, stage, m);
        const std::vector<std::string> entries = lib->entries(m, shape.k, shape.lda);
        for (std::size_t e = 0; e < entries.size(); ++e) {
          const std::string name =
              fmt::format("gemm/{}/{}/{}/m:{}", lib->name(), entries[e], stage_name(stage), m);
          timed_manually(
              benchmark::RegisterBenchmark(name.c_str(), bm_gemm, lib.get(), shape, entries[e]));
        }
      }
    }
    for (int m : ms)
      timed_manually(benchmark::RegisterBenchmark(
          fmt::format("gemm_step/{}/m:{}", lib->name(), m).c_str(), bm_step, lib.get(), m));
    const std::int64_t size = small_run() ? 256 : 2048;
    benchmark::RegisterBenchmark(fmt::format("gemm_square/{}/{}", lib->name(), size).c_str(),
                                 bm_square, lib.get(), size)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (int batch : ms)
    timed_manually(benchmark::RegisterBenchmark(
        fmt::format("layer_step/{}/batch:{}/ctx:{}", model.name, batch, small_run() ? 256 : 4096)
            .c_str(),
        bm_layer, batch, small_run() ? 256 : 4096));
  benchmark::AddCustomContext("decodebench.gemm", names.empty()
                                                      ? "none: " + cpu::missing_gemm_library()
                                                      : fmt::format("{}", fmt::join(names, "; ")));
  benchmark::AddCustomContext("decodebench.gemm.first",
                              names.empty() ? "none" : libraries().front()->name());
}

}  // namespace decodebench::bench
