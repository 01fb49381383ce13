// Google Benchmark view of the CUDA rungs: every rung of the ladder (the cuda backend's
// kernel_names()) at a few llama-3.1-8b points, f16 and fp8_e4m3 KV.
//
//   decodebench_bench --benchmark_filter=cuda/        cuda/<rung>/<point>
//
// It drives the GPU through the harness's path only: make_backend("cuda"), validation by
// run_check_point (the runner's check against the CPU reference, once per rung and point, before
// anything is timed; a point that is wrong or unsupported is SkipWithError with the reason), then
// prepare() and PreparedPoint::time_one() per iteration (CUDA events around one step after an L2
// flush: the sweep's cold timing), reported as manual time. Counters: those of bench.h, with
// frac_of_read against the GPU's read ceiling measured at start.
// Context: decodebench.cuda is the device's name, or "no device" / "not built" when no CUDA
// benchmark is registered; decodebench.cuda.read_GBps / copy_GBps, decodebench.cuda.kernels.
//
// Host C++ only, compiled in every build: without the cuda backend or a device it registers
// nothing, so its registration runs (and is tested) on machines without a GPU.
#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "backends/backend.h"
#include "bench/bench.h"
#include "harness/runner.h"  // run_check_point: the runner's validation
#include "results/point_result.h"
#include "workload/byte_model.h"

namespace decodebench::bench {
namespace {

// Sequences validated per point (a deterministic subset beyond, as the sweep's
// validate_max_rows): enough to cover the prefix group, cheap for the double-precision reference.
constexpr int kValidateRows = 16;

// One backend for the whole run (it must outlive its prepared points), the host workload and the
// prepared point of the benchmark running now. Benchmarks run in registration order, rungs
// innermost, so a point's host workload serves every rung and only one point is resident on the
// GPU at a time. Members are destroyed in reverse order: the point before the backend.
struct CudaState {
  std::unique_ptr<Backend> backend;
  Ceilings ceilings;
  std::string workload_key;
  Workload workload;
  ByteModel bytes;
  std::string point_key;
  std::unique_ptr<PreparedPoint> point;
  std::string last_check_key;  // the (rung, point) validated last, and its verdict
  std::string last_check_failure;
};
CudaState& cuda_state() {
  static CudaState s;
  return s;
}

// Empty when rung `kernel` validated at `pt`; else why not ("wrong: ...", "skipped: ...").
std::string check_once(CudaState& s, const std::string& kernel, const BenchPoint& pt,
                       const std::string& key) {
  if (s.last_check_key == key) return s.last_check_failure;
  SweepPoint sp;
  sp.spec = pt.spec();
  sp.kernel = kernel;
  const PointResult r = run_check_point(*s.backend, sp, kValidateRows);
  s.last_check_key = key;
  s.last_check_failure = r.status == PointStatus::ok
                             ? std::string()
                             : fmt::format("{}: {}", status_name(r.status), r.reason);
  return s.last_check_failure;
}

PreparedPoint& prepared(CudaState& s, const std::string& kernel, const BenchPoint& pt,
                        const std::string& key) {
  if (s.point_key == key) return *s.point;
  s.point.reset();  // the previous point's device memory first
  s.point_key.clear();
  if (s.workload_key != pt.label()) {
    s.workload_key.clear();  // until the new workload is complete
    s.workload = Workload{};
    s.workload = make_workload(pt.spec());
    s.bytes = byte_model(s.workload.spec, s.workload.layout);
    s.workload_key = pt.label();
  }
  s.point = s.backend->prepare(s.workload, kernel, TimingOptions{});
  s.point_key = key;
  return *s.point;
}

void bm_cuda_decode(benchmark::State& state, std::string kernel, BenchPoint pt) {
  CudaState& s = cuda_state();
  const std::string key = kernel + "/" + pt.label();
  try {
    if (const std::string why = check_once(s, kernel, pt, key); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    PreparedPoint& point = prepared(s, kernel, pt, key);
    point.run();  // warm-up: the code, the output, the workspace
    for (auto _ : state) state.SetIterationTime(point.time_one());
  } catch (const std::exception& e) {
    state.SkipWithError(fmt::format("error: {}", e.what()).c_str());
    return;
  }
  set_decode_counters(state, s.bytes, s.ceilings.read, s.workload.layout.hit_rate_actual);
}

}  // namespace

void register_cuda_benchmarks(bool measure) {
  const std::vector<std::string> built = backend_names();
  if (std::find(built.begin(), built.end(), "cuda") == built.end()) {
    benchmark::AddCustomContext("decodebench.cuda", "not built");
    return;
  }
  if (!cuda_device_present()) {
    benchmark::AddCustomContext("decodebench.cuda", "no device");
    return;
  }
  CudaState& s = cuda_state();
  try {
    s.backend = make_backend("cuda");
    if (measure) s.ceilings = s.backend->measure_ceilings();
  } catch (const std::exception& e) {
    // A device the runtime sees but cannot use: nothing is registered, and the context says why
    // (the smoke test then fails for want of cuda/ benchmarks).
    s.backend.reset();
    benchmark::AddCustomContext("decodebench.cuda", fmt::format("unusable: {}", e.what()));
    return;
  }
  const std::vector<std::string> rungs = s.backend->kernel_names();
  benchmark::AddCustomContext("decodebench.cuda", s.backend->device_info().name);
  benchmark::AddCustomContext("decodebench.cuda.kernels", fmt::format("{}", fmt::join(rungs, ",")));
  if (measure) {
    benchmark::AddCustomContext("decodebench.cuda.read_GBps",
                                fmt::format("{:.1f}", s.ceilings.read / 1e9));
    benchmark::AddCustomContext("decodebench.cuda.copy_GBps",
                                fmt::format("{:.1f}", s.ceilings.copy / 1e9));
    if (!s.ceilings.note.empty())
      benchmark::AddCustomContext("decodebench.cuda.ceilings_note", s.ceilings.note);
  }
  const BenchPoint points[] = {
      {"llama-3.1-8b", 1, 32768, 0, DType::f16},    // one long sequence: split_kv's case
      {"llama-3.1-8b", 64, 8192, 0, DType::f16},    // enough (sequence, KV head) pairs to fill it
      {"llama-3.1-8b", 64, 8192, 0.5, DType::f16},  // half of every context shared
  };
  for (const BenchPoint& registered : points) {
    for (DType kv : {DType::f16, DType::fp8_e4m3}) {
      BenchPoint pt = registered.sized();
      pt.kv = kv;
      for (const std::string& rung : rungs)
        timed_manually(benchmark::RegisterBenchmark(("cuda/" + rung + "/" + pt.label()).c_str(),
                                                    bm_cuda_decode, rung, pt));
    }
  }
}

void release_cuda_benchmarks() {
  CudaState& s = cuda_state();
  s.point.reset();  // before the backend, which owns its stream and L2 scrubber
  s.workload = Workload{};
  s.backend.reset();
}

}  // namespace decodebench::bench
