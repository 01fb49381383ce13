// Cold samples by rotation (src/backends/cpu/cpu_cold.h): the plan at its boundaries, the
// checker and a planted rotation too short to be cold, and points run through the cpu backend
// with rotation and with the flush. No test asserts a timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_ceilings.h"
#include "backends/cpu/cpu_cold.h"
#include "backends/cpu/cpu_layer.h"
#include "reference/reference.h"
#include "workload/byte_model.h"
#include "workload/workload.h"

namespace decodebench {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kBig = std::int64_t{1} << 50;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

bool cold(const cpu::ColdRotationPlan& p, std::int64_t step, std::int64_t llc) {
  const auto turn = cpu::rotation_schedule(p.copies, p.distance, step, p.copy_bytes);
  return cpu::rotation_cold_error(turn, llc).empty();
}

// 4 MiB step and copy against a 32 MiB LLC: a sample touches 8 MiB, so 8 samples cover 2x the
// LLC: distance 8, 17 copies, 68 MiB.
TEST(CpuColdRotationPlan, FitsTheCap) {
  const auto p = cpu::plan_cold_rotation(4 * kMiB, 4 * kMiB, 32 * kMiB, kBig);
  EXPECT_EQ(p.flush_reason, "");
  EXPECT_EQ(p.copies, 17);
  EXPECT_EQ(p.distance, 8);
  EXPECT_EQ(p.bytes(), 68 * kMiB);
  EXPECT_TRUE(cold(p, 4 * kMiB, 32 * kMiB));
  // The cap's edge: exactly the copies' bytes fits, a byte less does not.
  EXPECT_EQ(cpu::plan_cold_rotation(4 * kMiB, 4 * kMiB, 32 * kMiB, 68 * kMiB).copies, 17);
  const auto over = cpu::plan_cold_rotation(4 * kMiB, 4 * kMiB, 32 * kMiB, 68 * kMiB - 1);
  EXPECT_EQ(over.copies, 0);
  EXPECT_NE(over.flush_reason.find("17 copies"), std::string::npos) << over.flush_reason;
  EXPECT_NE(over.flush_reason.find("over the rotation cap"), std::string::npos)
      << over.flush_reason;
  EXPECT_EQ(cpu::plan_cold_rotation(4 * kMiB, 4 * kMiB, 32 * kMiB, 0).copies, 0);
}

// A step of 2x the LLC or more flushes and says why; a byte less still rotates (3 copies: each
// sample touches more than 2x the LLC with its paired read).
TEST(CpuColdRotationPlan, OneStepOverTwiceTheCache) {
  const auto at = cpu::plan_cold_rotation(64 * kMiB, 64 * kMiB, 32 * kMiB, kBig);
  EXPECT_EQ(at.copies, 0);
  EXPECT_NE(at.flush_reason.find("2x the last-level cache"), std::string::npos) << at.flush_reason;
  const auto under = cpu::plan_cold_rotation(64 * kMiB - 1, 64 * kMiB, 32 * kMiB, kBig);
  EXPECT_EQ(under.copies, 3);
  EXPECT_TRUE(cold(under, 64 * kMiB - 1, 32 * kMiB));
}

TEST(CpuColdRotationPlan, UnknownCacheOrNothingToCopy) {
  const auto zero = cpu::plan_cold_rotation(4 * kMiB, 4 * kMiB, 0, kBig);
  EXPECT_EQ(zero.copies, 0);
  EXPECT_NE(zero.flush_reason.find("unknown"), std::string::npos) << zero.flush_reason;
  EXPECT_EQ(cpu::plan_cold_rotation(0, 4 * kMiB, 32 * kMiB, kBig).copies, 0);
  EXPECT_EQ(cpu::plan_cold_rotation(4 * kMiB, 0, 32 * kMiB, kBig).copies, 0);
}

// Over many shapes the plan is cold by the checker, and minimal: no rotation of one or two copies
// fewer is cold at any distance (checked where the copies are few: every distance is a turn).
TEST(CpuColdRotationPlan, ColdAndMinimal) {
  const std::int64_t llc = 32 * kMiB;
  for (std::int64_t step :
       {std::int64_t{4096}, 300 * std::int64_t{1024}, 1 * kMiB, 5 * kMiB, 21 * kMiB, 63 * kMiB}) {
    for (std::int64_t copy : {step, step + 12345, 2 * step}) {
      const auto p = cpu::plan_cold_rotation(step, copy, llc, kBig);
      ASSERT_GE(p.copies, 3) << step << " " << copy;
      EXPECT_TRUE(cold(p, step, llc)) << step << " " << copy;
      if (p.copies > 200) continue;
      for (int fewer : {p.copies - 1, p.copies - 2}) {
        for (int d = 0; d < fewer; ++d) {
          EXPECT_FALSE(
              cpu::rotation_cold_error(cpu::rotation_schedule(fewer, d, step, copy), llc).empty())
              << step << " " << copy << " " << fewer << " copies, distance " << d;
        }
      }
    }
  }
}

// The checker on a hand-counted turn: 3 copies, no paired read, 10-byte steps: 20 bytes between
// two steps on one copy, cold for an LLC of 10 bytes and not 11; one copy has nothing between.
TEST(CpuColdRotationCheck, CountsTheBytesBetweenReuses) {
  const auto turn = cpu::rotation_schedule(3, 0, 10, 0);
  ASSERT_EQ(turn.size(), 3u);
  EXPECT_EQ(cpu::min_bytes_between_reuses(turn), 20);
  EXPECT_EQ(cpu::rotation_cold_error(turn, 10), "");
  EXPECT_NE(cpu::rotation_cold_error(turn, 11), "");
  EXPECT_EQ(cpu::min_bytes_between_reuses(cpu::rotation_schedule(1, 0, 10, 0)), 0);
  EXPECT_EQ(cpu::min_bytes_between_reuses({}), -1);
  // With paired reads: 5 copies at distance 2, reads of 4 and steps of 10: copy 0's step (sample
  // 0) is followed by samples 1 and 2 (28) before its read (sample 3), and its read by step 3,
  // sample 4 and the next turn's first read (28) before its step.
  EXPECT_EQ(cpu::min_bytes_between_reuses(cpu::rotation_schedule(5, 2, 10, 4)), 28);
  EXPECT_NE(cpu::rotation_cold_error(turn, 0), "");  // unknown cache: never cold
}

TEST(CpuColdRotationCheck, StreamReadReadsEveryWord) {
  std::vector<std::uint64_t> words(1000);
  std::uint64_t x = 0;
  for (std::size_t i = 0; i < words.size(); ++i) x ^= (words[i] = i * 0x9E3779B97F4A7C15ull);
  const auto* bytes = reinterpret_cast<const std::byte*>(words.data());
  EXPECT_EQ(cpu::stream_read(bytes, words.size() * 8, 2), x);
  EXPECT_EQ(cpu::stream_read(bytes, words.size() * 8 + 7, 1), x);  // a partial word: not read
}

// 4 sequences of 256 tokens, 8 KV heads of 128 f16: a 4 MiB step.
WorkloadSpec rotation_spec() {
  WorkloadSpec s;
  s.model = ModelShape{"test", 8, 8, 128, 1, ""};
  s.batch = 4;
  s.context = ContextSpec::fixed(256);
  s.block_size = 16;
  s.seed = 11;
  return s;
}

// Copies are the same bytes, so every copy's step gives the workload's own output.
TEST(CpuColdRotation, EveryCopyGivesTheSameOutput) {
  WorkloadSpec spec = rotation_spec();
  spec.hit_rate = 0.5;  // shared blocks: the tables are copied with the pool
  const Workload w = make_workload(spec);
  for (bool cascade : {false, true}) {
    cpu::CpuAttention a(w, cascade);
    a.run();
    const std::vector<std::byte> own(a.output().begin(), a.output().end());
    a.make_copies(3);
    ASSERT_EQ(a.copies(), 3);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(a.copy(i).size(), static_cast<std::size_t>(a.copy_bytes()));
      std::fill(const_cast<std::byte*>(a.output().data()),
                const_cast<std::byte*>(a.output().data()) + a.output().size(), std::byte{0});
      a.run_copy(i);
      EXPECT_TRUE(std::equal(own.begin(), own.end(), a.output().begin())) << "copy " << i;
    }
  }
}

