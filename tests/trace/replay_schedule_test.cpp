// The replay's schedule on hand-made traces small enough to follow by hand (blocks of 4 tokens,
// pages of 2, a model whose token costs 8 bytes read at 8 bytes/s and prefilled at 1 token/s, so
// times are token counts): one request alone, a shared prefix, the batch limit, preemption,
// rejection, ttl, a trace without prefix information, the step cut; step sampling and
// interpolation; and each step's paged layout checked against the trace's sharing (with faults
// planted in a layout to show the checker catches them).
#include "trace/replay_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/errors.h"
#include "support/host_test_util.h"

namespace decodebench {
namespace {

using Ids = std::vector<std::uint64_t>;

constexpr int kBlock = 4;  // trace block tokens
constexpr int kPage = 2;   // the kernels' page

ModelShape tiny_model() {
  ModelShape m;
  m.name = "tiny";
  m.num_q_heads = 1;
  m.num_kv_heads = 1;
  m.head_dim = 2;  // 2 (K, V) x 1 head x 2 x 2 bytes (bf16) x 1 layer = 8 bytes a token
  m.num_layers = 1;
  return m;
}

TraceRequest request(double at, int input, int output, Ids ids) {
  TraceRequest r;
  r.arrival_s = at;
  r.input_tokens = input;
  r.output_tokens = output;
  r.hash_ids = std::move(ids);
  return r;
}

Trace trace_of(std::vector<TraceRequest> requests, bool prefix_info = true) {
  Trace t;
  t.source = "hand.jsonl";
  t.format = prefix_info ? TraceFormat::mooncake : TraceFormat::csv;
  t.block_tokens = kBlock;
  t.has_prefix_info = prefix_info;
  t.requests = std::move(requests);
  return t;
}

// One modeled second per unique KV token read and per prefilled token.
ScheduleConfig config_of(std::int64_t pool_blocks) {
  ScheduleConfig c;
  c.model = tiny_model();
  c.kv_dtype = DType::bf16;
  c.page_tokens = kPage;
  c.kv_pool_bytes = pool_blocks * kBlock * 8;
  c.prefill_tokens_per_s = 1;
  c.decode_read_bytes_per_s = 8;
  return c;
}

std::vector<std::int32_t> contexts_of(const ReplaySchedule& s, std::size_t step) {
  std::vector<std::int32_t> out;
  const DecodeStep& st = s.steps[step];
  for (std::int32_t b = 0; b < st.batch; ++b) out.push_back(s.sequences[st.first + b].context);
  return out;
}

std::vector<std::int32_t> requests_of(const ReplaySchedule& s, std::size_t step) {
  std::vector<std::int32_t> out;
  const DecodeStep& st = s.steps[step];
  for (std::int32_t b = 0; b < st.batch; ++b) out.push_back(s.sequences[st.first + b].request);
  return out;
}

using test::input_error_message;

// ---- the schedule -------------------------------------------------------------------------

TEST(ReplaySchedule, OneRequestAlone) {
  // 10 prompt tokens prefilled by t = 10, then contexts 11, 12, 13 (output 4: the prefill's
  // token and three decode steps), each step taking its context in seconds.
  const Trace t = trace_of({request(0, 10, 4, {1, 2, 3})});
  const ReplaySchedule s = simulate_schedule(t, config_of(100));
  ASSERT_EQ(s.steps.size(), 3u);
  const double starts[] = {10, 21, 33};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(contexts_of(s, i), std::vector<std::int32_t>{static_cast<std::int32_t>(11 + i)});
    EXPECT_EQ(s.steps[i].kv_tokens, 11 + static_cast<std::int64_t>(i));
    EXPECT_EQ(s.steps[i].shared_tokens, 0);
    EXPECT_DOUBLE_EQ(s.steps[i].modeled_s, 11.0 + static_cast<double>(i));
    EXPECT_DOUBLE_EQ(s.steps[i].start_s, starts[i]);
  }
  EXPECT_DOUBLE_EQ(s.end_s, 46);
  EXPECT_FALSE(s.cut);
  EXPECT_EQ(s.pool_blocks, 100);
  EXPECT_DOUBLE_EQ(s.kv_bytes_per_token, 8);
  EXPECT_DOUBLE_EQ(s.weights_bytes_per_step, 0);  // no layer shape
  EXPECT_EQ(s.input_tokens, 10);
  EXPECT_EQ(s.hit_tokens, 0);
  EXPECT_DOUBLE_EQ(s.hit_rate, 0);
  EXPECT_EQ(s.prefill_tokens, 10);
  EXPECT_DOUBLE_EQ(s.prefill_s, 10);
  EXPECT_DOUBLE_EQ(s.decode_s, 36);
  EXPECT_EQ(s.decode_tokens, 3);
  EXPECT_EQ(s.cache.inserted, 3);
  EXPECT_EQ(s.cache.peak_blocks, 4);  // three prompt blocks and one for the 4 generated tokens
  ASSERT_EQ(s.requests.size(), 1u);
  const RequestOutcome& r = s.requests[0];
  EXPECT_DOUBLE_EQ(r.admitted_s, 0);
  EXPECT_DOUBLE_EQ(r.finished_s, 46);
  EXPECT_DOUBLE_EQ(r.decode_kv_tokens, 11 + 12 + 13);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_FALSE(r.rejected);
}

TEST(ReplaySchedule, RateScaleDividesArrivals) {
  const Trace t = trace_of({request(6, 10, 4, {1, 2, 3})});
  ScheduleConfig c = config_of(100);
  c.rate_scale = 2;
  const ReplaySchedule s = simulate_schedule(t, c);
  EXPECT_DOUBLE_EQ(s.requests[0].arrival_s, 3);
  EXPECT_DOUBLE_EQ(s.requests[0].admitted_s, 3);
  EXPECT_DOUBLE_EQ(s.end_s, 49);
}

TEST(ReplaySchedule, OutputOfOneFinishesAtPrefill) {
  const Trace t = trace_of({request(0, 4, 1, {1})});
  const ReplaySchedule s = simulate_schedule(t, config_of(100));
  EXPECT_TRUE(s.steps.empty());
  EXPECT_DOUBLE_EQ(s.requests[0].finished_s, 4);
  EXPECT_DOUBLE_EQ(s.end_s, 4);
}

TEST(ReplaySchedule, TwoRequestsSharingAPrefixArrivingTogether) {
  // A's prefill inserts ids 1, 2, 3 before B is admitted, so B finds 1, 2 (8 tokens) and
  // prefills its one other token. At both steps ids 1 and 2 (4 whole-page tokens each) are held
  // twice: 8 shared tokens.
  const Trace t = trace_of({request(0, 10, 3, {1, 2, 3}), request(0, 9, 3, {1, 2, 4})});
  const ReplaySchedule s = simulate_schedule(t, config_of(100));
  EXPECT_EQ(s.requests[0].hit_tokens, 0);
  EXPECT_EQ(s.requests[1].hit_tokens, 8);
  EXPECT_DOUBLE_EQ(s.requests[1].admitted_s, 10);
  EXPECT_EQ(s.hit_tokens, 8);
  EXPECT_EQ(s.input_tokens, 19);
  EXPECT_DOUBLE_EQ(s.hit_rate, 8.0 / 19.0);
  EXPECT_EQ(s.prefill_tokens, 11);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(contexts_of(s, 0), (std::vector<std::int32_t>{11, 10}));
  EXPECT_EQ(contexts_of(s, 1), (std::vector<std::int32_t>{12, 11}));
  EXPECT_EQ(s.steps[0].kv_tokens, 21);
  EXPECT_EQ(s.steps[0].shared_tokens, 8);
  EXPECT_DOUBLE_EQ(s.steps[0].modeled_s, 13);
  EXPECT_DOUBLE_EQ(s.steps[0].start_s, 11);
  EXPECT_EQ(s.steps[1].kv_tokens, 23);
  EXPECT_EQ(s.steps[1].shared_tokens, 8);
  EXPECT_DOUBLE_EQ(s.steps[1].modeled_s, 15);
  EXPECT_DOUBLE_EQ(s.end_s, 39);
  EXPECT_EQ(s.cache.inserted, 4);
}

TEST(ReplaySchedule, MaxBatchLimitsTheBatch) {
  // C waits for a seat: A finishes after the first step, C is admitted at 18.
  const Trace t = trace_of({request(0, 4, 2, {1}), request(0, 4, 3, {2}), request(0, 4, 2, {3})});
  ScheduleConfig c = config_of(100);
  c.max_batch = 2;
  const ReplaySchedule s = simulate_schedule(t, c);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(requests_of(s, 0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(contexts_of(s, 0), (std::vector<std::int32_t>{5, 5}));
  EXPECT_DOUBLE_EQ(s.steps[0].start_s, 8);
  EXPECT_DOUBLE_EQ(s.requests[2].admitted_s, 18);
  EXPECT_EQ(requests_of(s, 1), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(contexts_of(s, 1), (std::vector<std::int32_t>{6, 5}));
  EXPECT_DOUBLE_EQ(s.steps[1].start_s, 22);
  EXPECT_DOUBLE_EQ(s.end_s, 33);
  for (const DecodeStep& st : s.steps) EXPECT_LE(st.batch, 2);
  // Without the limit all three share the first step.
  const ReplaySchedule wide = simulate_schedule(t, config_of(100));
  EXPECT_EQ(wide.steps[0].batch, 3);
}

TEST(ReplaySchedule, APoolTooSmallPreemptsTheLatestAndRecomputes) {
  // Pool of 4 blocks. A (1 prompt block) holds 2 blocks; B arrives at 20, is admitted at 22 with
  // 2 more. At the next step A's 5th generated token needs a third block: the pool is full and
  // nothing is evictable, so B (the latest) is preempted. B cannot come back while A holds
  // 3 blocks and B's cached prompt block 1 more; A's 9th token evicts that block, and after A
  // finishes (t = 76) B prefills its 4 prompt tokens and its 1 generated token again.
  const Trace t = trace_of({request(0, 4, 9, {1}), request(20, 4, 2, {2})});
  const ReplaySchedule s = simulate_schedule(t, config_of(4));
  ASSERT_EQ(s.steps.size(), 9u);
  const std::int32_t a_contexts[] = {5, 6, 7, 8, 9, 10, 11, 12};
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(requests_of(s, i), std::vector<std::int32_t>{0}) << i;
    EXPECT_EQ(contexts_of(s, i), std::vector<std::int32_t>{a_contexts[i]}) << i;
  }
  EXPECT_EQ(requests_of(s, 8), std::vector<std::int32_t>{1});
  EXPECT_EQ(contexts_of(s, 8), std::vector<std::int32_t>{5});
  EXPECT_DOUBLE_EQ(s.steps[3].start_s, 26);  // after B's first prefill
  EXPECT_EQ(s.preemptions, 1);
  EXPECT_EQ(s.recomputed_tokens, 5);
  EXPECT_EQ(s.prefill_tokens, 4 + 4 + 5);
  EXPECT_EQ(s.cache.evicted, 1);
  EXPECT_LE(s.cache.peak_blocks, 4);
  const RequestOutcome& b = s.requests[1];
  EXPECT_DOUBLE_EQ(b.admitted_s, 22);
  EXPECT_EQ(b.hit_tokens, 0);
  EXPECT_EQ(b.preemptions, 1);
  EXPECT_EQ(b.recomputed_tokens, 5);
  EXPECT_DOUBLE_EQ(b.finished_s, 86);
  EXPECT_DOUBLE_EQ(s.requests[0].finished_s, 76);
  EXPECT_EQ(s.requests[0].preemptions, 0);
  EXPECT_DOUBLE_EQ(s.end_s, 86);
}

TEST(ReplaySchedule, APreemptedRequestGoesBackToTheHeadOfTheQueue) {
  // As above with C arriving at 23, queued behind the full pool before B is preempted at 26:
  // B is readmitted first when A finishes at 76 (prefill 5), then C (prefill 4).
  const Trace t = trace_of({request(0, 4, 9, {1}), request(20, 4, 2, {2}), request(23, 4, 2, {3})});
  const ReplaySchedule s = simulate_schedule(t, config_of(4));
  ASSERT_EQ(s.steps.size(), 9u);
  EXPECT_EQ(requests_of(s, 8), (std::vector<std::int32_t>{1, 2}));
  EXPECT_DOUBLE_EQ(s.requests[2].admitted_s, 81);
  EXPECT_DOUBLE_EQ(s.steps[8].start_s, 85);
  EXPECT_EQ(s.preemptions, 1);
}

TEST(ReplaySchedule, TheLatestPreemptsItselfAndWaitsForRoomForItsNextStep) {
  // Pool of 5 blocks. B is admitted one token behind A; A's 5th token takes the pool's last
  // block, so at B's 5th B itself is the latest and is preempted. Readmitted it would need a
  // second private block at once: it waits until A (16 tokens, up to 5 blocks, evicting B's
  // cached prompt block) finishes at 206, then prefills its 4 prompt and 4 generated tokens.
  const Trace t = trace_of({request(0, 4, 16, {1}), request(5, 4, 9, {2})});
  const ReplaySchedule s = simulate_schedule(t, config_of(5));
  ASSERT_EQ(s.steps.size(), 15u + 5u);
  EXPECT_EQ(requests_of(s, 0), std::vector<std::int32_t>{0});
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(requests_of(s, i), (std::vector<std::int32_t>{0, 1})) << i;
  }
  EXPECT_EQ(contexts_of(s, 3), (std::vector<std::int32_t>{8, 7}));
  EXPECT_EQ(contexts_of(s, 4), std::vector<std::int32_t>{9});   // B preempted itself
  EXPECT_EQ(contexts_of(s, 15), std::vector<std::int32_t>{8});  // B again, after A
  EXPECT_EQ(s.preemptions, 1);
  EXPECT_EQ(s.requests[0].preemptions, 0);
  EXPECT_EQ(s.requests[1].preemptions, 1);
  EXPECT_EQ(s.requests[1].recomputed_tokens, 8);
  EXPECT_EQ(s.cache.evicted, 1);
  EXPECT_DOUBLE_EQ(s.requests[0].finished_s, 206);
  EXPECT_DOUBLE_EQ(s.steps[15].start_s, 214);
  EXPECT_DOUBLE_EQ(s.requests[1].finished_s, 264);
  EXPECT_DOUBLE_EQ(s.end_s, 264);
}

TEST(ReplaySchedule, UnderPressureEveryRequestStillFinishes) {
  // Many requests sharing prefixes through a pool a few requests wide: preemption happens,
  // and every request finishes with exactly output - 1 decode steps.
  std::mt19937 rng(11);
  std::vector<TraceRequest> rs;
  for (int i = 0; i < 40; ++i) {
    const int input = 3 + static_cast<int>(rng() % 14);
    const int blocks = (input + kBlock - 1) / kBlock;
    const std::uint64_t root = rng() % 3;
    Ids ids;
    for (int j = 0; j < blocks; ++j) {
      const bool full = (j + 1) * kBlock <= input;  // equal ids cover equal tokens
      ids.push_back(j < 2 && full ? root * 100 + static_cast<std::uint64_t>(j)
                                  : 1000 + static_cast<std::uint64_t>(i) * 10 + j);
    }
    rs.push_back(request(i * 2.0, input, 2 + static_cast<int>(rng() % 12), ids));
  }
  const Trace t = trace_of(rs);
  const ReplaySchedule s = simulate_schedule(t, config_of(14));
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.recomputed_tokens, 0);
  EXPECT_EQ(s.rejected, 0);
  std::map<std::int32_t, std::int64_t> steps_of;
  for (const StepSequence& q : s.sequences) ++steps_of[q.request];
  std::int64_t preemptions = 0;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    EXPECT_GE(s.requests[i].finished_s, 0) << i;
    EXPECT_EQ(steps_of[static_cast<std::int32_t>(i)], rs[i].output_tokens - 1) << i;
    preemptions += s.requests[i].preemptions;
  }
  EXPECT_EQ(preemptions, s.preemptions);
  EXPECT_LE(s.cache.peak_blocks, 14);
}

