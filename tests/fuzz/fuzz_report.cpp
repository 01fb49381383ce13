// parse_report (what compare, merge and report read) and everything those commands do with a
// report once read: the printers (results view, every format, html, a replay's table), merge,
// compare against itself. Bad input is an InputError; a report that reads writes back (to_json)
// to one that reads.
#include <string>
#include <vector>

#include "common/errors.h"
#include "fuzz_util.h"
#include "report/compare.h"
#include "report/format.h"
#include "report/format_html.h"
#include "report/replay_table.h"
#include "results/merge.h"
#include "results/report.h"

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

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
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
