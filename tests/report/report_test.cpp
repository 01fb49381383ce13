// Report JSON round trip, atomic writes, reading errors, knees and the printers.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "report/format.h"
#include "results/knees.h"
#include "results/report.h"
#include "support/host_test_util.h"
#include "support/report_fixtures.h"

namespace decodebench {
namespace {

using test::sample_report;
using test::TempDir;

TEST(ReportJson, RoundTripIsExact) {
  Report r = sample_report();
  r.results[1].roofline.paired_read_Bps = 2.5e12;
  r.results[1].roofline.fraction_paired = 0.75;
  r.results[2].timing = TimingRecord{TimingMethod::graph_replay, 250, /*warm_l2=*/true};
  r.knees = compute_knees(r.results);
  const nlohmann::json j = to_json(r);
  const Report back = report_from_json(j);
  EXPECT_EQ(to_json(back), j);
  // Field-level spot checks, including the NaN <-> null convention and exact doubles.
  ASSERT_EQ(back.results.size(), r.results.size());
  EXPECT_EQ(back.results[0].seed, r.results[0].seed);
  EXPECT_EQ(back.results[0].time_s.rel_noise, r.results[0].time_s.rel_noise);
  EXPECT_EQ(back.results[0].error.max_abs, 1.0 / 3.0);
  EXPECT_EQ(back.results[0].samples, r.results[0].samples);
  EXPECT_EQ(back.results[3].status, PointStatus::wrong);
  EXPECT_EQ(back.results[3].kv_dtype, DType::fp8_e5m2);
  EXPECT_TRUE(std::isnan(back.results[3].time_s.median));
  EXPECT_TRUE(j["results"][3]["time_s"]["median"].is_null());
  EXPECT_TRUE(j["results"][3]["tokens_per_s"].is_null());
  EXPECT_EQ(back.results[4].context.kind, ContextSpec::Kind::ragged);
  EXPECT_EQ(back.results[4].context.hi, 9000);
  EXPECT_EQ(back.devices[0].measured.read, 4.1e12);
  EXPECT_EQ(back.devices[0].measured.fma_flops, 0);  // unknown: null in the JSON, 0 here
  EXPECT_TRUE(j["devices"][0]["flops_measured"].is_null());
  EXPECT_EQ(back.config, r.config);
  EXPECT_EQ(back.host.hostname, r.host.hostname);
  EXPECT_EQ(back.completion.points_planned, 5);
  // Every completion state reads back as itself.
  for (const Completion::State st :
       {Completion::State::complete, Completion::State::running, Completion::State::interrupted,
        Completion::State::device_failure, Completion::State::failed, Completion::State::partial}) {
    Report c = r;
    c.completion.state = st;
    EXPECT_EQ(report_from_json(to_json(c)).completion.state, st) << completion_state_name(st);
  }
  EXPECT_EQ(back.results[1].roofline.fraction_paired, 0.75);
  EXPECT_EQ(back.results[1].roofline.paired_read_Bps, 2.5e12);
  EXPECT_TRUE(j["results"][0]["roofline"]["fraction_paired"].is_null());
  ASSERT_TRUE(back.results[2].timing.has_value());
  EXPECT_EQ(back.results[2].timing->method, TimingMethod::graph_replay);
  EXPECT_EQ(back.results[2].timing->steps_per_sample, 250);
  EXPECT_TRUE(back.results[2].timing->warm_l2);
  EXPECT_EQ(j["results"][2]["timing"]["l2"], "warm");
  EXPECT_EQ(j["results"][0]["timing"]["method"], "events_per_step");
  EXPECT_EQ(j["results"][0]["timing"]["l2"], "cold");
  EXPECT_TRUE(j["results"][3]["timing"].is_null());  // wrong: never timed
  EXPECT_FALSE(back.results[3].timing.has_value());
  EXPECT_EQ(back.devices[0].measured.shapes, r.devices[0].measured.shapes);
  EXPECT_EQ(back.devices[0].flops_peak_tensor_f16, 989.4e12);
  EXPECT_EQ(back.devices[0].flops_peak_tensor_fp8, 1978.9e12);
  const nlohmann::json& ceiling = j["results"][0]["roofline"]["compute_ceiling"];
  EXPECT_EQ(ceiling,
            nlohmann::json({{"unit", "fma"}, {"name", "fp32 FMA (datasheet)"}, {"flops", 67e12}}));
  ASSERT_TRUE(back.results[0].roofline.compute_ceiling.has_value());
  EXPECT_EQ(back.results[0].roofline.compute_ceiling->unit, ComputeUnit::fma);
  EXPECT_TRUE(j["results"][3]["roofline"]["compute_ceiling"].is_null());  // wrong: none computed
  EXPECT_FALSE(back.results[3].roofline.compute_ceiling.has_value());
}

// A tensor-core ceiling and one whose figure is unknown (null flops) survive the round trip.
TEST(ReportJson, ComputeCeilingRoundTrip) {
  Report r = sample_report();
  r.results[0].roofline.compute_ceiling =
      ComputeCeiling{ComputeUnit::tensor_core, "tensor-core f16/bf16 (datasheet)", 989.4e12};
  r.results[1].roofline.compute_ceiling =
      ComputeCeiling{ComputeUnit::tensor_core, "tensor-core f16/bf16 (unknown)", kNotAvailable};
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["results"][0]["roofline"]["compute_ceiling"]["unit"], "tensor_core");
  EXPECT_TRUE(j["results"][1]["roofline"]["compute_ceiling"]["flops"].is_null());
  const Report back = report_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.results[0].roofline.compute_ceiling->unit, ComputeUnit::tensor_core);
  EXPECT_TRUE(std::isnan(back.results[1].roofline.compute_ceiling->flops));
}

