// Deferred keywords (not, dependencies, if/then/else) rewritten into what a grammar builds.
#include "structured/schema_reader.h"

namespace tandem::structured::schema {

namespace {

std::string where(SchemaP s, const std::string& keyword) {
  for (auto& [k, p] : s->deferred)
    if (k == keyword) return p;
  return s->pointer;
}

}  // namespace

void Reader::lower_not(Schema& out, const Schema::Not& no) {
  SchemaP n = deref(no.schema);
  const std::string& pointer = no.pointer;
  if (n->never) return;  // not false: no constraint
  if (n->is_any()) {     // not true: nothing matches
    out.never = true;
    return;
  }
  Schema rest = *n;
  rest.types = kAllTypes;
  rest.pointer.clear();
  if (rest.is_any()) {  // only a type
    out.types &= uint8_t(~n->types);
    return;
  }
  if (n->types == kAllTypes) {
    Schema req = rest;
    req.required.clear();
    if (req.is_any() && !n->required.empty()) {
      // Not all of these members: at least one of them is absent.
      std::vector<SchemaP> group;
      for (const std::string& name : n->required) {
        Schema* f = make(pointer);
        f->forbidden.push_back(name);
        group.push_back(f);
      }
      if (group.size() == 1)
        out.forbidden.push_back(n->required[0]);
      else
        out.any_of.push_back(std::move(group));
      return;
    }
  }
  Schema vals = rest;
  vals.has_enum = false;
  vals.enum_values.clear();
  if (n->has_enum && vals.is_any()) {
    for (const Json& v : n->enum_values) {
      if (!(type_of(v) & n->types)) continue;  // cannot match, so excludes nothing
      if (v.is_object() || v.is_array())
        unsupported(no.keyword, pointer, "excluding object or array values");
      out.excluded.push_back(v);
    }
    return;
  }
  unsupported(no.keyword, pointer,
              no.keyword == "if"
                  ? "if/then/else is built into a grammar only when its `if` is a type, required "
                    "members or enum/const values (an enum or const beside it would also do)"
                  : "only `not` of a type, of required members or of enum/const values is built "
                    "into a grammar (an enum or const beside it would also do)");
}

SchemaP Reader::lower(SchemaP s) {
  s = deref(s);
  if (s->deferred.empty()) return s;
  if (!s->one_of.empty())
    unsupported("oneOf", where(s, "oneOf"),
                "its branches may both match a value, and a grammar cannot require exactly one");
  if (s->unique_items)
    unsupported("uniqueItems", where(s, "uniqueItems"), "a grammar cannot compare array items");
  if (!s->contains.empty()) unsupported("contains", where(s, "contains"));
  Schema* m = make(s->pointer);
  *m = *s;
  m->deferred.clear();
  m->nots.clear();
  m->conditionals.clear();
  m->dependent_required.clear();
  m->dependent_schemas.clear();
  for (const Schema::Not& n : s->nots) lower_not(*m, n);
  auto forbid = [&](const std::string& name) {
    Schema* f = make(s->pointer);
    f->forbidden.push_back(name);
    return f;
  };
  for (auto& [name, names] : s->dependent_required) {
    Schema* req = make(s->pointer);
    req->required = names;
    m->any_of.push_back({forbid(name), req});
  }
  for (auto& [name, dep] : s->dependent_schemas) m->any_of.push_back({forbid(name), dep});
  for (const Schema::Conditional& c : s->conditionals) {
    Schema* negated = make(where(s, "if"));
    negated->nots.push_back({c.if_, "if", where(s, "if")});
    negated->deferred.push_back({"if", where(s, "if")});
    SchemaP yes = merge(c.if_, c.then_ ? c.then_ : any_);
    SchemaP no = merge(negated, c.else_ ? c.else_ : any_);
    m->any_of.push_back({yes, no});
  }
  return m;
}

}  // namespace tandem::structured::schema
