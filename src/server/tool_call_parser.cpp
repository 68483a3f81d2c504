#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "server/stop_matcher.h"

namespace tandem::server {
namespace {
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool all_space(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return false;
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

void ToolCallParser::emit_text(ToolDelta& out, std::string_view s) {
  if (s.empty()) return;
  if (calls_ > 0) {
    // Whitespace between or after calls is layout, not an answer.
    if (all_space(s)) {
      pending_ws_.append(s);
      return;
    }
    out.content += pending_ws_;
    pending_ws_.clear();
  }
  out.content.append(s);
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
    if (!in_call_) {
      size_t open = buf_.find(kOpen);
      if (open != std::string::npos) {
        emit_text(out, std::string_view(buf_).substr(0, open));
        buf_.erase(0, open + kOpen.size());
        in_call_ = true;
        continue;
      }
      size_t keep = final ? 0 : partial_suffix(buf_, kOpen);
      std::string_view s = std::string_view(buf_).substr(0, buf_.size() - keep);
      if (calls_ > 0 && !final) {
        // Hold trailing whitespace: it may only separate two calls.
        size_t t = s.size();
        while (t > 0 &&
               (s[t - 1] == ' ' || s[t - 1] == '\n' || s[t - 1] == '\t' || s[t - 1] == '\r'))
          --t;
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
    size_t close = buf_.find(kClose);
    if (close == std::string::npos && !final) return;
    std::string_view body = std::string_view(buf_).substr(0, close);
    ToolCall call;
    if (parse_call(body, call)) {
      out.calls.push_back(std::move(call));
      ++calls_;
      pending_ws_.clear();
    } else {
      std::string raw = std::string(kOpen) + std::string(body);
      if (close != std::string::npos) raw += kClose;
      emit_text(out, raw);
    }
    buf_.erase(0, close == std::string::npos ? buf_.size() : close + kClose.size());
    in_call_ = false;
    if (final && buf_.empty()) return;
  }
}

}  // namespace tandem::server
