#include "store/modelfile.h"

#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "store/modelfile_params.h"

namespace tandem::store {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_blank(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (is_blank(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// A value read so far is complete when it is bare, or its quote is closed.
bool complete(std::string_view v) {
  if (v.substr(0, 3) == "\"\"\"") return v.size() >= 6 && v.substr(v.size() - 3) == "\"\"\"";
  if (!v.empty() && v[0] == '"') return v.size() >= 2 && v.back() == '"';
  return true;
}

std::string unquote(std::string_view v) {
  if (v.substr(0, 3) == "\"\"\"") return std::string(v.substr(3, v.size() - 6));
  if (!v.empty() && v[0] == '"') return std::string(v.substr(1, v.size() - 2));
  return std::string(v);
}

struct Reader {
  std::string_view text;
  size_t pos = 0;
  int line = 1;

  bool eof() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }
  void skip_blanks() {
    while (!eof() && is_blank(peek())) ++pos;
  }
  std::string_view take_while(bool (*ok)(char)) {
    size_t start = pos;
    while (!eof() && ok(peek())) ++pos;
    return text.substr(start, pos - start);
  }
  // The value from here: up to the first line end at which it is complete. nullopt when the
  // text ends inside an open quote. Advances past the line end; `raw` gets the text as
  // written (quotes included).
  std::optional<std::string> value(std::string* raw = nullptr) {
    const size_t start = pos;
    for (;;) {
      size_t nl = text.find('\n', pos);
      size_t end = nl == std::string_view::npos ? text.size() : nl;
      std::string_view v = trim(text.substr(start, end - start));
      pos = nl == std::string_view::npos ? text.size() : nl + 1;
      if (complete(v)) {
        if (nl != std::string_view::npos) ++line;
        if (raw) *raw = std::string(v);
        return unquote(v);
      }
      if (nl == std::string_view::npos) return std::nullopt;
      ++line;
    }
  }
};

bool param_char(char c) {
  return is_alpha(c) || (c >= '0' && c <= '9') || c == '_';
}
bool alpha_char(char c) {
  return is_alpha(c);
}

std::string normalize(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

constexpr const char* kInstructions = "FROM, PARAMETER, SYSTEM, MESSAGE, LICENSE, REQUIRES";

}  // namespace

Modelfile parse_modelfile(std::string_view raw, const std::string& source) {
  const std::string text = normalize(raw);
  Modelfile mf;
  Reader r{text};
  auto err = [&](int line, const std::string& msg) -> void {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("{}:{}: {}", source, line, msg));
  };
  while (!r.eof()) {
    char c = r.peek();
    if (is_blank(c)) {
      ++r.pos;
      continue;
    }
    if (c == '\n') {
      ++r.pos;
      ++r.line;
      continue;
    }
    if (c == '#') {
      size_t nl = text.find('\n', r.pos);
      r.pos = nl == std::string::npos ? text.size() : nl;
      continue;
    }
    const int line = r.line;
    std::string_view word = r.take_while(alpha_char);
    const std::string name = lower(word);
    const bool followed_by_blank = !r.eof() && is_blank(r.peek());
    if (word.empty() || (!followed_by_blank && !r.eof() && r.peek() != '\n')) {
      size_t nl = text.find_first_of(" \t\n", r.pos);
      std::string shown =
          text.substr(r.pos - word.size(),
                      (nl == std::string::npos ? text.size() : nl) - (r.pos - word.size()));
      err(line, fmt::format("'{}' is not an instruction (instructions: {})", shown, kInstructions));
    }
    static const char* kKnown[] = {"from",    "parameter", "system",   "message",
                                   "license", "requires",  "template", "adapter",
                                   "draft",   "renderer",  "parser"};
    bool known = false;
    for (auto k : kKnown) known |= name == k;
    if (!known)
      err(line, fmt::format("unknown instruction '{}' (instructions: {})", word, kInstructions));
    if (name == "template")
      err(line,
          "TEMPLATE is not supported: tandem renders the model's own Qwen3 chat template "
          "(tools, thinking) itself; remove the TEMPLATE instruction");
    if (name == "adapter")
      err(line,
          "ADAPTER is not supported: tandem applies no LoRA adapters; merge the adapter into "
          "the weights (for example with peft's merge_and_unload) and FROM the merged folder");
    if (name == "draft")
      err(line, "DRAFT is not supported: tandem has no speculative decoding with a draft model");
    if (name == "renderer" || name == "parser")
      err(line, fmt::format("{} is not supported: tandem renders Qwen3's chat template and reads "
                            "its thinking and tool calls itself; remove the line",
                            upper(name)));
    r.skip_blanks();

    std::string key;
    if (name == "parameter" || name == "message") {
      std::string_view k = r.take_while(name == "parameter" ? param_char : alpha_char);
      if (k.empty() || r.eof() || !is_blank(r.peek())) {
        if (name == "parameter")
          err(line, "PARAMETER needs a name and a value (PARAMETER temperature 0.7)");
        err(line, "MESSAGE needs a role and a text (MESSAGE user Is Toronto in Canada?)");
      }
      key = std::string(k);
      r.skip_blanks();
    }
    std::string raw;
    auto value = r.value(&raw);
    if (!value)
      err(line,
          "the quoted value that starts here is never closed (a value ends at the line "
          "end after its closing \" or \"\"\")");
    if (raw.empty())
      err(line,
          fmt::format("{}{} needs a value{}", upper(name), key.empty() ? "" : " " + key,
                      name == "system" || name == "message" ? " (\"\" for an empty one)" : ""));

    if (name == "from") {
      if (!mf.from.empty() || mf.from_line)
        err(line, fmt::format("a second FROM (the first is on line {}); a model has one FROM",
                              mf.from_line));
      if (value->empty()) err(line, "FROM needs a model: a store name or a folder");
      mf.from = *value;
      mf.from_line = line;
    } else if (name == "parameter") {
      try {
        auto res = parse_param_text(key, *value);
        if (res.value) merge_param(mf.parameters, key, *res.value);
        if (!res.note.empty()) mf.notes.push_back(fmt::format("{}:{}: {}", source, line, res.note));
      } catch (const Error& e) {
        err(line, e.what());
      }
    } else if (name == "message") {
      const std::string role = lower(key);
      if (role != "system" && role != "user" && role != "assistant")
        err(line, fmt::format("MESSAGE role must be system, user or assistant, got '{}'", key));
      mf.messages.push_back({role, *value});
    } else if (name == "system") {
      mf.system = *value;
    } else if (name == "license") {
      mf.license.push_back(*value);
    } else if (name == "requires") {
      if (value->empty()) err(line, "REQUIRES needs a version (REQUIRES 0.14.0)");
      mf.requires_version = *value;
    }
  }
  if (mf.from.empty())
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("{}: no FROM line (FROM names the model: a store name or a folder)", source));
  return mf;
}

std::string quote_modelfile_value(std::string_view v) {
  auto reads_back = [&](const std::string& q) {
    Reader r{q};
    auto got = r.value();
    return got && *got == v && r.eof();
  };
  std::string bare(v);
  if (!v.empty() && v.find('\n') == std::string_view::npos && trim(v) == v && v[0] != '"' &&
      reads_back(bare))
    return bare;
  std::string triple = "\"\"\"" + std::string(v) + "\"\"\"";
  if (reads_back(triple)) return triple;
  std::string single = "\"" + std::string(v) + "\"";
  if (reads_back(single)) return single;
  fail(ErrorKind::kInvalidArgument, "this text cannot be written as one Modelfile value: {}",
       std::string(v.substr(0, 60)));
}

}  // namespace tandem::store
