#include "structured/json_formats.h"

#include <initializer_list>
#include <map>
#include <string_view>

namespace tandem::structured {

namespace {

// Concatenation by appending (GCC 12 warns falsely on chains of literal + string).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

// Year 0001-9999 (Python's date range; 0000 is not a date).
const std::string kYear = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})";
// Leap years: divisible by 4 and not by 100, or divisible by 400.
const std::string kLeapYear =
    "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";
const std::string kMonthDay =
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
    "02-(0[1-9]|1[0-9]|2[0-8]))";
const std::string kDate = "(" + kYear + "-" + kMonthDay + "|" + kLeapYear + "-02-29)";
const std::string kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([zZ]|[+-]([01][0-9]|2[0-3]):[0-5]"
    "[0-9])";
const std::string kDateTime = kDate + "[tT]" + kTime;

const std::string kDuration =
    "P(([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)(T([0-9]+H([0-9]+M([0-9]+S)?)?|"
    "[0-9]+M([0-9]+S)?|[0-9]+S))?|T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)|"
    "[0-9]+W)";

const std::string kDecOctet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
const std::string kIpv4 = kDecOctet + "(\\." + kDecOctet + "){3}";
const std::string kH16 = "[0-9a-fA-F]{1,4}";
const std::string kLs32 = "(" + kH16 + ":" + kH16 + "|" + kIpv4 + ")";
std::string ipv6() {
  auto h = [](int n) { return cat({"(", kH16, ":){", std::to_string(n), "}"}); };
  auto upto = [](int n) {  // [ *n( h16 ":" ) h16 ]
    if (n == 0) return cat({"(", kH16, ")?"});
    return cat({"((", kH16, ":){0,", std::to_string(n), "}", kH16, ")?"});
  };
  return cat({"(",   h(6),    kLs32,                       //
              "|::", h(5),    kLs32,                       //
              "|",   upto(0), "::",  h(4),  kLs32,         //
              "|",   upto(1), "::",  h(3),  kLs32,         //
              "|",   upto(2), "::",  h(2),  kLs32,         //
              "|",   upto(3), "::",  kH16,  ":",   kLs32,  //
              "|",   upto(4), "::",  kLs32,                //
              "|",   upto(5), "::",  kH16,                 //
              "|",   upto(6), "::",  ")"});
}

const std::string kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const std::string kHostname = kLabel + "(\\." + kLabel + ")*";
const std::string kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const std::string kEmail =
    kAtext + "+(\\." + kAtext + "+)*@(" + kHostname + "|\\[" + kIpv4 + "\\])";

// RFC 3986.
const std::string kUnreserved = "A-Za-z0-9._~\\-";
const std::string kSubDelims = "!$&'()*+,;=";
const std::string kPct = "%[0-9A-Fa-f]{2}";
const std::string kPchar = "([" + kUnreserved + kSubDelims + ":@]|" + kPct + ")";
const std::string kSegment = kPchar + "*";
const std::string kSegmentNz = kPchar + "+";
const std::string kSegmentNzNc = "([" + kUnreserved + kSubDelims + "@]|" + kPct + ")+";
const std::string kQuery = "([" + kUnreserved + kSubDelims + ":@/?]|" + kPct + ")*";
const std::string kUserinfo = "([" + kUnreserved + kSubDelims + ":]|" + kPct + ")*";
const std::string kRegName = "([" + kUnreserved + kSubDelims + "]|" + kPct + ")*";
std::string authority() {
  std::string ip_literal =
      cat({"\\[(", ipv6(), "|v[0-9A-Fa-f]+\\.[", kUnreserved, kSubDelims, ":]+)\\]"});
  return cat({"(", kUserinfo, "@)?(", ip_literal, "|", kIpv4, "|", kRegName, ")(:[0-9]*)?"});
}
std::string uri() {
  std::string path_abempty = cat({"(/", kSegment, ")*"});
  std::string hier = cat({"(//", authority(), path_abempty, "|/(", kSegmentNz, "(/", kSegment,
                          ")*)?|", kSegmentNz, "(/", kSegment, ")*|)"});
  return cat({"[A-Za-z][A-Za-z0-9+.\\-]*:", hier, "(\\?", kQuery, ")?(#", kQuery, ")?"});
}
std::string uri_reference() {
  std::string path_abempty = cat({"(/", kSegment, ")*"});
  std::string relative = cat({"(//", authority(), path_abempty, "|/(", kSegmentNz, "(/", kSegment,
                              ")*)?|", kSegmentNzNc, "(/", kSegment, ")*|)"});
  return cat({"(", uri(), "|", relative, "(\\?", kQuery, ")?(#", kQuery, ")?)"});
}

const std::map<std::string, std::string>& regexes() {
  static const std::map<std::string, std::string> m = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDateTime},
      {"duration", kDuration},
      {"ipv4", kIpv4},
      {"ipv6", ipv6()},
      {"hostname", kHostname},
      {"email", kEmail},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"uri", uri()},
      {"url", uri()},
      {"uri-reference", uri_reference()},
      {"json-pointer", "(/([^~/]|~[01])*)*"},
      {"relative-json-pointer", "(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)"},
  };
  return m;
}

}  // namespace

FormatKind classify_format(const std::string& name) {
  if (regexes().count(name)) return FormatKind::kRegex;
  if (name == "int32") return FormatKind::kInt32;
  if (name == "int64") return FormatKind::kInt64;
  if (name == "float" || name == "double") return FormatKind::kAnyNumber;
  if (name == "binary" || name == "password") return FormatKind::kAnyString;
  static const char* standard[] = {"idn-email",     "idn-hostname", "iri",
                                   "iri-reference", "uri-template", "regex",
                                   "color",         "unix-time",    "uri-reference-template"};
  for (const char* s : standard)
    if (name == s) return FormatKind::kUnsupported;
  return FormatKind::kUnknown;
}

const char* format_regex(const std::string& name) {
  auto it = regexes().find(name);
  return it == regexes().end() ? nullptr : it->second.c_str();
}

}  // namespace tandem::structured
