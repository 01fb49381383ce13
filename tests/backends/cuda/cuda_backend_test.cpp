// The CUDA backend on a real GPU (label `gpu`). Every test skips, with a message, when no CUDA
// device is visible; ctest runs each test in its own process, so the planted device fault at
// the end cannot poison the others.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/planted_tables.h"
#include "common/dtype.h"
#include "common/errors.h"
#include "kernels.h"
#include "reference/reference.h"
#include "support/host_test_util.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

namespace k = kernels;

#define DECODEBENCH_REQUIRE_GPU()                                                    \
  do {                                                                               \
    if (!cuda_runtime_device_present()) {                                            \
      GTEST_SKIP() << "no CUDA device visible: this test needs a GPU (label `gpu`)"; \
    }                                                                                \
  } while (0)

// Small odd shapes on what this build compiled (the first head_dim and KV dtype of the rung).
WorkloadSpec odd_spec(const k::KernelInfo& kernel, int batch, ContextSpec context) {
  WorkloadSpec s;
  s.model = {"gpu-test", /*num_q_heads=*/8, /*num_kv_heads=*/2, kernel.head_dims.front(), 1, ""};
  s.batch = batch;
  s.context = context;
  s.hit_rate = 0.5;
  s.prefix_groups = 2;
  s.kv_dtype = kernel.kv_dtypes.front();
  s.q_dtype = DType::f16;
  s.block_size = 16;
  s.seed = 77;
  return s;
}

Workload layout_only(const Workload& w) {
  Workload copy = w;
  copy.q.clear();
  copy.k_cache.clear();
  copy.v_cache.clear();
  return copy;
}

std::vector<float> run_point(Backend& b, const Workload& w, const std::string& kernel) {
  std::unique_ptr<PreparedPoint> point = b.prepare(w, kernel, TimingOptions{});
  point->run();
  return point->output();
}

TEST(CudaGpu, DeviceInfoIsSane) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const DeviceInfo info = b->device_info();
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.mem_bytes, 0);
  if (info.bandwidth_theoretical > 0 && info.bandwidth_datasheet > 0) {
    EXPECT_NEAR(info.bandwidth_theoretical / info.bandwidth_datasheet, 1.0, 0.3)
        << info.name << ": theoretical " << info.bandwidth_theoretical << " vs datasheet "
        << info.bandwidth_datasheet;
  }
}

TEST(CudaGpu, CeilingKernelsSelfCheck) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const auto checks = b->check_ceiling_kernels();
  ASSERT_EQ(checks.size(), 3u);
  for (const auto& c : checks) EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
}

TEST(CudaGpu, MeasuredCeilingsArePlausible) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const Ceilings c = b->measure_ceilings();
  const DeviceInfo info = b->device_info();
  EXPECT_GE(c.buffer_bytes, 8 * info.l2_bytes) << c.note;
  for (double bw : {c.read, c.copy, c.triad}) {
    EXPECT_GT(bw, 0);
    // Buffers of 8x L2 cannot be served from L2: no figure far above the DRAM peak.
    if (info.bandwidth_theoretical > 0) {
      EXPECT_LT(bw, 1.15 * info.bandwidth_theoretical);
    }
  }
  EXPECT_EQ(info.measured.copy, c.copy);  // remembered for the report
}

// The links: both copy directions and the mapped read, each at every size, at rates no link
// to a GPU exceeds (NVLink-C2C's 450 GB/s a direction, with margin) and below HBM.
TEST(CudaGpu, MeasuredLinksArePlausible) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const std::vector<LinkMeasurement> links = b->measure_links();
  ASSERT_GE(links.size(), 3u);
  EXPECT_EQ(links[0].direction, "to_device");
  EXPECT_EQ(links[1].direction, "to_host");
  for (const LinkMeasurement& l : links) {
    SCOPED_TRACE(l.name);
    ASSERT_EQ(l.by_size.size(), 5u);
    for (const auto& [bytes, rate] : l.by_size) {
      EXPECT_GT(rate, 0) << bytes;
      EXPECT_LE(rate, l.best_Bps);
    }
    EXPECT_GT(l.best_Bps, 1e9);
    if (l.direction != "peer") {
      EXPECT_LT(l.best_Bps, 600e9);
    }
    EXPECT_GE(l.overhead_s, 0);
    EXPECT_LT(l.overhead_s, 1e-3);
  }
}

