// The napkin calculator's rows printed (`decodebench model`): the table, Markdown, CSV and JSON of
// each scope. The numbers come from src/calculator; this file only lays them out.
#pragma once

#include <string>

#include "calculator/attention_calc.h"
#include "calculator/layer_calc.h"
#include "report/format.h"  // OutputFormat

namespace decodebench {

// table and md: a header naming the device, its roofs and what the rows count, then the rows.
// json and csv: every field of every row (docs/design.md "The napkin calculator").
std::string attention_view(const calculator::AttentionResult& r, OutputFormat f);

// table and md: the header, a line per model that does not fit, the rows (tok/s '-' above the
// max batch), then the knee of every series. json: the device, the rows with their stages, the
// knees and the models that do not fit; csv: the rows with their series' knee.
std::string layer_view(const calculator::LayerResult& r, OutputFormat f);

// What `f` has no place for, for stderr: a CSV cannot say that a model does not fit, so each one
// is a "note:" line here; "" for the other formats.
std::string layer_view_notes(const calculator::LayerResult& r, OutputFormat f);

}  // namespace decodebench