// Host tier: a pool of 3 blocks, a link of 4 B/s (2 s a token, 8 s a block) to the device and
// 8 B/s back. A (t 0) leaves block 1 cached; B (t 10, two blocks and one private) pushes it out
// to the host tier; C (t 30) finds it there. Always: C waits 8 s for the reload, with nothing
// else running (idle), and its first token comes at 38. Never: C recomputes its 4 tokens (t 34).
// Cheaper: the same (4 s of prefill < 8 s of link); with a 32 B/s link the reload (1 s) wins.
ReplaySchedule host_tier_run(ReloadPolicy reload, double to_device, double host_tokens = 100) {
  const Trace t =
      trace_of({request(0, 4, 2, {1}), request(10, 8, 2, {2, 3}), request(30, 4, 2, {1})});
  ScheduleConfig c = config_of(3);
  c.host_capacity_tokens = host_tokens;
  c.link_to_device = to_device;
  c.link_to_host = 8;
  c.reload = reload;
  return simulate_schedule(t, c);
}

TEST(ReplaySchedule, AHostHitWaitsForItsReloadOverTheLink) {
  const ReplaySchedule s = host_tier_run(ReloadPolicy::always, 4);
  const RequestOutcome& c = s.requests[2];
  EXPECT_DOUBLE_EQ(c.admitted_s, 30);
  EXPECT_EQ(c.hit_tokens, 4);
  EXPECT_DOUBLE_EQ(c.link_wait_s, 8);
  EXPECT_DOUBLE_EQ(c.first_token_s, 38);
  EXPECT_DOUBLE_EQ(c.finished_s, 43);  // one step of context 5
  EXPECT_EQ(s.hit_tokens, 4);
  EXPECT_EQ(s.tiers.hit_tokens_hbm, 0);
  EXPECT_EQ(s.tiers.hit_tokens_host, 4);
  EXPECT_EQ(s.tiers.host_capacity_blocks, 25);
  EXPECT_EQ(s.tiers.reloads, 1);
  EXPECT_EQ(s.tiers.reloaded_tokens, 4);
  EXPECT_EQ(s.tiers.recomputed_tokens, 0);
  EXPECT_EQ(s.tiers.blocks.promoted, 1);
  // Block 1 for B; then block 3 (B's least recent: its tail was touched first) for C's
  // private block.
  EXPECT_EQ(s.tiers.blocks.demoted, 2);
  EXPECT_EQ(s.tiers.blocks.dropped, 0);
  EXPECT_DOUBLE_EQ(s.tiers.link_bytes_to_hbm, 32);
  EXPECT_DOUBLE_EQ(s.tiers.link_bytes_to_host, 64);
  EXPECT_DOUBLE_EQ(s.tiers.link_busy_s_to_hbm, 8);
  EXPECT_DOUBLE_EQ(s.tiers.link_busy_s_to_host, 8);
  EXPECT_DOUBLE_EQ(s.tiers.decode_idle_waiting_s, 8);
  EXPECT_EQ(s.prefill_tokens, 4 + 8);  // C's 4 tokens came over the link
  EXPECT_DOUBLE_EQ(s.end_s, 43);
}

