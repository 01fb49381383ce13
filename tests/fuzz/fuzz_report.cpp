// parse_report (what compare, merge and report read) and everything those commands do with a
// report once read: the printers (results view, every format, html, a replay's table), merge,
// compare against itself. Bad input is an InputError; a report that reads writes back (to_json)
// to one that reads. The same text through quant-error's, cache-sim's, ceilings' and the static
// model's document readers, which `report` also reads, and their tables.
#include <string>
#include <string_view>
#include <vector>

#include "common/errors.h"
#include "fuzz_util.h"
#include "report/cache_sim_view.h"
#include "report/ceilings_view.h"
#include "report/compare.h"
#include "report/format.h"
#include "report/format_html.h"
#include "report/quant_error_view.h"
#include "report/replay_table.h"
#include "results/merge.h"
#include "results/report.h"
#include "static_model/static_report.h"

namespace {

using namespace decodebench;

// Each use may reject the report as a whole (e.g. side by side of reports without a common
// point); none may crash or throw anything else.
template <class F>
void use(F&& f) {
  try {
    f();
  } catch (const InputError&) {
  }
}

}  // namespace

// quant-error's document: accepted ones print and write back to one that reads.
void quant_error_document(std::string_view text) {
  const nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  QuantErrorResult q;
  try {
    q = quant_error_from_json(j, "fuzz.json");
  } catch (const InputError&) {
    return;
  }
  (void)render_text(quant_error_table(q, true));
  (void)quant_error_footer(q);
  try {
    (void)quant_error_from_json(quant_error_json(q), "written");
  } catch (const InputError& e) {
    fuzz::property_failed("quant_error_json of an accepted document is rejected", e.what());
  }
}

// cache-sim's document (its "cache_sim" section): accepted ones print, and their settings written
// back (to_json) read again.
void cache_sim_document(std::string_view text) {
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("cache_sim")) return;
  CacheSimDocument d;
  try {
    d = cache_sim_from_json(j["cache_sim"], "fuzz.json");
  } catch (const InputError&) {
    return;
  }
  (void)cache_sim_table_text(d);
  (void)cache_sim_table_text(d, /*markdown=*/true);
  (void)cache_sim_csv_text(d.settings);
  nlohmann::json& settings = j["cache_sim"]["settings"];
  settings = nlohmann::json::array();
  for (const CacheSimResult& r : d.settings) settings.push_back(to_json(r));
  try {
    (void)cache_sim_from_json(j["cache_sim"], "written");
  } catch (const InputError& e) {
    fuzz::property_failed("to_json of an accepted cache-sim setting is rejected", e.what());
  }
}

// A ceilings document: accepted ones print and write back (ceilings_json) to one that reads.
void ceilings_document(std::string_view text) {
  const nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !is_ceilings_document(j)) return;
  CeilingsDocument d;
  try {
    d = ceilings_from_json(j, "fuzz.json");
  } catch (const InputError&) {
    return;
  }
  (void)ceilings_text(d);
  (void)ceilings_rows(d, /*markdown=*/true);
  try {
    (void)ceilings_from_json(ceilings_json(d), "written");
  } catch (const InputError& e) {
    fuzz::property_failed("ceilings_json of an accepted document is rejected", e.what());
  }
}

// The static model's document (kernels --static --out): accepted ones print and write back to
// one that reads.
void static_document(std::string_view text) {
  const nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !static_model::is_static_document(j)) return;
  static_model::StaticDocument d;
  try {
    d = static_model::static_from_json(j, "fuzz.json");
  } catch (const InputError&) {
    return;
  }
  (void)static_model::static_table(d.instances, d.settings);
  (void)static_model::static_markdown(d.instances, d.settings);
  try {
    (void)static_model::static_from_json(static_model::static_json(d.instances, d.settings),
                                         "written");
  } catch (const InputError& e) {
    fuzz::property_failed("static_json of an accepted document is rejected", e.what());
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  quant_error_document(fuzz::as_text(data, size));
  cache_sim_document(fuzz::as_text(data, size));
  ceilings_document(fuzz::as_text(data, size));
  static_document(fuzz::as_text(data, size));
  Report r;
  try {
    r = parse_report(fuzz::as_text(data, size), "fuzz.json");
  } catch (const InputError&) {
    return 0;
  }
  const std::string written = to_json(r).dump();
  try {
    (void)parse_report(written, "written");
  } catch (const InputError& e) {
    fuzz::property_failed("to_json of an accepted report is rejected", e.what());
  }
  for (OutputFormat f :
       {OutputFormat::table, OutputFormat::json, OutputFormat::csv, OutputFormat::md}) {
    use([&] { (void)format_results(r, f); });
    use([&] { (void)format_replay(r, f); });  // InputError without a replay section
  }
  const std::vector<LabelledReport> two{{"a", &r}, {"b", &r}};
  for (OutputFormat f : {OutputFormat::table, OutputFormat::csv, OutputFormat::md}) {
    use([&] { (void)format_reports(two, f); });
  }
  use([&] { (void)format_html(two, {}); });
  use([&] { (void)merge_reports(std::vector<Report>{r}); });
  use([&] {
    CompareOptions o;
    o.allow_mismatch = true;
    const ReportComparison c = compare_reports(r, r, o);
    for (CompareFormat f : {CompareFormat::table, CompareFormat::md, CompareFormat::json}) {
      (void)format_comparison(c, f);
    }
  });
  return 0;
}
