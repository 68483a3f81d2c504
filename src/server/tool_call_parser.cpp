#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "server/stop_matcher.h"

namespace tandem::server {
namespace {
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool all_space(std::string_view s) {
  for (char c : s)
    if (!is_space(c)) return false;
  return true;
}
}  // namespace

bool ToolCallParser::parse_call(std::string_view body, ToolCall& out) {
  auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return false;
  out.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end() || args->is_null()) {
    out.arguments = "{}";
  } else if (args->is_string()) {
    // Some models write the arguments as a JSON string; pass it on verbatim.
    out.arguments = args->get<std::string>();
  } else if (args->is_object()) {
    out.arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    return false;
  }
  return true;
}

int ToolCallParser::match_header(std::string_view b, size_t& consumed, std::string& name) {
  size_t i = 0;
  auto ws = [&] {
    while (i < b.size() && is_space(b[i])) ++i;
  };
  auto lit = [&](std::string_view s) {  // 1 matched, 0 mismatch, -1 the body ends first
    for (char c : s) {
      if (i >= b.size()) return -1;
      if (b[i] != c) return 0;
      ++i;
    }
    return 1;
  };
  ws();
  if (int r = lit("{"); r != 1) return r;
  ws();
  if (int r = lit("\"name\""); r != 1) return r;
  ws();
  if (int r = lit(":"); r != 1) return r;
  ws();
  if (i >= b.size()) return -1;
  if (b[i] != '"') return 0;
  const size_t s0 = i++;
  for (bool esc = false;; ++i) {
    if (i >= b.size()) return -1;
    if (esc)
      esc = false;
    else if (b[i] == '\\')
      esc = true;
    else if (b[i] == '"')
      break;
  }
  ++i;
  auto j = nlohmann::json::parse(b.substr(s0, i - s0), nullptr, /*allow_exceptions=*/false);
  if (!j.is_string() || j.get_ref<const std::string&>().empty()) return 0;
  ws();
  if (int r = lit(","); r != 1) return r;
  ws();
  if (int r = lit("\"arguments\""); r != 1) return r;
  ws();
  if (int r = lit(":"); r != 1) return r;
  ws();
  if (i >= b.size()) return -1;
  if (b[i] != '{') return 0;
  name = j.get<std::string>();
  consumed = i;
  return 1;
}

void ToolCallParser::emit_text(ToolDelta& out, std::string_view s) {
  if (s.empty()) return;
  std::string text;
  if (calls_ > 0) {
    // Whitespace between or after calls is layout, not an answer.
    if (all_space(s)) {
      pending_ws_.append(s);
      return;
    }
    text = std::move(pending_ws_);
    pending_ws_.clear();
  }
  text.append(s);
  out.content += text;
  if (!out.pieces.empty() && out.pieces.back().kind == ToolPiece::Kind::kText)
    out.pieces.back().text += text;
  else
    out.pieces.push_back({ToolPiece::Kind::kText, std::move(text)});
}

void ToolCallParser::begin_call(ToolDelta& out, std::string name) {
  cur_ = ToolCall{name, ""};
  out.pieces.push_back({ToolPiece::Kind::kCallBegin, std::move(name)});
}

void ToolCallParser::args(ToolDelta& out, std::string_view s) {
  if (s.empty()) return;
  cur_.arguments.append(s);
  if (!out.pieces.empty() && out.pieces.back().kind == ToolPiece::Kind::kCallArgs)
    out.pieces.back().text.append(s);
  else
    out.pieces.push_back({ToolPiece::Kind::kCallArgs, std::string(s)});
}

void ToolCallParser::end_call(ToolDelta& out) {
  ++calls_;
  pending_ws_.clear();
  out.calls.push_back(std::move(cur_));
  cur_ = {};
  out.pieces.push_back({ToolPiece::Kind::kCallEnd, {}});
}

ToolDelta ToolCallParser::push(std::string_view piece) {
  ToolDelta out;
  buf_.append(piece);
  run(out, false);
  return out;
}

ToolDelta ToolCallParser::finish() {
  ToolDelta out;
  run(out, true);
  return out;
}