TEST(ReplaySchedule, TheReloadPolicyPicksRecomputeWhenTheLinkIsSlower) {
  for (ReloadPolicy p : {ReloadPolicy::never, ReloadPolicy::cheaper}) {
    const ReplaySchedule s = host_tier_run(p, 4);
    const RequestOutcome& c = s.requests[2];
    EXPECT_DOUBLE_EQ(c.link_wait_s, 0) << reload_policy_name(p);
    EXPECT_DOUBLE_EQ(c.first_token_s, 34) << reload_policy_name(p);
    EXPECT_EQ(s.tiers.hit_tokens_host, 4);
    EXPECT_EQ(s.tiers.reloads, 0);
    EXPECT_EQ(s.tiers.recomputed_tokens, 4);
    EXPECT_DOUBLE_EQ(s.tiers.link_bytes_to_hbm, 0);
    EXPECT_EQ(s.prefill_tokens, 4 + 8 + 4);
  }
  const ReplaySchedule fast = host_tier_run(ReloadPolicy::cheaper, 32);
  EXPECT_EQ(fast.tiers.reloads, 1);
  EXPECT_DOUBLE_EQ(fast.requests[2].first_token_s, 31);
  // No host tier: C misses and prefills, nothing crosses a link.
  const ReplaySchedule none = host_tier_run(ReloadPolicy::always, 4, /*host_tokens=*/0);
  EXPECT_EQ(none.hit_tokens, 0);
  EXPECT_DOUBLE_EQ(none.requests[2].first_token_s, 34);
  EXPECT_EQ(none.tiers.blocks.demoted, 0);
  EXPECT_DOUBLE_EQ(none.tiers.link_bytes_to_host, 0);
}

