#pragma once
// JSON Schema reduced to what a grammar needs: one Schema per (sub)schema with its
// keywords checked and combined. allOf and sibling keywords are merged into one Schema;
// anyOf (and oneOf whose branches provably exclude each other) stay as alternatives,
// expanded when the grammar is built. A $ref that is met again while its target is still
// being read (recursion) becomes a reference node, resolved when the grammar is built.
//
// Internal to the JSON Schema compiler (json_schema.h).
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/json_numbers.h"

namespace tandem::structured::schema {

using Json = nlohmann::ordered_json;  // key order matters: properties come in schema order
inline constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

// JSON types as bits; "number" is kInteger | kFraction.
enum TypeBits : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kInteger = 4,
  kFraction = 8,  // numbers that are not integers
  kString = 16,
  kArray = 32,
  kObject = 64,
  kAllTypes = 127,
};

struct Schema;
using SchemaP = const Schema*;

struct Pattern {
  std::string source;   // ECMA-262 regex, matched anywhere in the string (unless anchored)
  std::string pointer;  // where it came from, for messages
};

struct Schema {
  std::string pointer;  // where it came from (JSON pointer), for messages and names
  bool never = false;   // the `false` schema: nothing matches
  bool is_ref = false;  // a reference node (see above) to the schema at `ref`
  std::string ref;

  uint8_t types = kAllTypes;
  bool has_enum = false;
  std::vector<Json> enum_values;  // enum, or const as one value

  NumberRange num;  // num.integer is unused: the types say it
  std::vector<Decimal> multiple_of;

  uint64_t min_length = 0, max_length = kNoLimit;
  std::vector<Pattern> patterns;
  std::vector<std::string> formats;

  std::vector<SchemaP> prefix_items;
  SchemaP items = nullptr;  // null: any value
  uint64_t min_items = 0, max_items = kNoLimit;

  std::vector<std::pair<std::string, SchemaP>> properties;  // in order
  std::vector<std::string> required;                        // in order
  std::vector<std::pair<Pattern, SchemaP>> pattern_properties;
  SchemaP additional = nullptr;      // null: any value
  SchemaP property_names = nullptr;  // null: any string
  uint64_t min_properties = 0, max_properties = kNoLimit;

  // Each group is one anyOf: the value matches at least one of its schemas (and every
  // group, and everything above).
  std::vector<std::vector<SchemaP>> any_of;

  // Keywords that validate() checks exactly but a grammar builds only in some forms (the
  // compiler lowers those, Reader::lower) or not at all: an enum/const beside them still
  // compiles (its values are checked), anything else is refused naming `deferred[0]`.
  struct Not {
    SchemaP schema;
    std::string keyword, pointer;  // "not", or "if" for the else branch of if/then/else
  };
  std::vector<Not> nots;                     // the value matches none of these
  std::vector<std::vector<SchemaP>> one_of;  // exactly one branch, branches may overlap
  bool unique_items = false;
  struct Conditional {
    SchemaP if_ = nullptr, then_ = nullptr, else_ = nullptr;  // null: no constraint
  };
  std::vector<Conditional> conditionals;
  std::vector<std::pair<std::string, std::vector<std::string>>> dependent_required;
  std::vector<std::pair<std::string, SchemaP>> dependent_schemas;
  struct Contains {
    SchemaP schema;
    uint64_t min = 1, max = kNoLimit;
  };
  std::vector<Contains> contains;
  std::vector<std::pair<std::string, std::string>> deferred;  // (keyword, pointer)
  // Lowered forms: member names that must be absent; scalar values excluded.
  std::vector<std::string> forbidden;
  std::vector<Json> excluded;

  bool is_any() const;  // no constraint at all
};

// The JSON type of a value as bits (an integer-valued number is kInteger).
uint8_t type_of(const Json& v);
// JSON Schema's equality (enum, const): numbers by value, objects regardless of key order.
bool json_equal(const Json& a, const Json& b);

}  // namespace tandem::structured::schema