void ToolCallParser::run(ToolDelta& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::kText: {
        size_t open = buf_.find(kOpen);
        if (open != std::string::npos) {
          emit_text(out, std::string_view(buf_).substr(0, open));
          buf_.erase(0, open + kOpen.size());
          state_ = State::kHeader;
          continue;
        }
        size_t keep = final ? 0 : partial_suffix(buf_, kOpen);
        std::string_view s = std::string_view(buf_).substr(0, buf_.size() - keep);
        if (calls_ > 0 && !final) {
          // Hold trailing whitespace: it may only separate two calls.
          size_t t = s.size();
          while (t > 0 && is_space(s[t - 1])) --t;
          if (t > 0) {
            emit_text(out, s.substr(0, t));
            buf_.erase(0, t);
          }
          return;
        }
        emit_text(out, s);
        buf_.erase(0, s.size());
        return;
      }
      case State::kHeader: {
        size_t consumed = 0;
        std::string name;
        int m = match_header(buf_, consumed, name);
        if (m == 1) {
          begin_call(out, std::move(name));
          buf_.erase(0, consumed);
          state_ = State::kArgs;
          depth_ = 0;
          in_string_ = escape_ = false;
          continue;
        }
        if (m == 0 || final || buf_.find(kClose) != std::string::npos) {
          state_ = State::kWhole;
          continue;
        }
        return;
      }
      case State::kWhole: {
        size_t close = buf_.find(kClose);
        if (close == std::string::npos && !final) return;
        std::string_view body = std::string_view(buf_).substr(0, close);
        ToolCall call;
        if (parse_call(body, call)) {
          begin_call(out, call.name);
          args(out, call.arguments);
          end_call(out);
        } else {
          std::string raw = std::string(kOpen) + std::string(body);
          if (close != std::string::npos) raw += kClose;
          emit_text(out, raw);
        }
        buf_.erase(0, close == std::string::npos ? buf_.size() : close + kClose.size());
        state_ = State::kText;
        if (final && buf_.empty()) return;
        continue;
      }
      case State::kArgs: {
        // The arguments object, passed on as it is written until its closing brace.
        bool ended = false;
        size_t i = 0;
        for (; i < buf_.size() && !ended; ++i) {
          const char c = buf_[i];
          if (in_string_) {
            if (escape_)
              escape_ = false;
            else if (c == '\\')
              escape_ = true;
            else if (c == '"')
              in_string_ = false;
          } else if (c == '"') {
            in_string_ = true;
          } else if (c == '{' || c == '[') {
            ++depth_;
          } else if (c == '}' || c == ']') {
            ended = --depth_ <= 0;
          } else if (c == '<') {
            std::string_view rest = std::string_view(buf_).substr(i);
            if (rest.substr(0, kClose.size()) == kClose) {
              // The closing tag before the arguments closed: the call ends as written.
              args(out, std::string_view(buf_).substr(0, i));
              buf_.erase(0, i + kClose.size());
              end_call(out);
              state_ = State::kText;
              break;
            }
            if (!final && kClose.substr(0, rest.size()) == rest) {
              args(out, std::string_view(buf_).substr(0, i));  // hold a partial tag
              buf_.erase(0, i);
              return;
            }
          }
        }
        if (state_ == State::kText) continue;
        args(out, std::string_view(buf_).substr(0, i));
        buf_.erase(0, i);
        if (ended) {
          end_call(out);
          state_ = State::kTail;
          continue;
        }
        if (!final) return;
        end_call(out);
        state_ = State::kText;
        return;
      }
      case State::kTail: {
        // After the arguments: the call object's closing brace, then the closing tag.
        size_t close = buf_.find(kClose);
        if (close == std::string::npos) {
          if (final) {
            buf_.clear();
            state_ = State::kText;
            return;
          }
          if (buf_.size() > kClose.size()) buf_.erase(0, buf_.size() - kClose.size());
          return;
        }
        buf_.erase(0, close + kClose.size());
        state_ = State::kText;
        continue;
      }
    }
  }
}

}  // namespace tandem::server