// The device fill writes the host generator's values bit for bit, for every dtype.
TEST(CudaGpu, DeviceFillMatchesHostBitForBit) {
  DECODEBENCH_REQUIRE_GPU();
  for (DType kv : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    WorkloadSpec spec;
    spec.model = {"fill", 8, 2, 128, 1, ""};
    spec.batch = 7;
    spec.context = ContextSpec::ragged(1, 300);
    spec.kv_dtype = kv;
    spec.q_dtype = kv == DType::bf16 ? DType::bf16 : DType::f16;
    spec.seed = 1234;
    const Workload w = make_workload(spec);
    struct Job {
      Tensor tensor;
      DType dtype;
      const std::vector<std::byte>* want;
    };
    for (const Job& job : {Job{Tensor::q, spec.q_dtype, &w.q}, Job{Tensor::k, kv, &w.k_cache},
                           Job{Tensor::v, kv, &w.v_cache}}) {
      cuda::DeviceBuffer d(job.want->size());
      k::FillParams p;
      p.dst = d.get();
      p.dtype = job.dtype;
      p.count = job.want->size() / dtype_size(job.dtype);
      p.seed = spec.seed;
      p.tensor = static_cast<std::uint32_t>(job.tensor);
      p.inv_scale = inv_scale_for(job.tensor, kv);
      const k::LaunchResult r = k::cuda::launch_fill(p, /*stream=*/nullptr);
      ASSERT_TRUE(r.ok()) << r.message;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<std::byte> got(job.want->size());
      d.download(got.data(), got.size(), /*stream=*/nullptr);
      const std::size_t size = dtype_size(job.dtype);
      for (std::size_t i = 0; i < p.count; ++i) {
        if (std::memcmp(got.data() + i * size, job.want->data() + i * size, size) != 0) {
          ADD_FAILURE() << dtype_name(kv) << " tensor " << static_cast<int>(job.tensor)
                        << ": element " << i << " device "
                        << decode_value(job.dtype, got.data() + i * size) << " host "
                        << decode_value(job.dtype, job.want->data() + i * size);
          break;
        }
      }
    }
  }
}

// Every compiled rung against the CPU reference on odd shapes (the harness does this for every
// point; this keeps the backend's own plumbing honest: uploads, workspace, output decoding).
TEST(CudaGpu, EveryCompiledKernelMatchesTheReference) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  for (const k::KernelInfo& kernel : k::kernel_ladder()) {
    for (int batch : {1, 7}) {
      for (ContextSpec ctx :
           {ContextSpec::fixed(17), ContextSpec::ragged(1, 97), ContextSpec::fixed(4000)}) {
        const WorkloadSpec spec = odd_spec(kernel, batch, ctx);
        ASSERT_EQ(b->skip_reason(spec, kernel.name), "") << kernel.name;
        const Workload w = make_workload(spec);
        const std::vector<float> out = run_point(*b, w, kernel.name);
        const Comparison cmp =
            compare_outputs(out, reference_decode(w), spec.model.num_q_heads, spec.model.head_dim,
                            tolerance_for(spec.q_dtype, spec.kv_dtype));
        EXPECT_TRUE(cmp.ok) << kernel.name << " batch " << batch << " context " << ctx.lo << ".."
                            << ctx.hi << ": " << cmp.report;
      }
    }
  }
}

// The integer KV formats on the rungs built for them (tc, cascade): codes, scales and zeros
// uploaded, against the reference on the format's values, every head_dim, with and without a
// shared prefix; a layout-only point of them is refused (InputError, so the harness builds it on
// the host: the device fill writes float formats only).
TEST(CudaGpu, IntegerKvFormatsOnTheTensorCoreRungs) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  int ran = 0;
  for (const k::KernelInfo& kernel : k::kernel_ladder()) {
    for (DType kv : kernel.kv_dtypes) {
      if (!is_int_kv(kv)) continue;
      for (int d : kernel.head_dims) {
        for (double hit : {0.0, 0.6}) {
          WorkloadSpec spec = odd_spec(kernel, 7, ContextSpec::ragged(1, 700));
          spec.kv_dtype = kv;
          spec.model.head_dim = d;
          spec.hit_rate = hit;
          ASSERT_EQ(b->skip_reason(spec, kernel.name), "") << kernel.name;
          const Workload w = make_workload(spec);
          const Comparison cmp =
              compare_outputs(run_point(*b, w, kernel.name), reference_decode(w),
                              spec.model.num_q_heads, d, tolerance_for(spec.q_dtype, kv));
          EXPECT_TRUE(cmp.ok) << kernel.name << " " << dtype_name(kv) << " d " << d << " h " << hit
                              << ": " << cmp.report;
          ++ran;
        }
      }
      WorkloadSpec spec = odd_spec(kernel, 3, ContextSpec::fixed(40));
      spec.kv_dtype = kv;
      EXPECT_THROW(run_point(*b, layout_only(make_workload(spec)), kernel.name), InputError)
          << kernel.name << " " << dtype_name(kv);
    }
  }
  if (ran == 0) GTEST_SKIP() << "no rung built for an integer KV format";
}

