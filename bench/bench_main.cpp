// decodebench_bench: the Google Benchmark binary. main() adds the context every run shares
// (tool version and commit, the scale of the run), lets each file register its families
// (bench_cpu.cpp, bench_cuda.cpp) and runs them. The shared parts of bench.h live here too.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "bench/bench.h"
#include "results/report.h"  // this_tool()

namespace decodebench::bench {

std::string check_small_run_env() {
  const char* v = std::getenv("DECODEBENCH_BENCH_SMALL");
  if (v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0" ||
      std::string_view(v) == "1")
    return {};
  return fmt::format("DECODEBENCH_BENCH_SMALL='{}' is not valid; use 1 (small shapes), 0 or unset",
                     v);
}

bool small_run() {
  static const bool small = [] {
    const char* v = std::getenv("DECODEBENCH_BENCH_SMALL");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return small;
}

BenchPoint BenchPoint::sized() const {
  if (!small_run()) return *this;
  BenchPoint p = *this;
  p.batch = std::min(p.batch, 2);
  p.context = std::min(p.context, 512);
  return p;
}

WorkloadSpec BenchPoint::spec() const {
  WorkloadSpec s;
  s.model = load_model(model);
  s.batch = batch;
  s.context = ContextSpec::fixed(context);
  s.hit_rate = hit_rate;
  s.prefix_groups = 1;  // the sweep's default: every sequence shares the one prefix
  s.kv_dtype = kv;
  s.seed = 1;
  return s;
}

std::string BenchPoint::label() const {
  std::string s = fmt::format("{}/kv:{}/batch:{}/ctx:{}", model, dtype_name(kv), batch, context);
  if (hit_rate > 0) s += fmt::format("/h:{:g}", hit_rate);
  return s;
}

void set_decode_counters(benchmark::State& state, const ByteModel& bytes, double read_Bps,
                         double hit_rate_actual) {
  const auto steps = static_cast<double>(state.iterations());
  // As the report's bandwidth.logical: bytes_min with kv_logical in place of kv_unique.
  const auto logical = static_cast<double>(bytes.min - bytes.kv_unique + bytes.kv_logical);
  const auto rate = [&](double per_step, double unit) {
    return benchmark::Counter(per_step * steps / unit, benchmark::Counter::kIsRate);
  };
  state.SetBytesProcessed(state.iterations() * bytes.min);
  state.counters["bytes_min_GBps"] = rate(static_cast<double>(bytes.min), 1e9);
  state.counters["bytes_logical_GBps"] = rate(logical, 1e9);
  state.counters["kv_GBps"] = rate(static_cast<double>(bytes.kv_unique), 1e9);
  if (read_Bps > 0) state.counters["frac_of_read"] = rate(static_cast<double>(bytes.min), read_Bps);
  state.counters["hit_rate"] = hit_rate_actual;
  state.counters["arith_intensity"] = bytes.arithmetic_intensity;
}

benchmark::internal::Benchmark* timed_manually(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMillisecond);
  if (!small_run()) b->MinTime(0.5);
  return b;
}

namespace {

// --benchmark_list_tests runs nothing and prints no context: no ceilings are measured for it.
bool listing_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true" ||
        a == "--benchmark_list_tests=1")
      return true;
  }
  return false;
}

}  // namespace
}  // namespace decodebench::bench

int main(int argc, char** argv) {
  namespace bench = decodebench::bench;
  if (const std::string bad = bench::check_small_run_env(); !bad.empty()) {
    std::fprintf(stderr, "decodebench_bench: %s\n", bad.c_str());
    return 2;
  }
  const bool measure = !bench::listing_only(argc, argv);
  benchmark::Initialize(&argc, argv);  // exits on --help, before any ceiling is measured
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const decodebench::ToolInfo tool = decodebench::this_tool();
  benchmark::AddCustomContext("decodebench.version", tool.version);
  benchmark::AddCustomContext("decodebench.git_sha", tool.git_sha);
  benchmark::AddCustomContext("decodebench.shapes",
                              bench::small_run() ? "small (DECODEBENCH_BENCH_SMALL=1)" : "full");
  try {
    bench::register_cpu_benchmarks(measure);
    bench::register_gemm_benchmarks(measure);
    bench::register_cuda_benchmarks(measure);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decodebench_bench: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  bench::release_cuda_benchmarks();
  benchmark::Shutdown();
  return 0;
}
