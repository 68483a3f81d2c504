#include "structured/schema_reader.h"

#include <fmt/format.h>

#include "core/error.h"
#include "structured/json_formats.h"
#include "structured/regex.h"

namespace tandem::structured::schema {

namespace {

// Keywords that only annotate, or only hold subschemas for $ref: no effect on validity.
bool is_annotation(const std::string& k) {
  static const std::set<std::string> s = {
      "$schema",          "$id",           "id",       "$comment",    "title",
      "description",      "default",       "examples", "example",     "readOnly",
      "writeOnly",        "deprecated",    "$defs",    "definitions", "contentMediaType",
      "contentEncoding",  "contentSchema", "$anchor",  "$vocabulary", "$dynamicAnchor",
      "$recursiveAnchor", "discriminator"};
  return s.count(k) != 0;
}

// Assertion keywords of some draft that this compiler cannot enforce exactly.
bool is_unsupported(const std::string& k) {
  static const std::set<std::string> s = {"unevaluatedProperties", "unevaluatedItems",
                                          "$dynamicRef", "$recursiveRef"};
  return s.count(k) != 0;
}

std::string escape_token(const std::string& t) {
  std::string out;
  for (char c : t) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string unescape_token(const std::string& t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '~' && i + 1 < t.size() && (t[i + 1] == '0' || t[i + 1] == '1')) {
      out += t[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && isxdigit(uint8_t(s[i + 1])) &&
        isxdigit(uint8_t(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

uint64_t count_of(const Json& v, const std::string& key, const std::string& pointer) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  if (v.is_number_float() && v.get<double>() >= 0 &&
      v.get<double>() == double(uint64_t(v.get<double>())))
    return uint64_t(v.get<double>());
  invalid(key, pointer, "must be a non-negative integer");
}

}  // namespace

[[noreturn]] void unsupported(const std::string& keyword, const std::string& pointer,
                              const std::string& why) {
  fail(ErrorKind::kUnsupported, "json schema: keyword '{}' at '{}' is not supported{}{}", keyword,
       pointer.empty() ? "#" : pointer, why.empty() ? "" : ": ", why);
}

[[noreturn]] void invalid(const std::string& keyword, const std::string& pointer,
                          const std::string& why) {
  fail(ErrorKind::kInvalidArgument, "json schema: keyword '{}' at '{}' {}", keyword,
       pointer.empty() ? "#" : pointer, why);
}

std::string child_pointer(const std::string& parent, const std::string& token) {
  return parent + "/" + escape_token(token);
}

uint8_t type_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return kNull;
    case Json::value_t::boolean:
      return kBoolean;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kInteger;
    case Json::value_t::number_float: {
      double d = v.get<double>();
      return d == double(int64_t(d)) || (std::abs(d) >= 9.2e18 && d == std::floor(d)) ? kInteger
                                                                                      : kFraction;
    }
    case Json::value_t::string:
      return kString;
    case Json::value_t::array:
      return kArray;
    case Json::value_t::object:
      return kObject;
    default:
      return 0;
  }
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    return a == b;
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto& [k, v] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !json_equal(v, *it)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

bool Schema::is_any() const {
  return !never && !is_ref && types == kAllTypes && !has_enum && !num.bounded() &&
         multiple_of.empty() && min_length == 0 && max_length == kNoLimit && patterns.empty() &&
         formats.empty() && prefix_items.empty() && !items && min_items == 0 &&
         max_items == kNoLimit && properties.empty() && required.empty() &&
         pattern_properties.empty() && !additional && !property_names && min_properties == 0 &&
         max_properties == kNoLimit && any_of.empty() && nots.empty() && one_of.empty() &&
         !unique_items && conditionals.empty() && dependent_required.empty() &&
         dependent_schemas.empty() && contains.empty() && forbidden.empty() && excluded.empty();
}

Reader::Reader(const Json& root) : root_json_(root) {
  Schema* a = make("");
  any_ = a;
  Schema* n = make("");
  n->never = true;
  never_ = n;
  if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
    std::string s = root["$schema"].get<std::string>();
    if (s.find("draft-04") != std::string::npos || s.find("draft-03") != std::string::npos)
      draft_ = 4;
    else if (s.find("draft-06") != std::string::npos)
      draft_ = 6;
    else if (s.find("draft-07") != std::string::npos)
      draft_ = 7;
    else if (s.find("2019-09") != std::string::npos)
      draft_ = 2019;
  }
  collect_ids(root, "", "");
}

Schema* Reader::make(const std::string& pointer) {
  pool_.emplace_back();
  pool_.back().pointer = pointer;
  return &pool_.back();
}

void Reader::collect_ids(const Json& s, const std::string& pointer, const std::string& base) {
  if (s.is_array()) {
    for (size_t i = 0; i < s.size(); ++i)
      collect_ids(s[i], child_pointer(pointer, std::to_string(i)), base);
    return;
  }
  if (!s.is_object()) return;
  std::string here = base;
  for (const char* key : {"$id", "id"}) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_string()) continue;
    if (std::string(key) == "id" && draft_ > 4 && !pointer.empty()) continue;
    std::string id = it->get<std::string>();
    if (!id.empty() && id[0] == '#') {
      ids_[id] = pointer;  // a plain-name anchor (drafts 6 and 7 write it this way)
      continue;
    }
    size_t hash = id.find('#');
    if (hash != std::string::npos) id = id.substr(0, hash);
    ids_[id] = pointer;
    if (id.find("://") == std::string::npos && !base.empty()) {
      size_t slash = base.rfind('/');
      std::string joined = slash == std::string::npos ? id : base.substr(0, slash + 1) + id;
      ids_[joined] = pointer;
      here = joined;
    } else {
      here = id;
    }
  }
  if (auto it = s.find("$anchor"); it != s.end() && it->is_string())
    ids_["#" + it->get<std::string>()] = pointer;
  for (auto& [k, v] : s.items()) {
    if (k == "enum" || k == "const" || k == "default" || k == "examples" || k == "example")
      continue;
    collect_ids(v, child_pointer(pointer, k), here);
  }
}

SchemaP Reader::root() {
  return resolve_pointer("");
}

SchemaP Reader::deref(SchemaP s) {
  for (int guard = 0; s && s->is_ref; ++guard) {
    auto it = by_pointer_.find(s->ref);
    if (it == by_pointer_.end() || guard > 64) unsupported("$ref", s->pointer, "unresolved cycle");
    s = it->second;
  }
  return s;
}

SchemaP Reader::resolve_pointer(const std::string& pointer) {
  if (auto it = by_pointer_.find(pointer); it != by_pointer_.end()) return it->second;
  if (reading_.count(pointer)) {
    Schema* r = make(pointer);
    r->ref = pointer;
    r->is_ref = true;
    return r;
  }
  const Json* at = &root_json_;
  size_t pos = 0;
  while (pos < pointer.size()) {
    size_t next = pointer.find('/', pos + 1);
    std::string tok =
        unescape_token(pointer.substr(pos + 1, next == std::string::npos ? next : next - pos - 1));
    if (at->is_object() && at->contains(tok)) {
      at = &(*at)[tok];
    } else if (at->is_array() && !tok.empty() &&
               tok.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(tok) < at->size()) {
      at = &(*at)[std::stoul(tok)];
    } else {
      invalid("$ref", pointer, "points to nothing in the document");
    }
    pos = next == std::string::npos ? pointer.size() : next;
  }
  reading_.insert(pointer);
  SchemaP s = read(*at, pointer);
  reading_.erase(pointer);
  by_pointer_[pointer] = s;
  return s;
}

SchemaP Reader::read_ref(const std::string& ref, const std::string& pointer) {
  const std::string& where = pointer;
  std::string base = ref, frag;
  if (size_t h = ref.find('#'); h != std::string::npos) {
    base = ref.substr(0, h);
    frag = percent_decode(ref.substr(h + 1));
  }
  std::string target;
  if (base.empty()) {
    target = "";
  } else if (auto it = ids_.find(base); it != ids_.end()) {
    target = it->second;
  } else {
    unsupported("$ref", where, fmt::format("the reference '{}' is outside this document", ref));
  }
  if (!frag.empty() && frag[0] == '/') {
    target += frag;
  } else if (!frag.empty()) {
    auto it = ids_.find("#" + frag);
    if (it == ids_.end()) invalid("$ref", where, fmt::format("names no anchor '{}'", frag));
    target = it->second;
  }
  return resolve_pointer(target);
}

SchemaP Reader::read(const Json& s, const std::string& pointer) {
  if (s.is_boolean()) return s.get<bool>() ? any_ : never_;
  if (!s.is_object()) invalid("(schema)", pointer, "must be an object or a boolean");
  if (draft_ <= 7 && s.contains("$ref")) {
    const Json& r = s["$ref"];
    if (!r.is_string()) invalid("$ref", pointer, "must be a string");
    return read_ref(r.get<std::string>(), pointer);  // siblings of $ref do not apply
  }
  Schema* out = make(pointer);
  std::vector<SchemaP> conjuncts;
  for (auto& [k, v] : s.items()) read_keyword(*out, k, v, s, pointer, conjuncts);
  if (draft_ == 4) {
    auto flag = [&](const char* k) {
      auto it = s.find(k);
      if (it == s.end()) return false;
      if (!it->is_boolean()) invalid(k, pointer, "must be a boolean in draft 4");
      return it->get<bool>();
    };
    if (flag("exclusiveMinimum")) {
      if (!out->num.min) invalid("exclusiveMinimum", pointer, "needs minimum");
      out->num.min_exclusive = true;
    }
    if (flag("exclusiveMaximum")) {
      if (!out->num.max) invalid("exclusiveMaximum", pointer, "needs maximum");
      out->num.max_exclusive = true;
    }
  }
  if (auto it = s.find("uniqueItems"); it != s.end()) {
    if (!it->is_boolean()) invalid("uniqueItems", pointer, "must be a boolean");
    if (it->get<bool>() && out->max_items > 1) {
      out->unique_items = true;
      out->deferred.push_back({"uniqueItems", pointer});
    }
  }
  if (s.contains("if") && (s.contains("then") || s.contains("else"))) {
    Schema::Conditional c;
    c.if_ = read(s["if"], child_pointer(pointer, "if"));
    if (s.contains("then")) c.then_ = read(s["then"], child_pointer(pointer, "then"));
    if (s.contains("else")) c.else_ = read(s["else"], child_pointer(pointer, "else"));
    out->conditionals.push_back(c);
    out->deferred.push_back({"if", pointer});
  }
  if (auto it = s.find("contains"); it != s.end()) {
    Schema::Contains c;
    c.schema = read(*it, child_pointer(pointer, "contains"));
    if (draft_ >= 2019) {
      if (auto m = s.find("minContains"); m != s.end())
        c.min = count_of(*m, "minContains", pointer);
      if (auto m = s.find("maxContains"); m != s.end())
        c.max = count_of(*m, "maxContains", pointer);
    }
    out->contains.push_back(c);
    out->deferred.push_back({"contains", pointer});
  }
  SchemaP r = out;
  for (SchemaP c : conjuncts) r = merge(r, c);
  return r;
}

void Reader::read_keyword(Schema& out, const std::string& k, const Json& v, const Json& whole,
                          const std::string& pointer, std::vector<SchemaP>& conjuncts) {
  const std::string here = child_pointer(pointer, k);
  auto decimal = [&](const Json& x) {
    if (!x.is_number()) invalid(k, pointer, "must be a number");
    std::string text = x.is_number_float() ? fmt::format("{}", x.get<double>()) : x.dump();
    auto d = Decimal::parse(text);
    if (!d) unsupported(k, pointer, "a bound this large");
    return *d;
  };
  auto lower = [&](const Decimal& d, bool excl) {
    if (!out.num.min || compare(d, *out.num.min) > 0) {
      out.num.min = d;
      out.num.min_exclusive = excl;
    } else if (compare(d, *out.num.min) == 0) {
      out.num.min_exclusive = out.num.min_exclusive || excl;
    }
  };
  auto upper = [&](const Decimal& d, bool excl) {
    if (!out.num.max || compare(d, *out.num.max) < 0) {
      out.num.max = d;
      out.num.max_exclusive = excl;
    } else if (compare(d, *out.num.max) == 0) {
      out.num.max_exclusive = out.num.max_exclusive || excl;
    }
  };
  auto sub = [&](const Json& x, const std::string& p) { return read(x, p); };

  if (k == "type") {
    auto bits = [&](const Json& t) -> uint8_t {
      if (!t.is_string()) invalid(k, pointer, "must name types");
      std::string n = t.get<std::string>();
      if (n == "null") return kNull;
      if (n == "boolean") return kBoolean;
      if (n == "integer") return kInteger;
      if (n == "number") return kInteger | kFraction;
      if (n == "string") return kString;
      if (n == "array") return kArray;
      if (n == "object") return kObject;
      if (n == "any" && draft_ == 4) return kAllTypes;
      invalid(k, pointer, fmt::format("names an unknown type '{}'", n));
    };
    uint8_t m = 0;
    if (v.is_array()) {
      for (const Json& t : v) m |= bits(t);
    } else {
      m = bits(v);
    }
    out.types &= m;
  } else if (k == "enum" || k == "const") {
    std::vector<Json> vals;
    if (k == "enum") {
      if (!v.is_array()) invalid(k, pointer, "must be an array");
      vals.assign(v.begin(), v.end());
    } else {
      vals.push_back(v);
    }
    if (out.has_enum) {
      std::vector<Json> both;
      for (const Json& a : out.enum_values)
        for (const Json& b : vals)
          if (json_equal(a, b)) both.push_back(a);
      out.enum_values = std::move(both);
    } else {
      out.enum_values = std::move(vals);
    }
    out.has_enum = true;
  } else if (k == "minimum") {
    lower(decimal(v), false);
  } else if (k == "maximum") {
    upper(decimal(v), false);
  } else if (k == "exclusiveMinimum" || k == "exclusiveMaximum") {
    if (draft_ == 4) return;  // booleans, applied after all keywords
    if (v.is_boolean()) invalid(k, pointer, "must be a number (a boolean is draft 4's form)");
    if (k == "exclusiveMinimum")
      lower(decimal(v), true);
    else
      upper(decimal(v), true);
  } else if (k == "multipleOf") {
    Decimal d = decimal(v);
    if (d.negative || d.is_zero()) invalid(k, pointer, "must be greater than 0");
    out.multiple_of.push_back(d);
  } else if (k == "minLength") {
    out.min_length = std::max(out.min_length, count_of(v, k, pointer));
  } else if (k == "maxLength") {
    out.max_length = std::min(out.max_length, count_of(v, k, pointer));
  } else if (k == "pattern") {
    if (!v.is_string()) invalid(k, pointer, "must be a string");
    out.patterns.push_back({v.get<std::string>(), pointer});
  } else if (k == "format") {
    if (!v.is_string()) invalid(k, pointer, "must be a string");
    std::string f = v.get<std::string>();
    switch (classify_format(f)) {
      case FormatKind::kUnsupported:
        unsupported(k, pointer, fmt::format("the format '{}' is not enforced", f));
      case FormatKind::kUnknown:
      case FormatKind::kAnyNumber:
      case FormatKind::kAnyString:
        return;
      default:
        out.formats.push_back(f);
    }
  } else if (k == "items") {
    if (v.is_array()) {
      if (draft_ >= 2020) invalid(k, pointer, "must be a schema (use prefixItems for tuples)");
      for (size_t i = 0; i < v.size(); ++i)
        out.prefix_items.push_back(sub(v[i], child_pointer(here, std::to_string(i))));
      if (auto it = whole.find("additionalItems"); it != whole.end())
        out.items = sub(*it, child_pointer(pointer, "additionalItems"));
    } else {
      out.items = sub(v, here);
    }
  } else if (k == "prefixItems") {
    if (!v.is_array()) invalid(k, pointer, "must be an array");
    for (size_t i = 0; i < v.size(); ++i)
      out.prefix_items.push_back(sub(v[i], child_pointer(here, std::to_string(i))));
  } else if (k == "additionalItems") {
    // Read together with array-form items; alone it has no effect.
  } else if (k == "minItems") {
    out.min_items = std::max(out.min_items, count_of(v, k, pointer));
  } else if (k == "maxItems") {
    out.max_items = std::min(out.max_items, count_of(v, k, pointer));
  } else if (k == "uniqueItems") {
    // Checked once all keywords are read (it depends on maxItems).
  } else if (k == "properties") {
    if (!v.is_object()) invalid(k, pointer, "must be an object");
    for (auto& [name, ps] : v.items())
      out.properties.push_back({name, sub(ps, child_pointer(here, name))});
  } else if (k == "required") {
    if (!v.is_array()) {
      if (draft_ <= 4 && v.is_boolean()) return;  // draft 3's form, no effect on the parent
      invalid(k, pointer, "must be an array of names");
    }
    for (const Json& n : v) {
      if (!n.is_string()) invalid(k, pointer, "must be an array of names");
      std::string name = n.get<std::string>();
      if (std::find(out.required.begin(), out.required.end(), name) == out.required.end())
        out.required.push_back(name);
    }
  } else if (k == "additionalProperties") {
    out.additional = sub(v, here);
  } else if (k == "patternProperties") {
    if (!v.is_object()) invalid(k, pointer, "must be an object");
    for (auto& [pat, ps] : v.items()) {
      std::string p = child_pointer(here, pat);
      out.pattern_properties.push_back({{pat, pointer}, sub(ps, p)});
    }
  } else if (k == "propertyNames") {
    out.property_names = sub(v, here);
  } else if (k == "minProperties") {
    out.min_properties = std::max(out.min_properties, count_of(v, k, pointer));
  } else if (k == "maxProperties") {
    out.max_properties = std::min(out.max_properties, count_of(v, k, pointer));
  } else if (k == "anyOf") {
    if (!v.is_array() || v.empty()) invalid(k, pointer, "must be a non-empty array");
    std::vector<SchemaP> group;
    for (size_t i = 0; i < v.size(); ++i)
      group.push_back(sub(v[i], child_pointer(here, std::to_string(i))));
    out.any_of.push_back(std::move(group));
  } else if (k == "oneOf") {
    one_of(v, here, out);
  } else if (k == "allOf") {
    if (!v.is_array() || v.empty()) invalid(k, pointer, "must be a non-empty array");
    for (size_t i = 0; i < v.size(); ++i)
      conjuncts.push_back(sub(v[i], child_pointer(here, std::to_string(i))));
  } else if (k == "$ref") {
    if (!v.is_string()) invalid(k, pointer, "must be a string");
    conjuncts.push_back(read_ref(v.get<std::string>(), pointer));
  } else if (k == "if" || k == "then" || k == "else") {
    // Without `if`, `then`/`else` do nothing; `if` with them is refused in read().
  } else if (k == "minContains" || k == "maxContains" || k == "contains") {
    // Read once all keywords are known (read()).
  } else if (k == "not") {
    out.nots.push_back({sub(v, here), "not", pointer});
    out.deferred.push_back({"not", pointer});
  } else if (k == "dependencies" || k == "dependentRequired" || k == "dependentSchemas") {
    if (!v.is_object()) invalid(k, pointer, "must be an object");
    for (auto& [name, dep] : v.items()) {
      if (dep.is_array() && k != "dependentSchemas") {
        std::vector<std::string> names;
        for (const Json& n : dep) {
          if (!n.is_string()) invalid(k, pointer, "must list member names");
          names.push_back(n.get<std::string>());
        }
        out.dependent_required.push_back({name, names});
      } else if (k != "dependentRequired") {
        out.dependent_schemas.push_back({name, sub(dep, child_pointer(here, name))});
      } else {
        invalid(k, pointer, "must list member names");
      }
    }
    if (!v.empty()) out.deferred.push_back({k, pointer});
  } else if (is_unsupported(k)) {
    bool no_effect = v.is_boolean() && v.get<bool>();
    if (!no_effect) unsupported(k, pointer);
  } else if (is_annotation(k)) {
    // no effect on validity
  } else {
    // A keyword no draft defines: validators ignore it, and so does the grammar.
  }
}

SchemaP Reader::one_of(const Json& v, const std::string& here, Schema& out) {
  if (!v.is_array() || v.empty()) invalid("oneOf", here, "must be a non-empty array");
  std::vector<SchemaP> group;
  for (size_t i = 0; i < v.size(); ++i)
    group.push_back(read(v[i], child_pointer(here, std::to_string(i))));
  bool apart = true;
  for (size_t i = 0; i < group.size() && apart; ++i)
    for (size_t j = i + 1; j < group.size() && apart; ++j) apart = disjoint(group[i], group[j], 0);
  if (apart) {
    out.any_of.push_back(std::move(group));  // at most one can match: anyOf says the same
  } else {
    out.one_of.push_back(std::move(group));
    out.deferred.push_back({"oneOf", here.substr(0, here.rfind('/'))});
  }
  return nullptr;
}

ExprId Reader::pattern_expr(const Pattern& p) {
  auto it = pattern_exprs_.find(p.source);
  if (it != pattern_exprs_.end()) return it->second;
  RegexOptions o;
  o.encoding = TextEncoding::kUtf8;
  o.match = RegexMatch::kSearch;
  ExprId e;
  try {
    e = compile_regex(pattern_store_, p.source, o);
  } catch (const Error& err) {
    if (err.kind() == ErrorKind::kUnsupported) unsupported("pattern", p.pointer, err.what());
    invalid("pattern", p.pointer, err.what());
  }
  pattern_exprs_[p.source] = e;
  return e;
}

bool Reader::pattern_matches(const Pattern& p, const std::string& text) {
  return pattern_store_.matches(pattern_expr(p), text);
}

}  // namespace tandem::structured::schema
