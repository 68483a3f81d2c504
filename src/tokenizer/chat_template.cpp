#include "tokenizer/chat_template.h"

#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/py_json.h"

namespace tandem::tok {
namespace {

using ojson = nlohmann::ordered_json;

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Python's str.lstrip/rstrip/strip with a set of characters ("\n" here).
std::string lstrip_nl(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && s[i] == '\n') ++i;
  return std::string(s.substr(i));
}
std::string rstrip_nl(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && s[n - 1] == '\n') --n;
  return std::string(s.substr(0, n));
}
std::string strip_nl(std::string_view s) {
  return lstrip_nl(rstrip_nl(s));
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  size_t p = s.find(sep);
  return p == std::string_view::npos ? s : s.substr(0, p);
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

struct Message {
  std::string role;
  std::string content;
  std::optional<std::string> reasoning;  // reasoning_content when given and not null
  const ojson* tool_calls = nullptr;     // a non-empty array, or null
};

std::string content_text(const ojson& m, size_t i) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // OpenAI content parts: only text parts can be rendered
    std::string out;
    bool first = true;
    for (const auto& part : *it) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        fail(ErrorKind::kInvalidArgument,
             "messages[{}].content: only text parts are supported in a content list", i);
      if (!first) out += "\n";
      first = false;
      out += part["text"].get<std::string>();
    }
    return out;
  }
  fail(ErrorKind::kInvalidArgument,
       "messages[{}].content must be a string, a list of text "
       "parts, or null",
       i);
}

std::vector<Message> parse_messages(const ojson& messages) {
  if (!messages.is_array())
    fail(ErrorKind::kInvalidArgument, "messages must be an array of message objects");
  if (messages.empty()) fail(ErrorKind::kInvalidArgument, "messages must not be empty");
  std::vector<Message> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    if (!m.is_object()) fail(ErrorKind::kInvalidArgument, "messages[{}] is not an object", i);
    auto r = m.find("role");
    if (r == m.end() || !r->is_string())
      fail(ErrorKind::kInvalidArgument, "messages[{}].role must be a string", i);
    Message msg;
    msg.role = r->get<std::string>();
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      fail(ErrorKind::kInvalidArgument,
           "messages[{}].role '{}' is not one of system, user, assistant, tool", i,
           msg.role.substr(0, 40));
    msg.content = content_text(m, i);
    if (msg.role == "assistant") {
      if (auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null()) {
        if (!rc->is_string())
          fail(ErrorKind::kInvalidArgument, "messages[{}].reasoning_content must be a string", i);
        msg.reasoning = rc->get<std::string>();
      }
      if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
        if (!tc->is_array())
          fail(ErrorKind::kInvalidArgument, "messages[{}].tool_calls must be an array", i);
        if (!tc->empty()) msg.tool_calls = &*tc;
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void render_tool_call(const ojson& call, size_t i, size_t k, std::string& out) {
  if (!call.is_object())
    fail(ErrorKind::kInvalidArgument, "messages[{}].tool_calls[{}] is not an object", i, k);
  const ojson* fn = &call;
  // Jinja: `{% if tool_call.function %}` - a present, non-empty object.
  if (auto f = call.find("function"); f != call.end() && f->is_object() && !f->empty()) fn = &*f;
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string())
    fail(ErrorKind::kInvalidArgument,
         "messages[{}].tool_calls[{}]: function name must be a "
         "string",
         i, k);
  auto args = fn->find("arguments");
  if (args == fn->end())
    fail(ErrorKind::kInvalidArgument, "messages[{}].tool_calls[{}]: arguments are missing", i, k);
  out += "<tool_call>\n{\"name\": \"";
  out += name->get<std::string>();
  out += "\", \"arguments\": ";
  out += args->is_string() ? args->get<std::string>() : py_json_dumps(*args);
  out += "}\n</tool_call>";
}

}  // namespace

std::string render_chat(const ojson& messages, const ojson& tools, const ChatOptions& opt) {
  const std::vector<Message> msgs = parse_messages(messages);
  if (!tools.is_null() && !tools.is_array())
    fail(ErrorKind::kInvalidArgument, "tools must be an array (or null)");
  const size_t n = msgs.size();
  std::string out;

  if (tools.is_array() && !tools.empty()) {
    out += "<|im_start|>system\n";
    if (msgs[0].role == "system") out += msgs[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou "
        "are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& t : tools) {
      out += "\n";
      out += py_json_dumps(t);
    }
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (msgs[0].role == "system") {
    out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
  }

  // The last user message that is a real query (not a wrapped tool response).
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    const Message& m = msgs[k];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const Message& m = msgs[i];
    const bool last = i + 1 == n;
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string content = m.content;
      std::string reasoning;
      if (m.reasoning) {
        reasoning = *m.reasoning;
      } else if (m.content.find("</think>") != std::string::npos) {
        content = lstrip_nl(after_last(m.content, "</think>"));
        reasoning =
            lstrip_nl(after_last(rstrip_nl(before_first(m.content, "</think>")), "<think>"));
      }
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" +
               lstrip_nl(content);
      } else {
        out += "<|im_start|>assistant\n" + content;
      }
      if (m.tool_calls) {
        for (size_t k = 0; k < m.tool_calls->size(); ++k) {
          if ((k == 0 && !content.empty()) || k > 0) out += "\n";
          render_tool_call((*m.tool_calls)[k], i, k, out);
        }
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (opt.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (opt.enable_thinking.has_value() && !*opt.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tandem::tok
