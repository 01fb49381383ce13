// `decodebench quantize` and `decodebench quant-error` run as subprocesses (cli_run.h): the
// round trip equals the library's, the stored form reads back with any .npy reader's layout,
// quant-error on built-in data, on a `sweep --dump` directory and on a directory of layers, the
// speed half on a tiny CPU sweep, and bad input (exit 2 naming what is wrong).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/cli_run.h"
#include "common/npy.h"
#include "device/float_formats.h"
#include "quant/kv_quant.h"

namespace decodebench::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * i) * (1.f + (i % 64 == 5) * 9.f);
  return v;
}

TEST(CliQuantize, RoundTripIsTheLibrarysAndCodesAreWritten) {
  TempDir dir;
  const std::int64_t shape[] = {3, 2, 16, 64};
  const std::vector<float> x = ramp(3 * 2 * 16 * 64);
  write_npy(dir / "k.npy", x, shape);
  for (const char* format : {"int8", "int4", "int4_token", "fp8_e4m3"}) {
    const bool codes = std::string(format) != "fp8_e4m3";
    const CliResult r = run_cli(fmt::format("quantize --kv-dtype {} --tensor k '{}' '{}'{}", format,
                                            (dir / "k.npy").string(), (dir / "out.npy").string(),
                                            codes ? " --codes '" + (dir / "c").string() + "'" : ""),
                                dir.path());
    ASSERT_EQ(r.code, 0) << format << ": " << r.err;
    EXPECT_NE(r.err.find("B per token and head"), std::string::npos) << r.err;
    const quant::KvFormat f = quant::parse_format(format);
    const std::vector<float> want =
        quant::dequantize(quant::quantize(f, quant::KvTensor::k, {3, 2, 16, 64}, x));
    const NpyArray out = read_npy(dir / "out.npy");
    EXPECT_EQ(out.shape, (std::vector<std::int64_t>{3, 2, 16, 64}));
    EXPECT_EQ(out.as_float(), want) << format;
    if (!codes) continue;
    const NpyArray c = read_npy(dir / "c" / "codes.npy");
    const NpyArray s = read_npy(dir / "c" / "scales.npy");
    EXPECT_EQ(s.descr, "<f2");
    if (f == quant::KvFormat::int8) {
      EXPECT_EQ(c.descr, "|i1");
      EXPECT_EQ(s.shape, (std::vector<std::int64_t>{3, 2, 16}));
    } else {
      EXPECT_EQ(c.descr, "|u1");
      EXPECT_EQ(c.shape.back(), 32);  // two codes a byte
      EXPECT_TRUE(fs::exists(dir / "c" / "zeros.npy"));
      // Keys of int4 are scaled per (block, head, channel); int4_token per 32 channels.
      const std::vector<std::int64_t> per_channel = {3, 2, 64}, per_group = {3, 2, 16, 2};
      EXPECT_EQ(s.shape, f == quant::KvFormat::int4 ? per_channel : per_group);
    }
    fs::remove_all(dir / "c");
  }
}

