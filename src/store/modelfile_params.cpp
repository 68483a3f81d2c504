#include "store/modelfile_params.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace tandem::store {
namespace {

constexpr double kMaxInt = double(std::numeric_limits<int32_t>::max());
constexpr double kInt64 = 9.2e18;

const char* type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt:
      return "an integer";
    case ParamType::kFloat:
      return "a number";
    case ParamType::kBool:
      return "true or false";
    case ParamType::kString:
    case ParamType::kStringList:
      return "a string";
    case ParamType::kThinking:
      return "on, off or auto (or true/false)";
  }
  return "a value";
}

std::string known_names() {
  std::string s;
  for (auto& p : param_specs())
    if (p.applied) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

const ParamSpec& spec_or_fail(std::string_view name) {
  const ParamSpec* p = find_param(name);
  if (!p)
    fail(ErrorKind::kInvalidArgument, "unknown parameter '{}' (parameters: {})", name,
         known_names());
  return *p;
}

void check_range(const ParamSpec& p, double v, const std::string& shown) {
  if (v < p.lo || v > p.hi) {
    if (std::string_view(p.name) == "num_predict")
      fail(ErrorKind::kInvalidArgument,
           "num_predict must be -1 (no limit), -2 or at least 1, got {}", shown);
    fail(ErrorKind::kInvalidArgument, "{} must be between {} and {}, got {}", p.name, p.lo, p.hi,
         shown);
  }
  if (std::string_view(p.name) == "num_predict" && v == 0)
    fail(ErrorKind::kInvalidArgument, "num_predict must be -1 (no limit), -2 or at least 1, got 0");
}

ParamResult finish(const ParamSpec& p, json v) {
  ParamResult r;
  r.value = std::move(v);
  if (!p.applied)
    r.note = fmt::format("parameter {} changes nothing in tandem: {}", p.name, p.help);
  return r;
}

std::optional<bool> parse_go_bool(std::string_view s) {
  for (auto t : {"1", "t", "T", "TRUE", "true", "True"})
    if (s == t) return true;
  for (auto f : {"0", "f", "F", "FALSE", "false", "False"})
    if (s == f) return false;
  return std::nullopt;
}

json thinking_value(const std::string& s) {
  if (s == "on" || s == "off" || s == "auto") return s;
  if (auto b = parse_go_bool(s)) return *b ? "on" : "off";
  fail(ErrorKind::kInvalidArgument, "thinking must be on, off or auto (or true/false), got '{}'",
       s);
}

}  // namespace

const std::vector<ParamSpec>& param_specs() {
  static const std::vector<ParamSpec> specs = {
      {"num_ctx", ParamType::kInt, 1, kMaxInt, true,
       "context window of a request, capped by the loaded model's"},
      {"num_predict", ParamType::kInt, -2, kMaxInt, true,
       "tokens to generate at most (-1: up to the context)"},
      {"temperature", ParamType::kFloat, 0, 100, true, "sampling temperature (0: greedy)"},
      {"top_k", ParamType::kInt, 0, kMaxInt, true, "keep the k most likely tokens (0: off)"},
      {"top_p", ParamType::kFloat, 0, 1, true, "nucleus sampling mass"},
      {"min_p", ParamType::kFloat, 0, 1, true, "drop tokens below min_p x the best one's chance"},
      {"typical_p", ParamType::kFloat, 0, 1, false, "typical sampling is not implemented"},
      {"repeat_penalty", ParamType::kFloat, 0, 10, true, "penalty on repeated tokens (1: off)"},
      {"repeat_last_n", ParamType::kInt, -1, kMaxInt, true,
       "tokens the penalties look back over (-1: all)"},
      {"presence_penalty", ParamType::kFloat, -2, 2, true, "OpenAI-style presence penalty"},
      {"frequency_penalty", ParamType::kFloat, -2, 2, true, "OpenAI-style frequency penalty"},
      {"seed", ParamType::kInt, -kInt64, kInt64, true, "sampling seed (-1: random)"},
      {"stop", ParamType::kStringList, 0, 0, true, "stop strings (one PARAMETER line each)"},
      {"thinking", ParamType::kThinking, 0, 0, true, "Qwen3 thinking default: on, off or auto"},
      {"thinking_budget", ParamType::kInt, -1, kMaxInt, true,
       "reasoning tokens before </think> is forced (-1: no limit)"},
      {"num_keep", ParamType::kInt, -1, kMaxInt, false,
       "the engine keeps the whole prompt in its KV cache"},
      {"num_batch", ParamType::kInt, 1, kMaxInt, false,
       "the engine sizes its steps (--max-num-batched-tokens)"},
      {"num_gpu", ParamType::kInt, -1, kMaxInt, false,
       "every layer runs on the chosen backend (--backend)"},
      {"main_gpu", ParamType::kInt, 0, kMaxInt, false, "tandem uses GPU 0"},
      {"num_thread", ParamType::kInt, 0, kMaxInt, false, "CPU threads are set by --threads"},
      {"use_mmap", ParamType::kBool, 0, 0, false, "checkpoints are always memory-mapped"},
      {"draft_num_predict", ParamType::kInt, 0, kMaxInt, false,
       "speculative decoding is not implemented"},
  };
  return specs;
}

