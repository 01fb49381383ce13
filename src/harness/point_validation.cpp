#include "harness/point_validation.h"

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/errors.h"
#include "harness/sweep_axes.h"  // workload_key
#include "reference/reference.h"
#include "results/point_identity.h"

namespace decodebench {
namespace {

// Rows `rows` of an output [batch][Hq][d].
std::vector<float> gather_rows(const std::vector<float>& out, std::span<const int> rows,
                               std::size_t row_elems) {
  std::vector<float> g;
  g.reserve(rows.size() * row_elems);
  for (int r : rows) {
    const auto first = out.begin() + static_cast<std::ptrdiff_t>(r * row_elems);
    g.insert(g.end(), first, first + static_cast<std::ptrdiff_t>(row_elems));
  }
  return g;
}

std::string reference_key(const WorkloadSpec& s, std::size_t rows) {
  return fmt::format("{}|rows={}", workload_key(s), rows);
}

}  // namespace

bool validate_point(PreparedPoint& prepared, const Workload& checked, std::span<const int> rows,
                    ReferenceCache* cache, PointResult& r) {
  const WorkloadSpec& s = checked.spec;
  prepared.run();
  const std::vector<float> out = prepared.output();
  const int dv = s.model.value_dim();  // the output's width per head
  const std::size_t row_elems = static_cast<std::size_t>(s.model.num_q_heads) * dv;
  const std::size_t want = static_cast<std::size_t>(s.batch) * row_elems;
  if (out.size() != want) {
    throw RuntimeFailure(
        fmt::format("backend returned {} output values, expected {} "
                    "([batch {}][Hq {}][dv {}])",
                    out.size(), want, s.batch, s.model.num_q_heads, dv));
  }
  const bool all_rows = static_cast<int>(rows.size()) == s.batch;
  const std::string key = reference_key(s, rows.size());
  ReferenceCache::Entry computed;
  const ReferenceCache::Entry* entry = nullptr;
  if (cache && cache->entries.count(key)) {
    entry = &cache->entries.at(key);
  } else {
    computed.ref = reference_decode(checked);
    if (is_fp8(s.kv_dtype) || is_int_kv(s.kv_dtype)) {
      computed.quant_rel = quantization_error(computed.ref, reference_decode_unquantized(checked));
    }
    entry = &computed;
    if (cache) {
      if (cache->floats + computed.ref.size() > ReferenceCache::kMaxFloats) {
        cache->entries.clear();
        cache->floats = 0;
      }
      cache->floats += computed.ref.size();
      entry = &(cache->entries[key] = std::move(computed));
    }
  }
  const std::vector<float>& ref = entry->ref;
  const std::vector<float> got = all_rows ? out : gather_rows(out, rows, row_elems);
  const Tolerance tol = tolerance_for(s.q_dtype, s.kv_dtype);
  const Comparison cmp = compare_outputs(got, ref, s.model.num_q_heads, dv, tol);
  r.error.max_abs = cmp.max_abs;
  r.error.max_rel = cmp.max_rel;
  r.error.rows_checked = static_cast<int>(rows.size());
  r.error.quant_rel = entry->quant_rel;
  if (cmp.ok) return true;
  r.error.first_mismatch = cmp.report;
  r.status = PointStatus::wrong;
  r.reason = fmt::format(
      "{} of {} checked elements outside |out - ref| <= {:g} + {:g}*|ref| ({} of {} sequences "
      "checked){}{}",
      cmp.mismatches, cmp.checked, tol.atol, tol.rtol, rows.size(), s.batch,
      cmp.report.empty() ? "" : ": ", cmp.report);
  return false;
}

}  // namespace decodebench