TEST(ReplaySchedule, DisaggregatedPrefillSendsThePromptOverTheLinkWhileOthersDecode) {
  // A prefill node at 1 token/s and a link of 8 B/s (1 s a token). A (t 0): computed 0..4, sent
  // 4..8, decodes from 8 (steps of context 5 and 6). B (t 1): computed 4..8, sent 8..12 (the
  // link was busy with A's), joins A's second step at 13.
  const Trace t = trace_of({request(0, 4, 3, {1}), request(1, 4, 2, {2})});
  ScheduleConfig c = config_of(100);
  c.prefill_link_to_device = 8;
  const ReplaySchedule s = simulate_schedule(t, c);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(contexts_of(s, 0), std::vector<std::int32_t>{5});
  EXPECT_DOUBLE_EQ(s.steps[0].start_s, 8);
  EXPECT_EQ(contexts_of(s, 1), (std::vector<std::int32_t>{6, 5}));
  EXPECT_DOUBLE_EQ(s.steps[1].start_s, 13);
  EXPECT_DOUBLE_EQ(s.requests[0].link_wait_s, 8);
  EXPECT_DOUBLE_EQ(s.requests[1].link_wait_s, 11);
  EXPECT_DOUBLE_EQ(s.requests[1].first_token_s, 13);
  EXPECT_DOUBLE_EQ(s.requests[0].finished_s, 24);
  EXPECT_DOUBLE_EQ(s.requests[1].finished_s, 24);
  EXPECT_DOUBLE_EQ(s.prefill_s, 0);  // this node prefills nothing
  EXPECT_EQ(s.prefill_tokens, 8);
  EXPECT_DOUBLE_EQ(s.tiers.prefill_node_busy_s, 8);
  EXPECT_DOUBLE_EQ(s.tiers.prefill_link_bytes, 64);
  EXPECT_DOUBLE_EQ(s.tiers.prefill_link_busy_s, 8);
  EXPECT_DOUBLE_EQ(s.tiers.decode_idle_waiting_s, 8);
}

TEST(ReplaySchedule, WithTiersAndLinksUnderPressureEveryRequestStillFinishes) {
  // Sequences waiting for a link hold pool blocks; preemption may take them, and a step may
  // find only waiting sequences. Every request still gets exactly output - 1 steps, and the
  // host tier only adds hits.
  std::mt19937 rng(5);
  std::vector<TraceRequest> rs;
  for (int i = 0; i < 60; ++i) {
    const int input = 3 + static_cast<int>(rng() % 14);
    const int blocks = (input + kBlock - 1) / kBlock;
    const std::uint64_t root = rng() % 4;
    Ids ids;
    for (int j = 0; j < blocks; ++j) {
      const bool full = (j + 1) * kBlock <= input;
      ids.push_back(j < 3 && full ? root * 100 + static_cast<std::uint64_t>(j)
                                  : 1000 + static_cast<std::uint64_t>(i) * 10 + j);
    }
    rs.push_back(request(i * 3.0, input, 2 + static_cast<int>(rng() % 12), ids));
  }
  const Trace t = trace_of(rs);
  const ReplaySchedule plain = simulate_schedule(t, config_of(10));
  for (double prefill_link : {0.0, 16.0}) {
    ScheduleConfig c = config_of(10);
    c.host_capacity_tokens = 40;
    c.link_to_device = 4;
    c.link_to_host = 2;
    c.link_overhead_s = 0.5;
    c.prefill_link_to_device = prefill_link;
    const ReplaySchedule s = simulate_schedule(t, c);
    std::map<std::int32_t, std::int64_t> steps_of;
    for (const StepSequence& q : s.sequences) ++steps_of[q.request];
    for (std::size_t i = 0; i < rs.size(); ++i) {
      EXPECT_GE(s.requests[i].finished_s, s.requests[i].first_token_s) << i;
      EXPECT_GE(s.requests[i].first_token_s, s.requests[i].arrival_s) << i;
      EXPECT_EQ(steps_of[static_cast<std::int32_t>(i)], rs[i].output_tokens - 1) << i;
    }
    EXPECT_GT(s.tiers.hit_tokens_host, 0);
    EXPECT_EQ(s.tiers.hit_tokens_hbm + s.tiers.hit_tokens_host, s.hit_tokens);
    EXPECT_GE(s.hit_tokens, plain.hit_tokens);
    EXPECT_LE(s.cache.peak_blocks, 10);
    EXPECT_LE(s.tiers.blocks.host_peak, 10);
  }
}

TEST(ReplaySchedule, ARequestLargerThanThePoolIsRejected) {
  // 3 prompt blocks and 2 for 5 generated tokens exceed 4; 2 + 2 fit exactly.
  const Trace t =
      trace_of({request(0, 12, 5, {1, 2, 3}), request(0, 4, 2, {4}), request(0, 8, 8, {5, 6})});
  const ReplaySchedule s = simulate_schedule(t, config_of(4));
  EXPECT_EQ(s.rejected, 1);
  EXPECT_TRUE(s.requests[0].rejected);
  EXPECT_DOUBLE_EQ(s.requests[0].admitted_s, -1);
  EXPECT_DOUBLE_EQ(s.requests[0].finished_s, -1);
  EXPECT_DOUBLE_EQ(s.requests[1].admitted_s, 0);  // the rejected head does not block it
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(s.requests[i].rejected);
    EXPECT_GE(s.requests[i].finished_s, 0);
  }
  EXPECT_EQ(s.input_tokens, 12);  // of admitted requests only
}