// The copies' buffer outlives its point: the next point that fits reuses its mapped pages (a
// fresh GB per point is seconds of page faults on a VM); a larger one, or a point while another
// holds the buffer, gets a buffer of its own.
TEST(HostBufferCache, ReusesTheKeptBufferWhenItFits) {
  cpu::HostBufferCache cache;
  EXPECT_EQ(cache.kept_bytes(), 0u);
  cpu::HostBuffer a = cache.take(1000);
  ASSERT_GE(a.size(), 1000u);
  const std::byte* at = a.data();
  cpu::HostBuffer b = cache.take(1000);  // a is out: b is another buffer
  EXPECT_NE(b.data(), at);
  cache.give(std::move(a));
  EXPECT_EQ(a.size(), 0u) << "a moved-from buffer holds nothing";
  EXPECT_GE(cache.kept_bytes(), 1000u);
  cpu::HostBuffer c = cache.take(900);  // fits: the same pages
  EXPECT_EQ(c.data(), at);
  EXPECT_EQ(cache.kept_bytes(), 0u);
  cache.give(std::move(c));
  cpu::HostBuffer d = cache.take(1 << 20);  // too small: a new one
  EXPECT_GE(d.size(), std::size_t{1} << 20);
  EXPECT_EQ(cache.kept_bytes(), 0u) << "the small buffer is freed, not kept beside the new one";
  cache.give(std::move(d));
  cache.give(std::move(b));  // smaller than the kept one: dropped
  EXPECT_GE(cache.kept_bytes(), std::size_t{1} << 20);
}

