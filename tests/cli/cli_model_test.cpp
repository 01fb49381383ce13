// `decodebench model`, the napkin calculator, run as a subprocess (cli_run.h): layer scope (the
// default: weights, KV and activations of the whole step, knees, what fits) against numbers
// worked by hand, its ceilings from a datasheet row or a report, its bad input; attention scope
// as the calculator printed before weights.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;

json model_json(const std::string& args, const TempDir& dir) {
  const CliResult r = run_cli("model " + args + " --format json", dir.path());
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? json::parse(r.out) : json::object();
}

const json& knee_of(const json& j, const std::string& kind, double h, const std::string& context) {
  for (const json& k : j.at("knees")) {
    if (k.at("kernel_kind") == kind && k.at("hit_rate").get<double>() == h &&
        k.at("context") == context) {
      return k;
    }
  }
  ADD_FAILURE() << "no knee for " << kind << " h=" << h << " context " << context;
  static const json none = json::object();
  return none;
}

// ------------------------------------------------------------------------------- layer scope

// llama-3.1-8b, bf16 weights and activations, f16 KV, context 8192, batch 1, on the H200
// (4.8 TB/s), worked by hand. Every stage is memory-bound at batch 1, so the step is its bytes
// over the bandwidth.
//   weights/layer  (6144 + 4096 + 28672) x 4096 + 4096 x 14336 = 218103808 x 2 B = 436207616
//   weights/step   32 x 436207616 + LM head 128256 x 4096 x 2 (1050673152) = 15009316864
//                  (the published 8.03 B parameters x 2 = 16.06 GB minus the embedding table,
//                  of which a step reads one row per sequence)
//   KV/step        8192 tokens x 32 layers x 2 x 8 heads x 128 x 2 B = 1073741824
//   activations    per layer the GEMMs' inputs and outputs (4096 + 6144) + (4096 + 4096) +
//                  (4096 + 28672) + (14336 + 4096) = 69632 x 2 B, and the attention's q 8192,
//                  out 8192, 512 table entries x 4 and one context length 4: 157700 B x 32;
//                  the LM head's input 8192 and logits 256512
TEST(CliModelLayer, Llama8bOnH200Batch1ByHand) {
  TempDir dir;
  const json j = model_json(
      "--model llama-3.1-8b --device h200 --context 8192 --batch 1 --kernel-kind tensor-core", dir);
  ASSERT_EQ(j.at("scope"), "layer");
  EXPECT_EQ(j.at("weights_dtype"), "bf16");
  EXPECT_EQ(j.at("activation_dtype"), "bf16");
  EXPECT_EQ(j.at("device").at("gemm_flop_roof").get<double>(), 989.4e12);
  EXPECT_NE(j.at("device").at("gemm_flop_roof_name").get<std::string>().find("tensor-core bf16"),
            std::string::npos);
  ASSERT_EQ(j.at("rows").size(), 1u);
  const json& r = j.at("rows")[0];
  EXPECT_EQ(r.at("weight_bytes_per_layer"), 436207616);
  EXPECT_EQ(r.at("weight_bytes_lm_head"), 1050673152);
  EXPECT_EQ(r.at("weight_bytes_per_step").get<double>(), 15009316864.0);
  EXPECT_EQ(r.at("kv_bytes_unique_per_step").get<double>(), 1073741824.0);
  EXPECT_EQ(r.at("kv_bytes_logical_per_step").get<double>(), 1073741824.0);
  EXPECT_EQ(r.at("kv_bytes_streamed_per_step").get<double>(), 1073741824.0);
  const double act = 32.0 * (69632 * 2 + 8192 + 8192 + 2048 + 4) + 8192 + 256512;
  EXPECT_EQ(r.at("activation_bytes_per_step").get<double>(), act);
  const double bytes = 15009316864.0 + 1073741824.0 + act;
  EXPECT_EQ(r.at("bytes_per_step").get<double>(), bytes);
  EXPECT_EQ(r.at("bound_by"), "memory");
  EXPECT_NEAR(r.at("t_step_s").get<double>(), bytes / 4.8e12, 1e-15);  // 3.35 ms
  EXPECT_NEAR(r.at("t_step_s").get<double>(), 3.352e-3, 0.001e-3);
  EXPECT_NEAR(r.at("tokens_per_s").get<double>(), 4.8e12 / bytes, 1e-9);  // 298 tok/s
  EXPECT_NEAR(r.at("t_lm_head_s").get<double>(), (1050673152.0 + 8192 + 256512) / 4.8e12, 1e-15);
  EXPECT_NEAR(r.at("weight_byte_share").get<double>(), 15009316864.0 / bytes, 1e-12);
  EXPECT_NEAR(r.at("kv_byte_share").get<double>(), 1073741824.0 / bytes, 1e-12);
  // The stages in the order a layer runs them; GEMM FLOPs 2 m n k.
  const json& stages = r.at("layer_stages");
  ASSERT_EQ(stages.size(), 5u);
  const char* names[] = {"qkv_proj", "attention", "o_proj", "gate_up_proj", "down_proj"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(stages[i].at("stage"), names[i]);
  EXPECT_EQ(stages[0].at("bytes").get<double>(), 6144.0 * 4096 * 2 + 8192 + 12288);
  EXPECT_EQ(stages[0].at("flops").get<double>(), 2.0 * 6144 * 4096);
  EXPECT_EQ(stages[1].at("bytes").get<double>(), 33554432.0 + 8192 + 8192 + 2048 + 4);
  EXPECT_EQ(stages[1].at("flops").get<double>(), 4.0 * 32 * 8192 * 128);
  EXPECT_EQ(stages[4].at("bytes").get<double>(), 4096.0 * 14336 * 2 + 14336 * 2 + 8192);
  EXPECT_EQ(r.at("lm_head").at("stage"), "lm_head");
  // Memory: all 8030261248 weights once (16.06 GB) + per sequence 1073741824 B of KV and
  // 69632 x 2 + 8192 + 256512 + 2 x 4096 x 2 = 420352 B of activations:
  // (141e9 - 16060522496) / 1074162176 = 116.3 -> 116.
  EXPECT_EQ(r.at("model_weight_bytes_in_memory").get<double>(), 16060522496.0);
  EXPECT_EQ(r.at("max_batch_in_memory"), 116);
  EXPECT_EQ(r.at("fits_in_memory"), true);
  // One 16-token block a sequence (2 MiB of KV): there the activations count,
  // (141e9 - 16060522496) / (2097152 + 420352) = 49628.3.
  EXPECT_EQ(model_json("--context 16 --batch 1 --kernel-kind cascade", dir)
                .at("rows")[0]
                .at("max_batch_in_memory"),
            49628);
  EXPECT_TRUE(r.at("knee_batch").is_null());  // one batch: no series to find a knee in
  EXPECT_TRUE(j.at("knees").empty());

  // --weights-bytes replaces the weights in memory: 141e9 / 1074162176 = 131.3.
  const json w = model_json(
      "--model llama-3.1-8b --device h200 --context 8192 --batch 1 --kernel-kind tensor-core "
      "--weights-bytes 0",
      dir);
  EXPECT_EQ(w.at("rows")[0].at("max_batch_in_memory"), 131);
  EXPECT_EQ(w.at("rows")[0].at("t_step_s"), r.at("t_step_s"));  // the step still reads them
}

// fp8 weights: one byte each, the GEMMs against the fp8 tensor peak, the activations bf16.
TEST(CliModelLayer, Fp8WeightsHalveTheWeightBytes) {
  TempDir dir;
  const json j = model_json(
      "--model llama-3.1-8b --device h200 --batch 1 --kernel-kind tensor-core "
      "--weights-dtype fp8_e4m3",
      dir);
  EXPECT_EQ(j.at("weights_dtype"), "fp8_e4m3");
  EXPECT_EQ(j.at("activation_dtype"), "bf16");
  EXPECT_EQ(j.at("device").at("gemm_flop_roof").get<double>(), 1978.9e12);
  const json& r = j.at("rows")[0];
  EXPECT_EQ(r.at("weight_bytes_per_step").get<double>(), 15009316864.0 / 2);
  EXPECT_EQ(r.at("model_weight_bytes_in_memory").get<double>(), 8030261248.0);
  // A100: no fp8 tensor cores, the f16 peak.
  const json a = model_json("--device a100-80gb --batch 1 --weights-dtype fp8_e4m3", dir);
  EXPECT_EQ(a.at("device").at("gemm_flop_roof").get<double>(), 312e12);
}

// Every row's step time is its stages' roofline, rebuilt here from the stages it lists, and its
// byte sums add up; a batch large enough turns the GEMMs compute-bound (ridge: 989.4 / 4.8 =
// 206 FLOP/B, and a decode GEMM does about `batch` FLOP per byte).
TEST(CliModelLayer, StepIsTheSumOfItsStagesRooflines) {
  TempDir dir;
  const json j =
      model_json("--model llama-3.1-8b,qwen2.5-7b --context 1024,8192 --hit-rate 0,0.5", dir);
  ASSERT_EQ(j.at("rows").size(), 2u * 2 * 2 * 9 * 3);
  const double bw = 4.8e12;
  std::set<std::string> bounds;
  for (const json& r : j.at("rows")) {
    double t_layer = 0;
    for (const json& s : r.at("layer_stages")) {
      const double roof = s.at("flop_roof").get<double>();
      const double t =
          std::max(s.at("bytes").get<double>() / bw, s.at("flops").get<double>() / roof);
      EXPECT_NEAR(s.at("t_s").get<double>(), t, 1e-9 * t);
      t_layer += t;
      if (s.at("stage") == "attention") {
        EXPECT_EQ(roof, r.at("kernel_kind") == "cuda-core" ? 66.9e12 : 989.4e12);
      } else {
        EXPECT_EQ(roof, 989.4e12);
      }
    }
    EXPECT_NEAR(r.at("t_layer_s").get<double>(), t_layer, 1e-9 * t_layer);
    const double t_step =
        r.at("num_layers").get<double>() * t_layer + r.at("t_lm_head_s").get<double>();
    EXPECT_NEAR(r.at("t_step_s").get<double>(), t_step, 1e-9 * t_step);
    EXPECT_NEAR(r.at("tokens_per_s").get<double>(), r.at("batch").get<double>() / t_step,
                1e-9 * r.at("tokens_per_s").get<double>());
    const double bytes = r.at("weight_bytes_per_step").get<double>() +
                         r.at("kv_bytes_streamed_per_step").get<double>() +
                         r.at("activation_bytes_per_step").get<double>();
    EXPECT_NEAR(r.at("bytes_per_step").get<double>(), bytes, 1e-6 * bytes);
    // cascade reads the unique KV, the other kinds the logical.
    EXPECT_EQ(r.at("kv_bytes_streamed_per_step"),
              r.at(r.at("kernel_kind") == "cascade" ? "kv_bytes_unique_per_step"
                                                    : "kv_bytes_logical_per_step"));
    bounds.insert(r.at("bound_by").get<std::string>());
    if (r.at("batch").get<int>() <= 128) {
      EXPECT_EQ(r.at("bound_by"), "memory") << r.dump();
    }
  }
  EXPECT_TRUE(bounds.count("gemm")) << "batch 256 puts the GEMMs over the ridge";
}

// The knee at 8k on the H200 (tensor-core 128, where 90 % of the plateau is first reached),
// recomputed here from the series' tokens/s with the rule itself; a larger context moves it
// left or lowers the plateau; the prefix-aware kind at h = 0.9 plateaus higher than the
// prefix-unaware one.
TEST(CliModelLayer, KneesMoveWithContextAndPrefixSharing) {
  TempDir dir;
  const json j = model_json(
      "--model llama-3.1-8b --device h200 --context 4096,8192,32768 --hit-rate 0,0.9 "
      "--kernel-kind tensor-core,cascade",
      dir);
  ASSERT_EQ(j.at("knees").size(), 3u * 2 * 2);
  for (const json& k : j.at("knees")) {
    const auto batches = k.at("batches").get<std::vector<int>>();
    const auto tps = k.at("tokens_per_s").get<std::vector<double>>();
    ASSERT_EQ(batches, (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
    const double plateau = *std::max_element(tps.begin(), tps.end());
    EXPECT_EQ(k.at("plateau_tokens_per_s").get<double>(), plateau);
    std::size_t i = 0;
    while (tps[i] < 0.9 * plateau) ++i;
    EXPECT_EQ(k.at("knee_batch"), batches[i]) << k.dump();
    EXPECT_EQ(k.at("knee_tokens_per_s").get<double>(), tps[i]);
    EXPECT_EQ(k.at("knee_is_last_batch"), i + 1 == batches.size());
    const double w = k.at("weight_byte_share_at_knee").get<double>();
    const double kv = k.at("kv_byte_share_at_knee").get<double>();
    EXPECT_GT(w, 0);
    EXPECT_GT(kv, 0);
    EXPECT_LT(w + kv, 1);
  }
  const json& tc8 = knee_of(j, "tensor-core", 0, "8192");
  EXPECT_EQ(tc8.at("knee_batch"), 128);
  // 128 sequences of 8k f16 KV do not fit the H200 next to the weights (116 do).
  EXPECT_EQ(tc8.at("max_batch_in_memory"), 116);
  EXPECT_EQ(tc8.at("knee_fits_memory"), false);
  // At the knee the KV dominates: 128 x 1.07 GB against 15 GB of weights.
  EXPECT_GT(tc8.at("kv_byte_share_at_knee").get<double>(), 0.85);
  for (double h : {0.0, 0.9}) {
    for (const char* kind : {"tensor-core", "cascade"}) {
      const json& k4 = knee_of(j, kind, h, "4096");
      const json& k32 = knee_of(j, kind, h, "32768");
      EXPECT_TRUE(k32.at("knee_batch") < k4.at("knee_batch") ||
                  k32.at("plateau_tokens_per_s") < k4.at("plateau_tokens_per_s"))
          << kind << " h=" << h;
      EXPECT_LT(k32.at("plateau_tokens_per_s").get<double>(),
                k4.at("plateau_tokens_per_s").get<double>());
    }
  }
  EXPECT_LE(knee_of(j, "tensor-core", 0, "32768").at("knee_batch").get<int>(),
            knee_of(j, "tensor-core", 0, "4096").at("knee_batch").get<int>());
  const json& cas = knee_of(j, "cascade", 0.9, "8192");
  const json& tc = knee_of(j, "tensor-core", 0.9, "8192");
  EXPECT_GT(cas.at("plateau_tokens_per_s").get<double>(),
            2 * tc.at("plateau_tokens_per_s").get<double>());
  EXPECT_GE(cas.at("knee_batch").get<int>(), tc.at("knee_batch").get<int>());
  EXPECT_LT(cas.at("kv_byte_share_at_knee").get<double>(),
            tc.at("kv_byte_share_at_knee").get<double>());
  // At h = 0 the kinds read the same bytes: the same knee.
  EXPECT_EQ(knee_of(j, "cascade", 0, "8192").at("knee_batch"), tc8.at("knee_batch"));
  // Each row names its series' knee.
  for (const json& r : j.at("rows")) {
    EXPECT_EQ(r.at("knee_batch"),
              knee_of(j, r.at("kernel_kind"), r.at("hit_rate"), r.at("context")).at("knee_batch"));
  }
}

// --ceilings: a report's device replaces the datasheet row. An older report has no GEMM ceiling,
// so the GEMMs take its measured FMA peak; a newer one's measured GEMM peak wins. A ceilings
// file (`decodebench ceilings --out`, one device record) reads the same.
TEST(CliModelLayer, CeilingsFromAReport) {
  TempDir dir;
  json device = {{"backend", "cpu"},
                 {"name", "Fake CPU"},
                 {"sm_count", 16},
                 {"l2_bytes", 1 << 25},
                 {"mem_bytes", 64000000000LL},
                 {"bandwidth",
                  {{"datasheet", nullptr},
                   {"theoretical", nullptr},
                   {"measured",
                    {{"read", 5.0e10},
                     {"copy", 4.0e10},
                     {"triad", 3.0e10},
                     {"buffer_bytes", 1 << 30},
                     {"note", ""}}}}},
                 {"flops_peak", nullptr},
                 {"flops_measured", 1.0e12}};
  json report = {{"schema_version", 1}, {"devices", json::array({device})}};
  write_file(dir / "old.json", report.dump());
  const std::string old_path = (dir / "old.json").string();
  const json o =
      model_json(fmt::format("--ceilings '{}' --batch 1,16 --kernel-kind cascade", old_path), dir);
  EXPECT_EQ(o.at("device").at("name"), "Fake CPU");
  EXPECT_EQ(o.at("device").at("ceilings"), old_path);
  EXPECT_EQ(o.at("device").at("bandwidth").get<double>(), 5.0e10);
  EXPECT_EQ(o.at("device").at("bandwidth_source"), "measured read");
  EXPECT_EQ(o.at("device").at("gemm_flop_roof").get<double>(), 1.0e12);
  EXPECT_NE(o.at("device").at("gemm_flop_roof_name").get<std::string>().find("fp32 FMA (measured)"),
            std::string::npos);
  EXPECT_EQ(o.at("device").at("mem_bytes"), 64000000000LL);
  const json& b1 = o.at("rows")[0];
  EXPECT_NEAR(b1.at("t_step_s").get<double>(), b1.at("bytes_per_step").get<double>() / 5.0e10,
              1e-9 * b1.at("t_step_s").get<double>());
  // Ridge 1e12 / 5e10 = 20 FLOP/B: batch 16 (about 16 FLOP/B) is still memory-bound.
  EXPECT_EQ(o.at("rows")[1].at("bound_by"), "memory");
  // (64e9 - 16060522496) / (1073741824 + 420352) = 44.6 -> 44 sequences of 8k.
  EXPECT_EQ(b1.at("max_batch_in_memory"), 44);
  // No tensor cores: the tensor-core kinds' attention runs against the FMA roof.
  EXPECT_EQ(o.at("device").at("tensor_flop_roof").get<double>(), 1.0e12);

  // A measured GEMM ceiling, a quarter of the FMA peak: batch 16 turns GEMM-bound.
  device["gemm_ceiling"] = {{"flops", 2.5e11}, {"name", "OpenBLAS sbgemm"}};
  report["devices"] = json::array({device});
  write_file(dir / "new.json", report.dump());
  const json n = model_json(fmt::format("--ceilings '{}' --batch 1,16 --kernel-kind cascade",
                                        (dir / "new.json").string()),
                            dir);
  EXPECT_EQ(n.at("device").at("gemm_flop_roof").get<double>(), 2.5e11);
  EXPECT_NE(n.at("device").at("gemm_flop_roof_name").get<std::string>().find("OpenBLAS sbgemm"),
            std::string::npos);
  EXPECT_EQ(n.at("rows")[1].at("bound_by"), "gemm");
  EXPECT_GT(n.at("rows")[1].at("t_step_s").get<double>(),
            o.at("rows")[1].at("t_step_s").get<double>());

  // The bare device record of a ceilings file.
  write_file(dir / "record.json", device.dump());
  const json c = model_json(fmt::format("--ceilings '{}' --batch 1 --kernel-kind cascade",
                                        (dir / "record.json").string()),
                            dir);
  EXPECT_EQ(c.at("device").at("gemm_flop_roof").get<double>(), 2.5e11);
  EXPECT_EQ(c.at("rows")[0].at("t_step_s"), n.at("rows")[0].at("t_step_s"));

  // Attention scope reads the same bandwidth.
  const json a = model_json(
      fmt::format("--scope attention --ceilings '{}' --kernel-kind cascade", old_path), dir);
  EXPECT_EQ(a.at("device").at("bandwidth").get<double>(), 5.0e10);
  EXPECT_NEAR(a.at("rows")[0].at("t_roof_s").get<double>(),
              a.at("rows")[0].at("bytes_streamed_per_step_all_layers").get<double>() / 5.0e10,
              1e-15);

  // Bad files.
  json no_bw = device;
  no_bw["bandwidth"]["measured"] = {{"read", nullptr}};
  write_file(dir / "no_bw.json", no_bw.dump());
  write_file(dir / "not_report.json", R"({"rows": []})");
  const std::string d = dir.path().string();
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"--ceilings " + d + "/none.json", {d + "/none.json", "cannot open"}},
      {"--ceilings " + d + "/no_bw.json", {"no_bw.json", "bandwidth"}},
      {"--ceilings " + d + "/not_report.json", {"not_report.json", "devices[0]"}},
      {"--ceilings " + d + "/record.json --device h100-sxm", {"--device", "--ceilings"}},
  };
  for (const auto& [args, messages] : bad) {
    const CliResult r = run_cli("model " + args, dir.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    for (const std::string& m : messages) {
      EXPECT_NE(r.err.find(m), std::string::npos) << args << ": " << r.err;
    }
  }
}

TEST(CliModelLayer, BadInput) {
  TempDir dir;
  write_file(dir / "attn_only.json",
             R"({"name":"attn-only","num_q_heads":32,"num_kv_heads":8,"head_dim":128,)"
             R"("num_layers":32})");
  const std::string attn_only = (dir / "attn_only.json").string();
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"--model " + attn_only,
       {"attn-only", "hidden_size", "intermediate_size", "vocab_size", "--scope attention"}},
      {"--scope model", {"--scope", "'model'", "attention, layer"}},
      {"--weights-dtype f32", {"--weights-dtype", "bf16, f16 or fp8_e4m3", "f32"}},
      {"--weights-dtype fp8_e5m2", {"--weights-dtype", "fp8_e5m2"}},
      {"--weights-dtype int4", {"--weights-dtype", "'int4'"}},
      {"--weights-dtype bf16 --q-dtype f16", {"bf16 weights need bf16 activations", "--q-dtype"}},
      {"--q-dtype fp8_e4m3 --weights-dtype fp8_e4m3", {"q", "f16", "bf16"}},
      {"--batch 0", {"batch"}},
      {"--weights-bytes -5", {"--weights-bytes", ">= 0"}},
  };
  for (const auto& [args, messages] : bad) {
    const CliResult r = run_cli("model " + args, dir.path());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    for (const std::string& m : messages) {
      EXPECT_NE(r.err.find(m), std::string::npos) << args << ": stderr lacks '" << m << "'\n"
                                                  << r.err;
    }
  }
  // An attention-only model file still works at attention scope.
  EXPECT_EQ(run_cli("model --scope attention --model " + attn_only, dir.path()).code, 0);
  // f16 weights with f16 activations; fp8 weights with either.
  EXPECT_EQ(run_cli("model --weights-dtype f16 --batch 1", dir.path()).code, 0);
  EXPECT_EQ(run_cli("model --weights-dtype fp8_e4m3 --q-dtype f16 --batch 1", dir.path()).code, 0);
}

