// Workload construction: model presets and their errors, spec validation, the paged layout's
// invariants (prefix sharing, no aliasing, hit rate), values, and subsets.
#include "workload/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "common/dtype.h"
#include "common/errors.h"
#include "device/counter_rng.h"
#include "device/paged_kv.h"
#include "support/host_test_util.h"

namespace decodebench {
namespace {

ModelShape tiny_model(int hq = 8, int hkv = 2, int d = 64) { return {"tiny", hq, hkv, d, 1, ""}; }

WorkloadSpec spec_of(int batch, ContextSpec ctx, double h, int groups, int block_size = 16,
                     DType kv = DType::f16, std::uint64_t seed = 7) {
  WorkloadSpec s;
  s.model = tiny_model();
  s.batch = batch;
  s.context = ctx;
  s.hit_rate = h;
  s.prefix_groups = groups;
  s.block_size = block_size;
  s.kv_dtype = kv;
  s.seed = seed;
  return s;
}

using test::input_error_message;

// ---- models -------------------------------------------------------------------------------

TEST(Models, PresetsHaveTheirRealShapes) {
  struct Expected {
    const char* name;
    int hq, hkv, d, layers;
  };
  const Expected expected[] = {{"llama-3.1-8b", 32, 8, 128, 32},
                               {"llama-3.1-70b", 64, 8, 128, 80},
                               {"mistral-7b", 32, 8, 128, 32},
                               {"qwen2.5-7b", 28, 4, 128, 28},
                               {"llama-2-7b", 32, 32, 128, 32},
                               {"gemma-2-9b", 16, 8, 256, 42},
                               {"gpt-oss-20b", 64, 8, 64, 24},
                               {"gpt-oss-120b", 64, 8, 64, 36},
                               {"gemma-3-27b", 32, 16, 128, 62},
                               // MLA: one latent KV head of 512 + 64 values
                               {"deepseek-v3", 128, 1, 576, 61},
                               {"kimi-k2", 64, 1, 576, 61},
                               {"deepseek-v2-lite", 16, 1, 576, 27}};
  const std::vector<std::string> presets = model_presets();
  for (const Expected& e : expected) {
    EXPECT_TRUE(std::find(presets.begin(), presets.end(), e.name) != presets.end()) << e.name;
    const ModelShape m = load_model(e.name);
    EXPECT_EQ(m.name, e.name);
    EXPECT_EQ(m.num_q_heads, e.hq) << e.name;
    EXPECT_EQ(m.num_kv_heads, e.hkv) << e.name;
    EXPECT_EQ(m.head_dim, e.d) << e.name;
    EXPECT_EQ(m.num_layers, e.layers) << e.name;
    EXPECT_FALSE(m.source.empty()) << e.name;
  }
  EXPECT_TRUE(std::is_sorted(presets.begin(), presets.end()));
}

// Each preset's windows, sinks and soft-cap as its config.json gives them; the layer parity of
// the alternating ones is the transformers implementation's (layer 0 local).
TEST(Models, PresetsHaveTheirAttentionPatterns) {
  struct Expected {
    const char* name;
    int window, windowed;
    std::vector<int> local, global;  // some layers of each kind
    bool sinks;
    double softcap;
  };
  const Expected expected[] = {
      {"llama-3.1-8b", 0, 0, {}, {0, 31}, false, 0},
      {"mistral-7b", 4096, 32, {0, 1, 31}, {}, false, 0},
      {"gemma-2-9b", 4096, 21, {0, 2, 40}, {1, 3, 41}, false, 50},
      {"gpt-oss-20b", 128, 12, {0, 22}, {1, 23}, true, 0},
      {"gpt-oss-120b", 128, 18, {0, 34}, {1, 35}, true, 0},
      {"gemma-3-27b", 1024, 52, {0, 4, 6, 60, 61}, {5, 11, 59}, false, 0},
  };
  for (const Expected& e : expected) {
    const ModelShape m = load_model(e.name);
    EXPECT_EQ(m.windowed_layers(), e.windowed) << e.name;
    for (int l : e.local) EXPECT_EQ(m.layer_window(l), e.window) << e.name << " layer " << l;
    for (int l : e.global) EXPECT_EQ(m.layer_window(l), 0) << e.name << " layer " << l;
    EXPECT_EQ(m.sinks, e.sinks) << e.name;
    EXPECT_EQ(m.attn_logit_softcapping, e.softcap) << e.name;
    int layers = 0;
    for (const ModelShape::LayerClass& c : m.layer_classes()) layers += c.layers;
    EXPECT_EQ(layers, m.num_layers) << e.name;
  }
  const ModelShape gemma = load_model("gemma-2-9b");
  ASSERT_EQ(gemma.layer_classes().size(), 2u);
  EXPECT_EQ(gemma.layer_classes()[0].window, 4096);
  EXPECT_EQ(gemma.layer_classes()[1].window, 0);
  EXPECT_THROW(gemma.uniform_window(), InputError);
  EXPECT_EQ(gemma.with_window(4096).uniform_window(), 4096);
  EXPECT_EQ(gemma.with_window(0).uniform_window(), 0);
  EXPECT_EQ(load_model("mistral-7b").uniform_window(), 4096);
  EXPECT_EQ(load_model("gpt-oss-20b").num_experts, 32);
  EXPECT_EQ(load_model("gpt-oss-120b").num_experts, 128);
  EXPECT_EQ(load_model("gpt-oss-120b").experts_per_token, 4);
  EXPECT_EQ(gemma.attention_summary(), "window 4096 on 21 of 42 layers, soft-cap 50");
}

class ModelFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("decodebench_models_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
};

// Inputs the fuzzer (tests/fuzz/fuzz_model) is there to keep out: a number beyond double escaped
// as nlohmann's out_of_range; a deeply nested value overflowed the stack when the error message
// printed it.
TEST(ModelJson, HostileTextIsAnInputError) {
  std::string msg = input_error_message(
      [] { parse_model_json(R"({"name": "m", "num_q_heads": 1e400})", "m.json"); });
  EXPECT_NE(msg.find("m.json: not valid JSON"), std::string::npos) << msg;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  msg = input_error_message(
      [&] { parse_model_json(R"({"name": "m", "num_q_heads": )" + deep + "}", "m.json"); });
  EXPECT_NE(msg.find("nested deeper than"), std::string::npos) << msg;
  msg = input_error_message([] {
    parse_model_json(
        R"({"name": "m", "num_q_heads": 18446744073709551615, "num_kv_heads": 1, "head_dim": 128,
            "num_layers": 1})",
        "m.json");
  });
  EXPECT_NE(msg.find("num_q_heads"), std::string::npos) << msg;
}

