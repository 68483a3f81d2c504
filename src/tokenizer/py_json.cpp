#include "tokenizer/py_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tandem::tok {
namespace {

void dump_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

void dump(const nlohmann::ordered_json& v, std::string& out) {
  using T = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case T::null:
      out += "null";
      break;
    case T::boolean:
      out += v.get<bool>() ? "true" : "false";
      break;
    case T::number_integer:
      out += std::to_string(v.get<int64_t>());
      break;
    case T::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      break;
    case T::number_float:
      out += py_float_repr(v.get<double>());
      break;
    case T::string:
      dump_string(v.get_ref<const std::string&>(), out);
      break;
    case T::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        dump(e, out);
      }
      out += ']';
      break;
    }
    case T::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump_string(k, out);
        out += ": ";
        dump(e, out);
      }
      out += '}';
      break;
    }
    default:
      out += "null";
      break;  // binary/discarded: not produced by the JSON parser
  }
}

}  // namespace

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits and decimal exponent, then Python's layout rule: scientific
  // when the exponent is < -4 or >= 16, otherwise positional with at least one decimal.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // e.g. "-1.2345e+02"
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {  // appended piecewise: GCC 12 warns (-Wrestrict) on "." + s
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out += "0." + std::string(size_t(-exp - 1), '0') + digits;
  } else {
    if (digits.size() <= size_t(exp) + 1) {
      out += digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
  }
  return out;
}

std::string py_json_dumps(const nlohmann::ordered_json& v) {
  std::string out;
  dump(v, out);
  return out;
}

}  // namespace tandem::tok
