// Parsing the text of a JSON input file (sweep configs, reports, model presets, datasheets) with
// the same message for bad JSON everywhere and a cap on nesting. Header only: the readers that
// use it link nlohmann_json themselves.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/errors.h"

namespace decodebench {

// No input of ours nests deeper than a few levels (a report: results[i].time_s.median). The cap
// matters because nlohmann's copy, comparison and dump recurse: a file of a million '[' would
// overflow the stack in whatever touches it after parsing.
inline constexpr int kMaxJsonDepth = 64;

// Throws InputError "<source>: not valid JSON: <parser's message with the byte position>" or
// "<source>: nested deeper than 64 levels".
inline nlohmann::json parse_json_text(std::string_view text, std::string_view source,
                                      bool ignore_comments = false) {
  bool too_deep = false;
  const nlohmann::json::parser_callback_t cap =
      [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxJsonDepth) too_deep = true;
        return !too_deep;  // discarding the rest keeps the parse cheap until it returns
      };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, cap, /*allow_exceptions=*/true, ignore_comments);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (too_deep) {
    throw InputError(
        fmt::format("{}: JSON nested deeper than {} levels; no decodebench input nests that deep",
                    source, kMaxJsonDepth));
  }
  return j;
}

}  // namespace decodebench