// Reports written before the compute ceiling and the tensor peaks existed still read: the
// ceiling is unknown, the peaks 0 (null when written again).
TEST(ReportJson, ReportsWithoutComputeCeilingStillRead) {
  nlohmann::json j = to_json(sample_report());
  for (auto& p : j["results"]) p["roofline"].erase("compute_ceiling");
  j["devices"][0].erase("flops_peak_tensor_f16");
  j["devices"][0].erase("flops_peak_tensor_fp8");
  const Report back = report_from_json(j);
  for (const auto& p : back.results) EXPECT_FALSE(p.roofline.compute_ceiling.has_value());
  EXPECT_EQ(back.devices[0].flops_peak_tensor_f16, 0);
  EXPECT_TRUE(to_json(back)["devices"][0]["flops_peak_tensor_f16"].is_null());
  // An old compute-bound point says "compute", not which roof.
  RooflineRecord old;
  old.bound = Bound::compute;
  EXPECT_EQ(bound_label(old), "compute");
  old.bound = Bound::memory;
  EXPECT_EQ(bound_label(old), "mem");
}

// Reports written before the timing record and the ceiling shapes existed still read: absent
// means not recorded.
TEST(ReportJson, ReportsWithoutTimingOrShapesStillRead) {
  nlohmann::json j = to_json(sample_report());
  for (auto& p : j["results"]) p.erase("timing");
  j["devices"][0]["bandwidth"]["measured"].erase("shapes");
  const Report back = report_from_json(j);
  for (const auto& p : back.results) EXPECT_FALSE(p.timing.has_value()) << p.index;
  EXPECT_EQ(back.devices[0].measured.shapes, "");
}

