// The `cpu` backend through the Backend interface, and the CPU ceiling kernels (their results,
// never their speed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/planted_tables.h"
#include "common/errors.h"
#include "common/host_facts.h"
#include "reference/reference.h"
#include "support/host_test_util.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

WorkloadSpec small_spec() {
  WorkloadSpec s;
  s.model = ModelShape{"test", 8, 2, 128, 1, ""};
  s.batch = 5;
  s.context = ContextSpec::ragged(1, 90);
  s.hit_rate = 0.5;
  s.block_size = 16;
  s.seed = 7;
  return s;
}

TEST(CpuBackend, NamesAndKernels) {
  auto backend = make_cpu_backend();
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_EQ(backend->kernel_names(), (std::vector<std::string>{"cpu", "cascade"}));
  EXPECT_EQ(backend->choose_kernel(small_spec()), "cpu");
}

TEST(CpuBackend, DeviceInfo) {
  auto backend = make_cpu_backend();
  const DeviceInfo info = backend->device_info();
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.sm_count, 1);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.mem_bytes, 0);
}

TEST(CpuBackend, SkipReasons) {
  auto backend = make_cpu_backend();
  EXPECT_EQ(backend->skip_reason(small_spec(), "cpu"), "");
  EXPECT_NE(backend->skip_reason(small_spec(), "gqa").find("valid: cpu"), std::string::npos);
  WorkloadSpec huge = small_spec();
  huge.model = ModelShape{"huge", 64, 8, 128, 80, ""};
  huge.batch = 256;
  huge.context = ContextSpec::fixed(131072);
  huge.hit_rate = 0;
  EXPECT_NE(backend->skip_reason(huge, "cpu").find("memory"), std::string::npos);
}

TEST(CpuBackend, PreparedPointMatchesReference) {
  auto backend = make_cpu_backend();
  const Workload w = make_workload(small_spec());
  auto point = backend->prepare(w, "cpu", {});
  point->run();
  const std::vector<float> out = point->output();
  const std::vector<float> ref = reference_decode(w);
  const Comparison cmp = compare_outputs(out, ref, 8, 128, tolerance_for(DType::f16, DType::f16));
  EXPECT_TRUE(cmp.ok) << cmp.report;
  EXPECT_GT(point->time_one(), 0.0);
  EXPECT_THROW(backend->prepare(w, "naive", {}), InputError);
}

// Planted faults in the block tables: both kernels refuse them at prepare with the registry's
// sentence, so no point exists to run (the decode itself trusts the tables). An out-of-range
// entry its sequence never reads is accepted, and the point matches the reference.
TEST(CpuBackend, BadBlockTablesAreRefusedAtPrepare) {
  auto backend = make_cpu_backend();
  for (const test::PlantedTable& c : test::planted_tables(small_spec())) {
    const Workload& w = c.workload;
    for (const char* kernel : {"cpu", "cascade"}) {
      SCOPED_TRACE(c.name + ", kernel " + kernel);
      if (c.refusal.empty()) {
        auto point = backend->prepare(w, kernel, {});
        point->run();
        const Comparison cmp = compare_outputs(point->output(), reference_decode(w), 8, 128,
                                               tolerance_for(DType::f16, DType::f16));
        EXPECT_TRUE(cmp.ok) << cmp.report;
        continue;
      }
      std::vector<std::string> parts = c.refusal;
      parts.push_back("kernel 'cpu' does not take ");  // the CPU decode's terms, both kernels
      test::expect_input_error([&] { (void)backend->prepare(w, kernel, {}); }, parts);
    }
  }
}

TEST(CpuCeilings, SelfChecksPass) {
  auto backend = make_cpu_backend();
  const auto checks = backend->check_ceiling_kernels();
  ASSERT_EQ(checks.size(), 4u);
  for (const auto& c : checks) EXPECT_TRUE(c.ok) << c.name << ": " << c.detail;
}