TEST_F(ModelFiles, ErrorsNameTheFileAndTheKey) {
  EXPECT_EQ(
      load_model(
          write("ok.json",
                R"({"name":"m","num_q_heads":8,"num_kv_heads":2,"head_dim":64,"num_layers":3})"))
          .num_kv_heads,
      2);

  const std::string unknown = write(
      "unknown.json",
      R"({"name":"m","num_q_heads":8,"num_kv_heads":2,"head_dim":64,"num_layers":3,"rope_theta":1})");
  std::string msg = input_error_message([&] { load_model(unknown); });
  EXPECT_NE(msg.find("unknown.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'rope_theta'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_kv_heads"), std::string::npos) << msg;  // lists the valid keys

  const std::string missing =
      write("missing.json", R"({"name":"m","num_q_heads":8,"head_dim":64,"num_layers":3})");
  msg = input_error_message([&] { load_model(missing); });
  EXPECT_NE(msg.find("missing.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing key 'num_kv_heads'"), std::string::npos) << msg;

  const std::string gqa =
      write("gqa.json",
            R"({"name":"m","num_q_heads":28,"num_kv_heads":8,"head_dim":128,"num_layers":3})");
  msg = input_error_message([&] { load_model(gqa); });
  EXPECT_NE(msg.find("gqa.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'num_kv_heads'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("28"), std::string::npos) << msg;

  const std::string negative = write(
      "neg.json", R"({"name":"m","num_q_heads":-8,"num_kv_heads":2,"head_dim":64,"num_layers":3})");
  msg = input_error_message([&] { load_model(negative); });
  EXPECT_NE(msg.find("'num_q_heads' must be a positive integer"), std::string::npos) << msg;

  const std::string text =
      write("text.json",
            R"({"name":"m","num_q_heads":"8","num_kv_heads":2,"head_dim":64,"num_layers":3})");
  msg = input_error_message([&] { load_model(text); });
  EXPECT_NE(msg.find("'num_q_heads'"), std::string::npos) << msg;

  const std::string broken = write("broken.json", R"({"name":"m",)");
  msg = input_error_message([&] { load_model(broken); });
  EXPECT_NE(msg.find("broken.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(Models, UnknownPresetListsThePresets) {
  const std::string msg = input_error_message([] { load_model("llama-9"); });
  EXPECT_NE(msg.find("unknown model 'llama-9'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama-3.1-8b"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gemma-2-9b"), std::string::npos) << msg;
  EXPECT_NE(
      input_error_message([] { load_model("/no/such/model.json"); }).find("/no/such/model.json"),
      std::string::npos);
}

// $DECODEBENCH_CONFIGS first, then configs/ beside the binary's bin/ (a relocated bundle), then
// the compiled-in source path; an empty variable counts as unset.
TEST(Models, ConfigsDirOrder) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / "configs_dir_order";
  fs::remove_all(root);
  fs::create_directories(root / "bin");
  const fs::path exe = root / "bin" / "decodebench";
  const fs::path source = "/compiled/in/configs";
  // No configs/ beside bin/: the compiled-in path.
  EXPECT_EQ(configs_dir_for(nullptr, exe, source), source);
  EXPECT_EQ(configs_dir_for("", exe, source), source);
  EXPECT_EQ(configs_dir_for(nullptr, fs::path(), source), source);
  fs::create_directories(root / "configs");
  EXPECT_EQ(configs_dir_for(nullptr, exe, source), root / "configs");
  EXPECT_EQ(configs_dir_for("", exe, source), root / "configs");
  EXPECT_EQ(configs_dir_for("/from/env", exe, source), fs::path("/from/env"));
  fs::remove_all(root);
}

// ---- validation ---------------------------------------------------------------------------

TEST(Validate, RejectsImpossibleValuesWithTheValidChoices) {
  const WorkloadSpec good = spec_of(2, ContextSpec::fixed(17), 0.5, 1);
  EXPECT_NO_THROW(validate(good));
  auto check = [&](auto mutate, const std::string& expected) {
    WorkloadSpec s = good;
    mutate(s);
    const std::string msg = input_error_message([&] { validate(s); });
    EXPECT_NE(msg.find(expected), std::string::npos) << "message: " << msg;
  };
  check([](WorkloadSpec& s) { s.batch = 0; }, "batch must be >= 1");
  check([](WorkloadSpec& s) { s.context = ContextSpec::fixed(0); }, "1 <= lo <= hi");
  check([](WorkloadSpec& s) { s.context = ContextSpec::ragged(9, 3); }, "1 <= lo <= hi");
  check([](WorkloadSpec& s) { s.hit_rate = 1.5; }, "[0, 1]");
  check([](WorkloadSpec& s) { s.hit_rate = -0.1; }, "[0, 1]");
  check([](WorkloadSpec& s) { s.prefix_groups = 0; }, "prefix_groups must be >= 1");
  check([](WorkloadSpec& s) { s.model = tiny_model(6, 4, 64); }, "% num_kv_heads (4) != 0");
  check([](WorkloadSpec& s) { s.model = tiny_model(8, 2, 96); }, "valid: 64, 128, 256");
  check([](WorkloadSpec& s) { s.block_size = 24; }, "power of two");
  check([](WorkloadSpec& s) { s.block_size = 2048; }, "power of two in [1, 1024]");
  check([](WorkloadSpec& s) { s.q_dtype = DType::fp8_e4m3; }, "valid: f16, bf16");
}

// ---- layout -------------------------------------------------------------------------------

// Every invariant of docs/design.md "Workload and paged layout" for one layout.
void check_layout_invariants(const WorkloadSpec& spec, const PagedLayout& l) {
  const int P = spec.block_size;
  const int G = spec.prefix_groups;
  ASSERT_EQ(static_cast<int>(l.context_lens.size()), spec.batch);
  ASSERT_EQ(l.block_tables.size(), static_cast<std::size_t>(spec.batch) * l.max_blocks_per_seq);
  std::map<std::int32_t, std::set<int>> readers;  // physical block -> sequences reading it
  std::int64_t total = 0, hit_tokens = 0;
  for (int b = 0; b < spec.batch; ++b) {
    const int len = l.context_lens[b];
    EXPECT_GE(len, spec.context.lo);
    EXPECT_LE(len, spec.context.hi);
    EXPECT_EQ(l.group_of[b], b % G);
    const int blocks = (len + P - 1) / P;
    for (int j = 0; j < l.max_blocks_per_seq; ++j) {
      const std::int32_t id =
          l.block_tables[static_cast<std::size_t>(b) * l.max_blocks_per_seq + j];
      if (j >= blocks) {
        EXPECT_EQ(id, -1) << "unused entry b=" << b << " j=" << j;
        continue;
      }
      ASSERT_GE(id, 0);
      ASSERT_LT(id, l.num_blocks);
      EXPECT_TRUE(readers[id].insert(b).second)
          << "sequence " << b << " reads block " << id << " twice";
    }
    total += len;
    hit_tokens += static_cast<std::int64_t>(l.shared_blocks_of_group[b % G]) * P;
  }
  // Shared blocks: the first shared_blocks_of_group[g] entries are identical in a group.
  std::int64_t unique = 0;
  for (int b = 0; b < spec.batch; ++b) {
    const int g = b % G;
    EXPECT_LE(l.shared_blocks_of_group[g] * P, l.context_lens[b]);
    for (int j = 0; j < l.shared_blocks_of_group[g]; ++j) {
      EXPECT_EQ(l.block_tables[static_cast<std::size_t>(b) * l.max_blocks_per_seq + j],
                l.block_tables[static_cast<std::size_t>(g) * l.max_blocks_per_seq + j]);
    }
  }
  // Every other block is private: read by exactly one sequence. A block read by several
  // sequences is a shared block of their (common) group.
  int multi = 0;
  for (const auto& [id, seqs] : readers) {
    if (seqs.size() > 1) {
      ++multi;
      const int g = *seqs.begin() % G;
      for (int b : seqs) EXPECT_EQ(b % G, g) << "block " << id << " shared across groups";
    }
    // Distinct slots read: the longest reader's slots in this block.
    int slots = 0;
    for (int b : seqs) {
      const std::int32_t* row =
          l.block_tables.data() + static_cast<std::size_t>(b) * l.max_blocks_per_seq;
      const int j = static_cast<int>(std::find(row, row + l.max_blocks_per_seq, id) - row);
      slots = std::max(slots, std::min(P, l.context_lens[b] - j * P));
    }
    unique += slots;
  }
  EXPECT_EQ(static_cast<int>(readers.size()), l.num_blocks) << "pool has unread blocks";
  EXPECT_EQ(l.num_shared_blocks, multi);
  EXPECT_EQ(l.total_tokens, total);
  EXPECT_EQ(l.unique_tokens, unique);
  EXPECT_DOUBLE_EQ(l.hit_rate_actual, static_cast<double>(hit_tokens) / static_cast<double>(total));
}

TEST(Layout, InvariantsAcrossHitRatesGroupsAndContexts) {
  for (double h : {0.0, 0.5, 1.0}) {
    for (int G : {1, 3}) {
      for (ContextSpec ctx :
           {ContextSpec::fixed(97), ContextSpec::fixed(16), ContextSpec::ragged(1, 300)}) {
        for (int P : {8, 16}) {
          const WorkloadSpec spec = spec_of(7, ctx, h, G, P);
          SCOPED_TRACE(testing::Message() << "h=" << h << " G=" << G << " ctx=[" << ctx.lo << ","
                                          << ctx.hi << "] P=" << P);
          check_layout_invariants(spec, build_layout(spec));
        }
      }
    }
  }
}

TEST(Layout, ActualHitRateByHand) {
  // Fixed 100 tokens, P = 16, h = 0.5: floor(50 / 16) = 3 shared blocks = 48 tokens of each 100.
  PagedLayout l = build_layout(spec_of(4, ContextSpec::fixed(100), 0.5, 2));
  EXPECT_EQ(l.shared_blocks_of_group, (std::vector<int>{3, 3}));
  EXPECT_DOUBLE_EQ(l.hit_rate_actual, 0.48);
  EXPECT_EQ(l.num_shared_blocks, 6);
  EXPECT_EQ(l.num_blocks, 2 * 3 + 4 * (7 - 3));
  EXPECT_EQ(l.unique_tokens, 400 - 2 * 48);  // each group's second member re-reads 48 tokens
  // h = 1 with block-aligned contexts: every block shared, one copy per group.
  l = build_layout(spec_of(6, ContextSpec::fixed(128), 1.0, 3));
  EXPECT_DOUBLE_EQ(l.hit_rate_actual, 1.0);
  EXPECT_EQ(l.num_blocks, 3 * 8);
  EXPECT_EQ(l.unique_tokens, 3 * 128);
  // h = 0: nothing shared, the pool is exactly the blocks needed.
  l = build_layout(spec_of(5, ContextSpec::fixed(33), 0.0, 1));
  EXPECT_EQ(l.hit_rate_actual, 0.0);
  EXPECT_EQ(l.num_shared_blocks, 0);
  EXPECT_EQ(l.num_blocks, 5 * 3);
  EXPECT_EQ(l.unique_tokens, 5 * 33);
  // Ragged: the group's shortest context limits its prefix.
  const WorkloadSpec ragged = spec_of(9, ContextSpec::ragged(20, 400), 0.9, 2, 8);
  l = build_layout(ragged);
  for (int g = 0; g < 2; ++g) {
    int shortest = 1 << 30;
    for (int b = g; b < 9; b += 2) shortest = std::min(shortest, l.context_lens[b]);
    EXPECT_EQ(l.shared_blocks_of_group[g], static_cast<int>(0.9 * shortest / 8 + 1e-9));
  }
}

TEST(Layout, DeterministicRaggedAndShuffled) {
  const WorkloadSpec spec = spec_of(37, ContextSpec::ragged(1, 1000), 0.0, 1);
  const PagedLayout a = build_layout(spec);
  const PagedLayout b = build_layout(spec);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_EQ(a.context_lens, b.context_lens);
  // Golden values: the layout comes from our own generator, not the standard library's
  // (std::shuffle is implementation-defined), so it is the same everywhere. Change on purpose only.
  EXPECT_EQ(a.context_lens[0], 854);
  EXPECT_EQ(a.context_lens[1], 230);
  EXPECT_EQ(a.context_lens[36], 406);
  EXPECT_EQ(a.block_tables[0], 307);
  EXPECT_EQ(a.block_tables[1], 64);
  EXPECT_EQ(a.block_tables[a.max_blocks_per_seq], 258);
  EXPECT_EQ(a.num_blocks, 1217);
  std::set<int> lens(a.context_lens.begin(), a.context_lens.end());
  EXPECT_GT(lens.size(), 30u);  // ragged means varied
  WorkloadSpec other = spec;
  other.seed = 8;
  EXPECT_NE(build_layout(other).context_lens, a.context_lens);
  // Shuffled: a sequence's consecutive blocks are not consecutive physical ids.
  int consecutive = 0, pairs = 0;
  for (int s = 0; s < spec.batch; ++s) {
    for (int j = 1; j < (a.context_lens[s] + 15) / 16; ++j) {
      ++pairs;
      consecutive += a.block_tables[s * a.max_blocks_per_seq + j] ==
                     a.block_tables[s * a.max_blocks_per_seq + j - 1] + 1;
    }
  }
  EXPECT_LT(consecutive, pairs / 10 + 1);
}

TEST(Layout, MoreGroupsThanSequences) {
  const WorkloadSpec spec = spec_of(2, ContextSpec::fixed(64), 1.0, 5);
  const PagedLayout l = build_layout(spec);
  check_layout_invariants(spec, l);
  EXPECT_EQ(l.num_shared_blocks, 0);  // every group has at most one member
  EXPECT_EQ(l.unique_tokens, 128);
}

// ---- values -------------------------------------------------------------------------------

// The stored value of K (or V) of token t of row r, kv head h, element i, decoded.
float kv_at(const Workload& w, const std::vector<std::byte>& cache, int r, int t, int h, int i) {
  const ModelShape& m = w.spec.model;
  const std::size_t off =
      token_row_offset(w.layout.block_tables.data(), w.layout.max_blocks_per_seq, r, t, h,
                       m.num_kv_heads, w.spec.block_size, m.head_dim) +
      i;
  return decode_value(w.spec.kv_dtype, cache.data() + off * dtype_size(w.spec.kv_dtype));
}

TEST(Values, GeneratorValuesEncodedAndScaled) {
  for (DType kv : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    const WorkloadSpec spec = spec_of(3, ContextSpec::fixed(20), 0.5, 1, 8, kv);
    const Workload w = make_workload(spec);
    SCOPED_TRACE(std::string(dtype_name(kv)));
    EXPECT_FLOAT_EQ(w.softmax_scale, 0.125f);  // 1 / sqrt(64)
    EXPECT_EQ(w.k_scale, kv_scale_for(kv));
    EXPECT_EQ(w.v_scale, kv_scale_for(kv));
    if (is_fp8(kv)) {
      EXPECT_FLOAT_EQ(w.k_scale * fp8_max(kv), kGeneratorBound);
    } else {
      EXPECT_EQ(w.k_scale, 1.0f);
    }
    const std::size_t elems = static_cast<std::size_t>(w.layout.num_blocks) * 2 * 8 * 64;
    ASSERT_EQ(w.k_cache.size(), elems * dtype_size(kv));
    ASSERT_EQ(w.v_cache.size(), elems * dtype_size(kv));
    const float inv = inv_scale_for(Tensor::k, kv);
    for (std::size_t i = 0; i < elems; i += 37) {
      std::byte expected[4];
      encode_value(kv, counter_normal(spec.seed, 1, i) * inv, expected);
      ASSERT_EQ(std::memcmp(expected, w.k_cache.data() + i * dtype_size(kv), dtype_size(kv)), 0)
          << i;
      encode_value(kv, counter_normal(spec.seed, 2, i) * inv, expected);
      ASSERT_EQ(std::memcmp(expected, w.v_cache.data() + i * dtype_size(kv), dtype_size(kv)), 0)
          << i;
    }
    // Q [B][Hq][d] in q_dtype from tensor 0; never all zeros; fp8 never saturates.
    ASSERT_EQ(w.q.size(), 3u * 8 * 64 * 2);
    std::byte q100[2];
    encode_value(DType::f16, counter_normal(spec.seed, 0, 100), q100);
    EXPECT_EQ(std::memcmp(w.q.data() + 2 * 100, q100, 2), 0);
    float max_abs = 0;
    for (float x : decode_to_float(w.k_cache, kv)) max_abs = std::max(max_abs, std::fabs(x));
    EXPECT_GT(max_abs, 0.f);
    if (is_fp8(kv)) {
      EXPECT_LE(max_abs, fp8_max(kv));
    }
  }
}

TEST(Values, SharedBlocksHoldIdenticalKv) {
  const Workload w = make_workload(spec_of(6, ContextSpec::ragged(40, 90), 0.75, 3, 8));
  for (int r = 0; r < w.rows(); ++r) {
    const int g = w.layout.group_of[r];
    for (int t = 0; t < w.layout.shared_blocks_of_group[g] * 8; ++t) {
      for (int h = 0; h < 2; ++h) {
        EXPECT_EQ(kv_at(w, w.k_cache, r, t, h, 5), kv_at(w, w.k_cache, g, t, h, 5));
        EXPECT_EQ(kv_at(w, w.v_cache, r, t, h, 63), kv_at(w, w.v_cache, g, t, h, 63));
      }
    }
  }
}

TEST(Values, SubsetHasTheSameValues) {
  const WorkloadSpec spec = spec_of(9, ContextSpec::ragged(1, 120), 0.5, 3, 16, DType::bf16);
  const Workload full = make_workload(spec);
  const std::vector<int> rows = {7, 1, 4};
  const Workload sub = make_workload(spec, full.layout, rows);
  ASSERT_EQ(sub.rows(), 3);
  EXPECT_LT(sub.layout.num_blocks, full.layout.num_blocks);
  EXPECT_EQ(sub.k_cache.size(), static_cast<std::size_t>(sub.layout.num_blocks) * 2 * 16 * 64 * 2);
  for (int r = 0; r < 3; ++r) {
    const int s = rows[r];
    ASSERT_EQ(sub.layout.context_lens[r], full.layout.context_lens[s]);
    EXPECT_EQ(sub.layout.group_of[r], full.layout.group_of[s]);
    EXPECT_EQ(
        std::memcmp(sub.q.data() + r * 8 * 64 * 2, full.q.data() + s * 8 * 64 * 2, 8 * 64 * 2), 0);
    for (int t = 0; t < sub.layout.context_lens[r]; ++t) {
      for (int h = 0; h < 2; ++h) {
        for (int i : {0, 17, 63}) {
          ASSERT_EQ(kv_at(sub, sub.k_cache, r, t, h, i), kv_at(full, full.k_cache, s, t, h, i));
          ASSERT_EQ(kv_at(sub, sub.v_cache, r, t, h, i), kv_at(full, full.v_cache, s, t, h, i));
        }
      }
    }
  }
  // Rows 7, 1, 4 are in groups 1, 1, 1: their shared prefix is one set of blocks in the subset.
  EXPECT_EQ(sub.layout.num_shared_blocks, full.layout.shared_blocks_of_group[1]);
  const kernels::PagedDecodeParams p = sub.params();
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.num_blocks, sub.layout.num_blocks);
  EXPECT_EQ(p.block_tables, sub.layout.block_tables.data());
  EXPECT_EQ(p.max_blocks_per_seq, sub.layout.max_blocks_per_seq);
  EXPECT_EQ(p.kv_dtype, DType::bf16);
  EXPECT_EQ(p.out, nullptr);

  EXPECT_THROW(make_workload(spec, full.layout, std::vector<int>{9}), InputError);
  EXPECT_THROW(make_workload(spec, full.layout, std::vector<int>{1, 1}), InputError);
}

TEST(Values, ValidationSubsetCoversGroupsAndEnds) {
  const PagedLayout l = build_layout(spec_of(100, ContextSpec::fixed(8), 0.0, 4, 8));
  const std::vector<int> rows = validation_subset(l, 8);
  EXPECT_EQ(rows.size(), 8u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  std::set<int> groups;
  for (int r : rows) groups.insert(l.group_of[r]);
  EXPECT_EQ(groups.size(), 4u);
  EXPECT_EQ(rows.back(), 99);
  EXPECT_EQ(validation_subset(l, 1000).size(), 100u);
  EXPECT_EQ(validation_subset(l, 8), rows);
}

TEST(Values, HostBytes) {
  const WorkloadSpec spec = spec_of(3, ContextSpec::fixed(20), 0.0, 1, 8);
  const Workload w = make_workload(spec);
  const std::int64_t expected =
      static_cast<std::int64_t>(w.q.size() + w.k_cache.size() + w.v_cache.size() +
                                4 * (w.layout.block_tables.size() + w.layout.context_lens.size() +
                                     w.source_block_ids.size()));
  EXPECT_EQ(workload_host_bytes(spec, w.layout), expected);
}

TEST_F(ModelFiles, AttentionPatternErrorsNameTheKeyAndTheValid) {
  const std::string head =
      R"({"name":"m","num_q_heads":8,"num_kv_heads":2,"head_dim":64,"num_layers":6,)";
  const auto error_of = [&](const std::string& name, const std::string& rest) {
    const std::string path = write(name, head + rest + "}");
    return input_error_message([&] { load_model(path); });
  };
  std::string msg = error_of("no_layers.json", R"("sliding_window":128)");
  EXPECT_NE(msg.find("'sliding_window' needs 'window_layers'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"every\""), std::string::npos) << msg;  // names the valid forms
  msg = error_of("no_window.json", R"("window_layers":"all")");
  EXPECT_NE(msg.find("'window_layers' needs 'sliding_window'"), std::string::npos) << msg;
  msg = error_of("word.json", R"("sliding_window":128,"window_layers":"odd")");
  EXPECT_NE(msg.find("'window_layers' must be \"all\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"odd\""), std::string::npos) << msg;
  msg = error_of("local.json", R"("sliding_window":128,"window_layers":{"local":3,"every":2})");
  EXPECT_NE(msg.find("1 <= L <= N"), std::string::npos) << msg;
  msg = error_of("key.json", R"("sliding_window":128,"window_layers":{"local":1,"each":2})");
  EXPECT_NE(msg.find("window_layers"), std::string::npos) << msg;
  msg = error_of("zero.json", R"("sliding_window":0,"window_layers":"all")");
  EXPECT_NE(msg.find("'sliding_window' must be a positive integer"), std::string::npos) << msg;
  msg = error_of("sinks.json", R"("sinks":1)");
  EXPECT_NE(msg.find("'sinks' must be true or false"), std::string::npos) << msg;
  msg = error_of("cap.json", R"("attn_logit_softcapping":-5)");
  EXPECT_NE(msg.find("'attn_logit_softcapping' must be a positive number"), std::string::npos)
      << msg;
  msg = error_of("scalar.json", R"("query_pre_attn_scalar":0)");
  EXPECT_NE(msg.find("'query_pre_attn_scalar' must be a positive number"), std::string::npos)
      << msg;
  msg = error_of("scalar_word.json", R"("query_pre_attn_scalar":"168")");
  EXPECT_NE(msg.find("'query_pre_attn_scalar' must be a positive number"), std::string::npos)
      << msg;
  msg = error_of("moe.json", R"("num_local_experts":8)");
  EXPECT_NE(msg.find("needs both 'num_local_experts' and 'num_experts_per_tok'"), std::string::npos)
      << msg;
  msg = error_of("topk.json", R"("num_local_experts":4,"num_experts_per_tok":8)");
  EXPECT_NE(msg.find("must not exceed num_local_experts"), std::string::npos) << msg;

  // Valid: 2 of every 3 layers of 6, null soft-cap (Gemma 3's "none").
  const ModelShape m = load_model(
      write("ok.json", head + R"("sliding_window":64,"window_layers":{"local":2,)"
                              R"("every":3},"attn_logit_softcapping":null,"sinks":true})"));
  EXPECT_EQ(m.windowed_layers(), 4);
  EXPECT_EQ(m.layer_window(2), 0);
  EXPECT_EQ(m.layer_window(4), 64);
  EXPECT_EQ(m.attn_logit_softcapping, 0);
  EXPECT_TRUE(m.sinks);
}

// The MLA presets: the latent's shape from their "mla" objects, the value width, and DeepSeek's
// softmax scale (192^-0.5 x YaRN's mscale squared, modeling_deepseek.py), which differs from
// both 1/sqrt(576) (the absorbed width) and 1/sqrt(192) (no YaRN).
TEST(Models, MlaPresetsHaveTheirLatentAndScale) {
  struct Expected {
    const char* name;
    double factor, mscale_all_dim;
    int q_lora_rank;
  };
  for (const Expected& e :
       {Expected{"deepseek-v3", 40, 1.0, 1536}, Expected{"kimi-k2", 32, 1.0, 1536},
        Expected{"deepseek-v2-lite", 40, 0.707, 0}}) {
    const ModelShape m = load_model(e.name);
    EXPECT_TRUE(m.is_mla()) << e.name;
    EXPECT_EQ(m.kv_lora_rank, 512) << e.name;
    EXPECT_EQ(m.qk_rope_head_dim, 64) << e.name;
    EXPECT_EQ(m.qk_nope_head_dim, 128) << e.name;
    EXPECT_EQ(m.v_head_dim, 128) << e.name;
    EXPECT_EQ(m.q_lora_rank, e.q_lora_rank) << e.name;
    EXPECT_EQ(m.value_dim(), 512) << e.name;
    EXPECT_EQ(m.kv_tensors(), 1) << e.name;
    const double mscale = 0.1 * e.mscale_all_dim * std::log(e.factor) + 1.0;
    EXPECT_NEAR(m.softmax_scale(), mscale * mscale / std::sqrt(192.0), 1e-7) << e.name;
    EXPECT_GT(m.softmax_scale(), 1.0 / std::sqrt(192.0)) << e.name;
    EXPECT_NE(m.attention_summary().find("MLA"), std::string::npos) << e.name;
  }
  EXPECT_NEAR(load_model("deepseek-v3").softmax_scale(), 0.1352338, 1e-6);
  // Not MLA: 1/sqrt(head_dim), value width = head_dim, K and V.
  const ModelShape llama = load_model("llama-3.1-8b");
  EXPECT_FALSE(llama.is_mla());
  EXPECT_FLOAT_EQ(llama.softmax_scale(), 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(llama.value_dim(), 128);
  EXPECT_EQ(llama.kv_tensors(), 2);
  // Gemma 3 scales q.k by query_pre_attn_scalar 168, not head_dim 128; Gemma 2's equals its d.
  EXPECT_FLOAT_EQ(load_model("gemma-3-27b").softmax_scale(), 1.0f / std::sqrt(168.0f));
  EXPECT_FLOAT_EQ(load_model("gemma-2-9b").softmax_scale(), 1.0f / std::sqrt(256.0f));
}

TEST_F(ModelFiles, MlaErrorsNameTheKeyAndTheValid) {
  const std::string head = R"({"name":"m","num_q_heads":8,"num_layers":2,)";
  const std::string mla =
      R"("mla":{"kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128)";
  const auto error_of = [&](const std::string& name, const std::string& rest) {
    const std::string path = write(name, head + rest + "}");
    return input_error_message([&] { load_model(path); });
  };
  std::string msg = error_of("kv.json", mla + R"(},"num_kv_heads":1)");
  EXPECT_NE(msg.find("gives no 'num_kv_heads'"), std::string::npos) << msg;
  msg = error_of("key.json", mla + R"(,"rank":3})");
  EXPECT_NE(msg.find("unknown key 'rank'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kv_lora_rank, qk_rope_head_dim"), std::string::npos) << msg;
  msg = error_of("missing.json", R"("mla":{"kv_lora_rank":512})");
  EXPECT_NE(msg.find("missing key 'qk_rope_head_dim'"), std::string::npos) << msg;
  msg = error_of("yarn.json", mla + R"(,"rope_scaling":{"factor":-1,"mscale_all_dim":1}})");
  EXPECT_NE(msg.find("'rope_scaling' must be"), std::string::npos) << msg;
  msg = error_of("shared.json", mla + R"(},"n_shared_experts":1)");
  EXPECT_NE(msg.find("needs a mixture of experts"), std::string::npos) << msg;
  msg = error_of("dense.json", mla + R"(},"num_local_experts":4,"num_experts_per_tok":2,)" +
                                   R"("first_k_dense_replace":1)");
  EXPECT_NE(msg.find("go together"), std::string::npos) << msg;

  // Valid, no YaRN: the scale is 1/sqrt(qk_nope + qk_rope).
  const ModelShape m = load_model(write("ok.json", head + mla + "}}"));
  EXPECT_EQ(m.head_dim, 576);
  EXPECT_EQ(m.num_kv_heads, 1);
  EXPECT_FLOAT_EQ(m.softmax_scale(), 1.0f / std::sqrt(192.0f));
}

// An MLA workload: one latent row per token in k_cache, no v_cache, V pointed at K, the model's
// scale in the params; the byte model counts the latent once and 2 Hq (576 + 512) FLOP a token.
TEST(Values, MlaWorkloadHoldsOnlyTheLatent) {
  WorkloadSpec spec;
  spec.model = load_model("deepseek-v2-lite");
  spec.batch = 2;
  spec.context = ContextSpec::fixed(100);
  spec.kv_dtype = DType::bf16;
  spec.q_dtype = DType::bf16;
  const Workload w = make_workload(spec);
  EXPECT_TRUE(w.v_cache.empty());
  EXPECT_EQ(w.k_cache.size(), static_cast<std::size_t>(w.layout.num_blocks) * 16 * 576 * 2);
  EXPECT_EQ(w.q.size(), 2u * 16 * 576 * 2);
  const kernels::PagedDecodeParams p = w.params();
  EXPECT_EQ(p.v_cache, p.k_cache);
  EXPECT_EQ(p.v_head_dim, 512);
  EXPECT_EQ(p.head_dim, 576);
  EXPECT_FLOAT_EQ(p.softmax_scale, spec.model.softmax_scale());
  EXPECT_FLOAT_EQ(p.k_scale, p.v_scale);
  EXPECT_EQ(kv_bytes_per_token(spec.model, DType::bf16, 16), 1152.0);
  EXPECT_EQ(kv_bytes_per_token(spec.model, DType::fp8_e4m3, 16), 576.0);
  EXPECT_EQ(
      workload_host_bytes(spec, w.layout),
      static_cast<std::int64_t>(w.q.size() + w.k_cache.size() +
                                4 * (w.layout.block_tables.size() + w.layout.context_lens.size() +
                                     w.source_block_ids.size())));
}

}  // namespace
}  // namespace decodebench
