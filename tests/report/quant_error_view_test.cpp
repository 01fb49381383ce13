// quant-error's document: its reader gives back what the writer wrote, and refuses each way a
// saved document can be wrong, naming the key (what `decodebench report` relies on).
#include <string>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "report/quant_error_view.h"

namespace decodebench {
namespace {

QuantErrorResult two_layers() {
  QuantErrorResult r;
  r.data = "dumps/";
  r.layers = {"layer_00", "layer_01"};
  r.num_q_heads = 32;
  r.num_kv_heads = 8;
  r.head_dim = 128;
  r.block_size = 16;
  r.backend = "cpu";
  r.device = "Some CPU";
  r.model = "llama-3.1-8b";
  r.batch = 8;
  r.context = 8192;
  r.num_layers = 32;
  r.read_ceiling_Bps = 25e9;
  for (const quant::KvFormat f : {quant::KvFormat::f16, quant::KvFormat::int4}) {
    QuantFormatResult fr;
    fr.format = f;
    fr.overall = {1e-3, 2e-3, 3e-3, 4e-3, 5e-6, 6e-6};
    fr.layers = {fr.overall, {7e-3, 8e-3, 9e-3, 1e-2, 2e-5, 3e-5}};
    fr.bytes_per_step = 4.2e6;
    fr.tokens_per_s_roof = 190;
    fr.tokens_per_s = f == quant::KvFormat::f16 ? 131.5 : 0;
    fr.kernel = f == quant::KvFormat::f16 ? "cpu" : "";
    fr.status = f == quant::KvFormat::f16 ? "ok*~" : "skipped";
    fr.not_measured = f == quant::KvFormat::f16 ? "" : "skipped: no kernel";
    r.formats.push_back(fr);
  }
  return r;
}

TEST(QuantErrorDocument, ReadsBackWhatWasWritten) {
  const nlohmann::json j = quant_error_json(two_layers());
  EXPECT_EQ(quant_error_json(quant_error_from_json(j, "q.json")), j);
  // --no-speed: no speed section.
  QuantErrorResult accuracy_only = two_layers();
  accuracy_only.backend.clear();
  const nlohmann::json a = quant_error_json(accuracy_only);
  ASSERT_TRUE(a.at("speed").is_null());
  EXPECT_EQ(quant_error_json(quant_error_from_json(a, "q.json")), a);
}

TEST(QuantErrorDocument, EachPlantedFaultIsRefusedByKey) {
  const nlohmann::json good = quant_error_json(two_layers());
  struct Case {
    const char* name;
    nlohmann::json doc;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({"another kind", good, "kind"});
  cases.back().doc["kind"] = "cache-sim";
  cases.push_back({"an unknown key", good, "zz"});
  cases.back().doc["zz"] = 1;
  cases.push_back({"no formats", good, "formats"});
  cases.back().doc.erase("formats");
  cases.push_back({"a layer short", good, "formats[1].layers"});
  cases.back().doc["formats"][1]["layers"].erase(1);
  cases.push_back({"a bogus format", good, "formats[0].format"});
  cases.back().doc["formats"][0]["format"] = "int2";
  cases.push_back({"a string for a number", good, "head_dim"});
  cases.back().doc["head_dim"] = "128";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      quant_error_from_json(c.doc, "q.json");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("q.json"), std::string::npos) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace decodebench