TEST(ReplaySchedule, TtlExpiresBlocksBetweenArrivalsFarApart) {
  // A's blocks are touched at 0; B asks for them at 100.
  const Trace t = trace_of({request(0, 8, 2, {1, 2}), request(100, 8, 2, {1, 2})});
  ScheduleConfig lru = config_of(100);
  EXPECT_EQ(simulate_schedule(t, lru).requests[1].hit_tokens, 8);
  ScheduleConfig ttl = config_of(100);
  ttl.policy = EvictionPolicy::ttl;
  ttl.ttl_s = 50;
  const ReplaySchedule expired = simulate_schedule(t, ttl);
  EXPECT_EQ(expired.requests[1].hit_tokens, 0);
  EXPECT_EQ(expired.cache.expired, 2);
  EXPECT_DOUBLE_EQ(expired.requests[1].admitted_s, 100);
  ttl.ttl_s = 200;
  const ReplaySchedule kept = simulate_schedule(t, ttl);
  EXPECT_EQ(kept.requests[1].hit_tokens, 8);
  EXPECT_EQ(kept.cache.expired, 0);
}

TEST(ReplaySchedule, ATraceWithoutPrefixInformationSharesNothing) {
  // Each prompt holds ceil(8 / 4) = 2 private blocks and 1 for its generated tokens: in a pool
  // of 5 the second request waits for the first to finish.
  const Trace t = trace_of({request(0, 8, 3, {}), request(0, 8, 3, {})}, /*prefix_info=*/false);
  const ReplaySchedule wide = simulate_schedule(t, config_of(100));
  EXPECT_DOUBLE_EQ(wide.hit_rate, 0);
  EXPECT_EQ(wide.hit_tokens, 0);
  EXPECT_EQ(wide.cache.inserted, 0);
  EXPECT_EQ(wide.cache.peak_blocks, 6);
  ASSERT_FALSE(wide.steps.empty());
  EXPECT_EQ(wide.steps[0].batch, 2);
  for (const DecodeStep& st : wide.steps) EXPECT_EQ(st.shared_tokens, 0);
  const PagedLayout layout = step_layout(t, wide, 0, kPage);
  EXPECT_EQ(layout.num_shared_blocks, 0);
  EXPECT_EQ(layout.unique_tokens, wide.steps[0].kv_tokens);

  const ReplaySchedule narrow = simulate_schedule(t, config_of(5));
  EXPECT_DOUBLE_EQ(narrow.requests[0].finished_s, 27);
  EXPECT_DOUBLE_EQ(narrow.requests[1].admitted_s, 27);
  for (const DecodeStep& st : narrow.steps) EXPECT_EQ(st.batch, 1);
}

TEST(ReplaySchedule, MaxStepsCutsTheRun) {
  const Trace t = trace_of({request(0, 10, 4, {1, 2, 3})});
  ScheduleConfig c = config_of(100);
  c.max_steps = 2;
  const ReplaySchedule cut = simulate_schedule(t, c);
  EXPECT_EQ(cut.steps.size(), 2u);
  EXPECT_TRUE(cut.cut);
  EXPECT_DOUBLE_EQ(cut.requests[0].finished_s, -1);
  EXPECT_DOUBLE_EQ(cut.end_s, 33);
  c.max_steps = 3;  // the run ends there anyway
  const ReplaySchedule whole = simulate_schedule(t, c);
  EXPECT_FALSE(whole.cut);
  EXPECT_DOUBLE_EQ(whole.requests[0].finished_s, 46);
}

