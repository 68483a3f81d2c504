#pragma once
// Reads a JSON Schema document into Schema nodes (schema_model.h): every keyword checked,
// $ref resolved (JSON pointers, $id / id, $anchor; recursion), allOf and siblings merged,
// oneOf accepted where its branches provably exclude each other.
//
// Keywords: annotations (title, description, default, examples, $comment, readOnly ...)
// and keywords no JSON Schema draft defines are ignored, as validators ignore them. Every
// assertion keyword is honoured or refused: the refusal is an Error(kUnsupported) that
// names the keyword and the JSON pointer of the schema holding it. `format` is enforced
// for the formats json_formats.h lists; a standard format it does not list is refused; a
// format name that no standard defines is an annotation.
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "structured/expr.h"
#include "structured/schema_model.h"

namespace tandem::structured::schema {

class Reader {
 public:
  explicit Reader(const Json& root);

  SchemaP root();
  // A reference node's target (or the schema itself when it is not one).
  SchemaP deref(SchemaP s);
  // The conjunction of two schemas. Throws Error(kUnsupported) where it cannot be exact.
  SchemaP merge(SchemaP a, SchemaP b);
  // `s` without its anyOf groups.
  SchemaP without_any_of(SchemaP s);
  // `s` without enum/const.
  SchemaP without_enum(SchemaP s);
  // `s` with its deferred keywords (schema_model.h) in forms a grammar builds: `not` of a
  // type, of required members or of scalar values; dependencies and if/then/else as
  // anyOf. Throws Error(kUnsupported) naming what has no such form.
  SchemaP lower(SchemaP s);
  // The schema a member named `key` of an object matching `obj` must match (properties,
  // else the matching patternProperties, else additionalProperties).
  SchemaP schema_for_key(SchemaP obj, const std::string& key);
  // Whether the string matches the pattern (ECMA-262 search semantics).
  bool pattern_matches(const Pattern& p, const std::string& text);
  // Whether `v` is valid against `s` (for enum values and const members).
  bool validate(SchemaP s, const Json& v, int depth = 0);

  SchemaP any() const { return any_; }
  SchemaP never() const { return never_; }
  int draft() const { return draft_; }

 private:
  Schema* make(const std::string& pointer);
  SchemaP read(const Json& s, const std::string& pointer);
  SchemaP read_ref(const std::string& ref, const std::string& pointer);
  SchemaP resolve_pointer(const std::string& pointer);
  void read_keyword(Schema& out, const std::string& key, const Json& v, const Json& whole,
                    const std::string& pointer, std::vector<SchemaP>& conjuncts);
  SchemaP one_of(const Json& v, const std::string& pointer, Schema& out);
  bool disjoint(SchemaP a, SchemaP b, int depth);
  void lower_not(Schema& out, const Schema::Not& n);
  void collect_ids(const Json& s, const std::string& pointer, const std::string& base);
  ExprId pattern_expr(const Pattern& p);

  const Json& root_json_;
  int draft_ = 2020;  // 4, 6, 7, 2019 or 2020
  std::deque<Schema> pool_;
  SchemaP any_ = nullptr, never_ = nullptr;
  std::unordered_map<std::string, SchemaP> by_pointer_;
  std::set<std::string> reading_;
  std::unordered_map<std::string, std::string> ids_;  // $id / anchor -> pointer
  std::map<std::pair<SchemaP, SchemaP>, SchemaP> merged_;
  std::set<std::pair<SchemaP, SchemaP>> merging_;
  ExprStore pattern_store_;
  std::unordered_map<std::string, ExprId> pattern_exprs_;
};

// Refusals and errors, with the pointer in the message.
[[noreturn]] void unsupported(const std::string& keyword, const std::string& pointer,
                              const std::string& why = {});
[[noreturn]] void invalid(const std::string& keyword, const std::string& pointer,
                          const std::string& why);
std::string child_pointer(const std::string& parent, const std::string& token);

}  // namespace tandem::structured::schema
