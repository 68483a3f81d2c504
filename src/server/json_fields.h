#pragma once
// Typed, range-checked reads of request fields. Every failure is a 400 naming the field;
// a bad value is quoted short (json_body.h's describe), never whole.
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/gen_request.h"
#include "server/json_body.h"

namespace tandem::server::fields {

inline const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::discarded:
      return "invalid";
    default:
      return "number";
  }
}

// The field if present and not null.
inline const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::optional<bool> get_bool(const json& obj, const char* key) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(key, "'{}' must be a boolean, got {}", key, type_name(*v));
  return v->get<bool>();
}

inline std::optional<std::string> get_string(const json& obj, const char* key) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_field(key, "'{}' must be a string, got {}", key, type_name(*v));
  return v->get<std::string>();
}

inline std::optional<double> get_number(const json& obj, const char* key, double lo, double hi) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(key, "'{}' must be a number, got {}", key, type_name(*v));
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad_field(key, "'{}' must be between {} and {}, got {}", key, lo, hi, describe(*v));
  return x;
}

inline std::optional<int64_t> get_int(const json& obj, const char* key, int64_t lo, int64_t hi) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  bool integral = v->is_number_integer() ||
                  (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
                   std::fabs(v->get<double>()) < 9e15);
  if (!integral) bad_field(key, "'{}' must be an integer, got {}", key, describe(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    bad_field(key, "'{}' must be between {} and {}, got {}", key, lo, hi, describe(*v));
  int64_t x = v->is_number_float() ? int64_t(v->get<double>()) : v->get<int64_t>();
  if (x < lo || x > hi) bad_field(key, "'{}' must be between {} and {}, got {}", key, lo, hi, x);
  return x;
}

// A seed: any integer; negative values wrap (OpenAI takes int64).
inline std::optional<uint64_t> get_seed(const json& obj, const char* key) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  auto x =
      get_int(obj, key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  return uint64_t(*x);
}

// `stop`: a string or up to `max` strings.
inline std::vector<std::string> get_stop(const json& obj, const char* key, size_t max) {
  std::vector<std::string> out;
  const json* v = find(obj, key);
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max)
      bad_field(key, "'{}' takes at most {} strings, got {}", key, max, v->size());
    for (auto& s : *v) {
      if (!s.is_string()) bad_field(key, "'{}' must hold strings only, got {}", key, type_name(s));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_field(key, "'{}' must be a string or an array of strings, got {}", key, type_name(*v));
  }
  for (auto& s : out)
    if (s.empty()) bad_field(key, "'{}' strings must not be empty", key);
  return out;
}

}  // namespace tandem::server::fields
