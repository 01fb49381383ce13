// What the files of decodebench_bench share: the points they register, the scale of the run,
// the byte counters every decode-like benchmark reports, and the registrars main() calls.
#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "common/dtype.h"
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench::bench {

// DECODEBENCH_BENCH_SMALL=1: every family at small shapes (batch <= 2, context <= 512, small
// ceiling buffers) and without the per-benchmark minimum time, so --benchmark_min_time decides:
// the whole binary in seconds, for the smoke test (bench/bench_smoke_test.sh). Unset or 0: the
// real shapes. Any other value is rejected by check_small_run_env().
bool small_run();
// Empty when DECODEBENCH_BENCH_SMALL is unset, "0" or "1"; else what is wrong with it.
std::string check_small_run_env();

// One decode point: a model preset of configs/models at batch x fixed context, hit rate h with
// the sweep's shared-prefix layout (one prefix group, WorkloadSpec defaults elsewhere).
struct BenchPoint {
  const char* model;
  int batch;
  int context;
  double hit_rate;
  DType kv;
  // This point as registered: shrunk under small_run().
  BenchPoint sized() const;
  WorkloadSpec spec() const;
  // "llama-3.1-8b/kv:f16/batch:8/ctx:8192", with "/h:0.5" appended when hit_rate > 0.
  std::string label() const;
};

// The decode's byte counters for `state`'s iterations of one step each (manual time):
//   bytes_per_second     bytes_min / s (SetBytesProcessed), what the sweep's bandwidth.achieved is
//   bytes_min_GBps       the same in GB/s: unique KV (each shared block once) + Q + out + tables
//   bytes_logical_GBps   bytes_min with every sequence's KV counted (bandwidth.logical): above
//                        bytes_min_GBps exactly when blocks are shared (h > 0)
//   kv_GBps              unique KV bytes alone
//   frac_of_read         bytes_min / s over `read_Bps` (the measured read ceiling)
//   hit_rate             the layout's actual h
//   arith_intensity      FLOP per byte of bytes_min
void set_decode_counters(benchmark::State& state, const ByteModel& bytes, double read_Bps,
                         double hit_rate_actual);

// Applies the family's minimum time unless small_run(); manual time, milliseconds.
benchmark::internal::Benchmark* timed_manually(benchmark::internal::Benchmark* b);

// Each registers its families and adds its context keys (decodebench.cpu.*, decodebench.cuda*).
// `measure`: false when the run lists benchmarks only (--benchmark_list_tests), so no ceilings
// are measured.
void register_cpu_benchmarks(bool measure);
// The layer's GEMMs on every GEMM library of the build (bench_gemm.cpp); after
// register_cpu_benchmarks, whose read ceiling they are judged against.
void register_gemm_benchmarks(bool measure);
// The read ceiling register_cpu_benchmarks measured, B/s (0 when it measured none).
double cpu_read_ceiling();
void register_cuda_benchmarks(bool measure);
// Frees what the CUDA benchmarks hold on the device before main() returns: a static's destructor
// would run after the CUDA runtime has been torn down.
void release_cuda_benchmarks();

}  // namespace decodebench::bench