TEST(ReportJson, BadTimingRecordsNameTheKey) {
  auto expect_rejected = [](nlohmann::json j, const std::string& key, const std::string& why) {
    try {
      report_from_json(j);
      FAIL() << key << ": accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = to_json(sample_report());
  j["results"][1]["timing"]["method"] = "stopwatch";
  expect_rejected(j, "results[1].timing.method", "valid: events_per_step");
  j = to_json(sample_report());
  j["results"][1]["timing"]["l2"] = "lukewarm";
  expect_rejected(j, "results[1].timing.l2", "valid: warm, cold");
  j = to_json(sample_report());
  j["results"][1]["timing"]["steps_per_sample"] = 0;
  expect_rejected(j, "results[1].timing.steps_per_sample", ">= 1");
  j = to_json(sample_report());
  j["results"][1]["timing"].erase("steps_per_sample");
  expect_rejected(j, "results[1].timing.steps_per_sample", "");
  j = to_json(sample_report());
  j["results"][1]["roofline"]["compute_ceiling"]["unit"] = "systolic";
  expect_rejected(j, "results[1].roofline.compute_ceiling.unit", "valid: fma, tensor_core");
  j = to_json(sample_report());
  j["results"][1]["roofline"]["compute_ceiling"].erase("flops");
  expect_rejected(j, "results[1].roofline.compute_ceiling.flops", "");
}

// How each point was made cold round-trips: a rotation with its copies and bytes, a flush with
// its reason, warm. A report from before the field reads its cold points as flushed, no reason.
TEST(ReportJson, ColdMethodRoundTripsAndOldReportsRead) {
  Report r = sample_report();
  TimingRecord rotation{TimingMethod::host_clock_per_step, 1, /*warm_l2=*/false};
  rotation.rotation_copies = 17;
  rotation.rotation_bytes = std::int64_t{68} << 20;
  TimingRecord flush{TimingMethod::host_clock_per_step, 1, /*warm_l2=*/false};
  flush.flush_reason = "one step reads 80 MB >= 2x the last-level cache (64 MB)";
  r.results[0].timing = rotation;
  r.results[1].timing = flush;
  r.results[2].timing = TimingRecord{TimingMethod::host_clock_per_step, 1, /*warm_l2=*/true};
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["results"][0]["timing"]["cold"],
            nlohmann::json({{"method", "rotation"}, {"copies", 17}, {"bytes", 68 << 20}}));
  EXPECT_EQ(j["results"][1]["timing"]["cold"],
            nlohmann::json({{"method", "flush"}, {"reason", flush.flush_reason}}));
  EXPECT_EQ(j["results"][2]["timing"]["cold"], nlohmann::json({{"method", "warm"}}));
  const Report back = report_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(cold_method(*back.results[0].timing), ColdMethod::rotation);
  EXPECT_EQ(back.results[0].timing->rotation_copies, 17);
  EXPECT_EQ(back.results[0].timing->rotation_bytes, std::int64_t{68} << 20);
  EXPECT_EQ(cold_method(*back.results[1].timing), ColdMethod::flush);
  EXPECT_EQ(back.results[1].timing->flush_reason, flush.flush_reason);
  EXPECT_EQ(cold_method(*back.results[2].timing), ColdMethod::warm);

  nlohmann::json old = j;
  for (auto& p : old["results"])
    if (p["timing"].is_object()) p["timing"].erase("cold");
  const Report read = report_from_json(old);
  EXPECT_EQ(cold_method(*read.results[0].timing), ColdMethod::flush);
  EXPECT_EQ(read.results[0].timing->rotation_copies, 0);
  EXPECT_EQ(read.results[0].timing->flush_reason, "");
  EXPECT_EQ(cold_method(*read.results[2].timing), ColdMethod::warm);
}

TEST(ReportJson, BadColdMethodsNameTheKey) {
  Report r = sample_report();
  TimingRecord rotation{TimingMethod::host_clock_per_step, 1, /*warm_l2=*/false};
  rotation.rotation_copies = 5;
  rotation.rotation_bytes = 1000;
  r.results[1].timing = rotation;
  const nlohmann::json good = to_json(r);
  auto expect_rejected = [](const nlohmann::json& j, const std::string& key,
                            const std::string& why) {
    try {
      report_from_json(j);
      FAIL() << key << ": accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = good;
  j["results"][1]["timing"]["cold"]["method"] = "freeze";
  expect_rejected(j, "results[1].timing.cold.method", "valid: warm, flush, rotation");
  j = good;
  j["results"][1]["timing"]["cold"]["method"] = "warm";
  expect_rejected(j, "results[1].timing.cold.method", "disagrees with l2");
  j = good;
  j["results"][1]["timing"]["cold"]["copies"] = 1;
  expect_rejected(j, "results[1].timing.cold.copies", ">= 2 copies");
  j = good;
  j["results"][1]["timing"]["cold"].erase("bytes");
  expect_rejected(j, "results[1].timing.cold.bytes", "");
  j = good;
  j["results"][1]["timing"]["cold"]["reason"] = "both";
  expect_rejected(j, "results[1].timing.cold", "reason");
}

// Reports written before the paired read bandwidth existed still read: absent means NaN.
TEST(ReportJson, ReportsWithoutPairedFieldsStillRead) {
  nlohmann::json j = to_json(sample_report());
  for (auto& p : j["results"]) {
    p["roofline"].erase("paired_read_Bps");
    p["roofline"].erase("fraction_paired");
  }
  const Report back = report_from_json(j);
  EXPECT_TRUE(std::isnan(back.results[0].roofline.fraction_paired));
  EXPECT_TRUE(std::isnan(back.results[0].roofline.paired_read_Bps));
}

// The busy figures a GPU and a CPU point carry (made up, one of each source).
UtilizationRecord gpu_busy() {
  UtilizationRecord u;
  u.source = BusySource::nvml;
  u.busy = 0.97;
  u.window_s = 2.0;
  u.energy_J = 1300;
  u.power_W = 650;
  u.power_reading_W = 648.5;
  u.energy_J_per_step = 0.65;
  u.energy_J_per_token = 0.8125;
  return u;
}
UtilizationRecord cpu_busy() {
  UtilizationRecord u;
  u.source = BusySource::cpu_threads;
  u.busy = 0.995;
  u.threads = 2;
  u.cpu_time_s = 0.398;
  u.window_s = 0.2;
  return u;
}

TEST(ReportJson, UtilizationRoundTrip) {
  Report r = sample_report();
  r.results[0].utilization = gpu_busy();
  r.results[1].utilization = cpu_busy();
  r.results[1].utilization->note = "a caution";
  const nlohmann::json j = to_json(r);
  const nlohmann::json& g = j["results"][0]["utilization"];
  EXPECT_EQ(g["source"], "nvml");
  EXPECT_EQ(g["busy"], 0.97);
  EXPECT_TRUE(g["threads"].is_null());  // a GPU has no thread count
  EXPECT_TRUE(g["cpu_time_s"].is_null());
  EXPECT_EQ(g["energy_J_per_token"], 0.8125);
  EXPECT_EQ(g["note"], "");
  const nlohmann::json& c = j["results"][1]["utilization"];
  EXPECT_EQ(c["source"], "cpu_threads");
  EXPECT_EQ(c["threads"], 2);
  EXPECT_TRUE(c["power_W"].is_null());  // a CPU point has busy only
  EXPECT_TRUE(c["energy_J_per_token"].is_null());
  EXPECT_EQ(c["note"], "a caution");
  EXPECT_TRUE(j["results"][3]["utilization"].is_null());  // wrong: never timed
  const Report back = report_from_json(j);
  EXPECT_EQ(to_json(back), j);
  ASSERT_TRUE(back.results[0].utilization.has_value());
  EXPECT_EQ(back.results[0].utilization->power_reading_W, 648.5);
  EXPECT_EQ(back.results[1].utilization->threads, 2);
  EXPECT_TRUE(std::isnan(back.results[1].utilization->power_W));
  EXPECT_FALSE(back.results[3].utilization.has_value());
}

// Reports written before the busy figure existed still read: absent means not measured.
TEST(ReportJson, ReportsWithoutUtilizationStillRead) {
  Report r = sample_report();
  r.results[0].utilization = gpu_busy();
  nlohmann::json j = to_json(r);
  for (auto& p : j["results"]) p.erase("utilization");
  const Report back = report_from_json(j);
  for (const auto& p : back.results) EXPECT_FALSE(p.utilization.has_value()) << p.index;
  EXPECT_TRUE(to_json(back)["results"][0]["utilization"].is_null());
}

TEST(ReportJson, BadUtilizationRecordsNameTheKey) {
  auto expect_rejected = [](nlohmann::json j, const std::string& key, const std::string& why) {
    try {
      report_from_json(j);
      FAIL() << key << ": accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  Report r = sample_report();
  r.results[1].utilization = cpu_busy();
  const nlohmann::json good = to_json(r);
  nlohmann::json j = good;
  j["results"][1]["utilization"]["source"] = "nvidia-smi";
  expect_rejected(j, "results[1].utilization.source", "valid: cpu_threads, nvml");
  j = good;
  j["results"][1]["utilization"]["busy"] = -0.5;
  expect_rejected(j, "results[1].utilization.busy", ">= 0");
  j = good;
  j["results"][1]["utilization"]["busy"] = "97%";
  expect_rejected(j, "results[1].utilization.busy", "");
  j = good;
  j["results"][1]["utilization"]["threads"] = 0;
  expect_rejected(j, "results[1].utilization.threads", ">= 1 or null");
  j = good;
  j["results"][1]["utilization"].erase("window_s");
  expect_rejected(j, "results[1].utilization.window_s", "");
}

// The commit is read at build time (cmake/git_sha.cmake): 12 hex digits, "-dirty" when tracked
// files differ from it, or "unknown" outside a checkout.
TEST(ToolInfo, NamesTheBuildsCommit) {
  const std::string sha = this_tool().git_sha;
  EXPECT_TRUE(std::regex_match(sha, std::regex("[0-9a-f]{12}(-dirty)?|unknown"))) << sha;
}

TEST(ReportJson, HasEveryKeyOfTheDesign) {
  const nlohmann::json j = to_json(sample_report());
  for (const char* k :
       {"schema_version", "tool", "created", "host", "devices", "config", "results", "knees"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* k : {"name", "version", "git_sha"}) EXPECT_TRUE(j["tool"].contains(k)) << k;
  const auto& d = j["devices"][0];
  for (const char* k :
       {"backend", "name", "sm_count", "l2_bytes", "mem_bytes", "bandwidth", "flops_peak"}) {
    EXPECT_TRUE(d.contains(k)) << k;
  }
  for (const char* k : {"read", "copy", "triad"})
    EXPECT_TRUE(d["bandwidth"]["measured"].contains(k));
  const auto& p = j["results"][0];
  for (const char* k : {"kernel",
                        "backend",
                        "model",
                        "kv_dtype",
                        "q_dtype",
                        "block_size",
                        "batch",
                        "context",
                        "hit_rate",
                        "hit_rate_actual",
                        "prefix_groups",
                        "status",
                        "reason",
                        "time_s",
                        "bytes",
                        "flops",
                        "arithmetic_intensity",
                        "bandwidth",
                        "roofline",
                        "tokens_per_s",
                        "utilization",
                        "error"}) {
    EXPECT_TRUE(p.contains(k)) << k;
  }
  for (const char* k : {"median", "min", "max", "p10", "p90", "mean", "rel_noise", "samples"}) {
    EXPECT_TRUE(p["time_s"].contains(k)) << k;
  }
  for (const char* k :
       {"bound", "compute_ceiling", "t_roof_s", "fraction_measured", "fraction_datasheet"}) {
    EXPECT_TRUE(p["roofline"].contains(k)) << k;
  }
  for (const char* k : {"unit", "name", "flops"}) {
    EXPECT_TRUE(p["roofline"]["compute_ceiling"].contains(k)) << k;
  }
  for (const char* k : {"flops_peak_tensor_f16", "flops_peak_tensor_fp8"}) {
    EXPECT_TRUE(d.contains(k)) << k;
  }
  for (const char* k : {"max_abs", "max_rel", "quant_rel"}) EXPECT_TRUE(p["error"].contains(k));
  EXPECT_EQ(p["context"]["kind"], "fixed");
  EXPECT_EQ(p["context"]["values"], nlohmann::json::array({8192}));
  // ISO-8601 UTC.
  const std::string created = j["created"];
  EXPECT_EQ(created.size(), 20u);
  EXPECT_EQ(created.back(), 'Z');
  EXPECT_EQ(created[10], 'T');
}

TEST(ReportJson, ReadingErrorsNameTheKey) {
  nlohmann::json j = to_json(sample_report());
  j["results"][2]["time_s"].erase("median");
  try {
    report_from_json(j);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("results[2].time_s.median"), std::string::npos)
        << e.what();
  }
  j = to_json(sample_report());
  j["results"][0]["status"] = "great";
  EXPECT_THROW(report_from_json(j), InputError);
  j = to_json(sample_report());
  j["schema_version"] = 2;
  try {
    report_from_json(j);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("schema_version 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(report_from_json(nlohmann::json::object()), InputError);
}

// Inputs the fuzzer (tests/fuzz/fuzz_report) found: knees are kept as read, and a knee value of
// the wrong type threw nlohmann's type_error from the printers; a config's min_samples beyond
// int was cast from double (undefined) when marking points stopped at the timeout.
TEST(ParseReport, HostileValuesAreInputErrorsOrHarmless) {
  nlohmann::json j = to_json(sample_report());
  j["knees"] = nlohmann::json::array({{{"model", "m"}, {"knee_batch", 8}}});
  EXPECT_NO_THROW(parse_report(j.dump(), "r.json"));
  j["knees"][0]["knee_bandwidth"] = "fast";
  try {
    parse_report(j.dump(), "r.json");
    FAIL() << "a knee_bandwidth string was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("r.json: key 'knees[0].knee_bandwidth'"),
              std::string::npos)
        << e.what();
  }
  // A knee's context reads with the points' codec: a ragged context needs [lo, hi].
  j["knees"][0]["knee_bandwidth"] = 1e12;
  j["knees"][0]["context"] = {{"kind", "ragged"}, {"values", {512}}};
  try {
    parse_report(j.dump(), "r.json");
    FAIL() << "a ragged context of one value was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("knees[0].context.values"), std::string::npos) << e.what();
  }
  j["knees"][0]["context"] = {{"kind", "ragged"}, {"values", {512, 4096}}};
  EXPECT_NO_THROW(parse_report(j.dump(), "r.json"));
  EXPECT_NE(knee_series_label(parse_report(j.dump(), "r.json").knees[0]).find("ctx=512:4096"),
            std::string::npos);
  j["knees"][0]["knee_batch"] = 1e300;
  EXPECT_THROW(parse_report(j.dump(), "r.json"), InputError);
  j["knees"] = nlohmann::json::array({3});
  EXPECT_THROW(parse_report(j.dump(), "r.json"), InputError);

  j = to_json(sample_report());
  j["config"]["measure"]["min_samples"] = 1e308;
  const Report r = parse_report(j.dump(), "r.json");
  const auto ok = std::find_if(r.results.begin(), r.results.end(),
                               [](const PointResult& p) { return p.status == PointStatus::ok; });
  ASSERT_NE(ok, r.results.end());
  EXPECT_TRUE(stopped_at_timeout(*ok, r.config));  // no point has 1e308 samples
  EXPECT_FALSE(format_results(r, OutputFormat::table).empty());

  std::string msg;
  try {
    parse_report(R"({"schema_version": 1e400})", "r.json");
  } catch (const InputError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("r.json: not valid JSON"), std::string::npos) << msg;
}

TEST(AtomicWrite, WritesAndReadsBack) {
  TempDir dir;
  const auto path = dir.path() / "sub" / "r.json";
  const Report r = sample_report();
  write_report_atomic(path, r);
  EXPECT_EQ(to_json(read_report(path)), to_json(r));
  // Overwrite: the new content replaces the old one whole.
  Report r2 = r;
  r2.results.resize(1);
  write_report_atomic(path, r2);
  EXPECT_EQ(read_report(path).results.size(), 1u);
  // Only the report in the directory: no temporary file left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(path.parent_path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "r.json");
  }
  EXPECT_EQ(files, 1);
}

TEST(AtomicWrite, AFailedWriteLeavesNoPartialFile) {
  TempDir dir;
  const auto path = dir.path() / "r.json";
  write_report_atomic(path, sample_report());
  std::ifstream before_file(path);
  std::stringstream before;
  before << before_file.rdbuf();

  // 1) Serialization fails (invalid UTF-8 in a string): the old report stays as it was.
  Report bad = sample_report();
  bad.results[0].reason = std::string("\xff\xfe broken", 9);
  EXPECT_ANY_THROW(write_report_atomic(path, bad));
  std::ifstream after_file(path);
  std::stringstream after;
  after << after_file.rdbuf();
  EXPECT_EQ(after.str(), before.str());

  // 2) The rename fails (the target is a directory): RuntimeFailure, no temporary file left.
  const auto target_dir = dir.path() / "is_a_dir";
  std::filesystem::create_directory(target_dir);
  std::filesystem::create_directory(target_dir / "keep");  // a non-empty directory
  EXPECT_THROW(write_report_atomic(target_dir, sample_report()), RuntimeFailure);
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "r.json" || name == "is_a_dir") << "left behind: " << name;
  }

  // 3) The directory cannot be created (a file is in the way): RuntimeFailure naming the path.
  try {
    write_report_atomic(path / "x.json", sample_report());
    FAIL();
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos);
  }
}

TEST(ReadReport, FileErrors) {
  TempDir dir;
  EXPECT_THROW(read_report(dir.path() / "none.json"), InputError);
  const auto garbage = dir.write("g.json", "{ not json");
  try {
    read_report(garbage);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("g.json"), std::string::npos);
  }
}

TEST(Knees, SmallestBatchReachingNinetyPercentOfTheSeriesMax) {
  std::vector<PointResult> pts;
  const std::vector<std::pair<int, double>> curve = {
      {1, 10}, {8, 50}, {32, 92}, {64, 100}, {128, 95}};
  int i = 0;
  for (const auto& [b, bw] : curve) pts.push_back(test::ok_point(i++, b, 1e-3, bw));
  // A second series (other context) whose knee is its first point.
  for (int b : {4, 16}) {
    PointResult p = test::ok_point(i++, b, 1e-3, 100);
    p.context = ContextSpec::fixed(1024);
    pts.push_back(p);
  }
  // Wrong points and single-point series are ignored.
  pts.push_back(test::wrong_point(i++));
  PointResult lone = test::ok_point(i++, 2, 1e-3, 1);
  lone.hit_rate = 0.9;
  pts.push_back(lone);
  const nlohmann::json knees = compute_knees(pts);
  ASSERT_EQ(knees.size(), 2u);
  const auto& k8192 = knees[0]["context"]["values"][0] == 8192 ? knees[0] : knees[1];
  const auto& k1024 = knees[0]["context"]["values"][0] == 1024 ? knees[0] : knees[1];
  EXPECT_EQ(k8192["knee_batch"], 32);
  EXPECT_EQ(k8192["max_batch"], 64);
  EXPECT_EQ(k8192["max_bandwidth"], 100.0);
  EXPECT_EQ(k8192["batches"], nlohmann::json::array({1, 8, 32, 64, 128}));
  EXPECT_EQ(k1024["knee_batch"], 4);
  // The definition is the report's, once (knees_definition), not every entry's.
  for (const auto& k : knees) EXPECT_FALSE(k.contains("definition")) << k.dump();
  EXPECT_NE(std::string(kKneesDefinition).find("90%"), std::string::npos);
}

TEST(Format, Units) {
  EXPECT_EQ(format_bandwidth(3.35e12), "3.35 TB/s");
  EXPECT_EQ(format_bandwidth(812e9), "812 GB/s");
  EXPECT_EQ(format_seconds(812e-6), "812 µs");
  EXPECT_EQ(format_seconds(1.5e-3), "1.50 ms");
  EXPECT_EQ(format_seconds(2.0), "2.00 s");
  EXPECT_EQ(format_seconds(NAN), "-");
  EXPECT_EQ(format_bytes(16.5e9), "16.5 GB");
}

TEST(Format, TableHasDeviceHeaderAlignedRowsAndStatus) {
  Report r = sample_report();
  const std::string t = format_results(r, OutputFormat::table);
  EXPECT_NE(t.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(t.find("measured read 4.10 TB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("datasheet 4.80 TB/s"), std::string::npos);
  EXPECT_NE(t.find("tok/s (attn only)"), std::string::npos);
  EXPECT_NE(t.find("auto→gqa"), std::string::npos);
  EXPECT_NE(t.find("wrong"), std::string::npos);
  EXPECT_NE(t.find("skipped"), std::string::npos);
  EXPECT_NE(t.find("needs 90.1 GB"), std::string::npos);  // the reason below the table
  EXPECT_NE(t.find("1000:9000"), std::string::npos);
  EXPECT_NE(t.find("4000.0"), std::string::npos);  // 4 TB/s in the GB/s column
  EXPECT_NE(t.find("80.0%"), std::string::npos);
  // Rows of the table proper all have the same display width.
  std::istringstream in(t);
  std::string line;
  std::vector<std::size_t> widths;
  std::getline(in, line);  // device line
  for (std::size_t row = 0; row < 1 + r.results.size() && std::getline(in, line); ++row) {
    std::size_t w = 0;
    for (unsigned char c : line) w += (c & 0xC0) != 0x80;
    widths.push_back(w);
  }
  ASSERT_EQ(widths.size(), 1 + r.results.size());
  for (std::size_t w : widths) EXPECT_EQ(w, widths[0]);
}

// % busy beside % roof, W and J/tok for a GPU point, each with its legend; a note of a point's
// busy figure is listed; a report without busy figures shows none of it.
TEST(Format, BusyBesideTheRoof) {
  Report r = sample_report();
  const std::string before = format_results(r, OutputFormat::table);
  EXPECT_EQ(before.find("% busy"), std::string::npos);
  EXPECT_EQ(before.find("J/tok"), std::string::npos);
  r.results[0].utilization = gpu_busy();
  r.results[1].utilization = gpu_busy();
  r.results[1].utilization->busy = kNotAvailable;
  r.results[1].utilization->note = "busy unavailable: nvmlDeviceGetUtilizationRates: Not Supported";
  r.results[2].utilization = gpu_busy();
  r.results[2].utilization->note = r.results[1].utilization->note;
  const std::string t = format_results(r, OutputFormat::table);
  const std::size_t busy = t.find("% busy"), roof = t.find("% roof");
  ASSERT_NE(busy, std::string::npos) << t;
  ASSERT_NE(roof, std::string::npos);
  EXPECT_LT(busy, roof);
  EXPECT_EQ(t.substr(busy, roof - busy).find_first_not_of("% busy "), std::string::npos)
      << "% busy is not next to % roof";
  EXPECT_NE(t.find("97.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("  650  "), std::string::npos) << t;  // W
  EXPECT_NE(t.find("0.812"), std::string::npos) << t;    // J/tok
  EXPECT_NE(t.find("% busy: how busy the device was"), std::string::npos);
  EXPECT_NE(t.find("J/tok: W / tok/s"), std::string::npos);
  EXPECT_NE(t.find("busy of 2 points (1, 2): busy unavailable: nvmlDeviceGetUtilizationRates"),
            std::string::npos)
      << t;
  const std::string md = format_results(r, OutputFormat::md);
  EXPECT_NE(md.find("| % busy | % roof |"), std::string::npos) << md;
  // CPU points: busy only, no power columns.
  Report cpu = sample_report();
  cpu.results[0].utilization = cpu_busy();
  const std::string ct = format_results(cpu, OutputFormat::table);
  EXPECT_NE(ct.find("99.5%"), std::string::npos) << ct;
  EXPECT_EQ(ct.find("J/tok"), std::string::npos);
  EXPECT_EQ(ct.find(" W "), std::string::npos);
}

TEST(Format, CsvHasTheBusyColumns) {
  Report r = sample_report();
  r.results[0].utilization = gpu_busy();
  r.results[1].utilization = cpu_busy();
  const std::string csv = format_results(r, OutputFormat::csv);
  std::istringstream in(csv);
  std::string header, row0, row1, row2;
  std::getline(in, header);
  std::getline(in, row0);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_NE(header.find(",busy,busy_source,power_W,energy_J_per_step,energy_J_per_token,"),
            std::string::npos)
      << header;
  EXPECT_NE(row0.find(",0.97,nvml,650,0.65,0.8125,"), std::string::npos) << row0;
  EXPECT_NE(row1.find(",0.995,cpu_threads,,,,"), std::string::npos) << row1;
  EXPECT_EQ(row2.find("nvml"), std::string::npos) << row2;  // not measured: empty cells
}

TEST(Format, CsvAndMarkdown) {
  const Report r = sample_report();
  const std::string csv = format_results(r, OutputFormat::csv);
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  const auto columns = std::count(header.begin(), header.end(), ',');
  int rows = 0;
  const auto separators = [](const std::string& l) {  // commas outside quoted fields
    int n = 0;
    bool quoted = false;
    for (char ch : l) {
      if (ch == '"') quoted = !quoted;
      n += ch == ',' && !quoted;
    }
    return n;
  };
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_EQ(separators(line), columns) << line;
  }
  EXPECT_EQ(rows, 5);
  EXPECT_NE(csv.find(",wrong,"), std::string::npos);
  EXPECT_NE(csv.find("\"needs 90.1 GB, the device has 80 GB free\""), std::string::npos);
  const std::string md = format_results(r, OutputFormat::md);
  EXPECT_NE(md.find("| kernel |"), std::string::npos);
  EXPECT_NE(md.find("---:|"), std::string::npos);
  const std::string js = format_results(r, OutputFormat::json);
  EXPECT_EQ(nlohmann::json::parse(js), to_json(r));
  EXPECT_EQ(parse_output_format("md"), OutputFormat::md);
  EXPECT_THROW(parse_output_format("xml"), InputError);
}

}  // namespace
}  // namespace decodebench
