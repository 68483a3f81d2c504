// Conjunction of schemas (allOf, siblings of $ref), disjointness (oneOf) and validation of
// values against read schemas (enum and const members).
#include <fmt/format.h>

#include "core/error.h"
#include "structured/charset.h"
#include "structured/json_formats.h"
#include "structured/regex.h"
#include "structured/schema_reader.h"

namespace tandem::structured::schema {

namespace {

std::optional<Decimal> decimal_of(const Json& v) {
  std::string text = v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
  return Decimal::parse(text);
}

// Whether the decimal `x` is an integer multiple of `m` (both exact).
bool is_multiple(const Decimal& x, const Decimal& m) {
  size_t scale = std::max(x.frac_digits.size(), m.frac_digits.size());
  auto scaled = [&](const Decimal& d) {
    std::string s = d.int_digits + d.frac_digits + std::string(scale - d.frac_digits.size(), '0');
    size_t nz = s.find_first_not_of('0');
    return nz == std::string::npos ? std::string("0") : s.substr(nz);
  };
  std::string a = scaled(x), b = scaled(m);
  if (b.size() > 18) return false;  // not decided here; callers treat as not a multiple
  uint64_t div = std::stoull(b), rem = 0;
  for (char c : a) rem = (rem * 10 + uint64_t(c - '0')) % div;
  return rem == 0;
}

void lower_bound(NumberRange& r, const Decimal& d, bool excl) {
  if (!r.min || compare(d, *r.min) > 0) {
    r.min = d;
    r.min_exclusive = excl;
  } else if (compare(d, *r.min) == 0) {
    r.min_exclusive = r.min_exclusive || excl;
  }
}

void upper_bound(NumberRange& r, const Decimal& d, bool excl) {
  if (!r.max || compare(d, *r.max) < 0) {
    r.max = d;
    r.max_exclusive = excl;
  } else if (compare(d, *r.max) == 0) {
    r.max_exclusive = r.max_exclusive || excl;
  }
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

SchemaP Reader::without_any_of(SchemaP s) {
  s = deref(s);
  if (s->any_of.empty()) return s;
  Schema* c = make(s->pointer);
  *c = *s;
  c->any_of.clear();
  return c;
}

SchemaP Reader::without_enum(SchemaP s) {
  s = deref(s);
  if (!s->has_enum) return s;
  Schema* c = make(s->pointer);
  *c = *s;
  c->has_enum = false;
  c->enum_values.clear();
  return c;
}

SchemaP Reader::schema_for_key(SchemaP obj, const std::string& key) {
  obj = deref(obj);
  SchemaP r = any_;
  bool found = false;
  for (auto& [name, s] : obj->properties)
    if (name == key) {
      r = merge(r, s);
      found = true;
    }
  for (auto& [p, s] : obj->pattern_properties)
    if (pattern_matches(p, key)) {
      r = merge(r, s);
      found = true;
    }
  if (!found && obj->additional) r = merge(r, obj->additional);
  return r;
}

SchemaP Reader::merge(SchemaP a, SchemaP b) {
  if (a == b) return a;
  if (a->is_any()) return b;
  if (b->is_any()) return a;
  if (a->never || b->never) return never_;
  // A reference node can be merged only once its target is read.
  auto resolved = [&](SchemaP s) {
    if (!s->is_ref) return s;
    auto it = by_pointer_.find(s->ref);
    if (it == by_pointer_.end())
      unsupported("$ref", s->pointer,
                  "a recursive reference combined with other keywords (allOf or siblings)");
    return deref(it->second);
  };
  a = resolved(a);
  b = resolved(b);
  if (a == b) return a;
  auto key = std::make_pair(a, b);
  if (auto it = merged_.find(key); it != merged_.end()) return it->second;
  if (merging_.count(key))
    unsupported("allOf", a->pointer, "combines recursive schemas with each other");
  merging_.insert(key);

  Schema* m = make(a->pointer);
  m->types = a->types & b->types;
  if (a->has_enum && b->has_enum) {
    m->has_enum = true;
    for (const Json& x : a->enum_values)
      for (const Json& y : b->enum_values)
        if (json_equal(x, y)) m->enum_values.push_back(x);
  } else if (a->has_enum || b->has_enum) {
    m->has_enum = true;
    m->enum_values = a->has_enum ? a->enum_values : b->enum_values;
  }
  m->num = a->num;
  if (b->num.min) lower_bound(m->num, *b->num.min, b->num.min_exclusive);
  if (b->num.max) upper_bound(m->num, *b->num.max, b->num.max_exclusive);
  m->multiple_of = a->multiple_of;
  m->multiple_of.insert(m->multiple_of.end(), b->multiple_of.begin(), b->multiple_of.end());
  m->min_length = std::max(a->min_length, b->min_length);
  m->max_length = std::min(a->max_length, b->max_length);
  m->patterns = a->patterns;
  m->patterns.insert(m->patterns.end(), b->patterns.begin(), b->patterns.end());
  m->formats = a->formats;
  m->formats.insert(m->formats.end(), b->formats.begin(), b->formats.end());

  // Arrays: position by position, then the rest.
  size_t np = std::max(a->prefix_items.size(), b->prefix_items.size());
  auto item_at = [&](SchemaP s, size_t i) {
    if (i < s->prefix_items.size()) return s->prefix_items[i];
    return s->items ? s->items : any_;
  };
  for (size_t i = 0; i < np; ++i) m->prefix_items.push_back(merge(item_at(a, i), item_at(b, i)));
  if (a->items || b->items)
    m->items = merge(a->items ? a->items : any_, b->items ? b->items : any_);
  m->min_items = std::max(a->min_items, b->min_items);
  m->max_items = std::min(a->max_items, b->max_items);

  // Objects. A member not named by one side must match that side's schema for its name.
  for (auto& [name, s] : a->properties) {
    bool in_b = false;
    for (auto& [n2, s2] : b->properties) in_b = in_b || n2 == name;
    m->properties.push_back(
        {name, merge(s, in_b ? schema_for_key(b, name) : schema_for_key(b, name))});
  }
  for (auto& [name, s] : b->properties) {
    bool in_a = false;
    for (auto& [n2, s2] : a->properties) in_a = in_a || n2 == name;
    if (!in_a) m->properties.push_back({name, merge(schema_for_key(a, name), s)});
  }
  m->required = a->required;
  for (const std::string& r : b->required)
    if (std::find(m->required.begin(), m->required.end(), r) == m->required.end())
      m->required.push_back(r);
  bool a_add = a->additional && !a->additional->is_any();
  bool b_add = b->additional && !b->additional->is_any();
  if ((!a->pattern_properties.empty() && b_add) || (!b->pattern_properties.empty() && a_add))
    unsupported("patternProperties", a->pattern_properties.empty() ? b->pointer : a->pointer,
                "combined (allOf) with a schema whose additionalProperties differ");
  m->pattern_properties = a->pattern_properties;
  m->pattern_properties.insert(m->pattern_properties.end(), b->pattern_properties.begin(),
                               b->pattern_properties.end());
  if (a->additional || b->additional)
    m->additional =
        merge(a->additional ? a->additional : any_, b->additional ? b->additional : any_);
  if (a->property_names || b->property_names)
    m->property_names = merge(a->property_names ? a->property_names : any_,
                              b->property_names ? b->property_names : any_);
  m->min_properties = std::max(a->min_properties, b->min_properties);
  m->max_properties = std::min(a->max_properties, b->max_properties);
  m->any_of = a->any_of;
  m->any_of.insert(m->any_of.end(), b->any_of.begin(), b->any_of.end());
  auto both = [](auto& out, const auto& x, const auto& y) {
    out = x;
    out.insert(out.end(), y.begin(), y.end());
  };
  both(m->nots, a->nots, b->nots);
  both(m->one_of, a->one_of, b->one_of);
  m->unique_items = a->unique_items || b->unique_items;
  both(m->conditionals, a->conditionals, b->conditionals);
  both(m->dependent_required, a->dependent_required, b->dependent_required);
  both(m->dependent_schemas, a->dependent_schemas, b->dependent_schemas);
  both(m->contains, a->contains, b->contains);
  both(m->deferred, a->deferred, b->deferred);
  both(m->forbidden, a->forbidden, b->forbidden);
  both(m->excluded, a->excluded, b->excluded);

  merging_.erase(key);
  merged_[key] = m;
  return m;
}

// Conservative: true only when no value can match both.
bool Reader::disjoint(SchemaP a, SchemaP b, int depth) {
  if (depth > 8) return false;
  a = deref(a);
  b = deref(b);
  if (a->never || b->never) return true;
  if (a->any_of.size() == 1 && !a->has_enum) {
    bool all = true;
    for (SchemaP x : a->any_of[0]) all = all && disjoint(merge(without_any_of(a), x), b, depth + 1);
    if (all) return true;
  }
  if (b->any_of.size() == 1 && !b->has_enum) {
    bool all = true;
    for (SchemaP y : b->any_of[0]) all = all && disjoint(a, merge(without_any_of(b), y), depth + 1);
    if (all) return true;
  }
  uint8_t both = a->types & b->types;
  if (both == 0) return true;
  auto values_disjoint = [&](SchemaP e, SchemaP other) {
    for (const Json& v : e->enum_values)
      if (validate(other, v)) return false;
    return true;
  };
  if (a->has_enum && values_disjoint(a, b)) return true;
  if (b->has_enum && values_disjoint(b, a)) return true;
  // What remains must be told apart within each shared type.
  for (uint8_t t : {kNull, kBoolean, kInteger, kFraction, kString, kArray, kObject}) {
    if (!(both & t)) continue;
    bool apart = false;
    if (t == kInteger || t == kFraction) {
      NumberRange r = a->num;
      if (b->num.min) lower_bound(r, *b->num.min, b->num.min_exclusive);
      if (b->num.max) upper_bound(r, *b->num.max, b->num.max_exclusive);
      r.integer = t == kInteger;
      apart = range_empty(r);
    } else if (t == kString) {
      apart = std::max(a->min_length, b->min_length) > std::min(a->max_length, b->max_length);
    } else if (t == kArray) {
      apart = std::max(a->min_items, b->min_items) > std::min(a->max_items, b->max_items);
    } else if (t == kObject) {
      // A member one requires that the other forbids, or a required member whose schemas
      // exclude each other.
      auto forbids = [&](SchemaP s, const std::string& name) {
        return schema_for_key(s, name)->never;
      };
      for (const std::string& r : a->required) apart = apart || forbids(b, r);
      for (const std::string& r : b->required) apart = apart || forbids(a, r);
      for (const std::string& r : a->required) {
        if (apart) break;
        if (std::find(b->required.begin(), b->required.end(), r) == b->required.end()) continue;
        apart = disjoint(schema_for_key(a, r), schema_for_key(b, r), depth + 1);
      }
    }
    if (!apart) return false;
  }
  return true;
}

bool Reader::validate(SchemaP s, const Json& v, int depth) {
  if (depth > 64) return false;
  s = deref(s);
  if (s->never) return false;
  uint8_t t = type_of(v);
  if (!(s->types & t)) return false;
  if (s->has_enum) {
    bool found = false;
    for (const Json& e : s->enum_values) found = found || json_equal(e, v);
    if (!found) return false;
  }
  if (t == kInteger || t == kFraction) {
    auto d = decimal_of(v);
    if (!d) return false;
    if (s->num.min) {
      int c = compare(*d, *s->num.min);
      if (c < 0 || (c == 0 && s->num.min_exclusive)) return false;
    }
    if (s->num.max) {
      int c = compare(*d, *s->num.max);
      if (c > 0 || (c == 0 && s->num.max_exclusive)) return false;
    }
    for (const Decimal& m : s->multiple_of)
      if (!is_multiple(*d, m)) return false;
    for (const std::string& f : s->formats) {
      FormatKind k = classify_format(f);
      if (k == FormatKind::kInt32 && (compare(*d, *Decimal::parse("-2147483648")) < 0 ||
                                      compare(*d, *Decimal::parse("2147483647")) > 0))
        return false;
      if (k == FormatKind::kInt64 && (compare(*d, *Decimal::parse("-9223372036854775808")) < 0 ||
                                      compare(*d, *Decimal::parse("9223372036854775807")) > 0))
        return false;
    }
  } else if (t == kString) {
    const std::string& str = v.get_ref<const std::string&>();
    size_t n = code_points(str);
    if (n < s->min_length || n > s->max_length) return false;
    for (const Pattern& p : s->patterns)
      if (!pattern_matches(p, str)) return false;
    for (const std::string& f : s->formats) {
      if (classify_format(f) != FormatKind::kRegex) continue;
      Pattern p{std::string("^(") + format_regex(f) + ")$", s->pointer};
      if (!pattern_matches(p, str)) return false;
    }
  } else if (t == kArray) {
    if (v.size() < s->min_items || v.size() > s->max_items) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      SchemaP item = i < s->prefix_items.size() ? s->prefix_items[i] : s->items;
      if (item && !validate(item, v[i], depth + 1)) return false;
    }
  } else if (t == kObject) {
    if (v.size() < s->min_properties || v.size() > s->max_properties) return false;
    for (const std::string& r : s->required)
      if (!v.contains(r)) return false;
    for (auto& [k, x] : v.items()) {
      if (s->property_names && !validate(s->property_names, Json(k), depth + 1)) return false;
      if (!validate(schema_for_key(s, k), x, depth + 1)) return false;
    }
  }
  for (const auto& group : s->any_of) {
    bool any = false;
    for (SchemaP alt : group) any = any || validate(alt, v, depth + 1);
    if (!any) return false;
  }
  for (const Schema::Not& n : s->nots)
    if (validate(n.schema, v, depth + 1)) return false;
  for (const auto& group : s->one_of) {
    int matches = 0;
    for (SchemaP alt : group) matches += validate(alt, v, depth + 1) ? 1 : 0;
    if (matches != 1) return false;
  }
  for (const Schema::Conditional& c : s->conditionals) {
    SchemaP branch = validate(c.if_, v, depth + 1) ? c.then_ : c.else_;
    if (branch && !validate(branch, v, depth + 1)) return false;
  }
  for (const Json& x : s->excluded)
    if (json_equal(x, v)) return false;
  if (t == kObject) {
    for (const std::string& f : s->forbidden)
      if (v.contains(f)) return false;
    for (auto& [name, names] : s->dependent_required) {
      if (!v.contains(name)) continue;
      for (const std::string& n : names)
        if (!v.contains(n)) return false;
    }
    for (auto& [name, dep] : s->dependent_schemas)
      if (v.contains(name) && !validate(dep, v, depth + 1)) return false;
  }
  if (t == kArray) {
    if (s->unique_items)
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (json_equal(v[i], v[j])) return false;
    for (const Schema::Contains& c : s->contains) {
      uint64_t n = 0;
      for (const Json& x : v) n += validate(c.schema, x, depth + 1) ? 1 : 0;
      if (n < c.min || n > c.max) return false;
    }
  }
  return true;
}

}  // namespace tandem::structured::schema