TEST(CpuColdRotation, ConsecutivePointsShareOneBufferAndStayCorrect) {
  const Workload w = make_workload(rotation_spec());
  const auto cache = std::make_shared<cpu::HostBufferCache>();
  const std::byte* first = nullptr;
  for (bool cascade : {false, true}) {
    cpu::CpuAttention a(w, cascade);
    a.run();
    const std::vector<std::byte> own(a.output().begin(), a.output().end());
    a.make_copies(3, cache);
    if (!first) first = a.copy(0).data();
    EXPECT_EQ(a.copy(0).data(), first) << "the second point reuses the first one's buffer";
    // Another point alive at the same time gets its own buffer.
    cpu::CpuAttention other(w, cascade);
    other.make_copies(2, cache);
    EXPECT_NE(other.copy(0).data(), first);
    for (int i = 0; i < 3; ++i) {
      a.run_copy(i);
      EXPECT_TRUE(std::equal(own.begin(), own.end(), a.output().begin())) << "copy " << i;
    }
  }
}

// A cold point rotates where its copies fit: it validates against the reference (its own
// buffers, then a copy's output after the samples), pairs one read per sample, and its timing
// record names the rotation.
TEST(CpuColdRotation, PointRotatesAndValidates) {
  const Workload w = make_workload(rotation_spec());
  const std::int64_t copy_bytes = cpu::CpuAttention(w, false).copy_bytes();
  const auto plan = cpu::plan_cold_rotation(
      byte_model(w.spec, w.layout).min, copy_bytes, cpu::last_level_cache_bytes(),
      cpu::rotation_memory_cap(workload_host_bytes(w.spec, w.layout)));
  if (plan.copies == 0) GTEST_SKIP() << "this host cannot rotate the point: " << plan.flush_reason;
  auto backend = make_cpu_backend();
  auto point = backend->prepare(w, "cpu", {});
  point->run();
  const Comparison cmp = compare_outputs(point->output(), reference_decode(w), 8, 128,
                                         tolerance_for(DType::f16, DType::f16));
  EXPECT_TRUE(cmp.ok) << cmp.report;
  for (int i = 0; i < 3; ++i) EXPECT_GT(point->time_one(), 0.0);
  const std::vector<double> paired = point->paired_read_samples();
  ASSERT_EQ(paired.size(), 3u);
  for (double b : paired) EXPECT_GT(b, 0.0);
  const TimingRecord t = point->timing();
  EXPECT_EQ(cold_method(t), ColdMethod::rotation);
  EXPECT_EQ(t.rotation_copies, plan.copies);
  EXPECT_EQ(t.rotation_bytes, plan.copies * copy_bytes);
  EXPECT_EQ(t.flush_reason, "");
  EXPECT_FALSE(point->flush_record()) << "a rotated point has no flush to record";
  // The last sample's output (copy 2's) is the reference's too.
  EXPECT_TRUE(compare_outputs(point->output(), reference_decode(w), 8, 128,
                              tolerance_for(DType::f16, DType::f16))
                  .ok);
  // --plan's view of the point agrees.
  const auto planned = backend->cold_sample_plan(w.spec, w.layout, false, {}, {});
  EXPECT_EQ(planned.method, ColdMethod::rotation);
  // Warm points neither rotate nor flush.
  TimingOptions warm;
  warm.warm_l2 = true;
  EXPECT_EQ(cold_method(backend->prepare(w, "cpu", warm)->timing()), ColdMethod::warm);
}

