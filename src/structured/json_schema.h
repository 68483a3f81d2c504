#pragma once
// JSON Schema -> grammar (and with it, token masks).
//
// What the output looks like: the JSON text of one value, with
//   - object members in the schema's order: `properties` first, as listed, then members
//     named only in `required`, then any others (additionalProperties, patternProperties);
//   - whitespace: up to `max_whitespace` bytes of space, tab, CR or LF in each place JSON
//     allows it (before and after each `{ } [ ] , :` and value), none after the value
//     ends; 0 means compact JSON;
//   - strings written as JSON.stringify writes them (charset.h): non-ASCII as UTF-8, `"`
//     `\` and control characters escaped, `/` raw or as \/;
//   - numbers in JSON syntax; where a schema bounds a number (minimum and friends) it is
//     written without an exponent.
// What the schema may say: see schema_reader.h; anything it cannot enforce exactly is an
// Error(kUnsupported) naming the keyword and its JSON pointer, never a looser grammar.
#include <memory>
#include <string>

#include "structured/compiled_grammar.h"

namespace tandem::structured {

struct JsonSchemaOptions {
  int max_whitespace = 20;
  std::string prefix, suffix;  // literal text before and after the value
};

// `schema` is the text of a JSON Schema document. Throws Error(kInvalidArgument) for text
// that is not a schema, Error(kUnsupported) for a schema this cannot enforce.
std::shared_ptr<const CompiledGrammar> compile_json_schema(const std::string& schema,
                                                           const JsonSchemaOptions& opt = {});

// `instance` (JSON text) written as the grammar of `schema` expects a model to write it:
// members in schema order (above), ", " and ": " as separators (Python's json.dumps
// defaults), strings as JSON.stringify writes them. For checking a schema's grammar
// against known instances.
std::string write_json_instance(const std::string& schema, const std::string& instance);

}  // namespace tandem::structured
