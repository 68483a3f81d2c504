#pragma once
// String formats as regular expressions (RFC 3339 dates and times with real month lengths
// and leap years, RFC 3986 URIs, RFC 4122 UUIDs, RFC 5321-style email, IPv4 without
// leading zeros, RFC 4291 IPv6 with every compression form).
#include <string>

namespace tandem::structured {

enum class FormatKind {
  kRegex,  // a string format enforced by format_regex()
  kInt32,  // an integer format (ajv-formats): a range on integers
  kInt64,
  kAnyNumber,    // float, double: every number
  kAnyString,    // binary, password: every string
  kUnsupported,  // a standard format not enforced here: refused
  kUnknown,      // no standard defines it: an annotation
};

FormatKind classify_format(const std::string& name);
// The ECMA-262 pattern (matched against the whole string) of a kRegex format.
const char* format_regex(const std::string& name);

}  // namespace tandem::structured