// A layout-only workload (the convention of backend.h) gives exactly the output of the same
// workload uploaded from the host: full pools with one fill, subset pools block by block.
TEST(CudaGpu, LayoutOnlyWorkloadsAreFilledOnTheDevice) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  const WorkloadSpec spec = odd_spec(kernel, 7, ContextSpec::ragged(1, 300));
  const Workload full = make_workload(spec);
  EXPECT_EQ(run_point(*b, layout_only(full), kernel.name), run_point(*b, full, kernel.name));
  const std::vector<int> rows = {6, 2, 3};
  const Workload subset = make_workload(spec, full.layout, rows);
  EXPECT_EQ(run_point(*b, layout_only(subset), kernel.name), run_point(*b, subset, kernel.name));
}

// Cold: one step per sample between events, the flush before the start event. Warm: N > 1
// steps per sample (a step of this small point is far below the 1 ms window), by graph replay
// where capture works, else back-to-back launches; the output is still right afterwards.
TEST(CudaGpu, TimingColdAndWarm) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  for (const k::KernelInfo& kernel : k::kernel_ladder()) {
    const WorkloadSpec spec = odd_spec(kernel, 7, ContextSpec::fixed(2048));
    const Workload w = make_workload(spec);
    const std::vector<float> ref = reference_decode(w);
    for (bool warm : {false, true}) {
      TimingOptions t;
      t.warm_l2 = warm;
      auto point = b->prepare(w, kernel.name, t);
      point->run();
      std::vector<double> samples;
      for (int i = 0; i < 5; ++i) {
        const double s = point->time_one();
        EXPECT_GT(s, 0) << kernel.name;
        EXPECT_LT(s, 1.0) << kernel.name;
        samples.push_back(s);
      }
      const TimingRecord rec = point->timing();
      EXPECT_EQ(rec.warm_l2, warm);
      if (warm) {
        EXPECT_TRUE(rec.method == TimingMethod::graph_replay ||
                    rec.method == TimingMethod::events_back_to_back)
            << kernel.name << ": " << timing_method_name(rec.method);
        EXPECT_GT(rec.steps_per_sample, 1) << kernel.name;
        EXPECT_LE(rec.steps_per_sample, cuda::kMaxStepsPerSample);
        // The window is about kWarmSampleSeconds unless the cap bound it.
        if (rec.steps_per_sample < cuda::kMaxStepsPerSample) {
          EXPECT_GT(rec.steps_per_sample * samples.back(), 0.25 * cuda::kWarmSampleSeconds)
              << kernel.name << ": " << rec.steps_per_sample << " x " << samples.back();
        }
        std::cout << kernel.name << " warm: " << timing_method_name(rec.method) << ", "
                  << rec.steps_per_sample << " steps per sample, " << samples.back() * 1e6
                  << " us per step\n";
      } else {
        EXPECT_EQ(rec.method, TimingMethod::events_per_step) << kernel.name;
        EXPECT_EQ(rec.steps_per_sample, 1) << kernel.name;
        std::cout << kernel.name << " cold: " << samples.back() * 1e6 << " us per step\n";
      }
      // Replayed or not, the steps wrote the right output.
      const Comparison cmp =
          compare_outputs(point->output(), ref, spec.model.num_q_heads, spec.model.head_dim,
                          tolerance_for(spec.q_dtype, spec.kv_dtype));
      EXPECT_TRUE(cmp.ok) << kernel.name << (warm ? " warm" : " cold") << ": " << cmp.report;
    }
  }
}