TEST(ReplaySchedule, WeightsAndKvBytesOfARealModel) {
  // llama-3.1-8b in bf16: per layer qkv 6144 x 4096, o 4096 x 4096, gate_up 28672 x 4096,
  // down 4096 x 14336 = 218,103,808 weights; 32 layers and the LM head 128256 x 4096, 2 bytes
  // each. KV: 2 x 8 heads x 128 x 2 bytes x 32 layers = 131,072 bytes a token.
  Trace t = trace_of({request(0, 512, 2, {7})});
  t.block_tokens = 512;
  ScheduleConfig c = config_of(1);
  c.model = load_model("llama-3.1-8b");
  c.page_tokens = 16;
  c.kv_pool_bytes = 10 * 512 * std::int64_t{131072} + 5;
  c.decode_read_bytes_per_s = 1e12;
  const ReplaySchedule s = simulate_schedule(t, c);
  const double weights = 32.0 * 218103808 * 2 + 128256.0 * 4096 * 2;
  EXPECT_DOUBLE_EQ(s.weights_bytes_per_step, weights);
  EXPECT_DOUBLE_EQ(s.kv_bytes_per_token, 131072);
  EXPECT_EQ(s.pool_blocks, 10);
  ASSERT_EQ(s.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(s.steps[0].modeled_s, (weights + 513.0 * 131072) / 1e12);
}

// A windowed layer reads each sequence's pages from the one holding L - W on, a full layer the
// unique pages; the modeled time reads what the layers read, not every layer's whole context.
TEST(ReplaySchedule, WindowedLayersReadTheirWindowOnly) {
  // Four tiny layers (8 bytes a token each), layers 0 and 2 windowed at W = 6 tokens, pages of
  // 2: a sequence of context L reads L - 2 * floor(max(0, L - 6) / 2) tokens in those.
  ModelShape m = tiny_model();
  m.num_layers = 4;
  m.sliding_window = 6;
  m.window_local = 1;
  m.window_every = 2;
  const Trace t = trace_of({request(0, 20, 3, {1, 2, 3, 4, 5}), request(0, 9, 3, {1, 2, 9})});
  ScheduleConfig c = config_of(100);
  c.model = m;
  c.kv_pool_bytes = 100 * kBlock * 8 * 4;
  const ReplaySchedule s = simulate_schedule(t, c);
  ASSERT_FALSE(s.steps.empty());
  const auto window_tokens = [](std::int64_t l) {
    return l - 2 * (std::max<std::int64_t>(0, l - 6) / 2);
  };
  for (const DecodeStep& st : s.steps) {
    std::int64_t windowed = 0;
    for (std::int32_t b = 0; b < st.batch; ++b)
      windowed += window_tokens(s.sequences[st.first + b].context);
    const double want = 8.0 * (2.0 * static_cast<double>(st.kv_tokens - st.shared_tokens) +
                               2.0 * static_cast<double>(windowed));
    EXPECT_DOUBLE_EQ(st.read_bytes, want);
    EXPECT_LT(st.read_bytes, 8.0 * 4 * static_cast<double>(st.kv_tokens));  // less than all
    EXPECT_DOUBLE_EQ(st.modeled_s, st.read_bytes / c.decode_read_bytes_per_s);
  }
  // The same model without its window reads every layer's unique pages.
  c.model.sliding_window = 0;
  c.model.window_local = c.model.window_every = 0;
  for (const DecodeStep& st : simulate_schedule(t, c).steps)
    EXPECT_DOUBLE_EQ(st.read_bytes, 8.0 * 4 * static_cast<double>(st.kv_tokens - st.shared_tokens));
}

TEST(ReplaySchedule, ValidationNamesTheFlag) {
  const Trace t = trace_of({request(0, 10, 4, {1, 2, 3})});
  const auto error_of = [&](const std::function<void(ScheduleConfig&)>& edit) {
    ScheduleConfig c = config_of(100);
    edit(c);
    return input_error_message([&] { validate(c, t); });
  };
  EXPECT_EQ(error_of([](ScheduleConfig&) {}), "<no InputError>");
  const auto expect_names = [](const std::string& message, const std::string& flag) {
    EXPECT_NE(message.find(flag), std::string::npos) << message;
  };
  expect_names(error_of([](ScheduleConfig& c) { c.page_tokens = 3; }), "--block-size");
  expect_names(error_of([](ScheduleConfig& c) { c.page_tokens = 8; }), "--block-size");
  expect_names(error_of([](ScheduleConfig& c) { c.page_tokens = 0; }), "--block-size");
  expect_names(error_of([](ScheduleConfig& c) { c.rate_scale = 0; }), "--rate-scale");
  expect_names(
      error_of([](ScheduleConfig& c) { c.rate_scale = std::numeric_limits<double>::infinity(); }),
      "--rate-scale");
  expect_names(error_of([](ScheduleConfig& c) { c.rate_scale = std::nan(""); }), "--rate-scale");
  expect_names(error_of([](ScheduleConfig& c) { c.kv_pool_bytes = 0; }), "--kv-pool");
  expect_names(error_of([](ScheduleConfig& c) { c.kv_pool_bytes = 31; }), "--kv-pool");
  expect_names(error_of([](ScheduleConfig& c) { c.max_batch = 0; }), "--max-batch");
  expect_names(error_of([](ScheduleConfig& c) { c.policy = EvictionPolicy::ttl; }), "--ttl");
  expect_names(error_of([](ScheduleConfig& c) { c.prefill_tokens_per_s = 0; }), "--prefill-rate");
  expect_names(error_of([](ScheduleConfig& c) { c.decode_read_bytes_per_s = -1; }),
               "--decode-read-rate");
  expect_names(error_of([](ScheduleConfig& c) { c.max_steps = -1; }), "--max-steps");
  // Beyond int64 blocks: once cast to -2^63 after the ceilings were measured.
  expect_names(error_of([](ScheduleConfig& c) { c.host_capacity_tokens = 1e30; }),
               "--host-capacity");
  expect_names(error_of([](ScheduleConfig& c) { c.prefill_tokens_per_s = std::nan(""); }),
               "--prefill-rate");
  expect_names(error_of([](ScheduleConfig& c) { c.model.num_kv_heads = 0; }), "--model");
  EXPECT_EQ(error_of([](ScheduleConfig& c) { c.page_tokens = 4; }), "<no InputError>");
  EXPECT_EQ(error_of([](ScheduleConfig& c) { c.kv_pool_bytes = 32; }), "<no InputError>");
  EXPECT_EQ(error_of([](ScheduleConfig& c) {
              c.policy = EvictionPolicy::ttl;
              c.ttl_s = 1;
            }),
            "<no InputError>");
  EXPECT_THROW(simulate_schedule(t,
                                 [] {
                                   ScheduleConfig c = config_of(100);
                                   c.max_batch = 0;
                                   return c;
                                 }()),
               InputError);
}

TEST(ReplaySchedule, ValidationRejectsAnInconsistentTrace) {
  const ScheduleConfig c = config_of(100);
  const auto error_of = [&](std::vector<TraceRequest> rs) {
    return input_error_message([&] { validate(c, trace_of(std::move(rs))); });
  };
  EXPECT_NE(error_of({request(0, 10, 4, {1, 2})}).find("hash ids"), std::string::npos);
  EXPECT_NE(error_of({request(0, 8, 4, {1, 1})}).find("twice"), std::string::npos);
  EXPECT_NE(error_of({request(0, 6, 4, {1, 2}), request(1, 8, 4, {1, 2})}).find("equal content"),
            std::string::npos);
  EXPECT_NE(error_of({request(5, 4, 4, {1}), request(1, 4, 4, {2})}).find("in order"),
            std::string::npos);
  EXPECT_NE(error_of({request(0, 4, 0, {1})}).find(">= 1"), std::string::npos);
  EXPECT_EQ(error_of({request(0, 6, 4, {1, 2}), request(1, 6, 4, {1, 2})}), "<no InputError>");
}

// ---- sampling and interpolation -----------------------------------------------------------

ReplaySchedule schedule_with_kv(const std::vector<std::int64_t>& kv) {
  ReplaySchedule s;
  for (std::int64_t k : kv) {
    DecodeStep st;
    st.kv_tokens = k;
    s.steps.push_back(st);
  }
  return s;
}

TEST(SampleSteps, EvenlySpacedQuantilesWithTheExtremes) {
  // By (kv, index): 1 (10), 3 (10), 5 (20), 2 (30), 0 (50), 4 (70).
  const ReplaySchedule s = schedule_with_kv({50, 10, 30, 10, 70, 20});
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(sample_steps(s, 6), (V{1, 3, 5, 2, 0, 4}));
  EXPECT_EQ(sample_steps(s, 100), (V{1, 3, 5, 2, 0, 4}));
  EXPECT_EQ(sample_steps(s, 2), (V{1, 4}));
  EXPECT_EQ(sample_steps(s, 3), (V{1, 2, 4}));  // ranks 0, 2.5 -> 3, 5
  EXPECT_EQ(sample_steps(s, 1), (V{5}));        // the median
  EXPECT_TRUE(sample_steps(s, 0).empty());
  EXPECT_TRUE(sample_steps(schedule_with_kv({}), 4).empty());
}

TEST(SampleSteps, DistinctSortedAndIncludingTheExtremes) {
  std::mt19937 rng(3);
  std::vector<std::int64_t> kv;
  for (int i = 0; i < 97; ++i) kv.push_back(static_cast<std::int64_t>(rng() % 40));
  const ReplaySchedule s = schedule_with_kv(kv);
  const std::int64_t lo = *std::min_element(kv.begin(), kv.end());
  const std::int64_t hi = *std::max_element(kv.begin(), kv.end());
  for (int n = 2; n <= 100; ++n) {
    const std::vector<std::int64_t> picked = sample_steps(s, n);
    ASSERT_EQ(picked.size(), static_cast<std::size_t>(std::min(n, 97))) << n;
    EXPECT_EQ(std::set<std::int64_t>(picked.begin(), picked.end()).size(), picked.size()) << n;
    for (std::size_t i = 1; i < picked.size(); ++i) {
      const auto a = picked[i - 1], b = picked[i];
      EXPECT_TRUE(kv[a] < kv[b] || (kv[a] == kv[b] && a < b)) << n;
    }
    EXPECT_EQ(kv[picked.front()], lo) << n;
    EXPECT_EQ(kv[picked.back()], hi) << n;
  }
}

TEST(InterpolateDecodeTime, ExactAtSamplesLinearBetweenConstantBeyond) {
  const ReplaySchedule s = schedule_with_kv({10, 20, 30, 40, 5, 25});
  const std::vector<std::int64_t> sampled = {2, 0};  // any order
  const std::vector<double> measured = {3.0, 1.0};
  // 1 (exact), 2 (between), 3 (exact), 3 (beyond), 1 (below), 2.5 (between)
  EXPECT_DOUBLE_EQ(interpolate_decode_time(s, sampled, measured), 12.5);
  // Every step sampled: the sum of the measurements.
  const std::vector<std::int64_t> all = {0, 1, 2, 3, 4, 5};
  const std::vector<double> times = {1, 7, 3, 2, 9, 4};
  EXPECT_DOUBLE_EQ(interpolate_decode_time(s, all, times), 26);
}

TEST(InterpolateDecodeTime, TiedSamplesKeepTheirOwnTimes) {
  // Steps 0 and 1 both read 10 tokens; an unsampled step 3 at 10 takes their mean.
  const ReplaySchedule s = schedule_with_kv({10, 10, 20, 10});
  const std::vector<std::int64_t> sampled = {0, 1, 2};
  const std::vector<double> measured = {1, 3, 5};
  EXPECT_DOUBLE_EQ(interpolate_decode_time(s, sampled, measured), 1 + 3 + 5 + 2);
  EXPECT_THROW(interpolate_decode_time(s, sampled, std::vector<double>{1}), std::invalid_argument);
  EXPECT_THROW(interpolate_decode_time(s, {}, {}), std::invalid_argument);
  EXPECT_DOUBLE_EQ(interpolate_decode_time(schedule_with_kv({}), {}, {}), 0);
}

// ---- step layouts -------------------------------------------------------------------------

// "" when `layout` is step `step` of the schedule at page P as the trace defines it: row b is the
// step's b-th sequence with its context; page p of a row is a whole page of prompt content when
// (p + 1) P <= input, named (hash id of block pP / block, page within the block); every other
// page is the row's own. Same name <-> same physical page, ids dense in order of first
// appearance, unused entries -1, and the read statistics those pages give; else what is wrong.
std::string layout_mismatch(const Trace& t, const ReplaySchedule& s, std::int64_t step, int P,
                            const PagedLayout& layout) {
  const DecodeStep& st = s.steps[static_cast<std::size_t>(step)];
  if (layout.context_lens.size() != static_cast<std::size_t>(st.batch)) return "row count";
  int max_pages = 0;
  for (int b = 0; b < st.batch; ++b) {
    const int ctx = s.sequences[st.first + b].context;
    if (layout.context_lens[b] != ctx) return fmt::format("row {}: context", b);
    max_pages = std::max(max_pages, (ctx + P - 1) / P);
  }
  if (layout.max_blocks_per_seq != max_pages) return "max_blocks_per_seq";
  if (layout.block_tables.size() != static_cast<std::size_t>(st.batch) * max_pages) {
    return "block table size";
  }
  using Name = std::pair<std::int64_t, std::uint64_t>;  // (-1, id * pages + q) or (row, page)
  std::map<Name, std::int32_t> physical_of;
  std::map<std::int32_t, Name> name_of;
  std::map<Name, std::set<int>> rows_of;
  std::map<Name, int> max_slots;
  std::int64_t total = 0, shared_read = 0;
  std::int32_t next = 0;
  for (int b = 0; b < st.batch; ++b) {
    const StepSequence& q = s.sequences[st.first + b];
    const TraceRequest& r = t.requests[q.request];
    const int pages = (q.context + P - 1) / P;
    for (int p = 0; p < max_pages; ++p) {
      const std::int32_t id = layout.block_tables[b * max_pages + p];
      if (p >= pages) {
        if (id != -1) return fmt::format("row {} page {}: unused entry {}", b, p, id);
        continue;
      }
      if (id < 0 || id >= layout.num_blocks) return fmt::format("row {} page {}: id {}", b, p, id);
      if (id > next)
        return fmt::format("row {} page {}: id {} not in first-appearance order", b, p, id);
      if (id == next) ++next;
      Name name{b, static_cast<std::uint64_t>(p)};
      if (t.has_prefix_info && (p + 1) * P <= r.input_tokens) {
        const int j = p * P / t.block_tokens;
        const int in_block = p - j * (t.block_tokens / P);
        name = {-1, r.hash_ids[j] * (t.block_tokens / P) + in_block};
      }
      const auto [pit, p_new] = physical_of.emplace(name, id);
      if (pit->second != id) {
        return fmt::format("row {} page {}: its page is {} in another row, {} here", b, p,
                           pit->second, id);
      }
      const auto [nit, n_new] = name_of.emplace(id, name);
      if (nit->second != name) {
        return fmt::format("row {} page {}: physical page {} also holds other content", b, p, id);
      }
      rows_of[name].insert(b);
      const int slots = std::min(P, q.context - p * P);
      max_slots[name] = std::max(max_slots[name], slots);
      total += slots;
    }
  }
  if (next != layout.num_blocks) return "num_blocks is not the pages used";
  std::int64_t unique = 0;
  int shared_pages = 0;
  for (const auto& [name, slots] : max_slots) {
    unique += slots;
    if (rows_of[name].size() > 1) ++shared_pages;
  }
  for (int b = 0; b < st.batch; ++b) {
    const StepSequence& q = s.sequences[st.first + b];
    for (int p = 0; p < (q.context + P - 1) / P; ++p) {
      if (rows_of[name_of[layout.block_tables[b * max_pages + p]]].size() > 1) {
        shared_read += std::min(P, q.context - p * P);
      }
    }
  }
  if (layout.total_tokens != total || total != st.kv_tokens) return "total_tokens";
  if (layout.unique_tokens != unique) return "unique_tokens";
  if (unique != st.kv_tokens - st.shared_tokens) {
    return fmt::format("unique tokens {} but the step's kv - shared is {}", unique,
                       st.kv_tokens - st.shared_tokens);
  }
  if (layout.num_shared_blocks != shared_pages) return "num_shared_blocks";
  if (layout.hit_rate_actual != static_cast<double>(shared_read) / static_cast<double>(total)) {
    return "hit_rate_actual";
  }
  if (layout.group_of != std::vector<int>(st.batch, 0) ||
      layout.shared_blocks_of_group != std::vector<int>{0}) {
    return "groups";
  }
  return "";
}

// R0 and R1 have the same 11-token prompt (ids 1, 2, 3; block 3 holds 3 tokens: one whole page
// and a partial one); R2 shares ids 1, 2 (its block 7 holds 1 token, no whole page); R3 shares
// nothing (its block 9 holds one whole page, read by it alone).
Trace sharing_trace() {
  return trace_of({request(0, 11, 5, {1, 2, 3}), request(0, 11, 5, {1, 2, 3}),
                   request(0, 9, 5, {1, 2, 7}), request(0, 6, 5, {8, 9})});
}

TEST(StepLayout, ReproducesTheTracesSharing) {
  const Trace t = sharing_trace();
  const ReplaySchedule s = simulate_schedule(t, config_of(100));
  EXPECT_EQ(s.requests[1].hit_tokens, 11);
  EXPECT_EQ(s.requests[2].hit_tokens, 8);
  ASSERT_FALSE(s.steps.empty());
  // ids 1 and 2 held by three rows: 2 x 4 each; id 3's one whole page by two: 2.
  EXPECT_EQ(s.steps[0].kv_tokens, 12 + 12 + 10 + 7);
  EXPECT_EQ(s.steps[0].shared_tokens, 8 + 8 + 2);

  const PagedLayout layout = step_layout(t, s, 0, kPage);
  EXPECT_EQ(layout.context_lens, (std::vector<std::int32_t>{12, 12, 10, 7}));
  EXPECT_EQ(layout.max_blocks_per_seq, 6);
  const std::vector<std::int32_t> tables = {
      0, 1, 2,  3,  4,  5,    // R0: (1,0) (1,1) (2,0) (2,1) (3,0), tokens 10-11 its own
      0, 1, 2,  3,  4,  6,    // R1: the same prompt pages
      0, 1, 2,  3,  7,  -1,   // R2: ids 1, 2; tokens 8-9 (prompt and generated) its own
      8, 9, 10, 11, -1, -1};  // R3: ids 8, 9 read by it alone, token 6 its own
  EXPECT_EQ(layout.block_tables, tables);
  EXPECT_EQ(layout.num_blocks, 12);
  EXPECT_EQ(layout.num_shared_blocks, 5);
  EXPECT_EQ(layout.total_tokens, 41);
  EXPECT_EQ(layout.unique_tokens, 41 - 18);
  EXPECT_DOUBLE_EQ(layout.hit_rate_actual, (3 * 4 * 2 + 2 * 2) / 41.0);
  EXPECT_EQ(layout_mismatch(t, s, 0, kPage, layout), "");
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.steps.size()); ++i) {
    EXPECT_EQ(layout_mismatch(t, s, i, kPage, step_layout(t, s, i, kPage)), "") << i;
  }
  // At pages of 4 (the whole hash block) id 3's 3 tokens make no whole page: 8 + 8 shared.
  ScheduleConfig c4 = config_of(100);
  c4.page_tokens = 4;
  const ReplaySchedule s4 = simulate_schedule(t, c4);
  EXPECT_EQ(s4.steps[0].shared_tokens, 16);
  EXPECT_EQ(layout_mismatch(t, s4, 0, 4, step_layout(t, s4, 0, 4)), "");
  EXPECT_THROW(step_layout(t, s, 0, 3), InputError);
  EXPECT_THROW(step_layout(t, s, static_cast<std::int64_t>(s.steps.size()), kPage),
               std::invalid_argument);
}

