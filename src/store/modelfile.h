#pragma once
// Ollama's Modelfile (docs/MODELS.md): `INSTRUCTION arguments` lines, `#` comments, the
// instructions case-insensitive, in any order.
//
//   FROM <store name or folder>          required, once
//   PARAMETER <name> <value>             typed as store/modelfile_params.h says; stop repeats
//   SYSTEM <text>                        the default system prompt (the last one wins)
//   MESSAGE <system|user|assistant> <text>   a conversation put before every chat
//   LICENSE <text>                       may repeat
//   REQUIRES <version>                   accepted (an Ollama version), nothing to check
//   TEMPLATE, ADAPTER, DRAFT, RENDERER, PARSER   refused, saying why
//
// A value is the rest of its line, trimmed; `"..."` or `"""..."""` quote one that has
// spaces at its ends or spans lines (a value ends at the first line end where its quote is
// closed, as Ollama reads it; there are no escapes). CRLF line ends and a UTF-8 byte-order
// mark are accepted. Every error names the file and line.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::store {

struct StoredMessage {
  std::string role;  // system | user | assistant
  std::string content;
  bool operator==(const StoredMessage&) const = default;
};

struct Modelfile {
  std::string from;
  int from_line = 0;
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
  std::optional<std::string> system;
  std::vector<StoredMessage> messages;
  std::vector<std::string> license;
  std::optional<std::string> requires_version;
  // What the user should hear about lines that were accepted but change nothing
  // ("Modelfile:3: parameter num_gpu changes nothing in tandem: ...").
  std::vector<std::string> notes;
};

// `source` names the file in messages ("Modelfile", "./qwen.Modelfile"). Throws
// Error(kInvalidArgument) "SOURCE:LINE: what is wrong".
Modelfile parse_modelfile(std::string_view text, const std::string& source = "Modelfile");

// Quotes a value so that parse_modelfile reads it back unchanged: bare when it can be,
// "..." or """...""" otherwise. Throws Error(kInvalidArgument) for the rare text no quoting
// can carry (it holds both `"""` and a quote at a line end).
std::string quote_modelfile_value(std::string_view v);

}  // namespace tandem::store