const ParamSpec* find_param(std::string_view name) {
  for (auto& p : param_specs())
    if (name == p.name) return &p;
  return nullptr;
}

bool is_deprecated_param(std::string_view name) {
  for (auto d : {"penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock",
                 "mirostat", "mirostat_tau", "mirostat_eta"})
    if (name == d) return true;
  return false;
}

ParamResult parse_param_text(std::string_view name, std::string_view text) {
  if (is_deprecated_param(name))
    return ParamResult{std::nullopt,
                       fmt::format("parameter {} is deprecated in Ollama and ignored", name)};
  const ParamSpec& p = spec_or_fail(name);
  const std::string s(text);
  switch (p.type) {
    case ParamType::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        fail(ErrorKind::kInvalidArgument, "{} must be an integer, got '{}'{}", p.name, s,
             s.find('#') != std::string::npos ? " (comments go on a line of their own)" : "");
      check_range(p, double(v), s);
      return finish(p, v);
    }
    case ParamType::kFloat: {
      char* end = nullptr;
      double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
        fail(ErrorKind::kInvalidArgument, "{} must be a number, got '{}'{}", p.name, s,
             s.find('#') != std::string::npos ? " (comments go on a line of their own)" : "");
      check_range(p, v, s);
      return finish(p, v);
    }
    case ParamType::kBool: {
      auto b = parse_go_bool(s);
      if (!b) fail(ErrorKind::kInvalidArgument, "{} must be true or false, got '{}'", p.name, s);
      return finish(p, *b);
    }
    case ParamType::kString:
      return finish(p, s);
    case ParamType::kStringList:
      if (s.empty()) fail(ErrorKind::kInvalidArgument, "{} needs a non-empty string", p.name);
      return finish(p, json::array({s}));
    case ParamType::kThinking:
      return finish(p, thinking_value(s));
  }
  fail(ErrorKind::kInternal, "parameter {}: unhandled type", p.name);
}

ParamResult parse_param_json(std::string_view name, const json& v) {
  if (is_deprecated_param(name))
    return ParamResult{std::nullopt,
                       fmt::format("parameter {} is deprecated in Ollama and ignored", name)};
  const ParamSpec& p = spec_or_fail(name);
  auto wrong = [&]() -> ParamResult {
    fail(ErrorKind::kInvalidArgument, "parameter {} must be {}, got {}", p.name, type_name(p.type),
         v.dump());
  };
  switch (p.type) {
    case ParamType::kInt: {
      if (!v.is_number()) return wrong();
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::floor(d) != d) return wrong();
      check_range(p, d, v.dump());
      return finish(p, v.is_number_integer() ? v.get<int64_t>() : int64_t(d));
    }
    case ParamType::kFloat: {
      if (!v.is_number() || !std::isfinite(v.get<double>())) return wrong();
      check_range(p, v.get<double>(), v.dump());
      return finish(p, v.get<double>());
    }
    case ParamType::kBool:
      if (!v.is_boolean()) return wrong();
      return finish(p, v.get<bool>());
    case ParamType::kString:
      if (!v.is_string()) return wrong();
      return finish(p, v);
    case ParamType::kStringList: {
      json out = json::array();
      if (v.is_string()) {
        out.push_back(v);
      } else if (v.is_array()) {
        for (auto& x : v) {
          if (!x.is_string()) return wrong();
          out.push_back(x);
        }
      } else {
        return wrong();
      }
      for (auto& x : out)
        if (x.get<std::string>().empty())
          fail(ErrorKind::kInvalidArgument, "{} strings must not be empty", p.name);
      return finish(p, out);
    }
    case ParamType::kThinking:
      if (v.is_boolean()) return finish(p, v.get<bool>() ? "on" : "off");
      if (v.is_string()) return finish(p, thinking_value(v.get<std::string>()));
      return wrong();
  }
  fail(ErrorKind::kInternal, "parameter {}: unhandled type", p.name);
}

void merge_param(json& params, std::string_view name, const json& value) {
  if (!params.is_object()) params = json::object();
  const std::string key(name);
  if (value.is_array() && params.contains(key) && params[key].is_array()) {
    for (auto& x : value) params[key].push_back(x);
    return;
  }
  params[key] = value;
}

std::string format_params(const json& params) {
  std::string out;
  auto line = [&](const std::string& k, const json& v) {
    out += fmt::format("{:<30} {}\n", k, v.dump());
  };
  if (!params.is_object()) return out;
  // The table's order first, then anything else (a newer tandem's parameters).
  for (auto& p : param_specs()) {
    auto it = params.find(p.name);
    if (it == params.end()) continue;
    if (it->is_array())
      for (auto& x : *it) line(p.name, x);
    else
      line(p.name, *it);
  }
  for (auto& [k, v] : params.items())
    if (!find_param(k)) line(k, v);
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace tandem::store
