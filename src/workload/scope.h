// What a sweep point times: the attention alone (the rung's kernels) or one transformer layer's
// whole decode step (src/workload/layer_model.h). Header-only: the report layer reads and writes
// it without linking the workload library.
#pragma once

#include <string>
#include <string_view>

#include "common/errors.h"

namespace decodebench {

enum class Scope { attention, layer };

inline std::string_view scope_name(Scope s) { return s == Scope::layer ? "layer" : "attention"; }

// Throws InputError naming the valid scopes.
inline Scope parse_scope(std::string_view text) {
  if (text == "attention") return Scope::attention;
  if (text == "layer") return Scope::layer;
  throw InputError("unknown scope '" + std::string(text) + "' (valid: attention, layer)");
}

}  // namespace decodebench