TEST(CliModelLayer, DefaultIsLayerScopeOverABatchSweep) {
  TempDir dir;
  const json j = model_json("", dir);
  EXPECT_EQ(j.at("scope"), "layer");
  EXPECT_EQ(j.at("rows").size(), 9u * 3);  // batches 1..256 x three kinds
  EXPECT_EQ(j.at("knees").size(), 3u);
  EXPECT_FALSE(j.at("left_out").empty());
  EXPECT_NE(j.at("knees_definition").get<std::string>().find("90 %"), std::string::npos);
  // The table: rows, then the knees, with the assumptions stated.
  const CliResult t = run_cli("model", dir.path());
  ASSERT_EQ(t.code, 0) << t.err;
  for (const char* s : {"Layer scope", "GEMM roof 989.4 TFLOP/s", "Left out:", "RMSNorm",
                        "weights/step", "KV/step", "t_step", "tok/s", "Knees:", "knee batch",
                        "plateau tok/s (batch)", "beyond memory", "max batch"}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  }
  // csv: one line per row plus the header, the series' knee on each; md: the knee table too.
  const CliResult c = run_cli("model --kernel-kind cascade --format csv", dir.path());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(std::count(c.out.begin(), c.out.end(), '\n'), 10);
  EXPECT_EQ(c.out.rfind("model,device,weights_dtype,activation_dtype,kv_dtype,", 0), 0u) << c.out;
  EXPECT_NE(c.out.find(",t_step_s,tokens_per_s,weight_byte_share,kv_byte_share,bound_by,"),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find(",knee_batch,plateau_tokens_per_s\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("llama-3.1-8b,h200,bf16,bf16,f16,8192,0,0,1,32,cascade,1,15009316864,"),
            std::string::npos)
      << c.out;
  const CliResult m = run_cli("model --format md", dir.path());
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("| knee batch |"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("| t_step |"), std::string::npos) << m.out;
}

// The cells of each Markdown row of the first table whose first cell is `model` (header and
// separator left out).
std::vector<std::vector<std::string>> md_rows(const std::string& md, const std::string& model) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + model + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string cell; std::getline(cols, cell, '|');) {
      cells.push_back(cell.substr(1, cell.size() - 2));
    }
    rows.push_back(cells);
  }
  return rows;
}