// Measurement on small buffers: every ceiling is produced and positive (no speed asserted).
TEST(CpuCeilings, MeasureOnSmallBuffers) {
  cpu::CeilingOptions options;
  options.buffer_bytes = 1 << 20;
  options.repetitions = 2;
  options.fma_iterations = 1000;
  ::unsetenv("DECODEBENCH_CEILING_BYTES");
  const Ceilings c = cpu::measure_ceilings(options);
  EXPECT_EQ(c.buffer_bytes, 1 << 20);
  EXPECT_GT(c.read, 0);
  EXPECT_GT(c.copy, 0);
  EXPECT_GT(c.triad, 0);
  EXPECT_GT(c.fma_flops, 0);
  EXPECT_EQ(c.note, "");
  ::setenv("DECODEBENCH_CEILING_BYTES", "65536", 1);
  const Ceilings from_env = cpu::measure_ceilings(options);
  ::unsetenv("DECODEBENCH_CEILING_BYTES");
  EXPECT_EQ(from_env.buffer_bytes, 65536);
  EXPECT_NE(from_env.note.find("DECODEBENCH_CEILING_BYTES"), std::string::npos);
}

// Buffers sized from the cache stop at max_buffer_bytes, and the note says so; an explicit size
// is taken as given.
TEST(CpuCeilings, BuffersFromTheCacheAreCapped) {
  cpu::CeilingOptions options;
  options.llc_multiple = 1e6;  // far past any machine's memory
  options.max_buffer_bytes = 1 << 20;
  options.repetitions = 1;
  options.fma_iterations = 1000;
  ::unsetenv("DECODEBENCH_CEILING_BYTES");
  const Ceilings capped = cpu::measure_ceilings(options);
  EXPECT_EQ(capped.buffer_bytes, 1 << 20);
  EXPECT_NE(capped.note.find("buffers capped at"), std::string::npos) << capped.note;
  options.buffer_bytes = 2 << 20;
  const Ceilings given = cpu::measure_ceilings(options);
  EXPECT_EQ(given.buffer_bytes, 2 << 20);
  EXPECT_EQ(given.note, "");
}

// Each checker catches a planted fault.
TEST(CpuCeilings, ReadCheckerCatchesWrongSum) {
  std::vector<float> x(1024, 1.0f);
  EXPECT_TRUE(cpu::verify_read(x, cpu::read_kernel(x.data(), x.size(), 0)).ok);
  EXPECT_FALSE(cpu::verify_read(x, 1023.0).ok);
}

TEST(CpuCeilings, CopyCheckerCatchesOneWrongElement) {
  std::vector<float> src(1024), dst(1024);
  cpu::fill_pattern(src.data(), src.size(), 1.0f, 0);
  cpu::copy_kernel(src.data(), dst.data(), src.size(), 0);
  EXPECT_TRUE(cpu::verify_copy(src, dst).ok);
  dst[777] += 1.0f;
  const auto check = cpu::verify_copy(src, dst);
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.detail.find("777"), std::string::npos);
}

TEST(CpuCeilings, TriadCheckerCatchesOneWrongElement) {
  std::vector<float> a(1024), b(1024), c(1024);
  cpu::fill_pattern(b.data(), b.size(), 1.0f, 0);
  cpu::fill_pattern(c.data(), c.size(), 2.0f, 0);
  cpu::triad_kernel(a.data(), b.data(), c.data(), 3.0f, a.size(), 0);
  EXPECT_TRUE(cpu::verify_triad(a, b, c, 3.0f).ok);
  a[5] = 0.0f;
  EXPECT_FALSE(cpu::verify_triad(a, b, c, 3.0f).ok);
}

TEST(CpuCeilings, FmaCheckerCatchesWrongValue) {
  const double v = cpu::fma_kernel(500, 0.99f, 0);
  EXPECT_TRUE(cpu::verify_fma(v, 500, 0.99f).ok);
  EXPECT_FALSE(cpu::verify_fma(v * 1.01, 500, 0.99f).ok);
}