TEST(StepLayout, EveryStepOfABusyTraceMatchesItsSharing) {
  // Prefix trees of three roots through a small pool: admissions, finishes and preemptions keep
  // changing the running set, and each step's incremental shared_tokens must equal what its
  // layout's pages give.
  std::mt19937 rng(5);
  std::vector<TraceRequest> rs;
  for (int i = 0; i < 60; ++i) {
    const int input = 1 + static_cast<int>(rng() % 23);
    const int blocks = (input + kBlock - 1) / kBlock;
    const std::uint64_t root = rng() % 3;
    const int common = static_cast<int>(rng() % 4);
    Ids ids;
    for (int j = 0; j < blocks; ++j) {
      // A block shared across requests must be full (equal ids, equal tokens).
      const bool full = (j + 1) * kBlock <= input;
      ids.push_back(j < common && full ? root * 100 + static_cast<std::uint64_t>(j)
                                       : 10000 + static_cast<std::uint64_t>(i) * 100 + j);
    }
    rs.push_back(request(i * 3.0, input, 1 + static_cast<int>(rng() % 15), ids));
  }
  const Trace t = trace_of(rs);
  ScheduleConfig c = config_of(24);
  c.max_batch = 9;
  const ReplaySchedule s = simulate_schedule(t, c);
  EXPECT_GT(s.preemptions, 0);
  bool some_sharing = false;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.steps.size()); ++i) {
    some_sharing |= s.steps[static_cast<std::size_t>(i)].shared_tokens > 0;
    ASSERT_EQ(layout_mismatch(t, s, i, kPage, step_layout(t, s, i, kPage)), "") << "step " << i;
  }
  EXPECT_TRUE(some_sharing);
}