// The flush's buffers follow the plan, and a flush runs (the memset and the read kernel).
TEST(CudaGpu, L2FlusherFollowsThePlan) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const DeviceInfo info = b->device_info();
  const cuda::L2FlushPlan plan =
      cuda::plan_l2_flush(static_cast<std::size_t>(info.l2_bytes), info.sm_count);
  cuda::L2Flusher flusher(static_cast<std::size_t>(info.l2_bytes), info.sm_count);
  EXPECT_EQ(flusher.write_bytes(), plan.write_bytes);
  EXPECT_EQ(flusher.read_bytes(), plan.read_bytes);
  // What a cold point records of it (the small_flush self-check): 2x the L2, against the L2.
  const FlushRecord rec = flusher.record();
  EXPECT_EQ(rec.cache_bytes, static_cast<double>(info.l2_bytes));
  EXPECT_GE(rec.flush_bytes, 2.0 * static_cast<double>(info.l2_bytes));
  cuda::CudaStream stream;
  for (int i = 0; i < 3; ++i) flusher.flush(stream.get());
  EXPECT_NO_THROW(stream.synchronize());
}

// --timing eager: warm samples launch their steps one by one (events_back_to_back), and the
// output is still right; graph again afterwards for the points prepared after it.
TEST(CudaGpu, WarmTimingEagerLaunchesPlainly) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  const WorkloadSpec spec = odd_spec(kernel, 7, ContextSpec::fixed(2048));
  const Workload w = make_workload(spec);
  TimingOptions t;
  t.warm_l2 = true;
  b->set_warm_timing(WarmTiming::eager);
  auto point = b->prepare(w, kernel.name, t);
  point->run();
  for (int i = 0; i < 3; ++i) EXPECT_GT(point->time_one(), 0);
  EXPECT_EQ(point->timing().method, TimingMethod::events_back_to_back);
  EXPECT_FALSE(point->flush_record());  // warm: no flush to record
  const Comparison cmp =
      compare_outputs(point->output(), reference_decode(w), spec.model.num_q_heads,
                      spec.model.head_dim, tolerance_for(spec.q_dtype, spec.kv_dtype));
  EXPECT_TRUE(cmp.ok) << cmp.report;
  b->set_warm_timing(WarmTiming::graph);
  auto cold = b->prepare(w, kernel.name, TimingOptions{});
  cold->run();
  (void)cold->time_one();
  ASSERT_TRUE(cold->flush_record());
  EXPECT_GE(cold->flush_record()->flush_bytes, 2 * cold->flush_record()->cache_bytes);
}

// A capture that fails (a launch refused during it, or a call that cannot be captured) gives an
// empty graph and leaves the stream usable; one that works replays its launches.
TEST(CudaGpu, GraphCaptureFallsBackCleanly) {
  DECODEBENCH_REQUIRE_GPU();
  cuda::CudaStream stream;
  std::string why;
  EXPECT_TRUE(cuda::CudaGraphExec::capture(
                  stream.get(), [] { return false; }, &why)
                  .empty());
  EXPECT_NE(why, "");
  why.clear();
  const cudaStream_t s = stream.get();
  EXPECT_TRUE(cuda::CudaGraphExec::capture(
                  s, [s] { return cudaStreamSynchronize(s) == cudaSuccess; }, &why)
                  .empty());
  EXPECT_NE(why, "");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // nothing left for the next check to trip on

  // A working capture: a fill of 4 values, replayed.
  cuda::DeviceBuffer d(16);
  k::FillParams f;
  f.dst = d.get();
  f.dtype = DType::f32;
  f.count = 4;
  f.seed = 1;
  cuda::CudaGraphExec graph = cuda::CudaGraphExec::capture(
      s, [&] { return k::cuda::launch_fill(f, s).ok(); }, &why);
  ASSERT_FALSE(graph.empty()) << why;
  DECODEBENCH_CUDA_CHECK(cudaMemsetAsync(d.get(), 0, 16, s));
  graph.launch(s);
  std::vector<float> got(4);
  d.download(got.data(), 16, s);
  EXPECT_NE(got, std::vector<float>(4, 0.f));  // the replay wrote the values
}

TEST(CudaGpu, SkipReasons) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  const k::KernelInfo& kernel = k::kernel_ladder().front();
  // 512 sequences x 128k tokens x 8 KV heads x 128 x 2 B = 137 GB each of K and V.
  WorkloadSpec huge = odd_spec(kernel, 512, ContextSpec::fixed(1 << 17));
  huge.hit_rate = 0;
  huge.model.num_kv_heads = 8;
  huge.model.num_q_heads = 64;
  const std::string reason = b->skip_reason(huge, kernel.name);
  EXPECT_NE(reason.find("needs"), std::string::npos) << reason;
  EXPECT_NE(reason.find("GB free"), std::string::npos) << reason;
  EXPECT_NE(
      b->skip_reason(odd_spec(kernel, 1, ContextSpec::fixed(8)), "no-such-kernel").find("valid:"),
      std::string::npos);
  EXPECT_EQ(b->skip_reason(odd_spec(kernel, 1, ContextSpec::fixed(8)), kernel.name), "");
  const std::string chosen = b->choose_kernel(odd_spec(kernel, 1, ContextSpec::fixed(8)));
  EXPECT_EQ(b->skip_reason(odd_spec(kernel, 1, ContextSpec::fixed(8)), chosen), "") << chosen;
}