// llama-3.1-70b's bf16 weights (70.55 B x 2 = 141.1 GB) exceed the H200's 141 GB before any KV:
// no batch can run, so no row of throughput (it printed 54 rows of "max batch 0" with tok/s up
// to 5,004), one line saying so and what would fit instead: 2 devices, or fp8 weights.
TEST(CliModelLayer, WeightsThatDoNotFitGetOneLineNoThroughput) {
  TempDir dir;
  const std::string args = "--model llama-3.1-70b --device h200 --hit-rate 0,0.9";
  const CliResult t = run_cli("model " + args, dir.path());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("llama-3.1-70b does not fit h200: its bf16 weights take 141.1 GB, the "
                       "device has 141.0 GB of memory, so no batch can run and no throughput "
                       "is given; it would fit on 2 devices (70.6 GB of weights each, tensor "
                       "parallel) or one with --weights-dtype fp8_e4m3 (70.6 GB)."),
            std::string::npos)
      << t.out;
  EXPECT_EQ(t.out.find("kernel kind"), std::string::npos) << "no table: " << t.out;
  EXPECT_EQ(t.out.find("Knees:"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("\nllama-3.1-70b  "), std::string::npos) << "no row: " << t.out;

  const json j = model_json(args, dir);
  EXPECT_TRUE(j.at("rows").empty()) << j.dump();
  EXPECT_TRUE(j.at("knees").empty()) << j.dump();
  ASSERT_EQ(j.at("does_not_fit").size(), 1u) << j.dump();
  const json& d = j.at("does_not_fit")[0];
  EXPECT_EQ(d.at("model"), "llama-3.1-70b");
  EXPECT_EQ(d.at("weight_bytes_in_memory").get<double>(), 141107412992.0);
  EXPECT_EQ(d.at("mem_bytes").get<double>(), 141e9);
  EXPECT_EQ(d.at("devices_needed"), 2);
  EXPECT_EQ(d.at("weights_dtypes_that_fit"), json::array({"fp8_e4m3"}));

  // Beside a model that fits: its rows alone, the other named; CSV names it on stderr.
  const json both = model_json("--model llama-3.1-8b,llama-3.1-70b --device h200", dir);
  EXPECT_EQ(both.at("rows").size(), 9u * 3);
  for (const json& r : both.at("rows")) EXPECT_EQ(r.at("model"), "llama-3.1-8b");
  EXPECT_EQ(both.at("does_not_fit").size(), 1u);
  const CliResult csv = run_cli("model " + args + " --format csv", dir.path());
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1) << "header only: " << csv.out;
  EXPECT_NE(csv.err.find("llama-3.1-70b does not fit h200"), std::string::npos) << csv.err;
  // --weights-bytes over the memory: the same, naming the flag, no dtype to suggest.
  const json given = model_json("--model llama-3.1-8b --device h200 --weights-bytes 300e9", dir);
  ASSERT_EQ(given.at("does_not_fit").size(), 1u);
  EXPECT_EQ(given.at("does_not_fit")[0].at("devices_needed"), 3);
  EXPECT_TRUE(given.at("does_not_fit")[0].at("weights_dtypes_that_fit").empty());
  EXPECT_NE(given.at("does_not_fit")[0].at("message").get<std::string>().find("--weights-bytes"),
            std::string::npos);
  // With fp8 weights it fits: rows, and no such line.
  const json fp8 = model_json(args + " --weights-dtype fp8_e4m3", dir);
  EXPECT_EQ(fp8.at("rows").size(), 9u * 3 * 2);
  EXPECT_TRUE(fp8.at("does_not_fit").empty());
}

