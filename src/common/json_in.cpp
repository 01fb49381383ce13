#include "common/json_in.h"

#include <fmt/format.h>

namespace decodebench {

namespace {
std::string type_of(const nlohmann::json& j) { return j.type_name(); }
}  // namespace

std::string JsonIn::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void JsonIn::fail(std::string_view what) const {
  if (path_.empty()) throw InputError(fmt::format("{}: {}", source_, what));
  throw InputError(fmt::format("{}: key '{}': {}", source_, path_, what));
}

JsonIn JsonIn::at(std::string_view key) const {
  if (!j_->is_object()) fail(fmt::format("expected an object, got {}", type_of(*j_)));
  auto it = j_->find(key);
  if (it == j_->end()) {
    JsonIn(*j_, source_, child_path(key)).fail("missing");
  }
  return JsonIn(*it, source_, child_path(key));
}

JsonIn JsonIn::at(std::size_t i) const {
  if (!j_->is_array()) fail(fmt::format("expected an array, got {}", type_of(*j_)));
  if (i >= j_->size()) fail(fmt::format("index {} out of range (size {})", i, j_->size()));
  return JsonIn((*j_)[i], source_, fmt::format("{}[{}]", path_, i));
}

std::size_t JsonIn::size() const {
  if (!j_->is_array()) fail(fmt::format("expected an array, got {}", type_of(*j_)));
  return j_->size();
}

double JsonIn::number() const {
  if (!j_->is_number()) fail(fmt::format("expected a number, got {}", type_of(*j_)));
  return j_->get<double>();
}

double JsonIn::number_or_nan() const {
  if (j_->is_null()) return std::nan("");
  return number();
}

double JsonIn::number_or_zero() const {
  if (j_->is_null()) return 0;
  return number();
}

std::int64_t JsonIn::integer() const {
  if (j_->is_number_integer()) return j_->get<std::int64_t>();
  if (j_->is_number_float()) {
    const double x = j_->get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15) {
      return static_cast<std::int64_t>(x);
    }
    fail(fmt::format("expected an integer, got {}", x));
  }
  fail(fmt::format("expected an integer, got {}", type_of(*j_)));
}

int JsonIn::int32() const {
  const std::int64_t v = integer();
  if (v < INT32_MIN || v > INT32_MAX) fail(fmt::format("{} does not fit a 32-bit integer", v));
  return static_cast<int>(v);
}

std::uint64_t JsonIn::uint64() const {
  if (j_->is_number_unsigned()) return j_->get<std::uint64_t>();
  const std::int64_t v = integer();
  if (v < 0) fail(fmt::format("expected a non-negative integer, got {}", v));
  return static_cast<std::uint64_t>(v);
}

bool JsonIn::boolean() const {
  if (!j_->is_boolean()) fail(fmt::format("expected true or false, got {}", type_of(*j_)));
  return j_->get<bool>();
}

std::string JsonIn::string() const {
  if (!j_->is_string()) fail(fmt::format("expected a string, got {}", type_of(*j_)));
  return j_->get<std::string>();
}

void JsonIn::reject_unknown_keys(std::initializer_list<std::string_view> allowed) const {
  if (!j_->is_object()) fail(fmt::format("expected an object, got {}", type_of(*j_)));
  for (const auto& [key, value] : j_->items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (std::string_view a : allowed) list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
      JsonIn(value, source_, child_path(key))
          .fail(fmt::format("unknown key; valid keys: {}", list));
    }
  }
}

}  // namespace decodebench