// Planted faults in the block tables: every rung refuses them at prepare, on the host, with the
// registry's sentence, before anything is uploaded or launched (the kernels would fault on
// them). An out-of-range entry its sequence never reads is accepted, and the point matches the
// reference.
TEST(CudaGpu, BadBlockTablesAreRefusedBeforeAnyLaunch) {
  DECODEBENCH_REQUIRE_GPU();
  auto b = make_cuda_backend(0);
  for (const k::KernelInfo& kernel : k::kernel_ladder()) {
    for (const test::PlantedTable& c :
         test::planted_tables(odd_spec(kernel, 3, ContextSpec::fixed(40)))) {
      SCOPED_TRACE(c.name + ", kernel " + kernel.name);
      const Workload& w = c.workload;
      if (c.refusal.empty()) {
        const Comparison cmp = compare_outputs(run_point(*b, w, kernel.name), reference_decode(w),
                                               w.spec.model.num_q_heads, w.spec.model.head_dim,
                                               tolerance_for(w.spec.q_dtype, w.spec.kv_dtype));
        EXPECT_TRUE(cmp.ok) << cmp.report;
        continue;
      }
      std::vector<std::string> parts = c.refusal;
      parts.push_back("cuda backend: kernel '" + kernel.name + "' does not take ");
      test::expect_input_error([&] { (void)b->prepare(w, kernel.name, TimingOptions{}); }, parts);
    }
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing faulted
}

// A planted device fault (block-table entries far outside the pool: an illegal address) must
// surface as a RuntimeFailure, the harness's signal to end the sweep and keep what it has.
// prepare() refuses such tables on the host, so the fault is launched past it, straight through
// the launcher, whose device scope cannot read the tables.
TEST(CudaGpu, DeviceFaultSurfacesAsRuntimeFailure) {
  DECODEBENCH_REQUIRE_GPU();
  const k::KernelInfo* kernel = nullptr;  // a rung that needs neither workspace nor plan
  for (const k::KernelInfo& info : k::kernel_ladder()) {
    if (!kernel && !info.uses_workspace && !info.prefix_aware) kernel = &info;
  }
  if (!kernel) GTEST_SKIP() << "every compiled rung needs a workspace or a prefix plan";
  auto b = make_cuda_backend(0);
  const Workload w = make_workload(odd_spec(*kernel, 3, ContextSpec::fixed(64)));
  auto point = b->prepare(w, kernel->name, TimingOptions{});
  point->run();

  std::vector<std::int32_t> bad = w.layout.block_tables;
  for (std::int32_t& id : bad) {
    if (id >= 0) id = 1 << 30;
  }
  k::PagedDecodeParams host = w.params();
  host.block_tables = bad.data();
  EXPECT_NE(k::unsupported_reason(*kernel, host, k::CheckScope::layout), "");
  cuda::DeviceBuffer q(w.q.size()), out(w.q.size()), k_cache(w.k_cache.size()),
      v_cache(w.v_cache.size()), tables(bad.size() * sizeof(std::int32_t)),
      lens(w.layout.context_lens.size() * sizeof(std::int32_t));
  tables.upload(bad.data(), tables.bytes(), /*stream=*/nullptr);
  lens.upload(w.layout.context_lens.data(), lens.bytes(), /*stream=*/nullptr);
  k::PagedDecodeParams device = host;
  device.q = q.get();
  device.out = out.get();
  device.k_cache = k_cache.get();
  device.v_cache = v_cache.get();
  device.block_tables = tables.as<std::int32_t>();
  device.context_lens = lens.as<std::int32_t>();
  const k::LaunchResult r = k::cuda::launch_paged_decode(kernel->name, device, /*stream=*/nullptr);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
  // The error is sticky: whatever comes next fails the same way rather than returning garbage.
  EXPECT_THROW(point->run(), RuntimeFailure);
  EXPECT_THROW((void)point->output(), RuntimeFailure);
}

}  // namespace
}  // namespace decodebench