// A batch above the largest that fits cannot run: the table gives it no tok/s. llama-3.1-8b at
// 8k f16 KV fits 116 sequences on the H200 (Llama8bOnH200Batch1ByHand): 128 and 256 do not.
TEST(CliModelLayer, NoThroughputForABatchAboveTheMaxBatch) {
  TempDir dir;
  const CliResult m = run_cli(
      "model --model llama-3.1-8b --device h200 --kernel-kind tensor-core --format md", dir.path());
  ASSERT_EQ(m.code, 0) << m.err;
  const auto rows = md_rows(m.out, "llama-3.1-8b");
  ASSERT_EQ(rows.size(), 9u + 1) << m.out;  // the batch rows, then the knee's
  constexpr std::size_t kBatch = 4, kTokens = 11, kMaxBatch = 14;
  for (std::size_t i = 0; i < 9; ++i) {
    ASSERT_EQ(rows[i].size(), 15u) << m.out;
    EXPECT_EQ(rows[i][kMaxBatch], "116");
    const int batch = std::stoi(rows[i][kBatch]);
    if (batch > 116) {
      EXPECT_EQ(rows[i][kTokens], "-") << batch;
    } else {
      EXPECT_GT(std::stod(rows[i][kTokens]), 0) << batch;
    }
  }
  EXPECT_NE(m.out.find("tok/s is '-' for a batch above it"), std::string::npos) << m.out;
  // The knee (128) and the plateau (256) are batches beyond memory: named, without tok/s.
  const std::vector<std::string>& knee = rows[9];
  ASSERT_EQ(knee.size(), 12u) << m.out;
  EXPECT_EQ(knee[5], "128");
  EXPECT_EQ(knee[6], "-");
  EXPECT_EQ(knee[7], "- (256)");
  EXPECT_EQ(knee[11], "beyond memory");
  // Where the knee fits (4k context, h = 0.9 shares most of the KV), its tok/s is given.
  const CliResult fits = run_cli(
      "model --model llama-3.1-8b --device h200 --kernel-kind cascade --context 4096 "
      "--hit-rate 0.9 --batch 1,2,4,8 --format md",
      dir.path());
  ASSERT_EQ(fits.code, 0) << fits.err;
  const auto small = md_rows(fits.out, "llama-3.1-8b");
  ASSERT_EQ(small.size(), 4u + 1) << fits.out;
  EXPECT_GT(std::stod(small[4][6]), 0) << fits.out;
  EXPECT_NE(small[4][7].find(" (8)"), std::string::npos) << fits.out;
  EXPECT_NE(small[4][7][0], '-') << fits.out;
}

