// Reading JSON with error messages that name the source and the key path
// ("results.json: key 'results[3].time_s.median': expected a number, got string").
// Used by the report reader and by the sweep-config loader.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/errors.h"

namespace decodebench {

class JsonIn {
 public:
  JsonIn(const nlohmann::json& j, std::string source, std::string path = "")
      : j_(&j), source_(std::move(source)), path_(std::move(path)) {}

  const nlohmann::json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  bool has(std::string_view key) const { return j_->is_object() && j_->contains(key); }
  // A required member of an object.
  JsonIn at(std::string_view key) const;
  // An element of an array (the caller checks size() first).
  JsonIn at(std::size_t i) const;
  std::size_t size() const;  // array size; fails unless an array

  double number() const;          // any JSON number
  double number_or_nan() const;   // a number, or null -> NaN (the "not available" convention)
  double number_or_zero() const;  // a number, or null -> 0 (device fields: 0 = unknown)
  std::int64_t integer() const;   // an integral number (2.0 is accepted, 2.5 is not)
  int int32() const;
  std::uint64_t uint64() const;
  bool boolean() const;
  std::string string() const;

  // Fails naming the first key not in `allowed` and listing the allowed ones.
  void reject_unknown_keys(std::initializer_list<std::string_view> allowed) const;
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string child_path(std::string_view key) const;
  const nlohmann::json* j_;
  std::string source_;
  std::string path_;
};

// Writes a double, or null when it is NaN or infinite (JSON has no NaN).
inline nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}
// Device fields use 0 for "unknown"; the JSON says null.
inline nlohmann::json positive_or_null(double x) {
  return (std::isfinite(x) && x > 0) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

}  // namespace decodebench