TEST(CliQuantize, BadInputIsNamed) {
  TempDir dir;
  const std::int64_t shape3[] = {4, 2, 64};
  write_npy(dir / "x3.npy", ramp(4 * 2 * 64), shape3);
  const std::int64_t shape4[] = {1, 1, 4, 48};
  write_npy(dir / "x48.npy", ramp(4 * 48), shape4);
  struct Case {
    std::string args, message;
  };
  const std::string x3 = (dir / "x3.npy").string(), x48 = (dir / "x48.npy").string();
  const std::string out = (dir / "o.npy").string();
  for (const Case& c : std::vector<Case>{
           {"quantize --kv-dtype int3 --tensor k '" + x48 + "' '" + out + "'",
            "unknown KV format 'int3'"},
           {"quantize --kv-dtype int8 --tensor q '" + x48 + "' '" + out + "'", "valid: k, v"},
           {"quantize --kv-dtype int8 --tensor k '" + x3 + "' '" + out + "'",
            "expected float32 [num_blocks, kv_heads, block_size, head_dim]"},
           {"quantize --kv-dtype int4 --tensor v '" + x48 + "' '" + out + "'",
            "not a multiple of 32"},
           {"quantize --kv-dtype f16 --tensor v '" + x48 + "' '" + out + "' --codes '" +
                (dir / "c").string() + "'",
            "stores no codes"},
       }) {
    const CliResult r = run_cli(c.args, dir.path());
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

json quant_error_json(const std::string& args, const fs::path& scratch) {
  const CliResult r = run_cli("quant-error " + args + " --format json", scratch);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? json::parse(r.out) : json();
}

const json& format_entry(const json& j, const std::string& name) {
  for (const json& f : j.at("formats")) {
    if (f.at("format") == name) return f;
  }
  ADD_FAILURE() << "no format " << name;
  static const json none;
  return none;
}

TEST(CliQuantError, BuiltInOutliersFavourPerChannelKeys) {
  TempDir dir;
  const json j = quant_error_json("--data outliers --no-speed --model llama-3.1-8b", dir.path());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("num_kv_heads"), 8);
  EXPECT_EQ(j.at("head_dim"), 128);
  EXPECT_TRUE(j.at("speed").is_null());
  ASSERT_EQ(j.at("formats").size(), 5u);
  const json& f16 = format_entry(j, "f16").at("overall");
  const json& int8 = format_entry(j, "int8").at("overall");
  const json& int4 = format_entry(j, "int4").at("overall");
  const json& naive = format_entry(j, "int4_token").at("overall");
  EXPECT_LT(f16.at("attn_kl_mean").get<double>(), 1e-6);
  EXPECT_LT(f16.at("k_rel_rms").get<double>(), int8.at("k_rel_rms").get<double>());
  EXPECT_LT(int8.at("out_rel_l2").get<double>(), int4.at("out_rel_l2").get<double>());
  // The point of per-channel keys: the outlier channels no longer set every token's scale.
  EXPECT_LT(2 * int4.at("k_rel_rms").get<double>(), naive.at("k_rel_rms").get<double>());
  EXPECT_LT(int4.at("attn_kl_mean").get<double>(), naive.at("attn_kl_mean").get<double>());
  // Values are quantized the same way by both int4 layouts.
  EXPECT_EQ(int4.at("v_rel_rms"), naive.at("v_rel_rms"));
}

TEST(CliQuantError, ReadsADumpAndADirectoryOfLayers) {
  TempDir dir;
  const fs::path dump = dir / "dump";
  const CliResult s = run_cli(
      "sweep --backend cpu --model llama-3.1-8b --batch 2 --context 128 --kv-dtype f16 "
      "--min-samples 2 --min-time 0 --max-noise 1 --timeout 5 --warm -q --format json "
      "--ceilings '" +
          fake_cpu_ceilings(dir).string() + "' --dump '" + dump.string() + "'",
      dir.path());
  ASSERT_EQ(s.code, 0) << s.err;
  const CliResult printed = run_cli("quant-error --data '" + dump.string() +
                                        "' --no-speed --out '" + (dir / "one.json").string() + "'",
                                    dir.path());
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_NE(printed.out.find("K rel rms"), std::string::npos) << printed.out;
  const json one = json::parse(read_file(dir / "one.json"));
  ASSERT_TRUE(one.is_object());
  EXPECT_EQ(one.at("layers"), json::array({"dump"}));
  EXPECT_EQ(one.at("num_q_heads"), 32);
  // The dump's f16 cache is already f16: quantizing it to f16 changes nothing.
  EXPECT_EQ(format_entry(one, "f16").at("overall").at("k_rel_rms"), 0.0);

  // Two layers, the same dump twice: every measure pools to the one layer's.
  const fs::path layers = dir / "layers";
  fs::create_directories(layers);
  fs::copy(dump, layers / "layer_00", fs::copy_options::recursive);
  fs::copy(dump, layers / "layer_01", fs::copy_options::recursive);
  const json two = quant_error_json("--data '" + layers.string() + "' --no-speed", dir.path());
  ASSERT_TRUE(two.is_object());
  EXPECT_EQ(two.at("layers"), json::array({"layer_00", "layer_01"}));
  const json& a = format_entry(one, "int4").at("overall");
  const json& b = format_entry(two, "int4").at("overall");
  EXPECT_NEAR(a.at("out_rel_l2").get<double>(), b.at("out_rel_l2").get<double>(), 1e-12);
  EXPECT_NEAR(a.at("attn_kl_mean").get<double>(), b.at("attn_kl_mean").get<double>(), 1e-15);
  EXPECT_EQ(format_entry(two, "int4").at("layers").size(), 2u);

  // A planted fault: a block table entry outside the pool is named, not read.
  const NpyArray table = read_npy(layers / "layer_01" / "block_tables.npy");
  std::vector<std::int32_t> bad_table = table.as_int32();
  bad_table.at(table.shape[1]) = 99;  // sequence 1's first block
  write_npy(layers / "layer_01" / "block_tables.npy", bad_table, table.shape);
  const CliResult bad =
      run_cli("quant-error --data '" + layers.string() + "' --no-speed", dir.path());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("outside the pool"), std::string::npos) << bad.err;
}

