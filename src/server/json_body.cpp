#include "server/json_body.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace tandem::server {

using json = nlohmann::ordered_json;

namespace {

[[noreturn]] void refuse(const std::string& why) {
  throw ApiError(400, "invalid_request_error", "", "the request body is not valid JSON: " + why);
}

// Line and column (1-based, in bytes) of byte offset `pos`.
std::pair<size_t, size_t> line_col(std::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// The parser's reason without its error code or the input it last read:
// "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error while
// parsing value - invalid literal; last read: '...'" -> "invalid literal".
std::string reason_of(const std::string& what) {
  size_t dash = what.rfind(" - ");
  std::string r = dash == std::string::npos ? std::string("syntax error") : what.substr(dash + 3);
  if (size_t semi = r.find("; last read"); semi != std::string::npos) r.resize(semi);
  if (r.size() > 120) r.resize(120);
  return r;
}

}  // namespace

int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

json parse_json_body(std::string_view body) {
  if (body.find('\0') != std::string_view::npos) {
    auto [line, col] = line_col(body, body.find('\0'));
    refuse(fmt::format("a NUL byte at line {}, column {}", line, col));
  }
  if (json_depth(body) > kMaxJsonDepth)
    throw ApiError(400, "invalid_request_error", "",
                   fmt::format("the request body nests arrays and objects deeper than {} levels",
                               kMaxJsonDepth));
  try {
    return json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    auto [line, col] = line_col(body, e.byte > 0 ? e.byte - 1 : 0);
    refuse(fmt::format("{} at line {}, column {}", reason_of(e.what()), line, col));
  } catch (const json::exception&) {
    refuse("a number is out of range");  // 1e999: the only other error the parser raises
  }
}

std::string quote(std::string_view value) {
  std::string out = "'";
  size_t shown = 0, i = 0;
  while (i < value.size() && shown < kMaxQuoted) {
    const auto c = static_cast<unsigned char>(value[i]);
    size_t len = 1;
    if (c >= 0xF0)
      len = 4;
    else if (c >= 0xE0)
      len = 3;
    else if (c >= 0xC0)
      len = 2;
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xC0) || i + len > value.size()) {
      out += fmt::format("\\x{:02x}", c);  // control bytes and broken UTF-8 as escapes
      len = 1;
    } else {
      out.append(value.substr(i, len));
    }
    i += len;
    ++shown;
  }
  if (i < value.size()) out += "...";
  out += "'";
  return out;
}

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return quote(v.get_ref<const std::string&>());
    case json::value_t::array:
      return fmt::format("an array of {}", v.size());
    case json::value_t::object:
      return fmt::format("an object of {} fields", v.size());
    default: {
      std::string s = v.dump();  // a scalar: short unless a huge number literal
      if (s.size() > kMaxQuoted) s = s.substr(0, kMaxQuoted) + "...";
      return s;
    }
  }
}

}  // namespace tandem::server
