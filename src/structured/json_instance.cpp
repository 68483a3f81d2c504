// Instances written in the member order the schema's grammar expects (json_schema.h).
#include "core/error.h"
#include "structured/json_schema.h"
#include "structured/schema_reader.h"

namespace tandem::structured {

using namespace schema;

namespace {

class Writer {
 public:
  explicit Writer(Reader& rd) : rd_(rd) {}

  void write(SchemaP s, const Json& v, std::string& out, int depth = 0) {
    s = s ? rd_.deref(s) : rd_.any();
    if (depth > 200) fail(ErrorKind::kInvalidArgument, "instance nested too deeply");
    s = pick(s, v);
    if (v.is_object()) {
      // A const/enum object is written in the order of the value it equals.
      if (s->has_enum)
        for (const Json& e : s->enum_values)
          if (e.is_object() && json_equal(e, v)) return write_as(e, v, out);
      std::vector<std::string> order;
      auto add = [&](const std::string& k) {
        if (v.contains(k) && std::find(order.begin(), order.end(), k) == order.end())
          order.push_back(k);
      };
      for (auto& [name, ps] : s->properties) add(name);
      for (const std::string& r : s->required) add(r);
      for (auto& [k, x] : v.items()) add(k);
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += ", ";
        out += Json(order[i]).dump(-1, ' ', false, Json::error_handler_t::strict);
        out += ": ";
        write(rd_.schema_for_key(s, order[i]), v[order[i]], out, depth + 1);
      }
      out += '}';
    } else if (v.is_array()) {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        SchemaP item = i < s->prefix_items.size() ? s->prefix_items[i] : s->items;
        write(item, v[i], out, depth + 1);
      }
      out += ']';
    } else {
      out += v.dump(-1, ' ', false, Json::error_handler_t::strict);
    }
  }

 private:
  // For anyOf: the first combination of branches the value is valid against (the grammar
  // has one alternative per combination); for an invalid value, the first whose listed
  // members cover the value's (so its members come in an order that branch would take);
  // else the schema without them.
  SchemaP pick(SchemaP s, const Json& v) {
    if (!s->deferred.empty() && !s->has_enum) {
      try {
        s = rd_.lower(s);
      } catch (const Error&) {
        return s;
      }
    }
    if (s->any_of.empty()) return s;
    SchemaP base = rd_.without_any_of(s);
    std::vector<size_t> idx(s->any_of.size(), 0);
    SchemaP covering = nullptr;
    for (int guard = 0; guard < 1024; ++guard) {
      SchemaP m = base;
      for (size_t g = 0; g < idx.size(); ++g) m = rd_.merge(m, s->any_of[g][idx[g]]);
      if (rd_.validate(m, v)) return pick(rd_.deref(m), v);
      if (!covering && v.is_object()) {
        SchemaP d = rd_.deref(m);
        bool all = true;
        for (auto& [k, x] : v.items()) {
          bool found = false;
          for (auto& [name, ps] : d->properties) found = found || name == k;
          all = all && found;
        }
        if (all) covering = d;
      }
      size_t g = idx.size();
      while (g-- > 0) {
        if (++idx[g] < s->any_of[g].size()) break;
        idx[g] = 0;
      }
      if (g == size_t(-1)) break;
    }
    return covering ? covering : base;
  }

  void write_as(const Json& pattern, const Json& v, std::string& out) {
    if (pattern.is_object()) {
      out += '{';
      bool first = true;
      for (auto& [k, x] : pattern.items()) {
        if (!first) out += ", ";
        first = false;
        out += Json(k).dump();
        out += ": ";
        write_as(x, v[k], out);
      }
      out += '}';
    } else if (pattern.is_array()) {
      out += '[';
      for (size_t i = 0; i < pattern.size(); ++i) {
        if (i) out += ", ";
        write_as(pattern[i], v[i], out);
      }
      out += ']';
    } else {
      out += v.dump(-1, ' ', false, Json::error_handler_t::strict);
    }
  }

  Reader& rd_;
};

}  // namespace

std::string write_json_instance(const std::string& schema, const std::string& instance) {
  Json root = Json::parse(schema);
  Json v = Json::parse(instance);
  Reader rd(root);
  std::string out;
  Writer(rd).write(rd.root(), v, out);
  return out;
}

}  // namespace tandem::structured