TEST(CliQuantError, SpeedFromASweepInTheSameRun) {
  TempDir dir;
  const json j = quant_error_json(
      "--data gaussian --tokens 256 --kv-dtype f16,int8 --backend cpu "
      "--model llama-3.1-8b --batch 1 --context 64 --min-samples 3 --min-time 0 --max-noise 1 "
      "--warm --ceilings '" +
          fake_cpu_ceilings(dir).string() + "'",
      dir.path());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("speed").at("backend"), "cpu");
  EXPECT_EQ(j.at("speed").at("num_layers"), 32);
  const json& f16 = format_entry(j, "f16");
  const json& int8 = format_entry(j, "int8");
  EXPECT_GT(f16.at("tokens_per_s").get<double>(), 0);
  EXPECT_EQ(f16.at("not_measured"), "");
  EXPECT_GT(int8.at("tokens_per_s").get<double>(), 0);  // the cpu decode reads int8
  EXPECT_EQ(int8.at("not_measured"), "");
  EXPECT_EQ(f16.at("status"), "ok");  // the rule the flags set held
  EXPECT_EQ(int8.at("status"), "ok");
  // Bytes per step: one layer's KV at 64 tokens x 8 KV heads (+ q and out in f16).
  const double q_out = 2.0 * 32 * 128 * 2;
  EXPECT_DOUBLE_EQ(f16.at("bytes_per_step").get<double>(), 64.0 * 8 * 2 * 256 + q_out);
  EXPECT_DOUBLE_EQ(int8.at("bytes_per_step").get<double>(), 64.0 * 8 * 2 * 130 + q_out);
}

