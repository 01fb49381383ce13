// The ceilings document: its reader gives back what the writer wrote (a GPU's measured links
// included), refuses each way a saved document can be wrong naming the key, and is told apart from
// a report (what `decodebench report` relies on).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "report/ceilings_view.h"

namespace decodebench {
namespace {

CeilingsDocument gpu() {
  CeilingsDocument d;
  d.device.backend = "cuda";
  d.device.name = "NVIDIA H200";
  d.device.sm_count = 132;
  d.device.l2_bytes = 60 << 20;
  d.device.mem_bytes = 150'000'000'000;
  d.device.bandwidth_datasheet = 4.8e12;
  d.device.bandwidth_theoretical = 4.9e12;
  d.device.flops_peak = 67e12;
  d.device.measured.read = 4.1e12;
  d.device.measured.copy = 3.9e12;
  d.device.measured.triad = 3.8e12;
  d.device.measured.buffer_bytes = 1 << 30;
  d.device.measured.fma_flops = 60e12;
  d.datasheet_links = {{"pcie-gen5-x16", "PCIe 5.0 x16", 63e9, 63e9, "the PCIe 5.0 spec"}};
  LinkMeasurement m;
  m.name = "pinned host -> device, cudaMemcpyAsync";
  m.direction = "to_device";
  m.by_size = {{1 << 20, 40e9}, {64 << 20, 55e9}};
  m.best_Bps = 55e9;
  m.overhead_s = 8e-6;
  d.measured_links = {m};
  return d;
}

TEST(CeilingsDocument, ReadsBackWhatWasWritten) {
  const nlohmann::json j = ceilings_json(gpu());
  ASSERT_TRUE(is_ceilings_document(j));
  const CeilingsDocument back = ceilings_from_json(j, "c.json");
  EXPECT_EQ(ceilings_json(back), j);
  EXPECT_EQ(ceilings_text(back), ceilings_text(gpu()));
  EXPECT_EQ(ceilings_rows(back, true), ceilings_rows(gpu(), true));
  const std::string text = ceilings_text(back);
  EXPECT_NE(text.find("55.0 GB/s measured, 8.0 us per transfer"), std::string::npos) << text;
  EXPECT_NE(text.find("pcie-gen5-x16 (PCIe 5.0 x16)"), std::string::npos) << text;
  // A report (devices and results) is not one.
  EXPECT_FALSE(is_ceilings_document({{"devices", nlohmann::json::array()}, {"results", 1}}));
}

TEST(CeilingsDocument, EachPlantedFaultIsRefusedByKey) {
  const nlohmann::json good = ceilings_json(gpu());
  struct Case {
    const char* name;
    nlohmann::json doc;
    const char* says;
  };
  std::vector<Case> cases;
  const auto planted = [&](const char* name, auto plant, const char* says) {
    nlohmann::json d = good;
    plant(d);
    cases.push_back({name, d, says});
  };
  planted(
      "unknown key", [](auto& d) { d["bandwith"] = 1; }, "bandwith");
  planted(
      "links", [](auto& d) { d["links"] = 3; }, "links");
  planted(
      "kind", [](auto& d) { d["links"][0]["kind"] = "guessed"; }, "links[0].kind");
  planted(
      "datasheet", [](auto& d) { d["links"][0].erase("to_host_Bps"); }, "links[0].to_host_Bps");
  planted(
      "measured", [](auto& d) { d["links"][1]["best_Bps"] = "fast"; }, "links[1].best_Bps");
  planted(
      "size", [](auto& d) { d["links"][1]["by_size"][0]["bytes"] = 1.5; },
      "links[1].by_size[0].bytes");
  planted(
      "read", [](auto& d) { d["bandwidth"]["measured"]["read"] = "lots"; },
      "bandwidth.measured.read");
  planted(
      "units", [](auto& d) { d.erase("sm_count"); }, "sm_count");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      (void)ceilings_from_json(c.doc, "c.json");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("c.json"), std::string::npos) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace decodebench