TEST(StepLayout, TheCheckerCatchesPlantedFaults) {
  const Trace t = sharing_trace();
  const ReplaySchedule s = simulate_schedule(t, config_of(100));
  const PagedLayout good = step_layout(t, s, 0, kPage);
  ASSERT_EQ(layout_mismatch(t, s, 0, kPage, good), "");
  const int w = good.max_blocks_per_seq;

  // A shared page made private: R1's page 0 gets a page of its own.
  PagedLayout fault = good;
  fault.block_tables[1 * w + 0] = fault.num_blocks++;
  fill_read_stats(fault, kPage);
  EXPECT_NE(layout_mismatch(t, s, 0, kPage, fault), "");

  // A private page made shared: R3's own last page aliases R0's.
  fault = good;
  fault.block_tables[3 * w + 3] = good.block_tables[0 * w + 5];
  fill_read_stats(fault, kPage);
  EXPECT_NE(layout_mismatch(t, s, 0, kPage, fault), "");

  // Two different shared pages swapped in one row.
  fault = good;
  std::swap(fault.block_tables[2 * w + 0], fault.block_tables[2 * w + 2]);
  EXPECT_NE(layout_mismatch(t, s, 0, kPage, fault), "");

  // A wrong context, and read statistics that do not match the tables.
  fault = good;
  fault.context_lens[3] = 8;
  EXPECT_NE(layout_mismatch(t, s, 0, kPage, fault), "");
  fault = good;
  fault.unique_tokens += 1;
  EXPECT_NE(layout_mismatch(t, s, 0, kPage, fault), "");

  // A schedule whose shared_tokens drifted from its running set.
  ReplaySchedule drifted = s;
  drifted.steps[0].shared_tokens -= 2;
  EXPECT_NE(layout_mismatch(t, drifted, 0, kPage, good), "");
}

}  // namespace
}  // namespace decodebench