// A tokens/s the stopping rule did not stand behind carries the sweep's marks, in the table, the
// JSON and the progress line, with a line saying what they mean.
TEST(CliQuantError, ATokensPerSecondCutShortIsMarked) {
  TempDir dir;
  const fs::path js = dir / "q.json";
  const CliResult r = run_cli(
      "quant-error --data gaussian --tokens 64 --kv-dtype f16 --backend cpu --model llama-3.1-8b "
      "--batch 1 --context 64 --min-samples 1000000 --timeout 0.3 --warm --ceilings '" +
          fake_cpu_ceilings(dir).string() + "' --out '" + js.string() + "'",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(read_file(js));
  const std::string status = format_entry(j, "f16").at("status").get<std::string>();
  EXPECT_EQ(status.rfind("ok*", 0), 0u) << status;
  EXPECT_NE(r.out.find(" " + status + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("* stopped at the timeout"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[1/1] elapsed "), std::string::npos)
      << "the sweep's progress line: " << r.err;
}

TEST(CliQuantError, BadInputIsNamed) {
  TempDir dir;
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"quant-error --data uniform --no-speed", "valid: gaussian, outliers"},
           {"quant-error --data gaussian --kv-dtype f16,int2 --no-speed", "unknown KV format"},
           {"quant-error --data gaussian --batch 1,2 --no-speed", "one point per KV format"},
           {"quant-error --data gaussian --timeout 5 --no-speed", "--no-speed measures nothing"},
           {"quant-error --data gaussian --min-time -1", "min"},
           {"quant-error --data gaussian --context 1k:2k --no-speed", "a fixed length"},
           {"quant-error --data gaussian --kv-dtypes f16 --no-speed",
            "unknown option --kv-dtypes; did you mean --kv-dtype?"},
           {"quant-error --data gaussian --block-size 12 --no-speed", "power of two"},
           {"quant-error --data '" + dir.path().string() + "' --no-speed", "neither a dump"},
       }) {
    const CliResult r = run_cli(c.args, dir.path());
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

// The spellings before the one command language still run, and say the new names; the axis
// values read as the sweep reads them.
TEST(CliQuantError, OldSpellingsAnsweredWithTheNewNames) {
  TempDir dir;
  const fs::path js = dir / "old.json";
  const CliResult r = run_cli(
      "quant-error --data gaussian --tokens 64 --no-speed --formats int8 "
      "--context 1k --json '" +
          js.string() + "'",
      dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("quant-error --formats is now --kv-dtype"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("quant-error --json is now --out"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("K rel rms"), std::string::npos) << "stdout prints the table";
  ASSERT_TRUE(fs::exists(js));
  const json j = json::parse(read_file(js));
  ASSERT_EQ(j.at("formats").size(), 1u);
  EXPECT_EQ(j.at("formats")[0].at("format"), "int8");
}

// A small dump in the --dump layout, written field by field so that each hostile input below
// changes one thing: Hq 2, Hkv 1, head_dim 32, blocks of 4 tokens, 3 blocks, batch 2.
struct SmallDump {
  std::vector<std::int64_t> q_shape = {2, 2, 32}, kv_shape = {3, 1, 4, 32}, table_shape = {2, 3};
  std::vector<float> q = ramp(2 * 2 * 32), k = ramp(3 * 4 * 32), v = ramp(3 * 4 * 32);
  std::vector<std::int32_t> tables = {0, 1, 2, 2, 1, -1}, lens = {9, 7};
  json meta = {
      {"num_q_heads", 2},      {"num_kv_heads", 1},      {"head_dim", 32}, {"block_size", 4},
      {"softmax_scale", 0.17}, {"k_scale", 1.0},         {"v_scale", 1.0}, {"batch", 2},
      {"num_blocks", 3},       {"max_blocks_per_seq", 3}};
  bool with_meta = true;
  void write(const fs::path& dir) const {
    fs::create_directories(dir);
    write_npy(dir / "q.npy", q, q_shape);
    write_npy(dir / "k_cache.npy", k, kv_shape);
    write_npy(dir / "v_cache.npy", v, kv_shape);
    write_npy(dir / "block_tables.npy", tables, table_shape);
    write_npy(dir / "context_lens.npy", lens, std::vector<std::int64_t>{table_shape[0]});
    if (with_meta) write_file(dir / "meta.json", meta.dump());
  }
};

// Each class of hostile dump the reader once let through: exit 2, "decodebench: error:" and a
// message naming the file and what is wrong, and no --out written (it is
// checked before anything is measured, and nothing is written before the input is whole).
TEST(CliQuantError, HostileDumpsAreRefusedByName) {
  TempDir dir;
  {  // The unplanted dump reads: the faults below are what fails.
    SmallDump good;
    good.write(dir / "good");
    const CliResult r = run_cli(
        "quant-error --no-speed --kv-dtype f16,int8 --data '" + (dir / "good").string() + "'",
        dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  struct Case {
    std::string name;
    std::function<void(SmallDump&)> plant;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      // An empty pool once divided by its 0 KV heads (SIGFPE) before any shape check.
      {"kv-heads-0",
       [](SmallDump& d) {
         d.kv_shape = {3, 0, 4, 32};
         d.k.clear();
         d.v.clear();
         d.meta["num_kv_heads"] = 0;
       },
       {"meta.json: 'num_kv_heads' is 0", ">= 1"}},
      {"pool-empty-meta-agrees",
       [](SmallDump& d) {
         d.kv_shape = {3, 0, 4, 32};
         d.k.clear();
         d.v.clear();
       },
       {"k_cache.npy is [3, 0, 4, 32]", "meta.json says 1 KV heads"}},
      // A NaN in q once scored perfect (output error 0, KL nan) with exit 0.
      {"nan-in-q",
       [](SmallDump& d) { d.q[1 * 64 + 0 * 32 + 5] = NAN; },
       {"q.npy: [1, 0, 5] is nan", "finite"}},
      {"inf-in-v",
       [](SmallDump& d) { d.v[2 * 128 + 3 * 32 + 31] = -INFINITY; },
       {"v_cache.npy: [2, 0, 3, 31] is -inf"}},
      {"k-scale-overflows",
       [](SmallDump& d) { d.meta["k_scale"] = 1e38; },
       {"k_cache.npy", "overflows"}},
      {"k-scale-0",
       [](SmallDump& d) { d.meta["k_scale"] = 0; },
       {"meta.json: 'k_scale' is 0", "finite number > 0"}},
      // meta.json's shape keys were never compared with the arrays.
      {"meta-disagrees",
       [](SmallDump& d) {
         d.meta["head_dim"] = 128;
         d.meta["num_kv_heads"] = 7;
         d.meta["block_size"] = 3;
         d.meta["num_q_heads"] = 7;
       },
       {"k_cache.npy is [3, 1, 4, 32]", "meta.json says 7 KV heads, block_size 3, head_dim 128"}},
      {"meta-batch",
       [](SmallDump& d) { d.meta["batch"] = 5; },
       {"meta.json: 'batch' is 5, but the arrays have 2"}},
      {"meta-missing-key",
       [](SmallDump& d) { d.meta.erase("head_dim"); },
       {"meta.json: key 'head_dim': missing"}},
      // Nothing to measure: once all errors 0.
      {"batch-0",
       [](SmallDump& d) {
         d.q_shape = {0, 2, 32};
         d.q.clear();
         d.table_shape = {0, 3};
         d.tables.clear();
         d.lens.clear();
         d.meta.erase("batch");
       },
       {"q.npy holds no query (batch 0)"}},
      {"zero-blocks",
       [](SmallDump& d) {
         d.kv_shape = {0, 1, 4, 32};
         d.k.clear();
         d.v.clear();
         d.meta.erase("num_blocks");
       },
       {"k_cache.npy holds no block"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SmallDump d;
    c.plant(d);
    const fs::path data = dir / c.name;
    d.write(data);
    const fs::path js = dir / (c.name + ".json");
    const CliResult r = run_cli("quant-error --no-speed --kv-dtype f16,int8 --data '" +
                                    data.string() + "' --out '" + js.string() + "'",
                                dir.path());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("decodebench: error: ", 0), 0u) << r.err;
    for (const std::string& says : c.says) EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(js));
  }
}

// A layer directory without meta.json is a dump that did not finish (kv_dump.py writes meta.json
// last): refused, not skipped, or the overall figures would silently cover fewer layers. A folder
// holding none of a dump's files is not a layer: skipped, and stderr says so.
TEST(CliQuantError, UnfinishedLayersAreRefusedOtherFoldersNoted) {
  TempDir dir;
  const fs::path layers = dir / "layers";
  SmallDump().write(layers / "layer_00");
  SmallDump().write(layers / "layer_01");
  fs::create_directories(layers / "plots");
  write_file(layers / "plots" / "readme.txt", "not a layer");
  const std::string args =
      "quant-error --no-speed --kv-dtype int8 --format json --data '" + layers.string() + "'";
  const CliResult ok = run_cli(args, dir.path());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(json::parse(ok.out).at("layers"), json::array({"layer_00", "layer_01"}));
  EXPECT_NE(ok.err.find("note: --data " + layers.string() + ": skipped plots/"), std::string::npos)
      << ok.err;

  fs::remove(layers / "layer_01" / "meta.json");
  const CliResult bad = run_cli(args + " --out '" + (dir / "o.json").string() + "'", dir.path());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_EQ(bad.err.rfind("decodebench: error: --data ", 0), 0u) << bad.err;
  EXPECT_NE(bad.err.find("layer_01: holds q.npy"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("no meta.json"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "o.json"));
}

// The .npy reader and quantize's own checks, through the command: a negative dimension (once read
// as positive), an empty pool (once "-nan B per token"), a NaN, and --codes that cannot be written
// (once checked after OUT.npy was). No output file is left behind by any of them.
TEST(CliQuantize, HostileInputsWriteNothing) {
  TempDir dir;
  const std::int64_t shape[] = {2, 1, 4, 32};
  std::vector<float> x = ramp(2 * 4 * 32);
  write_npy(dir / "x.npy", x, shape);
  x[37] = NAN;
  write_npy(dir / "nan.npy", x, shape);
  write_npy(dir / "empty.npy", std::vector<float>{}, std::vector<std::int64_t>{0, 1, 4, 32});
  // A header numpy never writes: shape (2, -1, 4, 32), the data of (2, 1, 4, 32).
  std::string bytes = read_file(dir / "x.npy");
  const std::size_t at = bytes.find("(2, 1, 4, 32)");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 13, "(2,-1, 4, 32)");
  write_file(dir / "negative.npy", bytes);
  write_file(dir / "a-file", "in the way of --codes");
  const fs::path out = dir / "o.npy";
  struct Case {
    std::string args;
    std::vector<std::string> says;
  };
  const std::string x_npy = (dir / "x.npy").string();
  for (const Case& c : std::vector<Case>{
           {"--kv-dtype int8 --tensor k '" + (dir / "negative.npy").string() + "'",
            {"negative.npy: shape (2,-1, 4, 32): dimension -1 is negative"}},
           {"--kv-dtype int8 --tensor k '" + (dir / "empty.npy").string() + "'",
            {"empty.npy: shape [0, 1, 4, 32] is empty", ">= 1"}},
           {"--kv-dtype int8 --tensor k '" + (dir / "nan.npy").string() + "'",
            {"nan.npy: [0, 0, 1, 5] is nan"}},
           {"--kv-dtype int8 --tensor k '" + x_npy + "' --codes '" + (dir / "a-file").string() +
                "'",
            {"--codes", "a-file", "not a directory"}},
           {"--kv-dtype f16 --tensor k '" + x_npy + "' --codes '" + (dir / "c").string() + "'",
            {"--codes: f16 stores no codes"}},
       }) {
    SCOPED_TRACE(c.args);
    const CliResult r = run_cli("quantize " + c.args + " '" + out.string() + "'", dir.path());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("decodebench: error: ", 0), 0u) << r.err;
    for (const std::string& says : c.says) EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(dir / "c"));
  }
  // The same command without the fault writes both.
  const CliResult r = run_cli("quantize -q --kv-dtype int8 --tensor k '" + x_npy + "' '" +
                                  out.string() + "' --codes '" + (dir / "c").string() + "'",
                              dir.path());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(fs::exists(dir / "c" / "codes.npy"));
}

// f16 elements of a "<f2" array as floats.
std::vector<float> f16_values(const NpyArray& a) {
  std::vector<float> out(a.elements());
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, a.data.data() + 2 * i, 2);
    out[i] = floatfmt::f16_to_float(bits);
  }
  return out;
}

// `--dump` of an integer-format point: k_cache/v_cache are the dequantized values the kernel read,
// and the codes, scales and zeros beside them rebuild them exactly (int4: fma(code, s, z) with the
// block's channel scales for K); k_source is what was quantized, within one step of the format.
TEST(CliQuantDump, QuantizedPointKeepsItsCodesScalesAndSource) {
  for (const char* format : {"int8", "int4"}) {
    SCOPED_TRACE(format);
    TempDir dir;
    const fs::path dump = dir / "dump";
    const CliResult s = run_cli(
        std::string("sweep --backend cpu --model llama-3.1-8b --batch 2 --context 40 --kv-dtype ") +
            format +
            " --min-samples 2 --min-time 0 --max-noise 1 --timeout 5 --warm -q --format json "
            "--ceilings '" +
            fake_cpu_ceilings(dir).string() + "' --dump '" + dump.string() + "'",
        dir.path());
    ASSERT_EQ(s.code, 0) << s.err;
    const json meta = json::parse(read_file(dump / "meta.json"));
    EXPECT_EQ(meta.at("kv_dtype"), format);
    EXPECT_EQ(meta.at("status"), "ok");
    const NpyArray cache = read_npy(dump / "k_cache.npy");
    const NpyArray source = read_npy(dump / "k_source.npy");
    const NpyArray codes = read_npy(dump / "k_codes.npy");
    const NpyArray scales = read_npy(dump / "k_scales.npy");
    ASSERT_EQ(cache.shape.size(), 4u);
    const std::int64_t blocks = cache.shape[0], heads = cache.shape[1], p = cache.shape[2],
                       d = cache.shape[3];
    EXPECT_EQ(source.shape, cache.shape);
    EXPECT_EQ(scales.descr, "<f2");
    const std::vector<float> k = cache.as_float();
    const std::vector<float> x = source.as_float();
    const std::vector<float> sc = f16_values(scales);
    double worst = 0, worst_step = 0;
    if (std::string(format) == "int8") {
      EXPECT_EQ(codes.descr, "|i1");
      EXPECT_EQ(scales.shape, (std::vector<std::int64_t>{blocks, heads, p}));
      for (std::int64_t i = 0; i < blocks * heads * p * d; ++i) {
        const auto code = static_cast<std::int8_t>(codes.data[i]);
        worst = std::max(worst, std::fabs(k[i] - code * static_cast<double>(sc[i / d])));
        worst_step = std::max(worst_step, std::fabs(x[i] - k[i]) / static_cast<double>(sc[i / d]));
      }
    } else {
      const NpyArray zeros = read_npy(dump / "k_zeros.npy");
      const std::vector<float> z = f16_values(zeros);
      EXPECT_EQ(codes.descr, "|u1");
      EXPECT_EQ(codes.shape, (std::vector<std::int64_t>{blocks, heads, p, d / 2}));
      EXPECT_EQ(scales.shape, (std::vector<std::int64_t>{blocks, heads, d}));  // per channel
      for (std::int64_t i = 0; i < blocks * heads * p * d; ++i) {
        const auto byte = static_cast<std::uint8_t>(codes.data[i / 2]);
        const float code = static_cast<float>(i % 2 == 0 ? byte & 0xf : byte >> 4);
        const std::int64_t g = (i / (p * d)) * d + i % d;  // (block, head, channel)
        worst = std::max(worst, std::fabs(k[i] - static_cast<double>(std::fma(code, sc[g], z[g]))));
        worst_step = std::max(worst_step, std::fabs(x[i] - k[i]) / static_cast<double>(sc[g]));
      }
    }
    EXPECT_EQ(worst, 0.0) << "k_cache is not the codes' values";
    EXPECT_LE(worst_step, 0.5 + 1e-3) << "k_source is not what was quantized";
    EXPECT_TRUE(fs::exists(dump / "v_codes.npy"));
    EXPECT_TRUE(fs::exists(dump / "v_scales.npy"));
  }
}

// Every format of the table (kernels/kv_formats.h) through `sweep --dump` on the cpu backend and
// through `quantize --codes`: a format the dump, the quantize command or the CLI's parsing misses
// fails here by name. The stored form's files follow the table: codes (a signed byte each, or
// packed code_bits a code), scales in the axis' shape, zeros only where the table has them.
TEST(CliQuantDump, EveryTableFormatDumpsAndQuantizes) {
  for (const KvFormatInfo& f : kKvFormats) {
    SCOPED_TRACE(f.name);
    TempDir dir;
    const fs::path dump = dir / "dump";
    const CliResult s = run_cli(
        std::string("sweep --backend cpu --model llama-3.1-8b --batch 1 --context 40 --kv-dtype ") +
            f.name +
            " --min-samples 2 --min-time 0 --max-noise 1 --timeout 5 --warm -q --format json "
            "--ceilings '" +
            fake_cpu_ceilings(dir).string() + "' --dump '" + dump.string() + "'",
        dir.path());
    ASSERT_EQ(s.code, 0) << s.err;
    const json meta = json::parse(read_file(dump / "meta.json"));
    EXPECT_EQ(meta.at("kv_dtype"), f.name);
    EXPECT_EQ(meta.at("status"), "ok");
    const NpyArray cache = read_npy(dump / "k_cache.npy");
    ASSERT_EQ(cache.shape.size(), 4u);
    const std::int64_t d = cache.shape[3];
    for (const bool key : {true, false}) {
      const std::string t = key ? "k" : "v";
      EXPECT_EQ(fs::exists(dump / (t + "_codes.npy")), !f.is_float);
      EXPECT_EQ(fs::exists(dump / (t + "_zeros.npy")), !f.is_float && (f.k.zeros || f.v.zeros));
      if (f.is_float) continue;
      const NpyArray codes = read_npy(dump / (t + "_codes.npy"));
      EXPECT_EQ(codes.shape.back(), f.signed_codes ? d : d * f.code_bits / 8);
      const NpyArray scales = read_npy(dump / (t + "_scales.npy"));
      std::int64_t per_block_head = 1;
      for (std::size_t i = 2; i < scales.shape.size(); ++i) per_block_head *= scales.shape[i];
      EXPECT_EQ(static_cast<std::size_t>(per_block_head),
                kv_scales_per_block_head(f.dtype, key, static_cast<int>(d),
                                         static_cast<int>(cache.shape[2])));
    }
    // quantize round-trips the dumped source (integer) or cache (float) through the format.
    const fs::path in = dump / (f.is_float ? "k_cache.npy" : "k_source.npy");
    const CliResult q =
        run_cli(std::string("quantize -q --kv-dtype ") + f.name + " --tensor k '" + in.string() +
                    "' '" + (dir / "back.npy").string() + "'" +
                    (f.is_float ? "" : " --codes '" + (dir / "codes").string() + "'"),
                dir.path());
    ASSERT_EQ(q.code, 0) << q.err;
    EXPECT_EQ(read_npy(dir / "back.npy").shape, cache.shape);
    if (!f.is_float) {
      EXPECT_TRUE(fs::exists(dir / "codes" / "scales.npy"));
    }
  }
}

}  // namespace
}  // namespace decodebench::testing