TEST(CpuCeilings, KernelsRejectUnchunkedSizes) {
  std::vector<float> x(100);
  EXPECT_THROW(cpu::read_kernel(x.data(), x.size(), 0), InputError);
}

TEST(CpuCeilings, HostFacts) {
  EXPECT_FALSE(cpu_model_name().empty());
  EXPECT_GT(cpu::last_level_cache_bytes(), 0);
  EXPECT_GT(cpu::available_memory_bytes(), 0);
}

// The cold-sample flush reads at least twice the last-level cache (and >= 64 MiB), all of it:
// the sum it returns is the fill pattern's, 1.5 per element (0+1+2+3 per 4).
TEST(CpuCacheFlusher, ReadsTwiceTheLastLevelCache) {
  const std::int64_t llc = 48ll << 20;
  cpu::CacheFlusher flusher(llc, 2);
  EXPECT_GE(flusher.bytes(), static_cast<std::size_t>(2 * llc));
  EXPECT_EQ(flusher.floats() % cpu::kCeilingChunk, 0u);
  EXPECT_EQ(flusher.record().flush_bytes, static_cast<double>(flusher.bytes()));
  EXPECT_EQ(flusher.record().cache_bytes, static_cast<double>(llc));
  for (int i = 0; i < 2 * cpu::CacheFlusher::kRegions; ++i)  // every region, twice round
    EXPECT_DOUBLE_EQ(flusher.flush(), 1.5 * static_cast<double>(flusher.floats())) << "flush " << i;
  cpu::CacheFlusher small(0, 1);  // unknown cache size: the floor
  EXPECT_GE(small.bytes(), std::size_t{64} << 20);
  EXPECT_EQ(small.record().cache_bytes, 0.0);
  EXPECT_DOUBLE_EQ(small.flush(), 1.5 * static_cast<double>(small.floats()));
}

// Eviction leaves contents alone and handles empty, unaligned and multi-line ranges (that it
// empties the caches is a timing fact; README "Cold caches on the CPU" has the measurement).
TEST(CpuCacheFlusher, EvictionKeepsContents) {
  std::vector<std::uint8_t> buf(10000);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::uint8_t>(i * 7);
  const std::vector<std::uint8_t> before = buf;
  cpu::evict_from_caches(buf.data(), 0);
  cpu::evict_from_caches(buf.data() + 3, 1);
  cpu::evict_from_caches(buf.data() + 61, 130, 1);
  cpu::evict_from_caches(buf.data(), buf.size(), 2);
  EXPECT_EQ(buf, before);
}

// Warm and cold points time the same step and both give a positive time.
TEST(CpuBackend, ColdAndWarmSamples) {
  auto backend = make_cpu_backend();
  const Workload w = make_workload(small_spec());
  TimingOptions warm;
  warm.warm_l2 = true;
  for (const TimingOptions& timing : {TimingOptions{}, warm}) {
    auto point = backend->prepare(w, "cpu", timing);
    point->run();
    EXPECT_TRUE(point->paired_read_samples().empty());  // nothing timed yet
    EXPECT_GT(point->time_one(), 0.0);
    EXPECT_GT(point->time_one(), 0.0);
    // Cold samples pair each step with the bandwidth of its timed flush or rotation read; warm
    // ones have none. Only positive and finite: a small point's read of one copy is a few KiB,
    // whose rate on a loaded host says nothing.
    const std::vector<double> paired = point->paired_read_samples();
    if (timing.warm_l2) {
      EXPECT_TRUE(paired.empty());
    } else {
      ASSERT_EQ(paired.size(), 2u);  // one per sample, in order
      for (double b : paired) EXPECT_TRUE(std::isfinite(b) && b > 0) << b;
    }
  }
}

}  // namespace
}  // namespace decodebench