// ------------------------------------------------------------------------------- attention scope

// Attention scope prints what the calculator printed before it knew weights: the same keys.
TEST(CliModelAttention, OutputKeepsItsKeys) {
  TempDir dir;
  const json j = model_json("--scope attention", dir);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"device", "weights_bytes", "block_size", "prefix_groups",
                                         "q_dtype", "rows"}));
  EXPECT_EQ(j.at("rows").size(), 3u);  // batch 1, three kinds
  EXPECT_EQ(j.at("q_dtype"), "f16");
  EXPECT_TRUE(j.at("rows")[0].contains("tokens_per_s_attention_only"));
  const CliResult t = run_cli("model --scope attention", dir.path());
  EXPECT_EQ(t.out.rfind("NVIDIA H200 SXM 141GB (h200): 4.80 TB/s datasheet bandwidth,", 0), 0u)
      << t.out;
}

TEST(CliModelAttention, Llama8bOnH200MatchesHandComputedValues) {
  TempDir dir;
  const CliResult r = run_cli(
      "model --scope attention --model llama-3.1-8b --device h200 --context 8192 --batch 1,64 "
      "--kv-dtype f16,fp8_e4m3 --kernel-kind cascade --format json",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("rows").size(), 4u);
  const json& f16 = j.at("rows")[0];  // kv dtype outer, batch inner
  // Per token per layer: K and V, 8 KV heads x 128 dims x 2 bytes = 4096 B; x 32 layers.
  EXPECT_EQ(f16.at("kv_bytes_per_token_per_layer"), 4096);
  EXPECT_EQ(f16.at("kv_bytes_per_token_all_layers"), 131072);
  // One step, one layer, batch 1: 8192 x 4096 KV + q 8192 + out 8192 + 512 table entries x 4 + 4.
  EXPECT_EQ(f16.at("bytes_per_step_per_layer").get<double>(), 33554432.0 + 8192 + 8192 + 2048 + 4);
  EXPECT_EQ(f16.at("bytes_per_step_all_layers").get<double>(), 33572868.0 * 32);
  EXPECT_EQ(f16.at("bytes_streamed_per_step_all_layers").get<double>(), 33572868.0 * 32);
  EXPECT_EQ(f16.at("kernel_kind"), "cascade");
  EXPECT_EQ(f16.at("bound_by"), "memory");
  EXPECT_NEAR(f16.at("t_roof_s").get<double>(), 33572868.0 * 32 / 4.8e12, 1e-12);
  EXPECT_NEAR(f16.at("tokens_per_s_attention_only").get<double>(), 4.8e12 / (33572868.0 * 32),
              1e-6);
  // 141e9 B / (8192 tokens x 131072 B) = 131.3 -> 131 sequences.
  EXPECT_EQ(f16.at("max_batch_in_memory"), 131);
  const json& f16_64 = j.at("rows")[1];
  EXPECT_EQ(f16_64.at("batch"), 64);
  EXPECT_NEAR(f16_64.at("tokens_per_s_attention_only").get<double>(),
              64 * 4.8e12 / ((33554432.0 + 8192 + 8192 + 2048 + 4) * 64 * 32), 1e-6);
  const json& fp8 = j.at("rows")[2];
  EXPECT_EQ(fp8.at("kv_dtype"), "fp8_e4m3");
  EXPECT_EQ(fp8.at("kv_bytes_per_token_per_layer"), 2048);
  EXPECT_EQ(fp8.at("max_batch_in_memory"), 262);  // 141e9 / (8192 x 65536)

  EXPECT_EQ(j.at("device").at("tensor_f16_flops").get<double>(), 989.4e12);
  EXPECT_EQ(j.at("device").at("tensor_fp8_flops").get<double>(), 1978.9e12);

  // Weights subtracted: (141e9 - 16e9) / 2^30 = 116.4 -> 116.
  const CliResult w = run_cli(
      "model --scope attention --device h200 --context 8192 --weights-bytes 16e9 --format json",
      dir.path());
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_EQ(json::parse(w.out).at("rows")[0].at("max_batch_in_memory"), 116);
  // A device name resolves through the datasheet's name patterns.
  const CliResult n =
      run_cli("model --scope attention --device 'NVIDIA H100 80GB HBM3' --format json", dir.path());
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_EQ(json::parse(n.out).at("device").at("key"), "h100-sxm");
  // Full prefix sharing: memory does not grow with batch.
  const CliResult s =
      run_cli("model --scope attention --context 1024 --hit-rate 1 --format json", dir.path());
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(json::parse(s.out).at("rows")[0].at("max_batch_in_memory").is_null());
  // The table states its assumptions.
  const CliResult t = run_cli("model --scope attention", dir.path());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("Attention only"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("weights excluded"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Kernel kinds:"), std::string::npos) << t.out;
}

// The three kinds of kernel side by side (the default): per (shape, kind) one row, kinds
// innermost. Hand numbers for llama-3.1-8b, context 8192, batch 8, block 16, one prefix group
// at h = 0.9: 460 shared blocks (floor(0.9 x 8192 / 16)), 52 private ones per sequence.
//   unique KV tokens  = 460 x 16 + 8 x 52 x 16 = 14016;   logical = 8 x 8192 = 65536
//   other bytes/layer = q 65536 + out 65536 + 8 x 512 table entries x 4 + 8 x 4 = 147488
TEST(CliModelAttention, KernelKindsReadLogicalOrUniqueBytesUnderTheirOwnRoof) {
  TempDir dir;
  const CliResult r = run_cli(
      "model --scope attention --model llama-3.1-8b --device h200 --context 8192 --batch 8 "
      "--hit-rate 0,0.9 "
      "--format json",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json rows = json::parse(r.out).at("rows");
  ASSERT_EQ(rows.size(), 6u);  // 2 hit rates x 3 kinds
  const char* kinds[] = {"cuda-core", "tensor-core", "cascade"};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows[i].at("kernel_kind"), kinds[i % 3]) << i;
  const auto streamed = [&](int i) {
    return rows[i].at("bytes_streamed_per_step_per_layer").get<double>();
  };
  // h = 0: nothing shared, every kind reads the same bytes.
  EXPECT_EQ(streamed(0), streamed(2));
  EXPECT_EQ(streamed(1), streamed(2));
  // h = 0.9: the unaware kinds stream the logical bytes, cascade the unique ones.
  const double unique = 14016.0 * 4096 + 147488, logical = 65536.0 * 4096 + 147488;
  EXPECT_EQ(streamed(3), logical);
  EXPECT_EQ(streamed(4), logical);
  EXPECT_EQ(streamed(5), unique);
  EXPECT_EQ(rows[5].at("bytes_per_step_per_layer").get<double>(), unique);  // unique: any kind
  EXPECT_EQ(rows[3].at("bytes_per_step_per_layer").get<double>(), unique);
  EXPECT_EQ(rows[3].at("prefix_aware"), false);
  EXPECT_EQ(rows[5].at("prefix_aware"), true);
  // All memory-bound here: the roofline times scale by the byte model's ratio.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows[i].at("bound_by"), "memory") << i;
  EXPECT_NEAR(rows[5].at("t_roof_s").get<double>() / rows[3].at("t_roof_s").get<double>(),
              unique / logical, 1e-12);
  EXPECT_NEAR(rows[5].at("tokens_per_s_attention_only").get<double>(), 8 * 4.8e12 / (unique * 32),
              1e-6);
  // The intensity of what each kind reads; the unique one stays a property of the shape.
  EXPECT_EQ(rows[3].at("arithmetic_intensity_streamed").get<double>(),
            4.0 * 32 * 65536 * 128 / logical);
  EXPECT_EQ(rows[5].at("arithmetic_intensity_streamed").get<double>(),
            4.0 * 32 * 65536 * 128 / unique);
  EXPECT_EQ(rows[3].at("arithmetic_intensity"), rows[5].at("arithmetic_intensity"));
  EXPECT_EQ(rows[3].at("compute_unit"), "fma");
  EXPECT_EQ(rows[4].at("compute_unit"), "tensor_core");
  EXPECT_EQ(rows[3].at("flop_roof").get<double>(), 66.9e12);
  EXPECT_EQ(rows[4].at("flop_roof").get<double>(), 989.4e12);

  // csv and md carry the same fields.
  const CliResult c = run_cli(
      "model --scope attention --context 8192 --batch 8 --hit-rate 0.9 --kernel-kind "
      "cascade,cuda-core --format csv",
      dir.path());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find(",kernel_kind,prefix_aware,compute_unit,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(",bytes_streamed_per_step_all_layers,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(",flop_roof,bound_by,t_roof_s,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(",cascade,1,tensor_core,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(",cuda-core,0,fma,"), std::string::npos) << c.out;
  const CliResult m =
      run_cli("model --scope attention --context 8192 --hit-rate 0.9 --format md", dir.path());
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("| kernel kind |"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("| bound |"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("| cascade |"), std::string::npos) << m.out;
}

// llama-3.1-70b (group 8) with fp8 KV: ~16 FLOP per unique byte, over the H200's fp32 ridge
// (66.9 TFLOP/s / 4.8 TB/s = 13.9) and far under its tensor-core one (989.4 / 4.8 = 206).
TEST(CliModelAttention, CudaCoreIsFmaBoundWhereTensorCoresAreMemoryBound) {
  TempDir dir;
  const CliResult r = run_cli(
      "model --scope attention --model llama-3.1-70b --device h200 --context 8192 --kv-dtype "
      "fp8_e4m3 "
      "--kernel-kind cuda-core,tensor-core --format json",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json rows = json::parse(r.out).at("rows");
  ASSERT_EQ(rows.size(), 2u);
  const json& fma = rows[0];
  const json& tc = rows[1];
  EXPECT_EQ(fma.at("bound_by"), "fma");
  EXPECT_EQ(tc.at("bound_by"), "memory");
  const double flops = fma.at("flops_per_step_all_layers").get<double>();
  EXPECT_NEAR(fma.at("t_roof_s").get<double>(), flops / 66.9e12, 1e-15);
  EXPECT_NEAR(tc.at("t_roof_s").get<double>(),
              tc.at("bytes_streamed_per_step_all_layers").get<double>() / 4.8e12, 1e-15);
  EXPECT_GT(tc.at("tokens_per_s_attention_only").get<double>(),
            fma.at("tokens_per_s_attention_only").get<double>());
  const CliResult t = run_cli(
      "model --scope attention --model llama-3.1-70b --context 8192 --kv-dtype fp8_e4m3 "
      "--kernel-kind cuda-core",
      dir.path());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find(" fma "), std::string::npos) << t.out;
}

}  // namespace
}  // namespace decodebench::testing
