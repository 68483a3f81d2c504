#pragma once
// The model parameters a Modelfile's PARAMETER lines and /api/create's `parameters` set,
// with Ollama's names and types (its api.Options), and tandem's own (thinking,
// thinking_budget). Values are kept as typed JSON: ints as integers, floats as numbers,
// `stop` as a list of strings, `thinking` as "on", "off" or "auto".
//
// Three kinds of names:
//  - applied: they become the defaults of requests to the model (under the request's own
//    fields);
//  - accepted: Ollama runner settings that tandem's engine decides by itself (num_gpu,
//    num_thread, ...): stored and shown, with a note that they change nothing;
//  - deprecated in Ollama (mirostat, ...): dropped with a warning, as Ollama drops them.
// Anything else is refused, naming the known parameters.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::store {

using json = nlohmann::ordered_json;

enum class ParamType { kInt, kFloat, kBool, kString, kStringList, kThinking };

struct ParamSpec {
  const char* name;
  ParamType type;
  double lo, hi;     // inclusive range of numbers
  bool applied;      // false: accepted for Ollama compatibility, no effect in tandem
  const char* help;  // what it does (or why it does nothing)
};

// The table, in the order `tandem show` lists parameters.
const std::vector<ParamSpec>& param_specs();
const ParamSpec* find_param(std::string_view name);
bool is_deprecated_param(std::string_view name);

// What parsing one value gave: the typed value, or nothing (a deprecated name), plus a note
// for the user ("num_gpu changes nothing in tandem: ...") when there is one.
struct ParamResult {
  std::optional<json> value;
  std::string note;
};

// A PARAMETER line's text value ("0.7", "4096", "true", "<|im_end|>"). Throws
// Error(kInvalidArgument) naming the parameter and the expected type; the caller adds the
// line number.
ParamResult parse_param_text(std::string_view name, std::string_view text);
// A JSON value of /api/create's `parameters` (numbers, booleans, strings; `stop` a string or
// a list of strings). Integral floats (4096.0) are accepted for int parameters.
ParamResult parse_param_json(std::string_view name, const json& value);

// Adds `value` for `name` to a parameters object: `stop` values are appended to its list,
// any other name replaces the previous value.
void merge_param(json& params, std::string_view name, const json& value);

// One "name value" line per value, Ollama's /api/show layout (`stop` one line per string,
// strings quoted).
std::string format_params(const json& params);

}  // namespace tandem::store