// A cap of 0 (DECODEBENCH_CPU_ROTATION_CAP_BYTES) forces the flush, and the record says why.
TEST(CpuColdRotation, PointOverTheCapFlushesAndSaysWhy) {
  ScopedEnv cap("DECODEBENCH_CPU_ROTATION_CAP_BYTES", "0");
  const Workload w = make_workload(rotation_spec());
  auto backend = make_cpu_backend();
  auto point = backend->prepare(w, "cpu", {});
  point->run();
  EXPECT_TRUE(compare_outputs(point->output(), reference_decode(w), 8, 128,
                              tolerance_for(DType::f16, DType::f16))
                  .ok);
  EXPECT_GT(point->time_one(), 0.0);
  EXPECT_EQ(point->paired_read_samples().size(), 1u);
  const TimingRecord t = point->timing();
  EXPECT_EQ(cold_method(t), ColdMethod::flush);
  EXPECT_EQ(t.rotation_copies, 0);
  EXPECT_NE(t.flush_reason.find("over the rotation cap"), std::string::npos) << t.flush_reason;
  // Its flush is recorded for the small_flush self-check: the read against the LLC it beats.
  const auto flush = point->flush_record();
  ASSERT_TRUE(flush);
  EXPECT_EQ(flush->cache_bytes, static_cast<double>(cpu::last_level_cache_bytes()));
  EXPECT_GE(flush->flush_bytes, 2 * flush->cache_bytes);
  EXPECT_EQ(backend->cold_sample_plan(w.spec, w.layout, false, {}, {}).method, ColdMethod::flush);
  EXPECT_EQ(backend->cold_sample_plan(w.spec, w.layout, true, {}, {}).method, ColdMethod::flush);
}

// A planted fault: too few copies forced through the test hook. The backend checks its plan
// with the checker and refuses to time warm steps as cold; the plan's own count passes.
TEST(CpuColdRotation, TooFewCopiesAreCaught) {
  const Workload w = make_workload(rotation_spec());
  const std::int64_t copy_bytes = cpu::CpuAttention(w, false).copy_bytes();
  const auto plan = cpu::plan_cold_rotation(
      byte_model(w.spec, w.layout).min, copy_bytes, cpu::last_level_cache_bytes(),
      cpu::rotation_memory_cap(workload_host_bytes(w.spec, w.layout)));
  if (plan.copies == 0) GTEST_SKIP() << "this host cannot rotate the point: " << plan.flush_reason;
  auto backend = make_cpu_backend();
  for (int copies : {1, 2, plan.copies - 2}) {
    ScopedEnv forced("DECODEBENCH_CPU_ROTATION_COPIES", std::to_string(copies));
    try {
      (void)backend->prepare(w, "cpu", {});
      ADD_FAILURE() << copies << " copies accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("under 2x the last-level cache"), std::string::npos)
          << e.what();
    }
  }
  ScopedEnv forced("DECODEBENCH_CPU_ROTATION_COPIES", std::to_string(plan.copies + 1));
  EXPECT_EQ(backend->prepare(w, "cpu", {})->timing().rotation_copies, plan.copies + 1);
}

}  // namespace
}  // namespace decodebench
