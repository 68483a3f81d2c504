#include "server/thinking.h"

#include <array>
#include <cctype>
#include <cstring>

#include "core/error.h"

namespace tandem::server {

ThinkingDefault parse_thinking_default(const std::string& s) {
  if (s == "on") return ThinkingDefault::kOn;
  if (s == "off") return ThinkingDefault::kOff;
  if (s == "auto") return ThinkingDefault::kAuto;
  fail(ErrorKind::kInvalidArgument, "--thinking must be on, off or auto, got '{}'", s);
}

const char* to_string(ThinkingDefault d) {
  switch (d) {
    case ThinkingDefault::kOn:
      return "on";
    case ThinkingDefault::kOff:
      return "off";
    case ThinkingDefault::kAuto:
      return "auto";
  }
  return "?";
}

namespace {
// Cues matched at word starts, case-insensitively.
constexpr std::array<std::string_view, 22> kCues = {
    "why",       "prove",     "proof",    "explain",  "reason",  "step by step",
    "calculate", "compute",   "solve",    "derive",   "analyze", "analyse",
    "compare",   "debug",     "how many", "how much", "what if", "puzzle",
    "optimize",  "algorithm", "evaluate", "estimate"};

bool word_start(std::string_view s, size_t i) {
  return i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]));
}
}  // namespace

bool auto_wants_thinking(std::string_view text) {
  std::string low(text);
  for (auto& c : low) c = char(std::tolower(static_cast<unsigned char>(c)));
  int words = 0;
  bool in_word = false;
  for (char c : low) {
    bool space = std::isspace(static_cast<unsigned char>(c));
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  if (words >= kAutoLongWords) return true;
  if (low.find("```") != std::string::npos) return true;
  for (auto cue : kCues)
    for (size_t p = low.find(cue); p != std::string::npos; p = low.find(cue, p + 1))
      if (word_start(low, p)) return true;
  // Arithmetic: a digit, an operator, a digit ("12*7", "3 + 4").
  for (size_t i = 0; i < low.size(); ++i) {
    if (!std::strchr("+-*/^=", low[i])) continue;
    size_t a = i, b = i + 1;
    while (a > 0 && low[a - 1] == ' ') --a;
    while (b < low.size() && low[b] == ' ') ++b;
    if (a > 0 && std::isdigit(static_cast<unsigned char>(low[a - 1])) && b < low.size() &&
        std::isdigit(static_cast<unsigned char>(low[b])))
      return true;
  }
  return false;
}

int soft_switch(const GenRequest& r) {
  int found = -1;
  auto scan = [&](const std::string& s) {
    size_t t = s.rfind("/think"), n = s.rfind("/no_think");
    if (t == std::string::npos && n == std::string::npos) return;
    if (n == std::string::npos)
      found = 1;
    else if (t == std::string::npos)
      found = 0;
    else
      found = t > n ? 1 : 0;
  };
  for (auto& m : r.messages)
    if (m.role == "user" || m.role == "system") scan(m.content);
  if (r.api == Api::kOllamaGenerate) {
    scan(r.system);
    for (auto& p : r.prompts) scan(p);
  }
  return found;
}

bool resolve_thinking(const GenRequest& r, ThinkingDefault def) {
  if (r.think) return *r.think;
  if (int s = soft_switch(r); s >= 0) return s == 1;
  if (def == ThinkingDefault::kOn) return true;
  if (def == ThinkingDefault::kOff) return false;
  // auto: judge the last user message (or the generate prompt).
  std::string_view last;
  for (auto& m : r.messages)
    if (m.role == "user") last = m.content;
  if (r.api == Api::kOllamaGenerate && !r.prompts.empty()) last = r.prompts.back();
  return auto_wants_thinking(last);
}

}  // namespace tandem::server
